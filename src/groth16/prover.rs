//! The Groth16 prover, split into `start` (a backend's job) and `finish` (on the CPU: the
//! randomization, and the B multiexp in G2 unless the backend made it).
//!
//! With the SRS `(α, β, δ, A_i, B_i, L_i, H_i)`, witness `w` and randomizers `r, s`:
//!
//! ```text
//!   A = α + Σ w_i·A_i + r·δ                    (G1)
//!   B = β + Σ w_i·B_i + s·δ                    (G2)
//!   C = s·A' + r·B' + r·s·δ + s·α + r·β + Σ h_j·H_j + Σ w_k·L_k     (G1)
//! ```
//! where `A' = Σ w_i·A_i` and `B' = Σ w_i·B_i` in G1, and `h` are the coefficients of the
//! quotient polynomial `(a·b − c) / z`. Given the same `r` and `s` this is bellperson's
//! `create_proof`, so the proof bytes are identical.

use anyhow::{bail, ensure, Result};
use blstrs::{G1Projective, G2Projective, Scalar as Fr};
use group::{prime::PrimeCurveAffine, Curve};

use super::{msm, Assignment, Evaluations, PackedWitness, Proof, R1cs, Srs, Witness};

/// The multiexps proving start produces: the four in G1, and the B query's in G2 when the
/// backend made it too (the CUDA backend, with the G2 points resident beside the G1 ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Multiexps {
    /// `Σ h_j·H_j`
    pub h: G1Projective,
    /// `Σ w_k·L_k` over the aux variables.
    pub l: G1Projective,
    /// `Σ w_i·A_i` over inputs and A-dense aux variables.
    pub a: G1Projective,
    /// `Σ w_i·B_i` in G1 over B-dense inputs and aux variables.
    pub b_g1: G1Projective,
    /// `Σ w_i·B_i` in G2 over the same variables, when proving start made it; `None` leaves it
    /// to `finish`, which then needs the witness.
    pub b_g2: Option<G2Projective>,
}

/// Proving start: H by NTTs from the evaluations (consumed, so their memory goes as soon as the
/// backend is done with them), the G1 multiexps, and the B multiexp in G2 where the backend can.
pub trait Backend: Send + Sync {
    /// A short name for logs and metrics: `cpu`, `cuda:0`, ...
    fn name(&self) -> String;

    /// Host memory this backend keeps page-locked for as long as it lives (a GPU's staging
    /// buffers): never swapped, so the memory gate counts it in the worker's baseline.
    fn pinned_host_bytes(&self) -> u64 {
        0
    }

    fn start(&self, srs: &Srs, evals: Evaluations, witness: &Witness) -> Result<Multiexps>;

    /// Readies evaluations made on the CPU for this backend's `start`, off its path (the
    /// pipeline's products stage calls it as soon as they are made): a GPU page-locks them
    /// (`Evaluations::pins`), so that their copies go by DMA straight from them rather than
    /// through the CPU's cores, which the other stages keep busy. Failing costs only speed:
    /// the backend logs it.
    fn prepare_evaluations(&self, evals: &Evaluations) {
        let _ = evals;
    }

    /// Evaluations of an earlier partition with `rows` rows each, whose values are used up,
    /// for the products stage to write the next partition's over (`R1cs::assignment_into`):
    /// a GPU keeps them page-locked, so that they need not be locked again. `None` where there
    /// are none.
    fn reusable_evaluations(&self, rows: usize) -> Option<Evaluations> {
        let _ = rows;
        None
    }

    /// Called when this backend's start stage finds no partition waiting and no other start
    /// stage is proving one: it lets go of what it keeps for the next one (reusable
    /// evaluations, device buffers set aside).
    fn idle(&self) {}

    /// Whether this backend can make the A, B, C evaluations itself from recorded constraints
    /// (`start_from_constraints`), so that the pipeline need not make them on the CPU.
    fn products_on_device(&self) -> bool {
        false
    }

    /// Proving start from the packed witness alone: the backend expands it and makes the
    /// evaluations from the recorded constraints. `Ok(None)` when it cannot for this circuit
    /// (the matrices do not fit beside the parameters): the caller then makes them on the CPU
    /// and calls `start`.
    fn start_from_constraints(
        &self,
        srs: &Srs,
        r1cs: &R1cs,
        witness: &PackedWitness,
    ) -> Result<Option<Multiexps>> {
        let _ = (srs, r1cs, witness);
        Ok(None)
    }
}

/// Check that an assignment fits the SRS before any work is spent on it.
pub fn check_shape(srs: &Srs, evals: &Evaluations, witness: &Witness) -> Result<()> {
    check_counts(srs, evals.constraints(), witness)
}

/// What the parameters must match: a circuit's variables and the sizes of its queries.
struct Counts {
    inputs: usize,
    aux: usize,
    a_query: usize,
    b_query: usize,
}

/// `check_shape` for a circuit of `constraints` rows whose evaluations are yet to be made.
pub fn check_counts(srs: &Srs, constraints: usize, witness: &Witness) -> Result<()> {
    check_against(
        srs,
        constraints,
        Counts {
            inputs: witness.input.len(),
            aux: witness.aux.len(),
            a_query: witness.input.len() + witness.a_aux_density.count(),
            b_query: witness.b_input_density.count() + witness.b_aux_density.count(),
        },
    )
}

/// `check_shape` for a packed witness of the circuit `r1cs` records.
pub fn check_packed(srs: &Srs, r1cs: &R1cs, witness: &PackedWitness) -> Result<()> {
    r1cs.check_witness(witness.input.len(), witness.aux.len())?;
    check_against(
        srs,
        r1cs.constraints(),
        Counts {
            inputs: r1cs.inputs,
            aux: r1cs.aux,
            a_query: r1cs.inputs + r1cs.a_aux_density.count(),
            b_query: r1cs.b_input_density.count() + r1cs.b_aux_density.count(),
        },
    )
}

fn check_against(srs: &Srs, constraints: usize, counts: Counts) -> Result<()> {
    ensure!(
        counts.inputs == srs.vk.ic.len(),
        "circuit has {} public inputs, the parameters expect {}",
        counts.inputs,
        srs.vk.ic.len()
    );
    ensure!(
        counts.aux == srs.l.len(),
        "circuit has {} private variables, the parameters expect {}",
        counts.aux,
        srs.l.len()
    );
    let domain = constraints.next_power_of_two();
    ensure!(
        srs.h.len() == domain - 1,
        "circuit needs a domain of {domain}, the parameters hold {} H points",
        srs.h.len()
    );
    ensure!(
        srs.a.len() == counts.a_query,
        "A query size does not match the parameters"
    );
    ensure!(
        srs.b_g1.len() == counts.b_query && srs.b_g2.len() == srs.b_g1.len(),
        "B query size does not match the parameters"
    );
    Ok(())
}

/// Proving finish: the B multiexp in G2 (proving start's, or made here from `witness`), then
/// the randomization with `r` and `s`. The witness is needed only when `sums.b_g2` is `None`.
pub fn finish(
    srs: &Srs,
    sums: &Multiexps,
    witness: Option<&Witness>,
    r: Fr,
    s: Fr,
) -> Result<Proof> {
    let vk = &srs.vk;
    ensure!(
        !bool::from(vk.delta_g1.is_identity() | vk.delta_g2.is_identity()),
        "parameters have δ at infinity: refusing to prove with a subverted SRS"
    );
    let b_g2 = match (sums.b_g2, witness) {
        (Some(b_g2), _) => b_g2,
        (None, Some(witness)) => msm::b_g2(srs, witness)?,
        (None, None) => bail!(
            "the B multiexp in G2 was not made in proving start, and no witness is left to \
             make it from"
        ),
    };

    let delta_g1 = G1Projective::from(vk.delta_g1);
    let alpha_g1 = G1Projective::from(vk.alpha_g1);
    let beta_g1 = G1Projective::from(vk.beta_g1);

    let a = alpha_g1 + sums.a + delta_g1 * r;
    let b = G2Projective::from(vk.beta_g2) + b_g2 + G2Projective::from(vk.delta_g2) * s;
    let c = sums.a * s
        + sums.b_g1 * r
        + delta_g1 * (r * s)
        + alpha_g1 * s
        + beta_g1 * r
        + sums.h
        + sums.l;

    Ok(Proof {
        a: a.to_affine(),
        b: b.to_affine(),
        c: c.to_affine(),
    })
}

/// Start and finish in one call: what tests and the simple CLI path use.
pub fn prove(
    backend: &dyn Backend,
    srs: &Srs,
    assignment: Assignment,
    r: Fr,
    s: Fr,
) -> Result<Proof> {
    let Assignment { witness, evals } = assignment;
    check_shape(srs, &evals, &witness)?;
    let sums = backend.start(srs, evals, &witness)?;
    finish(srs, &sums, Some(&witness), r, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groth16::CpuBackend;
    use crate::job::ProofJob;
    use group::Group;

    fn bytes(p: &Proof) -> Vec<u8> {
        let mut v = Vec::new();
        p.write(&mut v).expect("proof serialises");
        v
    }

    /// A B multiexp in G2 from proving start is what `finish` uses: the proof is the one made
    /// with the witness, without it; a wrong one makes a wrong proof (so it is not made again
    /// from the witness behind the caller's back); and without either, `finish` refuses.
    #[test]
    fn finish_takes_the_b_multiexp_in_g2_from_proving_start() {
        let job = crate::canary::CanaryJob::new(1, 5).expect("canary job");
        let srs = crate::canary::srs().expect("canary parameters");
        let Assignment { witness, evals } = job.synthesize(0).expect("synthesis");
        let (r, s) = (Fr::from(7u64), Fr::from(11u64));
        let sums = CpuBackend.start(&srs, evals, &witness).expect("start");
        assert_eq!(sums.b_g2, None);
        let with_witness = finish(&srs, &sums, Some(&witness), r, s).expect("finish");
        job.verify(std::slice::from_ref(&with_witness))
            .expect("the proof verifies");

        let made = Multiexps {
            b_g2: Some(msm::b_g2(&srs, &witness).expect("B in G2")),
            ..sums
        };
        let without_witness = finish(&srs, &made, None, r, s).expect("finish");
        assert_eq!(bytes(&without_witness), bytes(&with_witness));

        let wrong = Multiexps {
            b_g2: Some(G2Projective::generator()),
            ..sums
        };
        let proof = finish(&srs, &wrong, Some(&witness), r, s).expect("finish");
        assert_ne!(bytes(&proof), bytes(&with_witness));
        assert!(job.verify(&[proof]).is_err());

        let err = finish(&srs, &sums, None, r, s).expect_err("nothing to make B in G2 from");
        assert!(format!("{err:#}").contains("no witness"), "{err:#}");
    }
}
