//! Checking a finished C2 proof against the C1 output it was made from, the way the chain
//! does: filecoin-proofs' `verify_seal` over comm_r, comm_d, ticket and seed, with the
//! verifying key from the parameter directory. Nothing here proves or reads `.params`.

use anyhow::{anyhow, ensure, Context, Result};
use filecoin_hashers::Domain;
use filecoin_proofs::constants::{DefaultPieceDomain, DefaultTreeDomain, DefaultTreeHasher};
use filecoin_proofs::{as_safe_commitment, PoRepConfig};
use filecoin_proofs_api::RegisteredSealProof;
use storage_proofs_porep::stacked::generate_replica_id;

use super::input::{proof_name, C1Input};
use super::job::SHAPE_ONLY_REFUSED;
use super::params;
use crate::groth16::{Proof, VerifyingKey};

/// Bytes of one partition's proof (compressed A, B, C).
pub const PARTITION_PROOF_BYTES: usize = 192;

/// Why a seal verification gave no verdict.
#[derive(Debug, thiserror::Error)]
pub enum SealCheckError {
    /// The inputs do not belong together or cannot be what they claim: a shape-only C1, a
    /// C1 for another miner or sector, a proof of the wrong length.
    #[error("{0:#}")]
    BadInput(anyhow::Error),
    /// The verifying key is missing or unreadable.
    #[error("{0:#}")]
    Params(anyhow::Error),
    /// The verifier failed for a reason of its own.
    #[error("{0:#}")]
    Verifier(anyhow::Error),
}

/// The answer about a proof whose inputs were in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SealVerdict {
    Valid {
        partitions: usize,
    },
    /// Why not, in a sentence.
    Invalid(String),
}

/// What a C1 output says the sector's public values are, checked against the miner and sector
/// the proof is said to be for.
pub struct SealStatement {
    pub registered_proof: RegisteredSealProof,
    pub miner_id: u64,
    pub sector_number: u64,
    pub comm_r: [u8; 32],
    pub comm_d: [u8; 32],
    pub ticket: [u8; 32],
    pub seed: [u8; 32],
    config: PoRepConfig,
}

impl SealStatement {
    /// Everything a verifier needs from a C1 output. Refuses shape-only outputs (their values
    /// are random) and a C1 whose replica id was not derived from this miner, sector, ticket
    /// and comm_d: its proof could only fail, and the reason is the input, not the proof.
    pub fn from_c1(c1: &C1Input, miner_id: u64, sector_number: u64) -> Result<SealStatement> {
        ensure!(!c1.shape_only, "{SHAPE_ONLY_REFUSED}");
        super::check_request(c1, miner_id, sector_number)?;
        let out = &c1.output;
        let proof = out.registered_proof;
        as_safe_commitment::<DefaultTreeDomain, _>(&out.comm_r, "comm_r")
            .context("the C1 output's comm_r")?;
        as_safe_commitment::<DefaultPieceDomain, _>(&out.comm_d, "comm_d")
            .context("the C1 output's comm_d")?;
        let config = proof.as_v1_config();
        // Every sector shape's tree hashes with the default tree hasher (the C1's replica id
        // is of that type), so no shape dispatch is needed for the replica id.
        let expected = generate_replica_id::<DefaultTreeHasher, _>(
            &super::prover_id(miner_id),
            sector_number,
            &out.ticket,
            out.comm_d,
            &config.porep_id,
        );
        ensure!(
            expected.into_bytes() == out.replica_id.into_bytes(),
            "the C1 output was not made for miner {miner_id} sector {sector_number} (its replica \
             id differs)"
        );
        Ok(SealStatement {
            registered_proof: proof,
            miner_id,
            sector_number,
            comm_r: out.comm_r,
            comm_d: out.comm_d,
            ticket: out.ticket,
            seed: out.seed,
            config,
        })
    }

    pub fn partitions(&self) -> usize {
        usize::from(self.config.partitions)
    }

    fn is_non_interactive(&self) -> bool {
        proof_name(self.registered_proof).contains("NonInteractive")
    }

    /// Verify `proof` (192 bytes per partition, as `c2q prove` writes it and results carry it).
    ///
    /// Interactive PoRep goes through filecoin-proofs' `verify_seal`, as the chain checks it.
    /// For non-interactive PoRep `verify_seal` takes only the aggregate of the partition proofs
    /// (aggregation is a later step than C2), so each partition proof is checked with
    /// bellperson's verifier against the inputs filecoin-proofs derives (`get_seal_inputs`).
    pub fn verify(&self, proof: &[u8]) -> Result<SealVerdict, SealCheckError> {
        let partitions = self.partitions();
        if proof.len() != partitions * PARTITION_PROOF_BYTES {
            return Err(SealCheckError::BadInput(anyhow!(
                "the proof is {} bytes, but a {} proof is {partitions} partition(s) of \
                 {PARTITION_PROOF_BYTES} bytes",
                proof.len(),
                proof_name(self.registered_proof)
            )));
        }
        let vk = self.verifying_key().map_err(SealCheckError::Params)?;
        let proofs = match parse_partition_proofs(proof) {
            Ok(p) => p,
            Err(reason) => return Ok(SealVerdict::Invalid(reason)),
        };
        let against = format!(
            "against the C1's comm_r, comm_d, ticket and seed for miner {} sector {}",
            self.miner_id, self.sector_number
        );
        if self.is_non_interactive() {
            let inputs = filecoin_proofs_api::seal::get_seal_inputs(
                self.registered_proof,
                self.comm_r,
                self.comm_d,
                super::prover_id(self.miner_id),
                self.sector_number.into(),
                self.ticket,
                self.seed,
            )
            .map_err(SealCheckError::Verifier)?;
            if inputs.len() != proofs.len() {
                return Err(SealCheckError::Verifier(anyhow!(
                    "filecoin-proofs derives public inputs for {} partitions, the proof has {}",
                    inputs.len(),
                    proofs.len()
                )));
            }
            let pvk = bellperson::groth16::prepare_verifying_key(&vk);
            let mut failed = Vec::new();
            for (k, (proof, inputs)) in proofs.iter().zip(&inputs).enumerate() {
                let ok = bellperson::groth16::verify_proof(&pvk, proof, inputs)
                    .map_err(|e| SealCheckError::Verifier(anyhow!("partition {k}: {e}")))?;
                if !ok {
                    failed.push(k.to_string());
                }
            }
            if failed.is_empty() {
                return Ok(SealVerdict::Valid { partitions });
            }
            return Ok(SealVerdict::Invalid(format!(
                "the proofs of partition(s) {} do not verify {against}",
                failed.join(", ")
            )));
        }
        let valid = filecoin_proofs_api::seal::verify_seal(
            self.registered_proof,
            self.comm_r,
            self.comm_d,
            super::prover_id(self.miner_id),
            self.sector_number.into(),
            self.ticket,
            self.seed,
            proof,
        )
        .map_err(SealCheckError::Verifier)?;
        Ok(if valid {
            SealVerdict::Valid { partitions }
        } else {
            SealVerdict::Invalid(format!("the proof does not verify {against}"))
        })
    }

    /// The `.vk` file filecoin-proofs reads, read here first: a missing or corrupt one is a
    /// parameter problem with a clear message, where filecoin-proofs would instead try to
    /// derive it from the `.params` file.
    fn verifying_key(&self) -> Result<VerifyingKey> {
        let id = params::cache_id(self.registered_proof)?;
        let path = params::params_dir().join(params::file_name(&id, "vk"));
        params::require(&path, self.registered_proof)?;
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        VerifyingKey::read(&bytes[..])
            .with_context(|| format!("{} is truncated or corrupt", path.display()))
    }
}

/// The partition proofs of `bytes`, or why they are not proofs at all: a changed byte mostly
/// leaves a value that is no point of the curve, which no prover could have made.
pub fn parse_partition_proofs(bytes: &[u8]) -> Result<Vec<Proof>, String> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(PARTITION_PROOF_BYTES) {
        return Err(format!(
            "{} bytes are not whole partition proofs of {PARTITION_PROOF_BYTES} bytes",
            bytes.len()
        ));
    }
    bytes
        .chunks(PARTITION_PROOF_BYTES)
        .enumerate()
        .map(|(k, chunk)| {
            Proof::read(chunk).map_err(|e| {
                format!(
                    "the proof of partition {k} is not made of curve points ({e}): it was \
                     altered or corrupted"
                )
            })
        })
        .collect()
}
