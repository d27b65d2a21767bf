//! Proofs through the CUDA backend with the r and s of a CPU proof, and proofs as bytes, for
//! the byte-for-byte comparisons of `gpu-check` (the canary) and `gpu-check --sectors`.

use anyhow::{Context, Result};
use blstrs::Scalar as Fr;

use crate::gpu::CudaBackend;
use crate::groth16::{self, prover::check_shape, Assignment, Backend, Srs};

/// A proof through the CUDA backend with the same r, s as `groth16::prove`, and whether the
/// backend made the B multiexp in G2 (the finalizer then used it, not the witness).
pub(super) fn cuda_proof(
    backend: &CudaBackend,
    srs: &Srs,
    assignment: Assignment,
    r: Fr,
    s: Fr,
) -> Result<(groth16::Proof, bool)> {
    let Assignment { witness, evals } = assignment;
    check_shape(srs, &evals, &witness)?;
    let sums = backend.start(srs, evals, &witness)?;
    let proof = groth16::finish(srs, &sums, Some(&witness), r, s)?;
    Ok((proof, sums.b_g2.is_some()))
}

/// A proof as bellperson writes it (192 bytes).
pub(super) fn proof_bytes(p: &groth16::Proof) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    p.write(&mut v).context("cannot serialise a proof")?;
    Ok(v)
}
