//! c2q's Groth16 prover against bellperson's `create_proof`: given the same parameters and the
//! same r and s, the proof bytes must be identical, for every density case.

use bellperson::groth16 as bp;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar as Fr};
use c2q::groth16::{self, setup, CpuBackend, Srs};
use ff::Field;
use rand::SeedableRng;

/// A circuit whose variables cover every query-density case: A only (p), A and B (q, s),
/// B only (b), C only (u, c), an input in B (x), plus whatever values the test picks.
#[derive(Clone)]
struct Densities {
    x: Option<Fr>,
    p: Option<Fr>,
    q: Option<Fr>,
}

impl Circuit<Fr> for Densities {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let get = |v: Option<Fr>| v.ok_or(SynthesisError::AssignmentMissing);
        let x = cs.alloc_input(|| "x", || get(self.x))?;
        let p = cs.alloc(|| "p", || get(self.p))?;
        let q = cs.alloc(|| "q", || get(self.q))?;
        let pq_v = self.p.zip(self.q).map(|(p, q)| p * q);
        let pq = cs.alloc(|| "pq", || get(pq_v))?;
        cs.enforce(|| "pq", |lc| lc + p, |lc| lc + q, |lc| lc + pq);
        let s_v = self.p.zip(self.x).map(|(p, x)| p + x);
        let s = cs.alloc(|| "s", || get(s_v))?;
        cs.enforce(|| "s", |lc| lc + p + x, |lc| lc + CS::one(), |lc| lc + s);
        let t_v = self.q.zip(self.x).map(|(q, x)| q * x);
        let t = cs.alloc(|| "t", || get(t_v))?;
        cs.enforce(|| "t", |lc| lc + q, |lc| lc + x, |lc| lc + t);
        let u_v = s_v.map(|s| s.square());
        let u = cs.alloc(|| "u", || get(u_v))?;
        cs.enforce(|| "u", |lc| lc + s, |lc| lc + s, |lc| lc + u);
        let c_v = pq_v.zip(t_v).map(|(a, b)| a + b);
        let c = cs.alloc(|| "c", || get(c_v))?;
        cs.enforce(|| "c", |lc| lc + pq + t, |lc| lc + CS::one(), |lc| lc + c);
        let b = cs.alloc(|| "b", || get(self.q))?;
        let b2 = cs.alloc(|| "b2", || get(self.q))?;
        cs.enforce(|| "b", |lc| lc + CS::one(), |lc| lc + b, |lc| lc + b2);
        Ok(())
    }
}

/// Public inputs only: no private variable at all.
#[derive(Clone)]
struct InputsOnly {
    x: Option<Fr>,
    y: Option<Fr>,
}

impl Circuit<Fr> for InputsOnly {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let get = |v: Option<Fr>| v.ok_or(SynthesisError::AssignmentMissing);
        let x = cs.alloc_input(|| "x", || get(self.x))?;
        let y = cs.alloc_input(|| "y", || get(self.y))?;
        let xy = cs.alloc_input(|| "xy", || get(self.x.zip(self.y).map(|(x, y)| x * y)))?;
        cs.enforce(|| "xy", |lc| lc + x, |lc| lc + y, |lc| lc + xy);
        Ok(())
    }
}

fn from_bellperson(params: &bp::Parameters<Bls12>) -> Srs {
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    Srs::decode(&bytes, "bellperson").unwrap()
}

fn proof_bytes(p: &groth16::Proof) -> Vec<u8> {
    let mut v = Vec::new();
    p.write(&mut v).unwrap();
    v
}

/// Prove with both provers; assert identical bytes; return whether the proof verifies.
fn compare<C: Circuit<Fr> + Clone + Send>(circuit: C, srs: &Srs, inputs: &[Fr], seed: u64) -> bool {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (r, s) = (Fr::random(&mut rng), Fr::random(&mut rng));
    let reference =
        bp::create_proof::<Bls12, _, _>(circuit.clone(), &srs.to_bellperson(), r, s).unwrap();
    let ours = groth16::prove(
        &CpuBackend,
        srs,
        groth16::synthesize(circuit).unwrap(),
        r,
        s,
    )
    .unwrap();
    assert_eq!(
        proof_bytes(&ours),
        proof_bytes(&reference),
        "proof bytes differ"
    );
    let pvk = bp::prepare_verifying_key(&srs.vk);
    bp::verify_proof(&pvk, &ours, inputs).unwrap()
}

fn value_sets() -> Vec<(&'static str, [Fr; 3])> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    vec![
        (
            "random",
            [
                Fr::random(&mut rng),
                Fr::random(&mut rng),
                Fr::random(&mut rng),
            ],
        ),
        ("zeros", [Fr::ZERO; 3]),
        ("ones", [Fr::ONE; 3]),
        ("mixed", [Fr::random(&mut rng), Fr::ZERO, Fr::ONE]),
    ]
}

#[test]
fn identical_to_bellperson_with_our_parameters() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let blank = Densities {
        x: None,
        p: None,
        q: None,
    };
    let srs = setup::generate(blank, &mut rng, "densities", &setup::Quiet).unwrap();
    for (name, [x, p, q]) in value_sets() {
        let c = Densities {
            x: Some(x),
            p: Some(p),
            q: Some(q),
        };
        assert!(compare(c, &srs, &[x], 1), "{name}: proof does not verify");
    }
}

#[test]
fn identical_to_bellperson_with_bellperson_parameters() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(6);
    let blank = Densities {
        x: None,
        p: None,
        q: None,
    };
    let params = bp::generate_random_parameters::<Bls12, _, _>(blank, &mut rng).unwrap();
    let srs = from_bellperson(&params);
    for (name, [x, p, q]) in value_sets() {
        let c = Densities {
            x: Some(x),
            p: Some(p),
            q: Some(q),
        };
        assert!(compare(c, &srs, &[x], 2), "{name}: proof does not verify");
    }
}

#[test]
fn identical_for_an_inputs_only_circuit() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let srs = setup::generate(
        InputsOnly { x: None, y: None },
        &mut rng,
        "inputs",
        &setup::Quiet,
    )
    .unwrap();
    assert!(srs.l.is_empty());
    let (x, y) = (Fr::random(&mut rng), Fr::ONE);
    assert!(compare(
        InputsOnly {
            x: Some(x),
            y: Some(y)
        },
        &srs,
        &[x, y, x * y],
        3
    ));
    // All-zero inputs are still a valid statement.
    assert!(compare(
        InputsOnly {
            x: Some(Fr::ZERO),
            y: Some(Fr::ZERO)
        },
        &srs,
        &[Fr::ZERO; 3],
        4
    ));
}

#[test]
fn our_parameters_are_what_bellperson_reads() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(8);
    let srs = setup::generate(
        Densities {
            x: None,
            p: None,
            q: None,
        },
        &mut rng,
        "d",
        &setup::Quiet,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.params");
    srs.write(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let theirs = bp::Parameters::<Bls12>::read(&bytes[..], true).unwrap();
    assert!(
        theirs == srs.to_bellperson(),
        "bellperson reads back different parameters"
    );
    // And an unsatisfied witness gives a proof that does not verify, identically.
    let bad = Densities {
        x: Some(Fr::ONE),
        p: Some(Fr::ONE),
        q: Some(Fr::ONE),
    };
    assert!(!compare(bad, &srs, &[Fr::from(2u64)], 9));
}

#[test]
fn truncated_or_corrupt_parameters_are_errors() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(10);
    let srs = setup::generate(
        Densities {
            x: None,
            p: None,
            q: None,
        },
        &mut rng,
        "d",
        &setup::Quiet,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.params");
    srs.write(&path).unwrap();
    let good = std::fs::read(&path).unwrap();
    for cut in [0, 10, 500, good.len() / 2, good.len() - 1] {
        assert!(
            Srs::decode(&good[..cut], "cut").is_err(),
            "truncated at {cut} accepted"
        );
    }
    let mut corrupt = good.clone();
    let at = good.len() - 100;
    corrupt[at] ^= 0x55;
    let err = Srs::decode(&corrupt, "corrupt").unwrap_err();
    assert!(
        format!("{err:#}").contains("not a valid curve point"),
        "{err:#}"
    );
    let mut longer = good;
    longer.push(0);
    assert!(Srs::decode(&longer, "longer").is_err());
}
