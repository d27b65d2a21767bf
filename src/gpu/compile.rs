//! Building the kernels for one GPU: the NVRTC options and `-D` definitions, the compile
//! itself, and the on-disk cache of the resulting CUBINs.
//!
//! A cold start compiles once per (source, options, architecture, driver, NVRTC) and later
//! starts load the cached CUBIN in milliseconds. Everything that changes the machine code is
//! part of the cache key, definitions included, so a changed knob never loads a stale image.

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use cudarc::nvrtc::sys as nsys;
use sha2::{Digest, Sha256};

use super::discovery::{driver_version, nvrtc_version, DeviceInfo};
use super::kernels;

/// Kernel headers, handed to NVRTC by name so that `#include "field.cuh"` resolves.
const HEADERS: &[(&str, &str)] = &[
    ("field.cuh", include_str!("../../kernels/field.cuh")),
    ("fp2.cuh", include_str!("../../kernels/fp2.cuh")),
    ("curve.cuh", include_str!("../../kernels/curve.cuh")),
];

/// NVRTC options besides the architecture and the definitions. `.ci/check-kernels` compiles
/// with the same ones.
const COMPILE_OPTIONS: &[&str] = &["-std=c++17"];

/// The options in effect: `$C2Q_KERNELS_PORTABLE` (any value) swaps the carry-chain assembly
/// of the field arithmetic for plain C++, to rule it out when diagnosing a GPU mismatch;
/// `$C2Q_KERNEL_DEFINES` adds `-DNAME[=VALUE]` definitions (tuning knobs the kernels read,
/// such as `C2Q_ACCUMULATE_BLOCKS`), so that variants can be compared with one binary.
fn compile_options() -> Result<Vec<String>> {
    let mut o: Vec<String> = COMPILE_OPTIONS.iter().map(|s| s.to_string()).collect();
    if std::env::var_os("C2Q_KERNELS_PORTABLE").is_some() {
        o.push("-DC2Q_PORTABLE".into());
    }
    if let Ok(defines) = std::env::var("C2Q_KERNEL_DEFINES") {
        for d in defines.split_whitespace() {
            let name = d.strip_prefix("-D").unwrap_or("");
            let ident = name.split('=').next().unwrap_or("");
            if ident.is_empty() || !ident.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                bail!("C2Q_KERNEL_DEFINES holds {d:?}: only -DNAME or -DNAME=VALUE are accepted");
            }
            o.push(d.to_string());
        }
    }
    Ok(o)
}

/// What the kernels are told at build time: the constants they share with their launchers
/// (defined once, in `kernels`), and the shared memory of the GPU's SM, from which ntt.cu
/// works out how many of its blocks can share one (and so its register budget).
fn kernel_defines(info: &DeviceInfo) -> Vec<String> {
    let mut defines = kernels::shared_defines();
    defines.push(format!("-DC2Q_SHARED_PER_SM={}", info.shared_per_sm));
    defines
}

/// Where compiled kernels are kept: `$C2Q_KERNEL_CACHE`, else `$XDG_CACHE_HOME/c2q/kernels`,
/// else `~/.cache/c2q/kernels`.
pub fn kernel_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("C2Q_KERNEL_CACHE") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("c2q/kernels"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/c2q/kernels"))
}

/// The cache file of program `name`: readable parts (architecture, driver) for whoever looks
/// in the directory, and a hash of everything else that shapes the CUBIN (sources, headers,
/// options with every definition, NVRTC version).
fn cache_file_name(
    name: &str,
    source: &str,
    arch: &str,
    options: &[String],
    nvrtc: (i32, i32),
    driver: i32,
) -> String {
    let mut h = Sha256::new();
    h.update(source.as_bytes());
    for (hname, hsrc) in HEADERS {
        h.update(hname.as_bytes());
        h.update(hsrc.as_bytes());
    }
    for o in options {
        h.update(o.as_bytes());
    }
    h.update(format!("nvrtc {}.{}", nvrtc.0, nvrtc.1).as_bytes());
    let key = hex::encode(&h.finalize()[..12]);
    format!("{name}-{arch}-drv{driver}-{key}.cubin")
}

/// Compile `source` for the GPU's `sm_XY` with NVRTC, or take the CUBIN from the disk cache.
pub(super) fn build_program(name: &str, source: &str, info: &DeviceInfo) -> Result<Vec<u8>> {
    let cc = info.compute_capability;
    let arch = format!("sm_{}{}", cc.0, cc.1);
    let mut options = compile_options()?;
    options.extend(kernel_defines(info));
    let file = cache_file_name(
        name,
        source,
        &arch,
        &options,
        nvrtc_version()?,
        driver_version()?,
    );
    let cache = kernel_cache_dir();
    if let Some(dir) = &cache {
        if let Ok(bytes) = std::fs::read(dir.join(&file)) {
            if !bytes.is_empty() {
                tracing::debug!(kernel = name, %arch, "kernel loaded from cache");
                return Ok(bytes);
            }
        }
    }
    let started = std::time::Instant::now();
    let image = nvrtc_compile(name, source, &arch, &options)
        .with_context(|| format!("NVRTC could not build kernels/{name}.cu for {arch}"))?;
    tracing::info!(
        kernel = name,
        %arch,
        ms = started.elapsed().as_millis() as u64,
        "kernel compiled by NVRTC"
    );
    if let Some(dir) = &cache {
        // The cache is an optimisation: failing to write it costs a recompile next time.
        if let Err(e) = write_atomically(dir, &file, &image) {
            tracing::warn!(error = %e, dir = %dir.display(), "cannot write the kernel cache");
        }
    }
    Ok(image)
}

/// Writes under a temporary name and renames, so that a process starting meanwhile (or after a
/// crash mid-write) never loads half a CUBIN.
fn write_atomically(dir: &Path, file: &str, bytes: &[u8]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{file}.{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, dir.join(file))?;
    Ok(())
}

fn nvrtc_check(rc: nsys::nvrtcResult, what: &str) -> Result<()> {
    if rc == nsys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(anyhow!("{what} failed: {rc:?}"))
    }
}

/// Owns an nvrtcProgram so that it is destroyed on every path.
struct Program(nsys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed once.
        unsafe {
            let _ = nsys::nvrtcDestroyProgram(&mut self.0);
        }
    }
}
fn nvrtc_compile(name: &str, source: &str, arch: &str, options: &[String]) -> Result<Vec<u8>> {
    let src = CString::new(source)?;
    let pname = CString::new(format!("{name}.cu"))?;
    let hsrc: Vec<CString> = HEADERS
        .iter()
        .map(|(_, s)| CString::new(*s))
        .collect::<Result<_, _>>()?;
    let hname: Vec<CString> = HEADERS
        .iter()
        .map(|(n, _)| CString::new(*n))
        .collect::<Result<_, _>>()?;
    let hsrc_p: Vec<*const c_char> = hsrc.iter().map(|s| s.as_ptr()).collect();
    let hname_p: Vec<*const c_char> = hname.iter().map(|s| s.as_ptr()).collect();
    let mut prog: nsys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: all strings are NUL-terminated and outlive the program.
    nvrtc_check(
        unsafe {
            nsys::nvrtcCreateProgram(
                &mut prog,
                src.as_ptr(),
                pname.as_ptr(),
                HEADERS.len() as i32,
                hsrc_p.as_ptr(),
                hname_p.as_ptr(),
            )
        },
        "nvrtcCreateProgram",
    )?;
    let prog = Program(prog);
    let mut opts: Vec<CString> = vec![CString::new(format!("--gpu-architecture={arch}"))?];
    for o in options {
        opts.push(CString::new(o.as_str())?);
    }
    let opts_p: Vec<*const c_char> = opts.iter().map(|s| s.as_ptr()).collect();
    // SAFETY: the program is valid and the options are NUL-terminated strings.
    let rc = unsafe { nsys::nvrtcCompileProgram(prog.0, opts_p.len() as i32, opts_p.as_ptr()) };
    let log = program_log(&prog)?;
    if rc != nsys::nvrtcResult::NVRTC_SUCCESS {
        bail!("{rc:?}:\n{log}");
    }
    if !log.trim().is_empty() {
        tracing::warn!(kernel = name, log = %log.trim(), "NVRTC warnings");
    }
    let mut size = 0usize;
    // SAFETY: the program compiled; size is written once.
    nvrtc_check(
        unsafe { nsys::nvrtcGetCUBINSize(prog.0, &mut size) },
        "nvrtcGetCUBINSize",
    )?;
    if size == 0 {
        bail!("NVRTC produced no CUBIN for {arch}");
    }
    let mut image = vec![0u8; size];
    // SAFETY: `image` has the size NVRTC asked for.
    nvrtc_check(
        unsafe { nsys::nvrtcGetCUBIN(prog.0, image.as_mut_ptr() as *mut c_char) },
        "nvrtcGetCUBIN",
    )?;
    Ok(image)
}

fn program_log(prog: &Program) -> Result<String> {
    let mut size = 0usize;
    // SAFETY: valid program; writes the size.
    nvrtc_check(
        unsafe { nsys::nvrtcGetProgramLogSize(prog.0, &mut size) },
        "nvrtcGetProgramLogSize",
    )?;
    let mut buf = vec![0u8; size.max(1)];
    // SAFETY: the buffer has the size NVRTC reported.
    nvrtc_check(
        unsafe { nsys::nvrtcGetProgramLog(prog.0, buf.as_mut_ptr() as *mut c_char) },
        "nvrtcGetProgramLog",
    )?;
    Ok(CStr::from_bytes_until_nul(&buf)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A definition passed to NVRTC changes the cache file, so a binary built with another
    /// value of a shared constant (or run with other `$C2Q_KERNEL_DEFINES`) compiles afresh.
    #[test]
    fn cache_key_covers_the_definitions() {
        let options =
            |unroll: u32| vec!["-std=c++17".to_string(), format!("-DSORT_UNROLL={unroll}")];
        let file = |o: &[String]| cache_file_name("msm", "src", "sm_90", o, (13, 0), 13000);
        assert_ne!(file(&options(8)), file(&options(4)));
        assert_eq!(file(&options(8)), file(&options(8)));
        assert_ne!(
            cache_file_name("msm", "src", "sm_90", &options(8), (13, 0), 13000),
            cache_file_name("msm", "src", "sm_90", &options(8), (13, 1), 13000)
        );
    }
}
