//! Sector commitments as Filecoin writes them: 32 bytes, or a CID (CIDv1 with the
//! fil-commitment codecs), in binary (Curio's gRPC requests) or as the base32 text lotus prints
//! (`bagboea4b5abc…` for a sealed sector, `baga6ea4seaq…` for unsealed data).

use anyhow::{bail, ensure, Context, Result};

/// Which commitment a CID must carry: the codec and hash Filecoin assigns each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitmentKind {
    /// comm_r (a replica's): codec fil-commitment-sealed, hash poseidon-bls12_381-a2-fc1.
    Sealed,
    /// comm_d (the data's): codec fil-commitment-unsealed, hash sha2-256-trunc254-padded.
    Unsealed,
}

impl CommitmentKind {
    fn codec(self) -> u64 {
        match self {
            CommitmentKind::Sealed => 0xf102,
            CommitmentKind::Unsealed => 0xf101,
        }
    }

    fn hash(self) -> u64 {
        match self {
            CommitmentKind::Sealed => 0xb401,
            CommitmentKind::Unsealed => 0x1012,
        }
    }

    fn name(self) -> &'static str {
        match self {
            CommitmentKind::Sealed => "sealed",
            CommitmentKind::Unsealed => "unsealed",
        }
    }
}

/// A commitment from text: 64 hex digits, or a base32 CID (`b…`).
pub fn parse_text(text: &str, kind: CommitmentKind) -> Result<[u8; 32]> {
    let text = text.trim();
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        let mut out = [0u8; 32];
        hex::decode_to_slice(text, &mut out).context("not hex")?;
        return Ok(out);
    }
    let Some(base32) = text.strip_prefix('b') else {
        bail!("{text:?} is neither 64 hex digits nor a base32 CID (b…)");
    };
    let bytes = base32_decode(base32).with_context(|| format!("{text:?} is not a base32 CID"))?;
    parse_cid_bytes(&bytes, kind).with_context(|| format!("CID {text}"))
}

/// A commitment from a binary CID; 32 bytes alone are taken as the commitment itself.
pub fn parse_bytes(bytes: &[u8], kind: CommitmentKind) -> Result<[u8; 32]> {
    if let Ok(raw) = <[u8; 32]>::try_from(bytes) {
        return Ok(raw);
    }
    parse_cid_bytes(bytes, kind)
}

fn parse_cid_bytes(bytes: &[u8], kind: CommitmentKind) -> Result<[u8; 32]> {
    let mut rest = bytes;
    let version = read_varint(&mut rest)?;
    ensure!(
        version == 1,
        "CID version {version}, Filecoin commitments are CIDv1"
    );
    let codec = read_varint(&mut rest)?;
    let hash = read_varint(&mut rest)?;
    ensure!(
        codec == kind.codec() && hash == kind.hash(),
        "not a {} sector commitment (codec {codec:#x}, hash {hash:#x}; expected {:#x}, {:#x})",
        kind.name(),
        kind.codec(),
        kind.hash()
    );
    let len = read_varint(&mut rest)?;
    ensure!(
        len == 32,
        "a commitment's digest is 32 bytes, this one {len}"
    );
    <[u8; 32]>::try_from(rest)
        .map_err(|_| anyhow::anyhow!("the CID holds {} digest bytes, not 32", rest.len()))
}

/// The binary CID of a commitment.
pub fn cid_bytes(commitment: &[u8; 32], kind: CommitmentKind) -> Vec<u8> {
    let mut out = Vec::with_capacity(40);
    for v in [1, kind.codec(), kind.hash(), 32] {
        write_varint(&mut out, v);
    }
    out.extend_from_slice(commitment);
    out
}

/// The CID of a commitment as lotus prints it.
pub fn cid_text(commitment: &[u8; 32], kind: CommitmentKind) -> String {
    format!("b{}", base32_encode(&cid_bytes(commitment, kind)))
}

fn read_varint(bytes: &mut &[u8]) -> Result<u64> {
    let mut value = 0u64;
    for shift in (0..63).step_by(7) {
        let (&byte, rest) = bytes.split_first().context("the CID ends early")?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    bail!("a varint in the CID is too long")
}

fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// RFC 4648 base32, lower case, no padding (multibase `b`).
fn base32_decode(text: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 5 / 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let value = BASE32
            .iter()
            .position(|&b| b == c.to_ascii_lowercase())
            .with_context(|| format!("{:?} is not a base32 character", c as char))?;
        buffer = (buffer << 5) | value as u32;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

fn base32_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &b in bytes {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(BASE32[((buffer >> bits) & 31) as usize] as char);
        }
        buffer &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(BASE32[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CIDs lotus prints for a sealed and an unsealed commitment begin as Filecoin's do.
    #[test]
    fn commitments_round_trip_through_cids() {
        let comm: [u8; 32] = std::array::from_fn(|i| i as u8 * 7);
        let sealed = cid_text(&comm, CommitmentKind::Sealed);
        assert!(sealed.starts_with("bagboea4b5abc"), "{sealed}");
        let unsealed = cid_text(&comm, CommitmentKind::Unsealed);
        assert!(unsealed.starts_with("baga6ea4seaq"), "{unsealed}");
        assert_eq!(parse_text(&sealed, CommitmentKind::Sealed).unwrap(), comm);
        assert_eq!(
            parse_text(&unsealed, CommitmentKind::Unsealed).unwrap(),
            comm
        );
        assert_eq!(
            parse_text(&hex::encode(comm), CommitmentKind::Sealed).unwrap(),
            comm
        );
        let binary = cid_bytes(&comm, CommitmentKind::Sealed);
        assert_eq!(parse_bytes(&binary, CommitmentKind::Sealed).unwrap(), comm);
        assert_eq!(parse_bytes(&comm, CommitmentKind::Unsealed).unwrap(), comm);
    }

    #[test]
    fn the_wrong_commitment_or_a_broken_cid_is_refused() {
        let comm = [9u8; 32];
        let unsealed = cid_text(&comm, CommitmentKind::Unsealed);
        let e = parse_text(&unsealed, CommitmentKind::Sealed).unwrap_err();
        assert!(
            format!("{e:#}").contains("not a sealed sector commitment"),
            "{e:#}"
        );
        let short = &unsealed[..unsealed.len() - 4];
        assert!(parse_text(short, CommitmentKind::Unsealed).is_err());
        assert!(parse_text("bag!", CommitmentKind::Sealed).is_err());
        assert!(parse_text("xyz", CommitmentKind::Sealed).is_err());
        assert!(parse_bytes(&[1, 2, 3], CommitmentKind::Sealed).is_err());
    }
}
