//! A SnapDeals job's input: the registered update proof, the three commitments and the vanilla
//! partition proofs, in one JSON document:
//!
//! ```json
//! {
//!   "registered_proof": "StackedDrg32GiBV1",
//!   "comm_r_old": "bagboea4b5abc…",
//!   "comm_r_new": "bagboea4b5abc…",
//!   "comm_d_new": "baga6ea4seaq…",
//!   "vanilla_proofs": ["<base64>", …]
//! }
//! ```
//!
//! `vanilla_proofs` is what filecoin-ffi's `generate_partition_proofs` returns and Curio and
//! lotus pass on to `ProveReplicaUpdate2`, as Go's `json.Marshal([][]byte)` writes it: one
//! base64 string per partition. `registered_proof` is the update proof's name or its number
//! (lotus's `abi.RegisteredUpdateProof`); commitments are CIDs as lotus prints them (sector key
//! and new sealed CID, new unsealed CID) or 64 hex digits. An input made by `c2q testdata snap
//! --shape-only` (`snap::shape`) also carries `"c2q_shape_only": true`.

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use base64::Engine;
use filecoin_proofs_api::RegisteredUpdateProof;
use serde::Deserialize;

use super::commitment::{self, CommitmentKind};
use super::{update_proof_from_name, update_proof_name};

/// The key that marks an input as shape-only (as `porep::shape::MARKER` marks a C1 output).
pub const SHAPE_ONLY_KEY: &str = "c2q_shape_only";

/// The largest input accepted. A 32 GiB sector's 16 vanilla partition proofs are ~10 MB in
/// base64; 64 GiB ones a little more.
pub const MAX_SNAP_INPUT_BYTES: usize = 64 << 20;

/// A parsed SnapDeals input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapInput {
    pub registered_proof: RegisteredUpdateProof,
    /// The sector key's comm_r (before the update).
    pub comm_r_old: [u8; 32],
    /// The updated replica's comm_r.
    pub comm_r_new: [u8; 32],
    /// The deal data's comm_d.
    pub comm_d_new: [u8; 32],
    /// One `PartitionProofBytes` per partition, as filecoin-ffi serializes them.
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// Made by `c2q testdata snap --shape-only`: a real update's shape with random values, for
    /// benchmarks only (the `c2q_shape_only` key, see `snap::shape`).
    pub shape_only: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    registered_proof: serde_json::Value,
    comm_r_old: String,
    comm_r_new: String,
    comm_d_new: String,
    vanilla_proofs: Vec<String>,
    #[serde(default)]
    c2q_shape_only: bool,
}

/// Parse a SnapDeals input document.
pub fn parse_snap_input(bytes: &[u8]) -> Result<SnapInput> {
    ensure!(
        bytes.len() <= MAX_SNAP_INPUT_BYTES,
        "input is {} bytes, more than the {MAX_SNAP_INPUT_BYTES} bytes a SnapDeals input can be",
        bytes.len()
    );
    let doc: Document = serde_json::from_slice(bytes).map_err(|e| {
        anyhow::anyhow!(
            "not a SnapDeals input ({e}): expected a JSON object with registered_proof, \
             comm_r_old, comm_r_new, comm_d_new and vanilla_proofs"
        )
    })?;
    let registered_proof = match &doc.registered_proof {
        serde_json::Value::String(name) => update_proof_from_name(name)?,
        serde_json::Value::Number(n) => update_proof_from_name(&n.to_string())?,
        other => bail!("registered_proof is {other}, expected an update proof's name or number"),
    };
    let sealed = |field: &str, text: &str| {
        commitment::parse_text(text, CommitmentKind::Sealed).with_context(|| field.to_string())
    };
    let comm_r_old = sealed("comm_r_old", &doc.comm_r_old)?;
    let comm_r_new = sealed("comm_r_new", &doc.comm_r_new)?;
    let comm_d_new =
        commitment::parse_text(&doc.comm_d_new, CommitmentKind::Unsealed).context("comm_d_new")?;
    let vanilla_proofs = doc
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(k, text)| {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .with_context(|| format!("vanilla proof of partition {k} is not base64"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(SnapInput {
        registered_proof,
        comm_r_old,
        comm_r_new,
        comm_d_new,
        vanilla_proofs,
        shape_only: doc.c2q_shape_only,
    })
}

/// Read and parse a SnapDeals input file.
pub fn read_snap_input_file(path: &Path) -> Result<SnapInput> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_snap_input(&bytes).with_context(|| format!("{}", path.display()))
}

/// Whether bytes look like a SnapDeals input (a JSON object with `comm_r_old` and
/// `vanilla_proofs`) rather than a C1 output; nothing else is checked.
pub fn is_snap_input(bytes: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Keys {
        comm_r_old: Option<serde::de::IgnoredAny>,
        vanilla_proofs: Option<serde::de::IgnoredAny>,
    }
    matches!(
        serde_json::from_slice::<Keys>(bytes),
        Ok(Keys {
            comm_r_old: Some(_),
            vanilla_proofs: Some(_)
        })
    )
}

/// [`is_snap_input`] of a file; a file too large to be a SnapDeals input is not one.
pub fn is_snap_input_file(path: &Path) -> Result<bool> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if meta.len() > MAX_SNAP_INPUT_BYTES as u64 {
        return Ok(false);
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(is_snap_input(&bytes))
}

impl SnapInput {
    /// The document [`parse_snap_input`] reads, commitments as CIDs (and the shape-only
    /// marker in front where it is one).
    pub fn to_json(&self) -> Result<Vec<u8>> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut doc = serde_json::Map::new();
        if self.shape_only {
            doc.insert(SHAPE_ONLY_KEY.into(), true.into());
        }
        let fields = serde_json::json!({
            "registered_proof": update_proof_name(self.registered_proof),
            "comm_r_old": commitment::cid_text(&self.comm_r_old, CommitmentKind::Sealed),
            "comm_r_new": commitment::cid_text(&self.comm_r_new, CommitmentKind::Sealed),
            "comm_d_new": commitment::cid_text(&self.comm_d_new, CommitmentKind::Unsealed),
            "vanilla_proofs": self.vanilla_proofs.iter().map(|p| b64.encode(p)).collect::<Vec<_>>(),
        });
        if let serde_json::Value::Object(fields) = fields {
            doc.extend(fields);
        }
        Ok(serde_json::to_vec(&doc)?)
    }

    pub fn sector_size(&self) -> u64 {
        u64::from(self.registered_proof.sector_size())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SnapInput {
        SnapInput {
            registered_proof: RegisteredUpdateProof::StackedDrg8MiBV1,
            comm_r_old: [1; 32],
            comm_r_new: [2; 32],
            comm_d_new: [3; 32],
            vanilla_proofs: vec![vec![4, 5, 6], vec![7; 40]],
            shape_only: false,
        }
    }

    #[test]
    fn an_input_round_trips_and_takes_numbers_and_hex() {
        let input = sample();
        assert_eq!(parse_snap_input(&input.to_json().unwrap()).unwrap(), input);
        let mut doc: serde_json::Value = serde_json::from_slice(&input.to_json().unwrap()).unwrap();
        doc["registered_proof"] = serde_json::json!(1);
        doc["comm_r_old"] = serde_json::json!(hex::encode([1u8; 32]));
        let again = parse_snap_input(&serde_json::to_vec(&doc).unwrap()).unwrap();
        assert_eq!(again, input);
        assert!(is_snap_input(&input.to_json().unwrap()));
        assert!(!is_snap_input(
            br#"{"registered_proof": "StackedDrg2KiBV1_1", "comm_r": []}"#
        ));
        assert!(!is_snap_input(b"not json"));

        // The shape-only marker round-trips, and is written only where it is set.
        assert!(!String::from_utf8(input.to_json().unwrap())
            .unwrap()
            .contains(SHAPE_ONLY_KEY));
        let marked = SnapInput {
            shape_only: true,
            ..input.clone()
        };
        let json = marked.to_json().unwrap();
        assert!(json.starts_with(br#"{"c2q_shape_only":true,"#));
        assert_eq!(parse_snap_input(&json).unwrap(), marked);
        assert!(is_snap_input(&json));
        let mut doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
        doc[SHAPE_ONLY_KEY] = serde_json::json!("yes");
        assert!(parse_snap_input(&serde_json::to_vec(&doc).unwrap()).is_err());
    }

    #[test]
    fn bad_inputs_say_what_is_wrong() {
        let input = sample();
        let doc: serde_json::Value = serde_json::from_slice(&input.to_json().unwrap()).unwrap();
        let with = |key: &str, value: serde_json::Value| {
            let mut d = doc.clone();
            d[key] = value;
            format!(
                "{:#}",
                parse_snap_input(&serde_json::to_vec(&d).unwrap()).unwrap_err()
            )
        };
        assert!(with("registered_proof", "StackedDrg2KiBV1_1".into()).contains("unknown"));
        assert!(with("comm_d_new", doc["comm_r_old"].clone()).contains("comm_d_new"));
        assert!(with("vanilla_proofs", serde_json::json!(["@@"])).contains("partition 0"));
        let e = parse_snap_input(b"[1,2]").unwrap_err();
        assert!(e.to_string().contains("not a SnapDeals input"), "{e}");
    }
}
