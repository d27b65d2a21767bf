//! A PoSt job's input, in one JSON document:
//!
//! ```json
//! {
//!   "registered_proof": "StackedDrgWindow32GiBV1_2",
//!   "miner_id": 1000,
//!   "randomness": "<64 hex digits>",
//!   "partition_index": 0,
//!   "vanilla_proofs": ["<base64>", …]
//! }
//! ```
//!
//! `vanilla_proofs` holds one entry per sector, each the bytes filecoin-proofs-api's
//! `generate_single_vanilla_proof` returns (a bincode `FallbackPoStSectorProof`), as Go's
//! `json.Marshal([][]byte)` writes them. `registered_proof` is the proof's name or Go's
//! `abi.RegisteredPoStProof` number; `randomness` is the 32-byte challenge seed (base64 is
//! taken too); `partition_index` may be left out (0, what Curio sends: each partition's
//! sectors are proved on their own). An input made by `c2q testdata post --shape-only`
//! (`post::shape`) also carries `"c2q_shape_only": true`: the shape of a real partition with
//! random values, for benchmarks only (`PostJob::new` refuses it).

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use base64::Engine;
use filecoin_proofs_api::RegisteredPoStProof;
use serde::Deserialize;

use super::{post_proof_from_name, post_proof_name, sectors_per_partition};
use crate::porep::shape::MARKER;

/// The largest input accepted. A full 32 GiB WindowPoSt partition is 2,349 vanilla proofs of
/// ten Merkle paths each, 78.2 MB in base64 (64 GiB: 2,300 of eleven levels, 78.3 MB; 55 MB
/// compressed in a job message).
pub const MAX_POST_INPUT_BYTES: usize = 96 << 20;

/// A parsed PoSt input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostInput {
    pub registered_proof: RegisteredPoStProof,
    /// The miner's actor id: its prover id is what the proof is made for.
    pub miner_id: u64,
    /// The challenge seed (a field element: the chain clears the top bits of byte 31).
    pub randomness: [u8; 32],
    /// The partition's index among the deadline's as filecoin-proofs numbers it; 0 when each
    /// partition's sectors are proved on their own.
    pub partition_index: u64,
    /// One `FallbackPoStSectorProof` per sector, as filecoin-proofs-api serializes it.
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// Made by `c2q testdata post --shape-only`: real shape, random values, for benchmarks
    /// only (the `c2q_shape_only` key, see `post::shape`).
    pub shape_only: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    registered_proof: serde_json::Value,
    miner_id: u64,
    randomness: String,
    #[serde(default)]
    partition_index: u64,
    vanilla_proofs: Vec<String>,
    #[serde(default, rename = "c2q_shape_only")]
    shape_only: Option<serde_json::Value>,
}

/// The randomness from 64 hex digits or base64 of 32 bytes.
pub fn parse_randomness(text: &str) -> Result<[u8; 32]> {
    let bytes = match hex::decode(text) {
        Ok(bytes) => bytes,
        Err(_) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| anyhow::anyhow!("randomness is neither hex nor base64"))?,
    };
    bytes
        .as_slice()
        .try_into()
        .map_err(|_| anyhow::anyhow!("randomness is {} bytes, not 32", bytes.len()))
}

/// Parse a PoSt input document.
pub fn parse_post_input(bytes: &[u8]) -> Result<PostInput> {
    ensure!(
        bytes.len() <= MAX_POST_INPUT_BYTES,
        "input is {} bytes, more than the {MAX_POST_INPUT_BYTES} bytes a PoSt input can be",
        bytes.len()
    );
    let doc: Document = serde_json::from_slice(bytes).map_err(|e| {
        anyhow::anyhow!(
            "not a PoSt input ({e}): expected a JSON object with registered_proof, miner_id, \
             randomness and vanilla_proofs"
        )
    })?;
    let registered_proof = match &doc.registered_proof {
        serde_json::Value::String(name) => post_proof_from_name(name)?,
        serde_json::Value::Number(n) => post_proof_from_name(&n.to_string())?,
        other => bail!("registered_proof is {other}, expected a PoSt proof's name or number"),
    };
    // Counted before anything is decoded: a partition never holds more sectors than this.
    let most = sectors_per_partition(registered_proof);
    ensure!(
        !doc.vanilla_proofs.is_empty() && doc.vanilla_proofs.len() <= most,
        "{} vanilla proofs, a {} partition holds 1 to {most} sectors",
        doc.vanilla_proofs.len(),
        post_proof_name(registered_proof)
    );
    let vanilla_proofs = doc
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .with_context(|| format!("vanilla proof {i} is not base64"))
        })
        .collect::<Result<Vec<_>>>()?;
    let shape_only = match doc.shape_only {
        None => false,
        Some(serde_json::Value::Bool(marked)) => marked,
        Some(_) => bail!("`{MARKER}` is not a boolean"),
    };
    Ok(PostInput {
        registered_proof,
        miner_id: doc.miner_id,
        randomness: parse_randomness(&doc.randomness)?,
        partition_index: doc.partition_index,
        vanilla_proofs,
        shape_only,
    })
}

/// Read and parse a PoSt input file.
pub fn read_post_input_file(path: &Path) -> Result<PostInput> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_post_input(&bytes).with_context(|| format!("{}", path.display()))
}

/// Whether bytes look like a PoSt input (a JSON object with `randomness` and
/// `vanilla_proofs`) rather than a C1 output or a SnapDeals input; nothing else is checked.
pub fn is_post_input(bytes: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Keys {
        randomness: Option<serde::de::IgnoredAny>,
        vanilla_proofs: Option<serde::de::IgnoredAny>,
    }
    matches!(
        serde_json::from_slice::<Keys>(bytes),
        Ok(Keys {
            randomness: Some(_),
            vanilla_proofs: Some(_)
        })
    )
}

/// [`is_post_input`] of a file; a file too large to be a PoSt input is not one.
pub fn is_post_input_file(path: &Path) -> Result<bool> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if meta.len() > MAX_POST_INPUT_BYTES as u64 {
        return Ok(false);
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(is_post_input(&bytes))
}

impl PostInput {
    /// The document [`parse_post_input`] reads.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut doc = serde_json::json!({
            "registered_proof": post_proof_name(self.registered_proof),
            "miner_id": self.miner_id,
            "randomness": hex::encode(self.randomness),
            "partition_index": self.partition_index,
            "vanilla_proofs": self.vanilla_proofs.iter().map(|p| b64.encode(p)).collect::<Vec<_>>(),
        });
        // Only where it is true: a real input is the document Curio's proving engine takes.
        if self.shape_only {
            doc[MARKER] = serde_json::Value::Bool(true);
        }
        Ok(serde_json::to_vec(&doc)?)
    }

    pub fn sector_size(&self) -> u64 {
        u64::from(self.registered_proof.sector_size())
    }

    pub fn is_window(&self) -> bool {
        super::is_window(self.registered_proof)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PostInput {
        PostInput {
            registered_proof: RegisteredPoStProof::StackedDrgWindow2KiBV1_2,
            miner_id: 1000,
            randomness: [9; 32],
            partition_index: 0,
            vanilla_proofs: vec![vec![4, 5, 6], vec![7; 40]],
            shape_only: false,
        }
    }

    #[test]
    fn an_input_round_trips_and_takes_numbers_and_base64() {
        let input = sample();
        let json = input.to_json().unwrap();
        assert_eq!(parse_post_input(&json).unwrap(), input);
        assert!(is_post_input(&json));
        let mut doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
        doc["registered_proof"] = serde_json::json!(10);
        doc["randomness"] =
            serde_json::json!(base64::engine::general_purpose::STANDARD.encode([9u8; 32]));
        doc.as_object_mut().unwrap().remove("partition_index");
        let again = parse_post_input(&serde_json::to_vec(&doc).unwrap()).unwrap();
        assert_eq!(again, input);
        assert!(!is_post_input(
            br#"{"comm_r_old": "x", "vanilla_proofs": []}"#
        ));
        assert!(!is_post_input(b"not json"));
    }

    /// The shape-only marker is written only where it is true, and read back.
    #[test]
    fn the_shape_only_marker_round_trips() {
        let plain = sample().to_json().unwrap();
        assert!(!String::from_utf8(plain).unwrap().contains(MARKER));
        let marked = PostInput {
            shape_only: true,
            ..sample()
        };
        let json = marked.to_json().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(doc[MARKER], serde_json::Value::Bool(true));
        assert!(is_post_input(&json));
        assert_eq!(parse_post_input(&json).unwrap(), marked);
        let e = parse_post_input(
            br#"{"registered_proof": 10, "miner_id": 1,
            "randomness": "0000000000000000000000000000000000000000000000000000000000000000",
            "vanilla_proofs": ["AA=="], "c2q_shape_only": "yes"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("c2q_shape_only"), "{e}");
    }

    #[test]
    fn bad_inputs_say_what_is_wrong() {
        let doc: serde_json::Value = serde_json::from_slice(&sample().to_json().unwrap()).unwrap();
        let with = |key: &str, value: serde_json::Value| {
            let mut d = doc.clone();
            d[key] = value;
            format!(
                "{:#}",
                parse_post_input(&serde_json::to_vec(&d).unwrap()).unwrap_err()
            )
        };
        assert!(with("registered_proof", "StackedDrg2KiBV1".into()).contains("unknown"));
        assert!(with("randomness", "abcd".into()).contains("not 32"));
        assert!(with("vanilla_proofs", serde_json::json!(["@@"])).contains("vanilla proof 0"));
        assert!(with("vanilla_proofs", serde_json::json!([])).contains("1 to 2 sectors"));
        assert!(with(
            "vanilla_proofs",
            serde_json::json!(["AA==", "AA==", "AA=="])
        )
        .contains("3 vanilla proofs"));
        let e = parse_post_input(b"[1,2]").unwrap_err();
        assert!(e.to_string().contains("not a PoSt input"), "{e}");
    }
}
