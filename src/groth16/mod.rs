//! Groth16 over BLS12-381, compatible with bellperson's parameter files and proofs.
//!
//! The prover is split in two so that the GPU can move on while the CPU finishes:
//! - [`Backend::start`]: H from the a/b/c evaluations (NTTs), the four G1 multiexps, and on a
//!   GPU with room for the B query's G2 points, its multiexp in G2;
//! - [`finish`]: the B multiexp in G2 when proving start did not make it, and the r/s
//!   randomization, on the CPU.

pub mod assignment;
pub mod cpu;
pub mod curve;
pub mod msm;
pub mod ntt;
pub mod pins;
pub mod prover;
pub mod r1cs;
pub mod select;
pub mod setup;
pub mod sha256_witness;
pub mod srs;
pub mod witness;

pub use assignment::{synthesize, Assignment, Density, Evaluations, Witness};
pub use cpu::CpuBackend;
pub use prover::{finish, prove, Backend, Multiexps};
pub use r1cs::{R1cs, R1csCache};
pub use srs::{unload_params, Srs, SrsCache, SrsKey};
pub use witness::{CompactValues, CompactWitness, PackedWitness, WitnessBuilder};

/// Proofs as bellperson writes them: 192 bytes (compressed A, B, C).
pub type Proof = bellperson::groth16::Proof<blstrs::Bls12>;
pub type VerifyingKey = bellperson::groth16::VerifyingKey<blstrs::Bls12>;
