//! Every kernel of `kernels/*.cu`, declared once with its parameters in Rust types, and the only
//! way to launch one: a typed handle per kernel ([`Kernel`]) whose `launch` takes exactly the
//! kernel's argument list. A test reads the CUDA signatures and checks them against the
//! declarations, so an argument list that disagrees with its kernel fails `cargo test` instead
//! of corrupting memory on a GPU.
//!
//! The constants that launchers and kernels must agree on are defined here too, and handed to
//! NVRTC as `-DNAME=VALUE` (see `compile`): the kernels have no default for them.

use std::marker::PhantomData;

use anyhow::{anyhow, Context, Result};
use cudarc::driver::{LaunchArgs, LaunchConfig, PushKernelArg};

use super::device::{Gpu, Lane};
use super::memory::DevPtr;

/// Entries each thread of the sort kernels (`msm_histogram`, `msm_scatter`) takes per round:
/// the launcher sizes their grids by it.
pub const SORT_UNROLL: u32 = 8;
/// Points each thread of `gen_points` makes (one inversion per batch): the launcher sizes its
/// grid by it.
pub const GEN_BATCH: u32 = 16;

/// log2 of the entries of the low table of powers that `gen_powers` and `scale_powers` read
/// (x^i = hi[i >> POWER_LO_LOG] · lo[i mod 2^POWER_LO_LOG]): the host builds the tables by it.
pub const POWER_LO_LOG: u32 = 10;

/// The `-D` definitions of the constants above, and of the input bit of recorded constraints
/// (`r1cs_rows` decodes the host's encoding). `.ci/check-kernels` passes the same ones.
pub(super) fn shared_defines() -> Vec<String> {
    vec![
        format!("-DSORT_UNROLL={SORT_UNROLL}"),
        format!("-DGEN_BATCH={GEN_BATCH}"),
        format!("-DPOWER_LO_LOG={POWER_LO_LOG}"),
        format!("-DINPUT_BIT={:#x}u", crate::groth16::r1cs::INPUT_BIT),
    ]
}

/// Blocks of `block` threads covering `n` items, as a grid size.
pub fn blocks(n: u64, block: u32) -> Result<u32> {
    let g = n.div_ceil(block as u64);
    u32::try_from(g).map_err(|_| anyhow!("{n} items is too many for one launch"))
}

/// A kernel taking the arguments `A` (a tuple, in the order of its parameters). Only this
/// module makes them, from the table below.
pub struct Kernel<A> {
    name: &'static str,
    _args: PhantomData<fn(A)>,
}

impl<A: KernelArgs> Kernel<A> {
    const fn declare(name: &'static str) -> Kernel<A> {
        Kernel {
            name,
            _args: PhantomData,
        }
    }

    /// The kernel's name in its source (for logs and traces).
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// Launches `grid` blocks of `block` threads on the main lane.
    pub fn launch(&self, gpu: &Gpu, grid: u32, block: u32, args: A) -> Result<()> {
        self.launch_in(gpu, Lane::Main, grid, block, args)
    }

    /// Launches `grid` blocks of `block` threads on `lane`; an empty grid launches nothing.
    pub fn launch_in(&self, gpu: &Gpu, lane: Lane, grid: u32, block: u32, args: A) -> Result<()> {
        let f = gpu.function(self.name)?;
        if grid == 0 {
            return Ok(());
        }
        let mut builder = gpu.lane(lane).launch_builder(f);
        args.push_all(&mut builder);
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `A` is the kernel's parameter list (checked against kernels/*.cu by the test
        // below), and each launcher passes addresses of buffers it checked the sizes of.
        unsafe { builder.launch(cfg) }
            .with_context(|| format!("launch of {} failed", self.name))?;
        Ok(())
    }
}

/// One kernel parameter: how it is pushed, and (for the signature test) the C type it stands
/// for.
pub trait KernelParam {
    #[cfg(test)]
    const C_TYPE: &'static str;
    fn push<'a>(&'a self, b: &mut LaunchArgs<'a>);
}

impl KernelParam for u32 {
    #[cfg(test)]
    const C_TYPE: &'static str = "u32";
    fn push<'a>(&'a self, b: &mut LaunchArgs<'a>) {
        b.arg(self);
    }
}

impl KernelParam for u64 {
    #[cfg(test)]
    const C_TYPE: &'static str = "u64";
    fn push<'a>(&'a self, b: &mut LaunchArgs<'a>) {
        b.arg(self);
    }
}

impl KernelParam for DevPtr<u32> {
    #[cfg(test)]
    const C_TYPE: &'static str = "u32*";
    fn push<'a>(&'a self, b: &mut LaunchArgs<'a>) {
        b.arg(self.addr());
    }
}

impl KernelParam for DevPtr<u64> {
    #[cfg(test)]
    const C_TYPE: &'static str = "u64*";
    fn push<'a>(&'a self, b: &mut LaunchArgs<'a>) {
        b.arg(self.addr());
    }
}

/// A whole argument list: a tuple of parameters, pushed in order.
pub trait KernelArgs {
    fn push_all<'a>(&'a self, b: &mut LaunchArgs<'a>);
}

macro_rules! tuple_args {
    ($($t:ident . $i:tt),+) => {
        impl<$($t: KernelParam),+> KernelArgs for ($($t,)+) {
            fn push_all<'a>(&'a self, b: &mut LaunchArgs<'a>) {
                $(self.$i.push(b);)+
            }
        }
    };
}

tuple_args!(A.0, B.1);
tuple_args!(A.0, B.1, C.2);
tuple_args!(A.0, B.1, C.2, D.3);
tuple_args!(A.0, B.1, C.2, D.3, E.4);
tuple_args!(A.0, B.1, C.2, D.3, E.4, F.5);
tuple_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6);
tuple_args!(A.0, B.1, C.2, D.3, E.4, F.5, G.6, H.7);

/// A kernel as declared below, for the signature test: its program, name and (name, C type) of
/// each parameter.
#[cfg(test)]
struct Declared {
    program: &'static str,
    kernel: &'static str,
    params: &'static [(&'static str, &'static str)],
}

/// Declares the programs (kernels/NAME.cu) and their kernels: `HANDLE = kernel(param: Type, …)`
/// makes the handle `HANDLE: Kernel<(Type, …)>`, lists the kernel in `PROGRAMS` (what
/// `Gpu::open` loads) and in `DECLARED` (what the test checks).
macro_rules! kernels {
    ($($program:literal {
        $($handle:ident = $kernel:ident($($param:ident: $ty:ty),* $(,)?);)*
    })*) => {
        /// The compiled programs: (name, source, kernels it exports).
        pub(super) const PROGRAMS: &[(&str, &str, &[&str])] = &[$((
            $program,
            include_str!(concat!("../../kernels/", $program, ".cu")),
            &[$(stringify!($kernel)),*],
        ),)*];

        $($(
            #[doc = concat!("`", stringify!($kernel), "` of kernels/", $program, ".cu.")]
            pub const $handle: Kernel<($($ty,)*)> = Kernel::declare(stringify!($kernel));
        )*)*

        #[cfg(test)]
        const DECLARED: &[Declared] = &[$($(Declared {
            program: $program,
            kernel: stringify!($kernel),
            params: &[$((stringify!($param), <$ty as KernelParam>::C_TYPE)),*],
        },)*)*];
    };
}

kernels! {
    "ntt" {
        NTT_PASS = ntt_pass(
            data: DevPtr<u32>, s: u32, k: u32, lo_log: u32, tw: DevPtr<u32>, dif: u32, inverse: u32,
        );
        BIT_REVERSE_TILES = bit_reverse_tiles(data: DevPtr<u32>, log_n: u32);
        BIT_REVERSE_PERMUTE = bit_reverse_permute(data: DevPtr<u32>, log_n: u32);
        GEN_POWERS = gen_powers(out: DevPtr<u32>, count: u64, hi: DevPtr<u32>, lo: DevPtr<u32>);
        SCALE_POWERS = scale_powers(
            data: DevPtr<u32>, log_n: u32, hi: DevPtr<u32>, lo: DevPtr<u32>, bitrev: u32,
        );
        H_MUL = h_mul(a: DevPtr<u32>, b: DevPtr<u32>, n: u64);
        H_SUB_DIV = h_sub_div(a: DevPtr<u32>, c: DevPtr<u32>, zinv: DevPtr<u32>, n: u64);
    }
    "msm" {
        MSM_CLASSIFY = msm_classify(
            scalars: DevPtr<u32>, n: u32, one_idx: DevPtr<u32>, other_idx: DevPtr<u32>,
            other_scalars: DevPtr<u32>, counters: DevPtr<u32>,
        );
        MSM_DIGITS = msm_digits(
            scalars: DevPtr<u32>, m: u32, c: u32, windows: u32, digits: DevPtr<u32>,
        );
        MSM_HISTOGRAM = msm_histogram(digits: DevPtr<u32>, m: u32, counts: DevPtr<u32>);
        SCAN_BLOCKS = scan_blocks(
            r#in: DevPtr<u32>, out: DevPtr<u32>, len: u32, sums: DevPtr<u32>,
        );
        SCAN_ADD = scan_add(out: DevPtr<u32>, len: u32, sums: DevPtr<u32>);
        MSM_SCATTER = msm_scatter(
            digits: DevPtr<u32>, other_idx: DevPtr<u32>, m: u32, offsets: DevPtr<u32>,
            fill: DevPtr<u32>, sorted: DevPtr<u32>,
        );
        MSM_ACCUMULATE = msm_accumulate(
            sorted: DevPtr<u32>, offsets: DevPtr<u32>, nbuckets: u32, chunk: u32,
            points: DevPtr<u32>, buckets: DevPtr<u32>, cont: DevPtr<u32>,
        );
        MSM_CONT_FOLD = msm_cont_fold(
            cont: DevPtr<u32>, offsets: DevPtr<u32>, nbuckets: u32, chunk: u32, group: u32,
        );
        MSM_BUCKET_FIX = msm_bucket_fix(
            buckets: DevPtr<u32>, cont: DevPtr<u32>, offsets: DevPtr<u32>, nbuckets: u32,
            chunk: u32, group: u32,
        );
        MSM_BUCKET_REDUCE = msm_bucket_reduce(
            buckets: DevPtr<u32>, nbuckets: u32, len: u32, nseg: u32, windows: u32,
            out: DevPtr<u32>,
        );
        MSM_SUM_INDEXED = msm_sum_indexed(
            points: DevPtr<u32>, idx: DevPtr<u32>, count: u32, partials: DevPtr<u32>,
        );
        XYZZ_REDUCE = xyzz_reduce(
            r#in: DevPtr<u32>, group_len: u32, blocks_per_group: u32, per_block: u32,
            out: DevPtr<u32>,
        );
        XYZZ_TO_JACOBIAN = xyzz_to_jacobian_kernel(r#in: DevPtr<u32>, n: u32, out: DevPtr<u32>);
        MSM_ACCUMULATE_G2 = msm_accumulate_g2(
            sorted: DevPtr<u32>, offsets: DevPtr<u32>, nbuckets: u32, chunk: u32,
            points: DevPtr<u32>, buckets: DevPtr<u32>, cont: DevPtr<u32>,
        );
        MSM_CONT_FOLD_G2 = msm_cont_fold_g2(
            cont: DevPtr<u32>, offsets: DevPtr<u32>, nbuckets: u32, chunk: u32, group: u32,
        );
        MSM_BUCKET_FIX_G2 = msm_bucket_fix_g2(
            buckets: DevPtr<u32>, cont: DevPtr<u32>, offsets: DevPtr<u32>, nbuckets: u32,
            chunk: u32, group: u32,
        );
        MSM_BUCKET_REDUCE_G2 = msm_bucket_reduce_g2(
            buckets: DevPtr<u32>, nbuckets: u32, len: u32, nseg: u32, windows: u32,
            out: DevPtr<u32>,
        );
        MSM_SUM_INDEXED_G2 = msm_sum_indexed_g2(
            points: DevPtr<u32>, idx: DevPtr<u32>, count: u32, partials: DevPtr<u32>,
        );
        XYZZ_REDUCE_G2 = xyzz_reduce_g2(
            r#in: DevPtr<u32>, group_len: u32, blocks_per_group: u32, per_block: u32,
            out: DevPtr<u32>,
        );
        XYZZ_TO_JACOBIAN_G2 = xyzz_to_jacobian_kernel_g2(
            r#in: DevPtr<u32>, n: u32, out: DevPtr<u32>,
        );
    }
    "gen" {
        GEN_SCALARS = gen_scalars(out: DevPtr<u32>, n: u64, seed: u64, mode: u32);
        GEN_POINTS = gen_points(
            out: DevPtr<u32>, n: u64, t1: DevPtr<u32>, t2: DevPtr<u32>, tlog: u32,
        );
        GEN_POINTS_G2 = gen_points_g2(
            out: DevPtr<u32>, n: u64, t1: DevPtr<u32>, t2: DevPtr<u32>, tlog: u32,
        );
    }
    "r1cs" {
        R1CS_ROWS = r1cs_rows(
            ends: DevPtr<u32>, terms: DevPtr<u32>, rows: u32, domain: u32, coeffs: DevPtr<u32>,
            aux: DevPtr<u32>, inputs: DevPtr<u32>, out: DevPtr<u32>,
        );
    }
    "witness" {
        WITNESS_EXPAND = witness_expand(
            ones: DevPtr<u64>, others: DevPtr<u64>, before: DevPtr<u32>, values: DevPtr<u32>,
            n: u32, out: DevPtr<u32>,
        );
        WITNESS_SELECT = witness_select(
            src: DevPtr<u32>, density: DevPtr<u64>, before: DevPtr<u32>, n: u32,
            out: DevPtr<u32>, offset: u32,
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::{shared_defines, DECLARED, PROGRAMS};

    /// A kernel as kernels/*.cu defines it: the file, and (name, C type) of each parameter
    /// with the type spelled as `KernelParam::C_TYPE` spells it.
    #[derive(Debug)]
    struct Defined {
        file: String,
        params: Vec<(String, String)>,
    }

    /// The canonical spelling of a parameter's C type: `const` and `__restrict__` dropped (the
    /// launch passes the same bits), integer types by width.
    fn c_type(tokens: &[&str], pointers: usize, kernel: &str) -> String {
        let base = match tokens.join(" ").as_str() {
            "u32" | "uint32_t" | "unsigned" | "unsigned int" | "int" | "int32_t" => "u32",
            "u64" | "uint64_t" | "size_t" | "unsigned long long" | "int64_t" => "u64",
            other => panic!("kernel {kernel}: parameter type {other:?} has no Rust counterpart"),
        };
        format!("{base}{}", "*".repeat(pointers))
    }

    /// Text up to the parenthesis closing the one `text` starts with, and what follows it.
    fn balanced(text: &str) -> (&str, &str) {
        let mut depth = 0usize;
        for (i, c) in text.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return (&text[1..i], &text[i + 1..]);
                    }
                }
                _ => {}
            }
        }
        panic!("unbalanced parentheses in {text:.80}");
    }

    /// Every `extern "C" __global__` kernel in `source`: its name and parameters.
    fn kernels_in(source: &str, file: &str) -> Vec<(String, Defined)> {
        let code: String = source
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let mut found = Vec::new();
        for rest in code.split("extern \"C\" __global__").skip(1) {
            let mut rest = rest.trim_start();
            // `void` and `__launch_bounds__(…)`, in either order, before the name.
            loop {
                if let Some(r) = rest.strip_prefix("void") {
                    rest = r.trim_start();
                } else if let Some(r) = rest.strip_prefix("__launch_bounds__") {
                    rest = balanced(r.trim_start()).1.trim_start();
                } else {
                    break;
                }
            }
            let open = rest.find('(').expect("a kernel's parameter list");
            let name = rest[..open].trim().to_string();
            let (list, _) = balanced(&rest[open..]);
            let params = list
                .split(',')
                .map(|p| {
                    let spaced = p.replace('*', " * ");
                    let tokens: Vec<&str> = spaced
                        .split_whitespace()
                        .filter(|t| !matches!(*t, "const" | "__restrict__"))
                        .collect();
                    let (pname, ty) = tokens.split_last().expect("a named parameter");
                    let pointers = ty.iter().filter(|t| **t == "*").count();
                    let ty: Vec<&str> = ty.iter().copied().filter(|t| *t != "*").collect();
                    (pname.to_string(), c_type(&ty, pointers, &name))
                })
                .collect();
            found.push((
                name,
                Defined {
                    file: file.to_string(),
                    params,
                },
            ));
        }
        found
    }

    /// The kernels of every source and header in kernels/, by name.
    fn defined_kernels() -> BTreeMap<String, Defined> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut all = BTreeMap::new();
        for entry in std::fs::read_dir(&dir).expect("kernels/ is readable") {
            let path = entry.expect("a kernels/ entry").path();
            let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
            if !(file.ends_with(".cu") || file.ends_with(".cuh")) {
                continue;
            }
            let source = std::fs::read_to_string(&path).expect("a kernel source is readable");
            for (name, defined) in kernels_in(&source, file) {
                let file = defined.file.clone();
                if let Some(other) = all.insert(name.clone(), defined) {
                    panic!("kernel {name} defined in both {} and {file}", other.file);
                }
            }
        }
        all
    }

    /// The declarations are the kernels: the same set, each in the program that compiles it
    /// (its own .cu, or one including the header it lives in), each parameter in place with
    /// its name and a Rust type of the C type's kind. A mismatch here would otherwise only
    /// show on a GPU, as garbage or a fault.
    #[test]
    fn declared_kernels_match_the_sources() {
        let defined = defined_kernels();
        let declared: BTreeMap<&str, _> = DECLARED.iter().map(|d| (d.kernel, d)).collect();
        let missing: Vec<&String> = defined
            .keys()
            .filter(|k| !declared.contains_key(k.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "kernels not declared in gpu/kernels.rs: {missing:?}"
        );
        let stale: Vec<&&str> = declared
            .keys()
            .filter(|k| !defined.contains_key(**k))
            .collect();
        assert!(
            stale.is_empty(),
            "declared kernels that kernels/ lacks: {stale:?}"
        );
        for (name, d) in &declared {
            let def = &defined[*name];
            let (_, source, _) = PROGRAMS
                .iter()
                .find(|(p, _, _)| *p == d.program)
                .expect("every declared program is compiled");
            let compiled_in = def.file == format!("{}.cu", d.program)
                || source.contains(&format!("#include \"{}\"", def.file));
            assert!(
                compiled_in,
                "kernel {name} is declared in program {} but defined in {}",
                d.program, def.file
            );
            let declared_params: Vec<(String, String)> = d
                .params
                .iter()
                .map(|(p, t)| (p.trim_start_matches("r#").to_string(), t.to_string()))
                .collect();
            assert_eq!(
                declared_params, def.params,
                "parameters of kernel {name} (declared, then as in {})",
                def.file
            );
        }
    }

    /// `.ci/check-kernels` compiles the kernels without c2q, so it must pass the definitions
    /// c2q passes: with a different value it would check other code than c2q runs.
    #[test]
    fn check_kernels_passes_the_shared_defines() {
        let script = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/check-kernels"),
        )
        .expect(".ci/check-kernels is readable");
        for define in shared_defines() {
            assert!(
                script.contains(&format!("\"{define}\"")),
                ".ci/check-kernels does not pass {define}"
            );
        }
    }
}
