//! Shape-only C1 outputs: full-size Commit1 outputs without a sealing farm.
//!
//! Benchmarking c2q on 32 GiB or 64 GiB sectors needs their C1 outputs, and making a real one
//! takes a sealed sector (hours of PC1 and hundreds of GiB of disk). What the prover's cost
//! depends on is the *shape* of the C1: how many partitions, how many challenges per partition,
//! how long every Merkle path is and with which arities, how many rows a column has, how many
//! parents a node has. This module writes C1 outputs with exactly that shape for any registered
//! PoRep proof, and random values everywhere else:
//!
//! - partitions and challenges per partition come from the proof type's `PoRepConfig` and
//!   stacked public parameters, as filecoin-proofs' Commit1 uses them;
//! - the challenges are derived from the seed (and comm_r) as the real ones are, the DRG and
//!   expander parents of each challenged node come from the stacked graph's own `parents`
//!   functions, so path positions and parent indices are those of a real sector;
//! - the comm_d path runs over the binary tree of the sector's nodes; tree C and tree R_last
//!   paths have the base, sub-tree and top-tree arities of the sector's tree type;
//! - labels, hashes, data and roots are random field elements. The roots are consistent where
//!   storage-proofs needs them to be: every proof shares comm_c and comm_r_last,
//!   `comm_r = H(comm_c, comm_r_last)`, and the replica id is derived from the miner, sector,
//!   ticket and comm_d as sealing derives it.
//!
//! Such a C1 synthesizes into a circuit of exactly the real size, but it cannot be proved: its
//! Merkle paths and labels do not hash to anything. The JSON carries a top-level
//! `"c2q_shape_only": true` (serde ignores unknown keys, so the rest of it reads as an ordinary
//! `SealCommitPhase1Output`); `PorepJob::new` refuses such input and only
//! `PorepJob::for_benchmark` accepts it.

use std::any::Any;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{anyhow, bail, ensure, Context, Result};
use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, HashFunction, Hasher, PoseidonArity};
use filecoin_proofs::{
    parameters::setup_params, DefaultPieceDomain, DefaultPieceHasher, MerkleTreeTrait,
};
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
use filecoin_proofs_api::RegisteredSealProof;
use rand::{RngCore, SeedableRng};
use rayon::prelude::*;
use serde::Serialize;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{base_path_length, MerkleProof, MerkleProofTrait};
use storage_proofs_porep::stacked::{
    self, Column, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof,
    StackedBucketGraph, StackedCompound, StackedDrg, TOTAL_PARENTS,
};

use super::input::proof_name;

/// The top-level JSON key that marks a C1 output as shape-only.
pub const MARKER: &str = "c2q_shape_only";

/// A generated shape-only C1 output.
pub struct ShapeOnly {
    pub output: SealCommitPhase1Output,
    pub miner: u64,
    pub sector: u64,
}

/// The C1 JSON with the marker in front of filecoin-ffi's fields.
#[derive(Serialize)]
struct Marked<'a> {
    c2q_shape_only: bool,
    #[serde(flatten)]
    output: &'a SealCommitPhase1Output,
}

impl ShapeOnly {
    /// Write the C1 JSON (filecoin-ffi's form plus the marker) to `w`.
    pub fn write_c1_json<W: Write>(&self, w: W) -> Result<()> {
        serde_json::to_writer(
            w,
            &Marked {
                c2q_shape_only: true,
                output: &self.output,
            },
        )
        .context("cannot serialize the shape-only C1 output")
    }

    pub fn c1_json(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.write_c1_json(&mut out)?;
        Ok(out)
    }

    /// The same C1 in lotus-bench's `Commit2In` envelope (the marker is inside `Phase1Out`).
    pub fn commit2in_json(&self) -> Result<Vec<u8>> {
        use base64::Engine;
        let inner = self.c1_json()?;
        Ok(serde_json::to_vec(&serde_json::json!({
            "SectorNum": self.sector,
            "Phase1Out": base64::engine::general_purpose::STANDARD.encode(inner),
            "SectorSize": u64::from(self.output.registered_proof.sector_size()),
        }))?)
    }

    pub fn partitions(&self) -> usize {
        partition_sizes(&self.output.vanilla_proofs).len()
    }

    /// Challenges in the first partition (all partitions have as many).
    pub fn challenges_per_partition(&self) -> usize {
        partition_sizes(&self.output.vanilla_proofs)
            .first()
            .copied()
            .unwrap_or(0)
    }
}

fn partition_sizes(proofs: &VanillaSealProof) -> Vec<usize> {
    fn sizes<T>(p: &[Vec<T>]) -> Vec<usize> {
        p.iter().map(Vec::len).collect()
    }
    match proofs {
        VanillaSealProof::StackedDrg2KiBV1(p) => sizes(p),
        VanillaSealProof::StackedDrg8MiBV1(p) => sizes(p),
        VanillaSealProof::StackedDrg512MiBV1(p) => sizes(p),
        VanillaSealProof::StackedDrg32GiBV1(p) => sizes(p),
        VanillaSealProof::StackedDrg64GiBV1(p) => sizes(p),
    }
}

/// Make a shape-only C1 output for `proof`, `miner` and `sector`, with random values drawn from
/// `rng_seed` (the same seed gives the same file). `progress(done, total)` is called as
/// partitions are finished.
pub fn generate(
    proof: RegisteredSealProof,
    miner: u64,
    sector: u64,
    rng_seed: u64,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<ShapeOnly> {
    ensure!(
        proof.major_version() == 1,
        "registered proof {} is not a version 1 PoRep",
        proof_name(proof)
    );
    let size = u64::from(proof.sector_size());
    let output = filecoin_proofs::with_shape!(
        size,
        generate_tree,
        proof,
        super::prover_id(miner),
        sector,
        rng_seed,
        progress,
    )
    .with_context(|| format!("cannot make a shape-only C1 for {}", proof_name(proof)))?;
    Ok(ShapeOnly {
        output,
        miner,
        sector,
    })
}

type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
type TreeProof<Tree> = MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;
type ChallengeProof<Tree> = stacked::Proof<Tree, DefaultPieceHasher>;

/// What every challenge proof of the sector shares.
struct Sector<'a, Tree: 'static + MerkleTreeTrait> {
    graph: &'a StackedBucketGraph<Tree::Hasher>,
    layers: usize,
    /// Arity of each level of a tree C / tree R_last path, leaf first.
    tree_levels: Vec<usize>,
    /// Levels of the comm_d path (binary).
    data_levels: Vec<usize>,
    comm_d: DefaultPieceDomain,
    comm_c: TreeDomain<Tree>,
    comm_r_last: TreeDomain<Tree>,
}

fn generate_tree<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredSealProof,
    prover_id: [u8; 32],
    sector: u64,
    rng_seed: u64,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<SealCommitPhase1Output> {
    let config = proof.as_v1_config();
    let partitions = usize::from(config.partitions);
    let compound = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::setup(&compound_proof::SetupParams {
        vanilla_params: setup_params(&config)?,
        partitions: Some(partitions),
        priority: false,
    })?;
    let params = compound.vanilla_params;
    let nodes = params.graph.size();
    ensure!(
        nodes.is_power_of_two(),
        "a sector of {nodes} nodes is not a binary tree"
    );

    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(rng_seed);
    // Tickets and seeds are field elements in Filecoin: clear the top bits.
    let mut ticket = [0u8; 32];
    rng.fill_bytes(&mut ticket);
    ticket[31] &= 0x3f;
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    seed[31] &= 0x3f;
    let comm_d = DefaultPieceDomain::random(&mut rng);
    let comm_c = TreeDomain::<Tree>::random(&mut rng);
    let comm_r_last = TreeDomain::<Tree>::random(&mut rng);
    let comm_r = <Tree::Hasher as Hasher>::Function::hash2(&comm_c, &comm_r_last);
    let replica_id = stacked::generate_replica_id::<Tree::Hasher, _>(
        &prover_id,
        sector,
        &ticket,
        comm_d,
        &config.porep_id,
    );
    let public_inputs = stacked::PublicInputs::<TreeDomain<Tree>, DefaultPieceDomain> {
        replica_id,
        seed: Some(seed),
        tau: Some(stacked::Tau { comm_d, comm_r }),
        k: None,
    };

    let shared = Sector::<Tree> {
        graph: &params.graph,
        layers: params.num_layers,
        tree_levels: tree_levels::<Tree>(nodes)?,
        data_levels: vec![2; nodes.trailing_zeros() as usize],
        comm_d,
        comm_c,
        comm_r_last,
    };

    // One random stream per partition, drawn up front, so the output does not depend on how
    // the partitions are spread over threads.
    let partition_seeds: Vec<u64> = (0..partitions).map(|_| rng.next_u64()).collect();
    let done = AtomicUsize::new(0);
    let proofs = partition_seeds
        .into_par_iter()
        .enumerate()
        .map(|(k, partition_seed)| {
            let challenges = public_inputs.challenges(&params.challenges, nodes, Some(k));
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(partition_seed);
            let proofs = challenges
                .into_iter()
                .map(|c| challenge_proof(&shared, c, &mut rng))
                .collect::<Result<Vec<_>>>()
                .with_context(|| format!("partition {k}"))?;
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, partitions);
            Ok(proofs)
        })
        .collect::<Result<Vec<_>>>()?;

    let replica_id: Fr = replica_id.into();
    Ok(SealCommitPhase1Output {
        registered_proof: proof,
        vanilla_proofs: tag_proofs::<Tree>(u64::from(proof.sector_size()), proofs)?,
        comm_r: bytes32(comm_r.as_ref())?,
        comm_d: bytes32(comm_d.as_ref())?,
        replica_id: replica_id.into(),
        seed,
        ticket,
    })
}

/// The arities of a tree C / tree R_last path, leaf level first: the base levels of one
/// (sub-)tree, then one level for the sub-trees and one for the top tree where the shape has
/// them.
pub(crate) fn tree_levels<Tree: 'static + MerkleTreeTrait>(nodes: usize) -> Result<Vec<usize>> {
    let base = arity::<Tree::Hasher, Tree::Arity>();
    let sub = arity::<Tree::Hasher, Tree::SubTreeArity>();
    let top = arity::<Tree::Hasher, Tree::TopTreeArity>();
    let base_levels =
        base_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(nodes);
    let mut levels = vec![base; base_levels];
    levels.extend([sub, top].into_iter().filter(|&a| a > 0));
    let leaves: usize = levels.iter().product();
    ensure!(
        leaves == nodes,
        "tree shape {levels:?} does not cover the sector's {nodes} nodes"
    );
    Ok(levels)
}

/// The number a typenum arity stands for (0 for "no such level"). A path element of a fresh
/// `MerkleProof` holds as many hashes as its base arity.
fn arity<H: Hasher, A: PoseidonArity>() -> usize {
    MerkleProof::<H, A>::new(1)
        .path()
        .first()
        .map_or(0, |(hashes, _)| hashes.len())
}

/// An inclusion path for `node` under `root` with a random leaf and random siblings: one path
/// element per level, its position the node's digit in that level's arity.
pub(crate) fn inclusion_proof<H, A, B, C>(
    levels: &[usize],
    node: usize,
    root: H::Domain,
    rng: &mut impl RngCore,
) -> MerkleProof<H, A, B, C>
where
    H: Hasher,
    A: PoseidonArity,
    B: PoseidonArity,
    C: PoseidonArity,
{
    let leaf = H::Domain::random(rng);
    inclusion_proof_of(levels, node, leaf, root, rng)
}

/// An inclusion path for `leaf` at `node` under `root` with random siblings: one path element
/// per level, its position the node's digit in that level's arity.
pub(crate) fn inclusion_proof_of<H, A, B, C>(
    levels: &[usize],
    node: usize,
    leaf: H::Domain,
    root: H::Domain,
    rng: &mut impl RngCore,
) -> MerkleProof<H, A, B, C>
where
    H: Hasher,
    A: PoseidonArity,
    B: PoseidonArity,
    C: PoseidonArity,
{
    let mut rest = node;
    let path = levels
        .iter()
        .map(|&arity| {
            let index = rest % arity;
            rest /= arity;
            let siblings = (1..arity).map(|_| H::Domain::random(rng)).collect();
            (siblings, index)
        })
        .collect();
    MerkleProof::from_parts(leaf, root, path)
}

fn column_proof<Tree: 'static + MerkleTreeTrait>(
    sector: &Sector<'_, Tree>,
    node: u32,
    rng: &mut impl RngCore,
) -> Result<ColumnProof<TreeProof<Tree>>> {
    let rows = (0..sector.layers)
        .map(|_| TreeDomain::<Tree>::random(rng))
        .collect();
    let column = Column::new(node, rows)?;
    let path = inclusion_proof(&sector.tree_levels, node as usize, sector.comm_c, rng);
    ColumnProof::from_column(column, path)
}

/// One challenge's vanilla proof, laid out as `StackedDrg::prove_layers` lays it out.
fn challenge_proof<Tree: 'static + MerkleTreeTrait>(
    sector: &Sector<'_, Tree>,
    challenge: usize,
    rng: &mut impl RngCore,
) -> Result<ChallengeProof<Tree>> {
    let graph = sector.graph;
    let node = u32::try_from(challenge).context("challenge beyond the sector")?;
    let comm_d_proofs = inclusion_proof(&sector.data_levels, challenge, sector.comm_d, rng);

    let c_x = column_proof(sector, node, rng)?;
    let mut drg = vec![0u32; graph.base_graph().degree()];
    graph.base_parents(challenge, &mut drg)?;
    let mut exp = vec![0u32; graph.expansion_degree()];
    graph.expanded_parents(challenge, &mut exp)?;
    let drg_parents = drg
        .iter()
        .map(|&p| column_proof(sector, p, rng))
        .collect::<Result<Vec<_>>>()?;
    let exp_parents = exp
        .iter()
        .map(|&p| column_proof(sector, p, rng))
        .collect::<Result<Vec<_>>>()?;
    let comm_r_last_proof =
        inclusion_proof(&sector.tree_levels, challenge, sector.comm_r_last, rng);

    // The labeling proof of layer l hashes the DRG parents' labels in layer l and, from layer 2
    // on, the expander parents' labels in layer l - 1, repeated to TOTAL_PARENTS; the encoding
    // proof repeats the last layer's.
    let label = |col: &ColumnProof<TreeProof<Tree>>, layer: usize| -> Result<TreeDomain<Tree>> {
        Ok(*col.get_node_at_layer(layer)?)
    };
    let mut labeling_proofs = Vec::with_capacity(sector.layers);
    let mut last_parents = Vec::new();
    for layer in 1..=sector.layers {
        let mut parents = drg_parents
            .iter()
            .map(|col| label(col, layer))
            .collect::<Result<Vec<_>>>()?;
        if layer > 1 {
            for col in &exp_parents {
                parents.push(label(col, layer - 1)?);
            }
        }
        let repeated: Vec<_> = parents.into_iter().cycle().take(TOTAL_PARENTS).collect();
        labeling_proofs.push(LabelingProof::new(
            layer as u32,
            challenge as u64,
            repeated.clone(),
        ));
        last_parents = repeated;
    }
    let encoding_proof = EncodingProof::new(sector.layers as u32, challenge as u64, last_parents);

    Ok(stacked::Proof {
        comm_d_proofs,
        comm_r_last_proof,
        replica_column_proofs: ReplicaColumnProof {
            c_x,
            drg_parents,
            exp_parents,
        },
        labeling_proofs,
        encoding_proof,
    })
}

/// Wrap the proofs in filecoin-proofs-api's per-sector-size enum. Sector sizes share tree types
/// (2 KiB, 8 MiB and 512 MiB), so the size picks the variant.
fn tag_proofs<Tree: 'static + MerkleTreeTrait>(
    size: u64,
    proofs: Vec<Vec<ChallengeProof<Tree>>>,
) -> Result<VanillaSealProof> {
    use filecoin_proofs::constants::*;
    fn take<T: 'static>(any: Box<dyn Any>) -> Result<T> {
        any.downcast::<T>()
            .map(|b| *b)
            .map_err(|_| anyhow!("the vanilla proofs' tree type does not fit the sector size"))
    }
    let any: Box<dyn Any> = Box::new(proofs);
    Ok(match size {
        SECTOR_SIZE_2_KIB => VanillaSealProof::StackedDrg2KiBV1(take(any)?),
        SECTOR_SIZE_8_MIB => VanillaSealProof::StackedDrg8MiBV1(take(any)?),
        SECTOR_SIZE_512_MIB => VanillaSealProof::StackedDrg512MiBV1(take(any)?),
        SECTOR_SIZE_32_GIB => VanillaSealProof::StackedDrg32GiBV1(take(any)?),
        SECTOR_SIZE_64_GIB => VanillaSealProof::StackedDrg64GiBV1(take(any)?),
        _ => bail!("no C1 output form for sectors of {size} bytes"),
    })
}

fn bytes32(bytes: &[u8]) -> Result<[u8; 32]> {
    bytes
        .try_into()
        .map_err(|_| anyhow!("a commitment of {} bytes, not 32", bytes.len()))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::Value;

    use super::*;
    use crate::job::ProofJob;
    use crate::porep::{parse_c1, proof_from_name, testdata, C1Input, PorepJob};

    fn quiet(_: usize, _: usize) {}

    /// The JSON with every number and string blanked: equal skeletons mean the same keys and
    /// the same length of every array, at every depth.
    fn skeleton(v: &Value) -> Value {
        match v {
            Value::Number(_) => Value::from(0),
            Value::String(_) => Value::from(""),
            Value::Array(items) => Value::Array(items.iter().map(skeleton).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, _)| k.as_str() != MARKER)
                    .map(|(k, v)| (k.clone(), skeleton(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// Where two skeletons first differ, as a JSON path.
    fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
        match (a, b) {
            (Value::Array(x), Value::Array(y)) => {
                if x.len() != y.len() {
                    return Some(format!("{at}: {} items vs {}", x.len(), y.len()));
                }
                x.iter()
                    .zip(y)
                    .enumerate()
                    .find_map(|(i, (x, y))| first_difference(x, y, &format!("{at}[{i}]")))
            }
            (Value::Object(x), Value::Object(y)) => {
                let keys = |m: &serde_json::Map<String, Value>| m.keys().cloned().collect();
                let (kx, ky): (Vec<String>, Vec<String>) = (keys(x), keys(y));
                if kx != ky {
                    return Some(format!("{at}: keys {kx:?} vs {ky:?}"));
                }
                x.iter()
                    .find_map(|(k, v)| first_difference(v, &y[k], &format!("{at}.{k}")))
            }
            _ => (a != b).then(|| format!("{at}: {a} vs {b}")),
        }
    }

    /// The arity of every level of a serialized `MerkleProof`, leaf first.
    fn arities(proof: &Value) -> Vec<usize> {
        let Some((_, inner)) = proof["data"].as_object().and_then(|m| m.iter().next()) else {
            panic!("not a MerkleProof: {proof}");
        };
        ["path", "base_proof", "sub_proof", "top_proof"]
            .iter()
            .filter_map(|part| inner[part]["path"].as_array())
            .flatten()
            .map(|el| el["hashes"].as_array().map_or(0, Vec::len) + 1)
            .collect()
    }

    /// The node a serialized `MerkleProof` opens, from its path positions.
    fn path_index(proof: &Value) -> usize {
        let Some((_, inner)) = proof["data"].as_object().and_then(|m| m.iter().next()) else {
            panic!("not a MerkleProof: {proof}");
        };
        let mut weight = 1;
        let mut node = 0;
        for el in ["path", "base_proof", "sub_proof", "top_proof"]
            .iter()
            .filter_map(|part| inner[part]["path"].as_array())
            .flatten()
        {
            node += weight * el["index"].as_u64().unwrap() as usize;
            weight *= el["hashes"].as_array().map_or(0, Vec::len) + 1;
        }
        node
    }

    /// The structural figures of one challenge's serialized vanilla proof.
    #[derive(Debug, PartialEq)]
    struct Figures {
        comm_d_path: Vec<usize>,
        comm_r_last_path: Vec<usize>,
        /// (rows, tree C path arities) of c_x, then the DRG parents, then the expander parents.
        columns: Vec<(usize, Vec<usize>)>,
        drg_parents: usize,
        exp_parents: usize,
        /// (layer, parents) of each labeling proof.
        labeling: Vec<(u64, usize)>,
        encoding: (u64, usize),
    }

    fn figures(proof: &Value) -> Figures {
        let rcp = &proof["replica_column_proofs"];
        let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
        let columns = std::iter::once(rcp["c_x"].clone())
            .chain(list(&rcp["drg_parents"]))
            .chain(list(&rcp["exp_parents"]))
            .map(|col| {
                (
                    list(&col["column"]["rows"]).len(),
                    arities(&col["inclusion_proof"]),
                )
            })
            .collect();
        let layer_and_parents = |p: &Value| {
            (
                p["layer_index"].as_u64().unwrap_or(0),
                list(&p["parents"]).len(),
            )
        };
        Figures {
            comm_d_path: arities(&proof["comm_d_proofs"]),
            comm_r_last_path: arities(&proof["comm_r_last_proof"]),
            columns,
            drg_parents: list(&rcp["drg_parents"]).len(),
            exp_parents: list(&rcp["exp_parents"]).len(),
            labeling: list(&proof["labeling_proofs"])
                .iter()
                .map(layer_and_parents)
                .collect(),
            encoding: layer_and_parents(&proof["encoding_proof"]),
        }
    }

    /// Partitions, challenges per partition and the first challenge's serialized proof.
    fn layout(proofs: &VanillaSealProof) -> (Vec<usize>, Value) {
        fn first<T: Serialize>(p: &[Vec<T>]) -> Value {
            serde_json::to_value(&p[0][0]).unwrap()
        }
        let first = match proofs {
            VanillaSealProof::StackedDrg2KiBV1(p) => first(p),
            VanillaSealProof::StackedDrg8MiBV1(p) => first(p),
            VanillaSealProof::StackedDrg512MiBV1(p) => first(p),
            VanillaSealProof::StackedDrg32GiBV1(p) => first(p),
            VanillaSealProof::StackedDrg64GiBV1(p) => first(p),
        };
        (partition_sizes(proofs), first)
    }

    /// Constraints, inputs, aux variables and query densities of a synthesized partition.
    fn circuit_size(job: &PorepJob, k: usize) -> [usize; 6] {
        let a = job.synthesize(k).unwrap();
        let w = &a.witness;
        [
            a.evals.constraints(),
            w.input.len(),
            w.aux.len(),
            w.a_aux_density.count(),
            w.b_input_density.count(),
            w.b_aux_density.count(),
        ]
    }

    /// A shape-only C1 has the structure of a real sealed sector of the same proof type, down to
    /// every array length, and synthesizes into the same circuit.
    fn same_as_sealed(proof: RegisteredSealProof, miner: u64, sector: u64) {
        // Synthesis records the circuit's constraints beside the parameters: the test ones.
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", "/var/tmp/c2q-test-params");
        let sealed = testdata::seal_2kib(proof, miner, sector, 9).unwrap();
        let shape = generate(proof, miner, sector, 9, &quiet).unwrap();

        let real_json = serde_json::to_value(&sealed.c1).unwrap();
        let shape_json: Value = serde_json::from_slice(&shape.c1_json().unwrap()).unwrap();
        assert_eq!(shape_json[MARKER], Value::Bool(true));
        let diff = first_difference(&skeleton(&real_json), &skeleton(&shape_json), "c1");
        assert_eq!(diff, None, "{proof:?}: shape differs from a sealed C1");

        let (real_sizes, real_first) = layout(&sealed.c1.vanilla_proofs);
        let (shape_sizes, shape_first) = layout(&shape.output.vanilla_proofs);
        assert_eq!(shape_sizes, real_sizes);
        assert_eq!(figures(&shape_first), figures(&real_first));

        // The challenges and parents are the real ones for this replica id and seed.
        let proofs: Vec<Vec<ChallengeProof<filecoin_proofs::SectorShape2KiB>>> =
            shape.output.vanilla_proofs.clone().try_into().unwrap();
        let config = proof.as_v1_config();
        let params = <StackedDrg<'_, filecoin_proofs::SectorShape2KiB, DefaultPieceHasher> as storage_proofs_core::proof::ProofScheme<'_>>::setup(&setup_params(&config).unwrap()).unwrap();
        let replica_id = TreeDomain::<filecoin_proofs::SectorShape2KiB>::try_from_bytes(
            shape.output.replica_id.as_ref(),
        )
        .unwrap();
        let public_inputs = stacked::PublicInputs::<_, DefaultPieceDomain> {
            replica_id,
            seed: Some(shape.output.seed),
            tau: Some(stacked::Tau {
                comm_d: DefaultPieceDomain::try_from_bytes(&shape.output.comm_d).unwrap(),
                comm_r: TreeDomain::<filecoin_proofs::SectorShape2KiB>::try_from_bytes(
                    &shape.output.comm_r,
                )
                .unwrap(),
            }),
            k: None,
        };
        for (k, partition) in proofs.iter().enumerate() {
            let challenges =
                public_inputs.challenges(&params.challenges, params.graph.size(), Some(k));
            for (p, &c) in partition.iter().zip(&challenges) {
                assert_eq!(p.comm_d_proofs.path_index(), c);
                assert_eq!(p.comm_r_last_proof.path_index(), c);
                let mut parents = vec![0u32; params.graph.degree()];
                params.graph.parents(c, &mut parents).unwrap();
                let column_nodes: Vec<u32> = std::iter::once(&p.replica_column_proofs.c_x)
                    .chain(&p.replica_column_proofs.drg_parents)
                    .chain(&p.replica_column_proofs.exp_parents)
                    .map(|col| {
                        let col = serde_json::to_value(col).unwrap();
                        let node = col["column"]["index"].as_u64().unwrap() as usize;
                        assert_eq!(path_index(&col["inclusion_proof"]), node);
                        node as u32
                    })
                    .collect();
                assert_eq!(column_nodes[0], c as u32);
                assert_eq!(column_nodes[1..], parents[..]);
            }
        }

        // Refused for proving, accepted for benchmarks, same circuit as the real sector.
        let parsed = parse_c1(&shape.c1_json().unwrap()).unwrap();
        assert!(parsed.shape_only);
        let refused = PorepJob::new(parsed, miner, sector)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("--shape-only"), "{refused}");
        let enveloped = parse_c1(&shape.commit2in_json().unwrap()).unwrap();
        assert!(enveloped.shape_only);
        assert_eq!(enveloped.sector_number, Some(sector));
        assert!(PorepJob::new(enveloped, miner, sector).is_err());

        let bench =
            PorepJob::for_benchmark(parse_c1(&shape.c1_json().unwrap()).unwrap(), miner, sector)
                .unwrap();
        let real = PorepJob::new(
            C1Input {
                output: sealed.c1,
                sector_number: None,
                shape_only: false,
            },
            miner,
            sector,
        )
        .unwrap();
        assert_eq!(bench.partitions(), real.partitions());
        assert_eq!(bench.params_path, real.params_path);
        assert_eq!(circuit_size(&bench, 0), circuit_size(&real, 0), "{proof:?}");
    }

    #[test]
    fn shape_of_2kib_v1_1_is_that_of_a_sealed_sector() {
        same_as_sealed(RegisteredSealProof::StackedDrg2KiBV1_1, 1000, 3);
    }

    #[test]
    fn shape_of_2kib_non_interactive_is_that_of_a_sealed_sector() {
        same_as_sealed(
            RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
            77,
            5,
        );
    }

    /// Every registered PoRep proof up to 512 MiB: generated, parsed back, and accepted by
    /// `for_benchmark`'s checks (partition count, sector size tag, replica id).
    #[test]
    fn every_small_proof_type_generates_and_passes_the_benchmark_checks() {
        for size in ["2KiB", "8MiB", "512MiB"] {
            for version in [
                "V1",
                "V1_1",
                "V1_1_Feat_SyntheticPoRep",
                "V1_2_Feat_NonInteractivePoRep",
            ] {
                let proof = proof_from_name(&format!("StackedDrg{size}{version}")).unwrap();
                let shape = generate(proof, 1000, 7, 1, &quiet).unwrap();
                let config = proof.as_v1_config();
                assert_eq!(
                    shape.partitions(),
                    usize::from(config.partitions),
                    "{proof:?}"
                );
                let c1 = parse_c1(&shape.c1_json().unwrap()).unwrap();
                assert_eq!(c1.registered_proof(), proof);
                let job = PorepJob::for_benchmark(c1, 1000, 7).unwrap();
                assert_eq!(job.partitions(), shape.partitions());
                // The replica id binds it to its miner and sector.
                let c1 = parse_c1(&shape.c1_json().unwrap()).unwrap();
                assert!(PorepJob::for_benchmark(c1, 1000, 8).is_err(), "{proof:?}");
            }
        }
    }

    #[test]
    fn tree_shapes_of_the_production_sizes() {
        use filecoin_proofs::{SectorShape32GiB, SectorShape512MiB, SectorShape64GiB};
        assert_eq!(
            tree_levels::<SectorShape512MiB>(1 << 24).unwrap(),
            vec![8; 8]
        );
        let mut levels = vec![8; 10];
        assert_eq!(tree_levels::<SectorShape32GiB>(1 << 30).unwrap(), levels);
        levels.push(2);
        assert_eq!(tree_levels::<SectorShape64GiB>(1 << 31).unwrap(), levels);
    }

    /// A 32 GiB C1 without sealing: the figures every real one has.
    #[test]
    fn shape_of_32gib_v1_1_has_the_known_figures() {
        let started = Instant::now();
        let proof = RegisteredSealProof::StackedDrg32GiBV1_1;
        let shape = generate(proof, 1000, 3, 1, &quiet).unwrap();
        let generated = started.elapsed();
        let (sizes, first) = layout(&shape.output.vanilla_proofs);
        assert_eq!(sizes, vec![18; 10]);
        let f = figures(&first);
        assert_eq!(f.comm_d_path, vec![2; 30]);
        assert_eq!(f.comm_r_last_path, vec![8; 10]);
        assert_eq!(f.drg_parents, 6);
        assert_eq!(f.exp_parents, 8);
        assert_eq!(f.columns, vec![(11, vec![8; 10]); 1 + 6 + 8]);
        let labeling: Vec<(u64, usize)> = (1..=11).map(|l| (l, TOTAL_PARENTS)).collect();
        assert_eq!(f.labeling, labeling);
        assert_eq!(f.encoding, (11, TOTAL_PARENTS));

        struct Count(usize);
        impl Write for Count {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0 += buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut count = Count(0);
        shape.write_c1_json(&mut count).unwrap();
        eprintln!(
            "32 GiB shape-only C1: generated in {:.2} s, {} bytes of JSON, {:.2} s in all",
            generated.as_secs_f64(),
            count.0,
            started.elapsed().as_secs_f64()
        );
        // About 1,800 field elements per challenge, each a JSON array of 32 bytes: ~38.7 MB,
        // the ~51 MB usually quoted for a 32 GiB C1 once base64-encoded into a Commit2In.
        assert!(
            (36_000_000..42_000_000).contains(&count.0),
            "{} bytes",
            count.0
        );

        let c1 = C1Input {
            output: shape.output,
            sector_number: None,
            shape_only: true,
        };
        let job = PorepJob::for_benchmark(c1, 1000, 3).unwrap();
        assert_eq!(job.partitions(), 10);
    }
}
