//! Commit1 output as sealing pipelines produce it.
//!
//! Two forms are accepted:
//! - the `SealCommitPhase1Output` JSON that filecoin-ffi, lotus and Curio write
//!   (`registered_proof`, `vanilla_proofs`, `comm_r`, `comm_d`, `replica_id`, `seed`, `ticket`);
//! - lotus-bench's `Commit2In` JSON: `{"SectorNum": N, "Phase1Out": base64(C1 JSON),
//!   "SectorSize": bytes}`.

use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use base64::Engine;
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::RegisteredSealProof;
use serde::Deserialize;

use super::shape::MARKER;

/// The largest C1 JSON accepted. A 32 GiB C1 is about 51 MB, a 64 GiB one a little more.
pub const MAX_C1_BYTES: usize = 128 << 20;

/// A parsed Commit1 output, with what the envelope said about it.
pub struct C1Input {
    pub output: SealCommitPhase1Output,
    /// The sector number, where the input carries one (`Commit2In`).
    pub sector_number: Option<u64>,
    /// Made by `c2q testdata c1 --shape-only`: a real sector's shape with random values, for
    /// benchmarks only (the `c2q_shape_only` key, see `porep::shape`).
    pub shape_only: bool,
}

impl C1Input {
    pub fn registered_proof(&self) -> RegisteredSealProof {
        self.output.registered_proof
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Commit2In {
    #[serde(rename = "SectorNum")]
    sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

/// Parse C1 bytes in either form. Errors say which form was recognised and what is wrong.
pub fn parse_c1(bytes: &[u8]) -> Result<C1Input> {
    ensure!(
        bytes.len() <= MAX_C1_BYTES,
        "input is {} bytes, more than the {} bytes a C1 output can be",
        bytes.len(),
        MAX_C1_BYTES
    );
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| anyhow::anyhow!("input is not JSON ({e}): expected a C1 output"))?;
    let Some(object) = value.as_object() else {
        bail!("input is JSON but not an object: expected a C1 output");
    };
    if object.contains_key("Phase1Out") {
        let envelope: Commit2In = serde_json::from_value(value)
            .map_err(|e| anyhow::anyhow!("Commit2In JSON is malformed: {e}"))?;
        ensure!(
            envelope.phase1_out.len() <= MAX_C1_BYTES / 3 * 4 + 4,
            "Commit2In Phase1Out is larger than a C1 output can be"
        );
        let inner = base64::engine::general_purpose::STANDARD
            .decode(envelope.phase1_out.trim())
            .map_err(|e| anyhow::anyhow!("Commit2In Phase1Out is not base64: {e}"))?;
        let output = parse_output(&inner).context("Commit2In Phase1Out")?;
        let shape_only = shape_only_marker(&inner).context("Commit2In Phase1Out")?;
        let size = u64::from(output.registered_proof.sector_size());
        ensure!(
            envelope.sector_size == size,
            "Commit2In says SectorSize {} but its C1 is for {} ({size} bytes)",
            envelope.sector_size,
            proof_name(output.registered_proof)
        );
        return Ok(C1Input {
            output,
            sector_number: Some(envelope.sector_num),
            shape_only,
        });
    }
    if !object.contains_key("registered_proof") || !object.contains_key("vanilla_proofs") {
        bail!(
            "input is JSON but not a C1 output: no `registered_proof`/`vanilla_proofs` \
             (nor a Commit2In `Phase1Out`)"
        );
    }
    let shape_only = marked(object.get(MARKER))?;
    Ok(C1Input {
        output: serde_json::from_value(value).map_err(describe)?,
        sector_number: None,
        shape_only,
    })
}

/// Read and parse a C1 file (either accepted form), refusing one too large to be a C1 output
/// before reading it.
pub fn read_c1_file(path: &Path) -> Result<C1Input> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    ensure!(
        meta.len() <= MAX_C1_BYTES as u64,
        "{} is {} bytes, more than a C1 output can be",
        path.display(),
        meta.len()
    );
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_c1(&bytes).with_context(|| format!("{}", path.display()))
}

/// The shape-only marker of C1 JSON bytes; the other fields are skipped, not parsed.
fn shape_only_marker(bytes: &[u8]) -> Result<bool> {
    #[derive(Deserialize)]
    struct Marker {
        c2q_shape_only: Option<serde_json::Value>,
    }
    let marker: Marker = serde_json::from_slice(bytes).map_err(describe)?;
    marked(marker.c2q_shape_only.as_ref())
}

fn marked(marker: Option<&serde_json::Value>) -> Result<bool> {
    match marker {
        None => Ok(false),
        Some(serde_json::Value::Bool(marked)) => Ok(*marked),
        Some(_) => bail!("C1 output is malformed: `{MARKER}` is not a boolean"),
    }
}

fn parse_output(bytes: &[u8]) -> Result<SealCommitPhase1Output> {
    serde_json::from_slice(bytes).map_err(describe)
}

fn describe(e: serde_json::Error) -> anyhow::Error {
    let mut msg = e.to_string();
    if msg.len() > 300 {
        msg.truncate(300);
        msg.push('…');
    }
    anyhow::anyhow!("C1 output is malformed: {msg}")
}

/// Every registered PoRep proof, in the order of their numbers in Filecoin's actors
/// (go-state-types `abi.RegisteredSealProof`, lotus's JSON): five sector sizes per version.
pub const REGISTERED_PROOFS: [RegisteredSealProof; 20] = {
    use RegisteredSealProof::*;
    [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
        StackedDrg2KiBV1_1,
        StackedDrg8MiBV1_1,
        StackedDrg512MiBV1_1,
        StackedDrg32GiBV1_1,
        StackedDrg64GiBV1_1,
        StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
        StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
    ]
};

/// The name Filecoin uses for a registered proof, e.g. `StackedDrg2KiBV1_1`.
pub fn proof_name(proof: RegisteredSealProof) -> String {
    format!("{proof:?}")
}

/// Parse a registered proof from its name (as in `c2q params generate --proof`).
pub fn proof_from_name(name: &str) -> Result<RegisteredSealProof> {
    serde_json::from_value(serde_json::Value::String(name.to_string())).map_err(|_| {
        anyhow::anyhow!(
            "unknown registered proof `{name}` (expected e.g. StackedDrg2KiBV1_1, \
             StackedDrg32GiBV1_1, StackedDrg2KiBV1_2_Feat_NonInteractivePoRep)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_is_not_a_c1() {
        let cases: [(&[u8], &str); 5] = [
            (b"\x00\x01garbage", "not JSON"),
            (b"{\"registered_proof\": \"StackedDrg2KiBV1_1\"", "not JSON"),
            (b"[1,2,3]", "not an object"),
            (b"{\"hello\": 1}", "not a C1 output"),
            (
                b"{\"SectorNum\": 1, \"Phase1Out\": \"%%%\", \"SectorSize\": 2048}",
                "base64",
            ),
        ];
        for (input, expect) in cases {
            let err = parse_c1(input)
                .err()
                .map(|e| format!("{e:#}"))
                .unwrap_or_default();
            assert!(err.contains(expect), "{input:?}: {err}");
        }
    }

    #[test]
    fn shape_only_marker_must_be_a_boolean() {
        let input = br#"{"registered_proof": "StackedDrg2KiBV1_1", "vanilla_proofs": {},
                         "c2q_shape_only": "yes"}"#;
        let err = parse_c1(input)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("c2q_shape_only` is not a boolean"), "{err}");
    }

    #[test]
    fn rejects_oversize_before_parsing() {
        let big = vec![b' '; MAX_C1_BYTES + 1];
        let err = parse_c1(&big)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("more than"), "{err}");
    }

    #[test]
    fn proof_names_round_trip() {
        let p = proof_from_name("StackedDrg2KiBV1_1").unwrap();
        assert_eq!(proof_name(p), "StackedDrg2KiBV1_1");
        assert!(proof_from_name("StackedDrg3KiB").is_err());
    }
}
