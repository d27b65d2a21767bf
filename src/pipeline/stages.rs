//! The stage loops. Every item carries its job's context; a failure in any stage is sent
//! straight to assembly, which answers the job at once and drops its remaining partitions.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Result};
use blstrs::Scalar as Fr;
use crossbeam_channel::{Receiver, Sender};
use ff::Field;
use tokio::sync::oneshot;

use super::{PartitionDone, Priority, Progress, Proved, Stage, StageError, Submission};
use crate::groth16::{
    self,
    prover::{check_packed, check_shape},
    Assignment, Backend, CompactWitness, Multiexps, PackedWitness, Proof, R1cs, Srs, Witness,
};
use crate::job::{proof_bytes, ProofJob};
use crate::schema::{PartitionTiming, StageTimes};

/// What every stage knows about the job a partition belongs to.
pub(super) struct JobCtx {
    id: String,
    job: Arc<dyn ProofJob>,
    srs: Arc<Srs>,
    r1cs: Arc<R1cs>,
    partitions: usize,
    t0: Instant,
    /// `t0` as Unix time in milliseconds: lets timings of different jobs be compared.
    origin_unix_ms: u64,
    /// Loading its parameters and recorded constraints, from `t0`.
    srs_load_ms: u64,
    /// Which lane its partitions take to the GPU and through the finalizer.
    priority: Priority,
    failed: AtomicBool,
    progress: Progress,
    done: Mutex<Option<oneshot::Sender<Result<Proved, StageError>>>>,
}

impl JobCtx {
    fn ms(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    fn answer(&self, result: Result<Proved, StageError>) {
        if result.is_err() {
            self.failed.store(true, Ordering::Release);
        }
        let sender = self.done.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(tx) = sender {
            // The worker may have given up on the job (shutdown): nobody to tell.
            let _ = tx.send(result);
        }
    }
}

pub(super) struct SynthItem {
    ctx: Arc<JobCtx>,
    partition: usize,
}

pub(super) struct WitnessItem {
    ctx: Arc<JobCtx>,
    partition: usize,
    witness: CompactWitness,
    timing: PartitionTiming,
}

pub(super) struct StartItem {
    ctx: Arc<JobCtx>,
    partition: usize,
    prepared: Prepared,
    timing: PartitionTiming,
}

/// What the products stage hands to proving start.
pub(super) enum Prepared {
    /// Witness and evaluations, made on the CPU.
    Assignment(Box<Assignment>),
    /// The packed witness alone: the backends expand it and make the evaluations on the device.
    Packed(PackedWitness),
}

/// The witness the finalizer makes the B multiexp in G2 from, as proving start left it.
pub(super) enum FinishWitness {
    Full(Witness),
    /// Never expanded on the host (the device did it): the finalizer expands it.
    Packed(PackedWitness),
}

pub(super) struct FinishItem {
    ctx: Arc<JobCtx>,
    partition: usize,
    sums: Multiexps,
    /// The witness, kept only when the finalizer is to make the B multiexp in G2 from it
    /// (`sums.b_g2` is `None`): a 32 GiB partition's is ~4 GB in full, freed as soon as
    /// proving start is done with it otherwise.
    witness: Option<FinishWitness>,
    products_on_gpu: bool,
    timing: PartitionTiming,
}

pub(super) struct AssembleItem {
    ctx: Arc<JobCtx>,
    partition: usize,
    result: Result<Finished, StageError>,
}

/// A partition's proof with what the job's owner is told about it.
struct Finished {
    proof: Proof,
    timing: PartitionTiming,
    products_on_gpu: bool,
}

/// Run `f`, turning a panic (a bug, or a circuit library choking on bad input) into an error
/// so that one job cannot take the worker down.
fn guarded<T>(stage: Stage, f: impl FnOnce() -> Result<T>) -> Result<T, StageError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(error)) => Err(StageError { stage, error }),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(StageError {
                stage,
                error: anyhow!("panicked: {msg}"),
            })
        }
    }
}

fn fail(to_assemble: &Sender<AssembleItem>, ctx: Arc<JobCtx>, partition: usize, e: StageError) {
    // Assembly outlives every other stage, so this only fails during teardown.
    let _ = to_assemble.send(AssembleItem {
        ctx,
        partition,
        result: Err(e),
    });
}

/// A submitted job's context, with its parameters and recorded constraints loaded; `None`
/// when that failed or it has no partitions (the job is answered here).
fn open_job(sub: Submission) -> Option<Arc<JobCtx>> {
    let t0 = Instant::now();
    let origin_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let loaded = guarded(Stage::Srs, || Ok((sub.job.srs()?, sub.job.r1cs()?)));
    let srs_load_ms = t0.elapsed().as_millis() as u64;
    let (srs, r1cs) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            let _ = sub.done.send(Err(e));
            return None;
        }
    };
    let partitions = sub.job.partitions();
    let ctx = Arc::new(JobCtx {
        id: sub.id,
        job: sub.job,
        srs,
        r1cs,
        partitions,
        t0,
        origin_unix_ms,
        srs_load_ms,
        priority: sub.priority,
        failed: AtomicBool::new(false),
        progress: sub.progress,
        done: Mutex::new(Some(sub.done)),
    });
    if partitions == 0 {
        ctx.answer(Err(StageError {
            stage: Stage::Synthesis,
            error: anyhow!("job has no partitions"),
        }));
        return None;
    }
    Some(ctx)
}

/// Takes jobs one at a time: loads their parameters and recorded constraints, then hands out
/// their partitions, in order, to the synthesis threads.
pub(super) fn intake(jobs: Receiver<Submission>, to_synth: Sender<SynthItem>) {
    for sub in jobs {
        let Some(ctx) = open_job(sub) else {
            continue;
        };
        for partition in 0..ctx.partitions {
            if ctx.is_failed() {
                break;
            }
            let item = SynthItem {
                ctx: ctx.clone(),
                partition,
            };
            if to_synth.send(item).is_err() {
                return;
            }
        }
    }
}

/// Where each circuit's A, B and C are made: on the device when the backends take packed
/// witnesses, until a backend declines a circuit's (its recorded constraints do not fit on the
/// GPU beside a proving start). From then on that circuit's products are made on the CPU in
/// the products stage, ahead of its start, so that the GPU proves other partitions meanwhile
/// instead of waiting for them in its own start.
pub(super) struct ProductsPlace {
    on_device: bool,
    declined: Mutex<std::collections::HashSet<String>>,
    /// Readies evaluations made here for the starts (`Backend::prepare_evaluations`): a GPU's
    /// page-locking serves every GPU.
    readies: Arc<dyn Backend>,
}

impl ProductsPlace {
    pub(super) fn new(on_device: bool, readies: Arc<dyn Backend>) -> ProductsPlace {
        ProductsPlace {
            on_device,
            declined: Mutex::new(Default::default()),
            readies,
        }
    }

    fn on_device(&self, circuit: &str) -> bool {
        self.on_device
            && !self
                .declined
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(circuit)
    }

    /// Records that a backend declined `circuit`'s products; whether it is the first time.
    fn decline(&self, circuit: &str) -> bool {
        self.declined
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(circuit.to_string())
    }
}

/// The urgent lane (PoSt, due within a deadline): one thread that takes urgent jobs, computes
/// each partition's witness and products itself (the synthesis and products threads may all
/// be waiting, full, behind the GPU) and offers it to the proving-start threads, which take
/// an urgent partition before any other one that has not started. A partition of the normal
/// lane already on a GPU finishes first: an urgent one waits at most one proving start.
pub(super) fn urgent(
    jobs: Receiver<Submission>,
    place: Arc<ProductsPlace>,
    to_start: Sender<StartItem>,
    to_assemble: Sender<AssembleItem>,
) {
    for sub in jobs {
        let Some(ctx) = open_job(sub) else {
            continue;
        };
        for partition in 0..ctx.partitions {
            if ctx.is_failed() {
                break;
            }
            let prepared =
                synthesize(ctx.clone(), partition).and_then(|item| prepare(item, &place));
            match prepared {
                Ok(item) => {
                    if to_start.send(item).is_err() {
                        return;
                    }
                }
                Err((ctx, e)) => {
                    fail(&to_assemble, ctx, partition, e);
                    break;
                }
            }
        }
    }
}

/// Partition `partition`'s witness, compact.
fn synthesize(
    ctx: Arc<JobCtx>,
    partition: usize,
) -> Result<WitnessItem, (Arc<JobCtx>, StageError)> {
    let mut timing = PartitionTiming {
        partition: partition as u32,
        synth_start_ms: ctx.ms(),
        ..Default::default()
    };
    let job = ctx.job.clone();
    match guarded(Stage::Synthesis, || job.witness(partition)) {
        Ok(witness) => {
            timing.synth_end_ms = ctx.ms();
            tracing::debug!(job_id = %ctx.id, partition, ms = timing.synth_end_ms - timing.synth_start_ms, census = ?witness.census(), bytes = witness.bytes(), "witness computed");
            Ok(WitnessItem {
                ctx,
                partition,
                witness,
                timing,
            })
        }
        Err(e) => Err((ctx, e)),
    }
}

/// Computes partitions' witnesses (compact: they wait in ~0.4 bytes per variable).
pub(super) fn synthesis(
    items: Receiver<SynthItem>,
    to_products: Sender<WitnessItem>,
    to_assemble: Sender<AssembleItem>,
) {
    for SynthItem { ctx, partition } in items {
        if ctx.is_failed() {
            continue;
        }
        match synthesize(ctx, partition) {
            Ok(item) => {
                if to_products.send(item).is_err() {
                    return;
                }
            }
            Err((ctx, e)) => fail(&to_assemble, ctx, partition, e),
        }
    }
}

/// What proving start takes from a witness: the packed witness where the backends make A, B
/// and C on the device (`place`), else A, B, C evaluated here from the recorded constraints.
fn prepare(
    item: WitnessItem,
    place: &ProductsPlace,
) -> Result<StartItem, (Arc<JobCtx>, StageError)> {
    let WitnessItem {
        ctx,
        partition,
        witness,
        mut timing,
    } = item;
    timing.products_start_ms = ctx.ms();
    let r1cs = ctx.r1cs.clone();
    let on_device = place.on_device(&r1cs.circuit_id);
    let prepared = guarded(Stage::Synthesis, || {
        if on_device {
            Ok(Prepared::Packed(witness.packed()))
        } else {
            // Over the evaluations of an earlier partition where the backend kept them.
            let reuse = place.readies.reusable_evaluations(r1cs.constraints());
            let assignment = r1cs.assignment_into(&witness, reuse.unwrap_or_default())?;
            place.readies.prepare_evaluations(&assignment.evals);
            Ok(Prepared::Assignment(Box::new(assignment)))
        }
    });
    drop(witness);
    match prepared {
        Ok(prepared) => {
            timing.products_end_ms = ctx.ms();
            Ok(StartItem {
                ctx,
                partition,
                prepared,
                timing,
            })
        }
        Err(e) => Err((ctx, e)),
    }
}

/// Expands a witness and, unless the backends make them on the device, evaluates A, B and C as
/// sparse products with the recorded constraints, just before proving start needs them: only
/// the partitions about to be proved hold full-size values.
pub(super) fn products(
    items: Receiver<WitnessItem>,
    place: Arc<ProductsPlace>,
    to_start: Sender<StartItem>,
    to_assemble: Sender<AssembleItem>,
) {
    for item in items {
        if item.ctx.is_failed() {
            continue;
        }
        let partition = item.partition;
        match prepare(item, &place) {
            Ok(item) => {
                if to_start.send(item).is_err() {
                    return;
                }
            }
            Err((ctx, e)) => fail(&to_assemble, ctx, partition, e),
        }
    }
}

/// Two queues into one stage, the urgent one always taken from first; ends when both are
/// closed and empty.
pub(super) struct Lanes<T> {
    urgent: Option<Receiver<T>>,
    normal: Option<Receiver<T>>,
}

impl<T> Lanes<T> {
    pub(super) fn new(urgent: Receiver<T>, normal: Receiver<T>) -> Lanes<T> {
        Lanes {
            urgent: Some(urgent),
            normal: Some(normal),
        }
    }

    /// The next item, urgent first, calling `idle` first if none is waiting; `None` once both
    /// queues are closed.
    fn recv_or_idle(&mut self, idle: impl FnOnce()) -> Option<T> {
        let waiting = [&self.urgent, &self.normal]
            .into_iter()
            .flatten()
            .find_map(|rx| rx.try_recv().ok());
        if waiting.is_some() {
            return waiting;
        }
        idle();
        self.recv()
    }

    /// The next item, urgent first; `None` once both queues are closed.
    fn recv(&mut self) -> Option<T> {
        loop {
            match (&self.urgent, &self.normal) {
                (Some(urgent), Some(normal)) => {
                    // One waiting already is taken before the select, which picks the first
                    // ready arm but may see both ready at once.
                    if let Ok(item) = urgent.try_recv() {
                        return Some(item);
                    }
                    crossbeam_channel::select_biased! {
                        recv(urgent) -> m => match m {
                            Ok(item) => return Some(item),
                            Err(_) => self.urgent = None,
                        },
                        recv(normal) -> m => match m {
                            Ok(item) => return Some(item),
                            Err(_) => self.normal = None,
                        },
                    }
                }
                (Some(only), None) | (None, Some(only)) => {
                    let item = only.recv().ok();
                    if item.is_none() {
                        self.urgent = None;
                        self.normal = None;
                    }
                    return item;
                }
                (None, None) => return None,
            }
        }
    }
}

/// Proving start from what the products stage prepared. A backend that makes the evaluations
/// on the device but cannot for this circuit (its matrices do not fit beside the parameters)
/// gets them made on the CPU here, and says so once.
fn start_one(
    backend: &dyn Backend,
    ctx: &JobCtx,
    prepared: Prepared,
    place: &ProductsPlace,
) -> Result<Started, StageError> {
    let srs = &ctx.srs;
    match prepared {
        Prepared::Assignment(assignment) => {
            let Assignment { mut witness, evals } = *assignment;
            // A circuit that does not match its parameters is a parameters problem, not the
            // backend's.
            guarded(Stage::Srs, || check_shape(srs, &evals, &witness))?;
            // `evals` is consumed: a/b/c memory goes as soon as the backend is done with it.
            let sums = guarded(Stage::Start, || backend.start(srs, evals, &witness))?;
            // The finalizer works from the full values.
            witness.compact_aux = None;
            Ok(Started {
                witness: FinishWitness::Full(witness),
                sums,
                products_on_gpu: false,
            })
        }
        Prepared::Packed(packed) => {
            let r1cs = &ctx.r1cs;
            guarded(Stage::Srs, || check_packed(srs, r1cs, &packed))?;
            let on_device = guarded(Stage::Start, || {
                backend.start_from_constraints(srs, r1cs, &packed)
            })?;
            if let Some(sums) = on_device {
                return Ok(Started {
                    witness: FinishWitness::Packed(packed),
                    sums,
                    products_on_gpu: true,
                });
            }
            if place.decline(&r1cs.circuit_id) {
                tracing::warn!(
                    backend = %backend.name(),
                    circuit = %r1cs.circuit_id,
                    bytes = r1cs.bytes(),
                    "the recorded constraints do not fit on this GPU beside a proving \
                     start: A, B and C are made on the CPU from now on, ahead of each start"
                );
            }
            let (witness, evals) = guarded(Stage::Synthesis, || {
                let witness = r1cs.witness(packed.input.clone(), packed.expand_aux())?;
                let evals = r1cs.evaluate(&witness.input, &witness.aux)?;
                Ok((witness, evals))
            })?;
            let sums = guarded(Stage::Start, || backend.start(srs, evals, &witness))?;
            Ok(Started {
                witness: FinishWitness::Full(witness),
                sums,
                products_on_gpu: false,
            })
        }
    }
}

/// What proving start hands on.
struct Started {
    witness: FinishWitness,
    sums: Multiexps,
    /// Whether A, B and C were made on the GPU.
    products_on_gpu: bool,
}

/// Shared by the proving-start threads. A backend whose proving starts fail `threshold` times
/// in a row (a bad GPU among good ones) is taken out of service and the others carry on,
/// unless it is the last one in service: then its failures keep reaching the worker, which
/// judges the whole proving backend broken.
pub(super) struct Quarantine {
    threshold: u32,
    /// Backends in service, and the names of those taken out.
    state: Mutex<(usize, Vec<String>)>,
}

impl Quarantine {
    pub(super) fn new(threshold: u32, backends: usize) -> Quarantine {
        Quarantine {
            threshold: threshold.max(1),
            state: Mutex::new((backends, Vec::new())),
        }
    }

    /// Takes `name` out of service unless it is the last backend in service; true when it did.
    fn withdraw(&self, name: String) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.0 <= 1 {
            return false;
        }
        state.0 -= 1;
        state.1.push(name);
        true
    }

    pub(super) fn out_of_service(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .clone()
    }
}

/// Shared by the proving-start threads: how many are proving a partition. A thread that finds
/// nothing waiting tells its backend it is idle (`Backend::idle`: a GPU lets go of the
/// evaluations it keeps page-locked for the next partitions) only when no other thread is
/// proving either. With several GPUs one often waits while another proves, whenever the
/// stages before are a partition behind; the job is still in flight then (its memory still
/// reserved by the gate), and letting go would make its next partition lock its evaluations
/// anew (~0.6 s at 32 GiB).
#[derive(Default)]
pub(super) struct StartsInProgress {
    proving: Mutex<usize>,
}

impl StartsInProgress {
    /// Tells `backend` it is idle unless a start is in progress. Under the lock that `proving`
    /// takes too, so that no start begins while the backend lets go.
    fn idle_unless_proving(&self, backend: &dyn Backend) {
        let proving = self.proving.lock().unwrap_or_else(|p| p.into_inner());
        if *proving == 0 {
            backend.idle();
        }
    }

    /// Counts a start in progress until the guard drops.
    fn proving(&self) -> Proving<'_> {
        *self.proving.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        Proving(self)
    }
}

/// A start in progress (`StartsInProgress::proving`).
struct Proving<'a>(&'a StartsInProgress);

impl Drop for Proving<'_> {
    fn drop(&mut self) {
        *self.0.proving.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
    }
}

pub(super) fn start(
    backend: Arc<dyn Backend>,
    place: Arc<ProductsPlace>,
    quarantine: Arc<Quarantine>,
    in_progress: Arc<StartsInProgress>,
    mut items: Lanes<StartItem>,
    to_finish: FinishQueues,
    to_assemble: Sender<AssembleItem>,
) {
    let mut failures_in_a_row = 0u32;
    // With nothing waiting and no start in progress anywhere, the backend lets go of what it
    // keeps for the next partition.
    while let Some(item) = items.recv_or_idle(|| in_progress.idle_unless_proving(&*backend)) {
        let _proving = in_progress.proving();
        let StartItem {
            ctx,
            partition,
            prepared,
            mut timing,
        } = item;
        if ctx.is_failed() {
            continue;
        }
        timing.start_start_ms = ctx.ms();
        match start_one(&*backend, &ctx, prepared, &place) {
            Ok(Started {
                witness,
                sums,
                products_on_gpu,
            }) => {
                failures_in_a_row = 0;
                timing.start_end_ms = ctx.ms();
                // With the B multiexp in G2 made in proving start, the finalizer only
                // randomizes: the witness goes now instead of waiting in its queue.
                let witness = if sums.b_g2.is_some() {
                    release(witness);
                    None
                } else {
                    Some(witness)
                };
                let item = FinishItem {
                    ctx,
                    partition,
                    sums,
                    witness,
                    products_on_gpu,
                    timing,
                };
                if !to_finish.send(item) {
                    return;
                }
            }
            Err(e) => {
                // Parameter mismatches are not the backend's fault.
                if e.stage == Stage::Start {
                    failures_in_a_row += 1;
                }
                let withdrawn = failures_in_a_row >= quarantine.threshold
                    && quarantine.withdraw(backend.name());
                if withdrawn {
                    tracing::error!(
                        backend = %backend.name(),
                        failures = failures_in_a_row,
                        last_error = %e,
                        "proving starts keep failing on this backend: it is out of service and \
                         the other backends carry on. Check the GPU (nvidia-smi, Xid errors in \
                         the kernel log), then restart the worker"
                    );
                }
                fail(&to_assemble, ctx, partition, e);
                if withdrawn {
                    return;
                }
            }
        }
    }
}

/// The finalizer's two queues, as proving start sends to them.
pub(super) struct FinishQueues {
    pub(super) urgent: Sender<FinishItem>,
    pub(super) normal: Sender<FinishItem>,
}

impl FinishQueues {
    /// Whether the item was taken (false once the finalizers are gone).
    fn send(&self, item: FinishItem) -> bool {
        let queue = match item.ctx.priority {
            Priority::Urgent => &self.urgent,
            Priority::Normal => &self.normal,
        };
        queue.send(item).is_ok()
    }
}

/// Frees a witness on a thread of its own: handing gigabytes back to the system takes a good
/// part of a second, which the proving-start thread would otherwise spend before its next
/// start. (Should no thread be made, it is freed here.)
fn release(witness: FinishWitness) {
    let _ = std::thread::Builder::new()
        .name("c2q-release".into())
        .spawn(move || drop(witness));
}

/// Finishes partitions: the B multiexp in G2 where proving start left it to the CPU, then the
/// randomization.
pub(super) fn finalize(mut items: Lanes<FinishItem>, to_assemble: Sender<AssembleItem>) {
    while let Some(item) = items.recv() {
        let FinishItem {
            ctx,
            partition,
            sums,
            witness,
            products_on_gpu,
            mut timing,
        } = item;
        if ctx.is_failed() {
            continue;
        }
        timing.finish_start_ms = ctx.ms();
        let srs = ctx.srs.clone();
        let r1cs = ctx.r1cs.clone();
        let result = guarded(Stage::Finish, || {
            let witness = match witness {
                None => None,
                Some(FinishWitness::Full(w)) => Some(w),
                Some(FinishWitness::Packed(p)) => {
                    let aux = p.expand_aux();
                    Some(r1cs.witness(p.input, aux)?)
                }
            };
            let mut rng = rand::rngs::OsRng;
            let (r, s) = (Fr::random(&mut rng), Fr::random(&mut rng));
            groth16::finish(&srs, &sums, witness.as_ref(), r, s)
        })
        .map(|proof| {
            timing.finish_end_ms = ctx.ms();
            Finished {
                proof,
                timing,
                products_on_gpu,
            }
        });
        let _ = to_assemble.send(AssembleItem {
            ctx,
            partition,
            result,
        });
    }
}

/// Collects partitions per job; the job is answered when all are in (after verification) or
/// at its first failure.
pub(super) fn assemble(items: Receiver<AssembleItem>) {
    // Keyed by the context's address: unique while the context is alive, which it is while
    // any of its partitions is in flight.
    let mut pending: HashMap<usize, Vec<Option<(Proof, PartitionTiming)>>> = HashMap::new();
    for item in items {
        let key = Arc::as_ptr(&item.ctx) as usize;
        let ctx = item.ctx;
        if ctx.is_failed() {
            pending.remove(&key);
            continue;
        }
        let Finished {
            proof,
            timing,
            products_on_gpu,
        } = match item.result {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(job_id = %ctx.id, partition = item.partition, error = %e, "partition failed");
                pending.remove(&key);
                ctx.answer(Err(e));
                continue;
            }
        };
        tracing::info!(
            job_id = %ctx.id,
            partition = item.partition,
            synth_ms = timing.synth_end_ms - timing.synth_start_ms,
            products_ms = timing.products_end_ms - timing.products_start_ms,
            start_ms = timing.start_end_ms - timing.start_start_ms,
            finish_ms = timing.finish_end_ms - timing.finish_start_ms,
            synth_at = timing.synth_start_ms,
            start_at = timing.start_start_ms,
            finish_at = timing.finish_start_ms,
            "partition proved"
        );
        let slots = pending
            .entry(key)
            .or_insert_with(|| (0..ctx.partitions).map(|_| None).collect());
        if let Some(slot) = slots.get_mut(item.partition) {
            *slot = Some((proof, timing));
        }
        let remaining = slots.iter().filter(|s| s.is_none()).count();
        (ctx.progress)(PartitionDone {
            remaining,
            products_on_gpu,
        });
        if remaining > 0 {
            continue;
        }
        let Some(slots) = pending.remove(&key) else {
            continue;
        };
        let (proofs, timings): (Vec<Proof>, Vec<PartitionTiming>) =
            slots.into_iter().flatten().unzip();
        let t = Instant::now();
        let job = ctx.job.clone();
        let verified = guarded(Stage::Verify, || {
            job.verify(&proofs)?;
            proof_bytes(&proofs)
        });
        let verify_ms = t.elapsed().as_millis() as u64;
        let stages = StageTimes::of(&timings, ctx.srs_load_ms, ctx.ms());
        ctx.answer(verified.map(|proof| Proved {
            proof,
            timings,
            origin_unix_ms: ctx.origin_unix_ms,
            verify_ms,
            stages,
        }));
    }
}
