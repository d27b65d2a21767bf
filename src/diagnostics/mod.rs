//! `c2q gpu-check` and `c2q bench gpu`: the GPU backend checked bit for bit against the CPU
//! backend (on random inputs, at full size, and on real 2 KiB PoRep sectors) and timed. Both
//! run from the release binary alone (kernels are embedded).
//!
//! The diagnostics sit above the rest of the crate and may use any of it (`gpu`, `groth16`,
//! `porep`, `canary`, `job`, `config`); nothing but the command line uses them, so `gpu` stays
//! a backend below `groth16` alone.

pub mod bench_gpu;
pub mod gpu_check;
pub mod inputs;
pub mod large_check;
mod proofs;
mod report;
pub mod sectors_check;

pub use bench_gpu::{bench_gpu, BenchGpuArgs};
pub use gpu_check::{gpu_check, GpuCheckArgs};
