#!/usr/bin/env python3
"""Counts the SASS instructions of kernels/msm.cu (or another kernel file) per function, without a GPU.

Compiles msm.cu with NVRTC to a CUBIN for sm_90 (the H200's architecture), with the options
and shared constants of .ci/check-kernels (read from that file, so they cannot drift) plus any
-DNAME=VALUE given on the command line, disassembles it with nvdisasm, and prints, for the
MSM's point kernels and the out-of-line field functions, how many of their instructions are
integer multiplies (by form), additions and other classes, and the total. Static counts: a
loop body counts once, and a kernel's count leaves out the functions it calls (listed with
how many call sites each has).

    python3 ops/bench/sass-count.py [-DC2Q_SQR=1 ...] [--all] [--cubin FILE]
    python3 ops/bench/sass-count.py --source ntt.cu [-DC2Q_NTT_BLOCKS=3 ...] [--sass FILE]

NVRTC and nvdisasm come from PyPI wheels (nvidia-cuda-nvrtc, nvidia-cuda-nvdisasm), installed
once under /var/tmp as .ci/check-kernels does. --all lists every function; --cubin keeps the
CUBIN, --sass the disassembly; --source counts another file of kernels/ (all its functions).
"""
import argparse
import collections
import ctypes
import glob
import importlib.machinery
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARCH = "sm_90"
# No nvdisasm wheel of CUDA 13.0 is published; 13.2 is the oldest 13.x one, and reads sm_90
# CUBINs of any 13.x compiler.
NVDISASM_WHEEL = "nvidia-cuda-nvdisasm==13.2.51"
NVDISASM_DIR = os.environ.get("C2Q_NVDISASM_DIR", "/var/tmp/c2q-ci/nvdisasm-13.2.51")
# The kernels shown by default: the hot accumulation in G1 and G2, then the other point
# kernels; the out-of-line field and group functions they call are shown with them.
SHOWN_ORDER = ["msm_accumulate", "msm_accumulate_g2", "msm_bucket_fix", "msm_bucket_fix_g2",
               "msm_bucket_reduce", "msm_bucket_reduce_g2", "msm_sum_indexed", "msm_sum_indexed_g2",
               "xyzz_reduce", "xyzz_reduce_g2", "xyzz_to_jacobian_kernel",
               "xyzz_to_jacobian_kernel_g2"]
COLUMNS = ["IMAD.WIDE", "IMAD.HI", "IMAD", "IMAD.X", "mul", "IMAD(add/mov)", "IADD3", "IADD3.X",
           "SHF", "LEA", "SEL", "LOP3", "ISETP", "LD/ST", "CALL", "total"]


def load_check_kernels():
    path = os.path.join(ROOT, ".ci", "check-kernels")
    loader = importlib.machinery.SourceFileLoader("check_kernels", path)
    spec = importlib.util.spec_from_loader("check_kernels", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def nvdisasm_path():
    def find():
        hits = glob.glob(os.path.join(NVDISASM_DIR, "nvidia", "**", "bin", "nvdisasm"), recursive=True)
        return hits[0] if hits else None

    tool = find()
    if not tool:
        os.makedirs(NVDISASM_DIR, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
               NVDISASM_DIR, NVDISASM_WHEEL]
        subprocess.run(cmd, check=True, env=dict(os.environ, PIP_ROOT_USER_ACTION="ignore"))
        tool = find()
        if not tool:
            sys.exit(f"sass-count: {NVDISASM_WHEEL} installed but nvdisasm not found under {NVDISASM_DIR}")
    os.chmod(tool, 0o755)
    return tool


def compile_cubin(ck, defines, source):
    lib = ck.install()
    for builtins in glob.glob(os.path.join(os.path.dirname(lib), "libnvrtc-builtins.so*")):
        ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    nvrtc = ctypes.CDLL(lib)
    kdir = os.path.join(ROOT, "kernels")
    headers = {os.path.basename(h): open(h, "rb").read() for h in sorted(glob.glob(os.path.join(kdir, "*.cuh")))}
    names = list(headers)
    hdr_src = (ctypes.c_char_p * len(names))(*[headers[n] for n in names])
    hdr_names = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
    path = os.path.join(kdir, source)
    prog = ctypes.c_void_p()
    rc = nvrtc.nvrtcCreateProgram(ctypes.byref(prog), open(path, "rb").read(), source.encode(),
                                  len(names), hdr_src, hdr_names)
    if rc != 0:
        sys.exit(f"sass-count: nvrtcCreateProgram failed ({rc})")
    # -v makes ptxas log each function's registers and spills; it changes no code.
    opts = [f"--gpu-architecture={ARCH}", *ck.OPTIONS, *ck.SHARED_DEFINES, *defines,
            "--ptxas-options=-v"]
    copts = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    started = time.monotonic()
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), copts)
    seconds = time.monotonic() - started
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        sys.exit(f"sass-count: {source} does not compile:\n{log.value.decode(errors='replace')}")
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return cubin.raw, seconds, opts[:-1], log.value.decode(errors="replace")


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                             check=True).stdout.split("\n")
        return dict(zip(names, out))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


# "/*0a70*/  @!P0 IMAD.WIDE.U32 R2, R5, R7, R2 ;": the predicate, the opcode with its modifiers,
# the operands.
INSTR = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")
SECTION = re.compile(r"^\s*\.section\s+\.text\.(\S+?),")
CALLEE = re.compile(r"^\$([^$]+)\$(\S+):\s*$")
CALL_TARGET = re.compile(r"`\(\$([^$]+)\$([^)]+)\)")


def classify(opcode, operands):
    """The column an instruction counts in. ptxas also uses IMAD for moves, shifts and additions
    (.MOV, .SHL, .IADD, or a multiplicand RZ or 1, as in "IMAD.X R1, R2, 0x1, R3, P0"): those
    run on the multiply pipe but multiply nothing, and have their own column."""
    base = opcode.split(".")[0]
    if base == "IMAD":
        srcs = [s.strip() for s in operands.split(",")[1:3]]
        if any(m in opcode for m in (".MOV", ".SHL", ".IADD")) or "RZ" in srcs or "0x1" in srcs:
            return "IMAD(add/mov)"
        if ".WIDE" in opcode:
            return "IMAD.WIDE"
        if ".HI" in opcode:
            return "IMAD.HI"
        if ".X" in opcode:
            return "IMAD.X"
        return "IMAD"
    if base == "IADD3":
        return "IADD3.X" if ".X" in opcode else "IADD3"
    if base in ("SHF", "LEA", "SEL", "LOP3", "ISETP", "CALL"):
        return base
    if base in ("LD", "ST", "LDG", "STG", "LDL", "STL", "LDS", "STS", "LDC", "ULDC"):
        return "LD/ST"
    return None


def count(sass):
    """Counts per function. ptxas gives each kernel its own copy of every out-of-line function it
    calls, at a label "$kernel$callee" inside the kernel's section: such a copy counts apart,
    as (kernel, callee); a kernel itself as (kernel, None)."""
    functions = collections.OrderedDict()
    calls = collections.defaultdict(collections.Counter)
    current = None
    for line in sass.splitlines():
        m = SECTION.match(line)
        if m:
            current = (m.group(1), None)
            functions[current] = collections.Counter()
            continue
        m = CALLEE.match(line)
        if m and current is not None:
            current = (current[0], m.group(2))
            functions[current] = collections.Counter()
            continue
        m = INSTR.match(line)
        if not m or current is None:
            continue
        opcode, operands = m.group(1), m.group(2)
        if opcode == "NOP":
            continue
        counts = functions[current]
        counts["total"] += 1
        column = classify(opcode, operands)
        if column:
            counts[column] += 1
        if column in ("IMAD.WIDE", "IMAD.HI", "IMAD", "IMAD.X"):
            counts["mul"] += 1
        if column == "CALL":
            target = CALL_TARGET.search(operands)
            calls[current][target.group(2) if target else operands.strip()] += 1
    return functions, calls


def kernel_resources(ptxas_log):
    """Registers and spilled bytes (stores) of each kernel, from ptxas's -v log."""
    resources, kernel = {}, None
    for line in ptxas_log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            kernel = m.group(1)
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m and m.group(1) != kernel:
            kernel = None  # the lines that follow are a callee's
            continue
        m = re.search(r"(\d+) bytes spill stores", line)
        if m and kernel:
            resources.setdefault(kernel, {})["spill"] = int(m.group(1))
        m = re.search(r"Used (\d+) registers", line)
        if m and kernel:
            resources.setdefault(kernel, {})["regs"] = int(m.group(1))
    return resources


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     usage="%(prog)s [-DNAME=VALUE ...] [--all] [--source FILE] [--cubin FILE] [--sass FILE]")
    parser.add_argument("--all", action="store_true", help="every function, not only the MSM's")
    parser.add_argument("--cubin", help="write the CUBIN here")
    parser.add_argument("--source", default="msm.cu",
                        help="the kernel file under kernels/ (ntt.cu: the transform's kernels, "
                             "which then are all shown)")
    parser.add_argument("--sass", help="write the disassembly here")
    # The defines look like options to argparse: whatever it does not know must be one.
    args, defines = parser.parse_known_args()
    for d in defines:
        if not d.startswith("-D"):
            sys.exit(f"sass-count: {d!r} is neither an option nor a -DNAME=VALUE define")
    ck = load_check_kernels()
    tool = nvdisasm_path()
    cubin, seconds, opts, ptxas_log = compile_cubin(ck, defines, args.source)
    if args.source != "msm.cu":
        args.all = True
    with tempfile.TemporaryDirectory() as tmp:
        path = args.cubin or os.path.join(tmp, "kernels.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        sass = subprocess.run([tool, "-c", "-ndf", path], capture_output=True, text=True,
                              check=True).stdout
        version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    if args.sass:
        with open(args.sass, "w") as f:
            f.write(sass)
    functions, calls = count(sass)
    names = demangle(sorted({n for key in functions for n in key if n}))
    short = {n: names[n].split("(")[0] for n in names}
    print(f"{args.source} for {ARCH}: {' '.join(opts[1:])}")
    print(f"{ck.WHEEL}: compiled in {seconds:.1f} s; nvdisasm {version.strip().splitlines()[-1]}")
    print()
    print("| function | regs | spill | " + " | ".join(COLUMNS) + " | calls |")
    print("|---" * (len(COLUMNS) + 4) + "|")
    resources = kernel_resources(ptxas_log)
    # The kernels in the order of SHOWN (the hot accumulation first), then each out-of-line
    # function once, as copied into the first of them that calls it (the copies differ in
    # register numbers at most); with --all, every kernel and every copy.
    order = {name: i for i, name in enumerate(SHOWN_ORDER)}
    kernels = [k for k, callee in functions if callee is None and (args.all or k in order)]
    kernels.sort(key=lambda k: order.get(k, len(order)))
    rows, seen = [], set()
    for kernel in kernels:
        rows.append(((kernel, None), short[kernel]))
    for kernel in kernels:
        for k, callee in functions:
            if k == kernel and callee and (args.all or callee not in seen):
                seen.add(callee)
                rows.append(((k, callee), f"{short[callee]} (in {short[kernel]})"))
    for key, label in rows:
        counts = functions[key]
        callees = ", ".join(f"{short.get(t, t)} ×{k}" for t, k in sorted(calls[key].items()))
        res = resources.get(key[0], {}) if key[1] is None else {}
        regs, spill = res.get("regs", ""), res.get("spill", "")
        print(f"| {label} | {regs} | {spill} | " + " | ".join(str(counts[c]) for c in COLUMNS)
              + f" | {callees} |")
    print()
    print("mul = IMAD.WIDE + IMAD.HI + IMAD + IMAD.X (integer multiplies); IMAD(add/mov): IMAD "
          "forms that multiply nothing (.MOV, .SHL, .IADD, a multiplicand RZ or 1); regs, spill: "
          "registers and spilled bytes per thread (ptxas -v), of a kernel with its copies of "
          "the functions it calls.")


if __name__ == "__main__":
    main()
