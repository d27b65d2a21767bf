//! The in-process proving pipeline: intake (parameters and recorded constraints) → synthesis
//! (the witness) → products (A, B, C evaluations) → proving start (the backend) → G2
//! finalizer → assembly and verification, each stage on its own OS threads, joined by bounded
//! channels.
//!
//! While partition `p` is in proving start, `p + 1` is having its products evaluated, later
//! ones their witnesses computed, and `p − 1` is being finalized, across partitions and across
//! jobs. A partition's witness is computed on several threads (one per challenge for PoRep)
//! and waits compact (bitmaps of zeros and ones and the few other values, ~0.4 bytes per
//! variable); its full-size evaluations exist only from the products stage to the end of
//! proving start. With several GPUs, each runs its own products and proving-start threads
//! over the same queues. The bounded hand-offs are the back-pressure that keeps a known number
//! of partitions alive ([`partitions_in_flight`]). None of this runs on the
//! async runtime: the broker's heartbeats, confirms and acks never wait for a proof.

mod stages;

use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use crossbeam_channel::{bounded, unbounded, Sender};
use tokio::sync::oneshot;

use crate::groth16::Backend;
use crate::job::ProofJob;
use crate::schema::{PartitionTiming, StageTimes};

/// Urgent jobs that may wait for the urgent lane before a submitter blocks.
const URGENT_WAITING: usize = 4;

/// Full-size partitions kept alive by one backend: one in the products stage (handed straight
/// to a proving-start thread: that channel holds none) and one in proving start.
const FULL_SIZE_PER_BACKEND: u64 = 2;

/// Full-size partitions (evaluations and witness) of a job that a pipeline with `backends`
/// backends keeps alive at once, what the memory gate reserves for: [`FULL_SIZE_PER_BACKEND`]
/// per backend, and one more for the witnesses waiting for the G2 finalizer. Witnesses in
/// synthesis are compact and covered by the estimate's margin. The channel bounds in
/// [`Pipeline::start`] are what make it true.
pub fn partitions_in_flight(backends: usize) -> u64 {
    FULL_SIZE_PER_BACKEND * backends.max(1) as u64 + 1
}

/// The stage a failure came from: the worker turns it into a failure class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Loading the SRS for the job.
    Srs,
    Synthesis,
    Start,
    Finish,
    Verify,
}

#[derive(Debug)]
pub struct StageError {
    pub stage: Stage,
    pub error: anyhow::Error,
}

impl std::fmt::Display for StageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} failed: {:#}", self.stage, self.error)
    }
}

/// A verified multi-partition proof and when each stage of each partition ran.
#[derive(Debug)]
pub struct Proved {
    pub proof: Vec<u8>,
    pub timings: Vec<PartitionTiming>,
    /// When the job entered the pipeline (Unix ms): the origin of `timings`.
    pub origin_unix_ms: u64,
    pub verify_ms: u64,
    /// The job's time by stage, verification included in `proving_ms`.
    pub stages: StageTimes,
}

/// What a job's owner is told each time one of its partitions is proved, so its memory
/// reservation can shrink as the job progresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionDone {
    /// Partitions of the job still unfinished.
    pub remaining: usize,
    /// Whether the GPU made this partition's A, B and C from its packed witness: the host then
    /// held only the compact witness, never the full-size evaluations.
    pub products_on_gpu: bool,
}

pub type Progress = Box<dyn Fn(PartitionDone) + Send + Sync>;

/// The way a job's partitions go through the pipeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Priority {
    /// In order of submission, one job at a time into synthesis.
    #[default]
    Normal,
    /// Due within a deadline (PoSt): synthesized beside the normal lane on a thread of its own
    /// and proved on the first GPU to finish its current partition, ahead of every normal
    /// partition that has not started.
    Urgent,
}

/// One job handed to the pipeline.
pub struct Submission {
    pub id: String,
    pub job: Arc<dyn ProofJob>,
    pub priority: Priority,
    pub progress: Progress,
    pub done: oneshot::Sender<Result<Proved, StageError>>,
}

pub struct Pipeline {
    submit: Option<Sender<Submission>>,
    submit_urgent: Option<Sender<Submission>>,
    threads: Vec<JoinHandle<()>>,
    quarantine: Arc<stages::Quarantine>,
}

impl Pipeline {
    /// Start the stage threads: `synthesizers` synthesis threads, one proving-start thread per
    /// backend (per GPU), all taking partitions from the same queue, and `finalizers` G2
    /// finalizer threads to keep up. A backend whose proving starts fail `quarantine_after`
    /// times in a row leaves the queue to the others (never the last one in service).
    pub fn start(
        backends: Vec<Arc<dyn Backend>>,
        synthesizers: usize,
        finalizers: usize,
        quarantine_after: u32,
    ) -> Result<Pipeline> {
        anyhow::ensure!(
            !backends.is_empty(),
            "the pipeline needs at least one backend"
        );
        // One job waits while one is being synthesized: the next job's synthesis starts as soon
        // as the last partition of the previous one is handed on.
        let (submit, jobs) = bounded::<Submission>(1);
        // Urgent jobs are few and small; a handful may wait without blocking their submitter.
        let (submit_urgent, urgent_jobs) = bounded::<Submission>(URGENT_WAITING);
        // Partitions to synthesize: none wait beyond the ones being synthesized, so that the
        // next job's partitions queue behind this job's without holding memory.
        let (to_synth, synth_rx) = bounded(0);
        // Compact witnesses are small: one per synthesis thread may wait for the products.
        let (to_products, products_rx) = bounded(synthesizers.max(1));
        // A products thread hands its evaluated partition straight to a proving-start thread:
        // per backend one partition's evaluations being made (or ready) and one being proved.
        // This is what bounds a/b/c memory ([`partitions_in_flight`]).
        let (to_start, start_rx) = bounded(0);
        let (urgent_to_start, urgent_start_rx) = bounded(0);
        // Witnesses waiting for the finalizer are smaller; let the backend run ahead a little.
        let (to_finish, finish_rx) = bounded(2);
        let (urgent_to_finish, urgent_finish_rx) = bounded(2);
        let (to_assemble, assemble_rx) = unbounded();

        let mut threads = Vec::new();
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(f)
                .with_context(|| format!("spawning pipeline thread {name}"))
        };
        threads.push(spawn(
            "c2q-intake",
            Box::new(move || stages::intake(jobs, to_synth)),
        )?);
        for i in 0..synthesizers.max(1) {
            let (rx, tx, to_assemble) =
                (synth_rx.clone(), to_products.clone(), to_assemble.clone());
            threads.push(spawn(
                &format!("c2q-synth-{i}"),
                Box::new(move || stages::synthesis(rx, tx, to_assemble)),
            )?);
        }
        drop(to_products);
        // Backends that make A, B, C on the device get the bare witness.
        let place = Arc::new(stages::ProductsPlace::new(
            backends.iter().all(|b| b.products_on_device()),
            backends[0].clone(),
        ));
        for i in 0..backends.len() {
            let (rx, tx, to_assemble) =
                (products_rx.clone(), to_start.clone(), to_assemble.clone());
            let place = place.clone();
            threads.push(spawn(
                &format!("c2q-products-{i}"),
                Box::new(move || stages::products(rx, place, tx, to_assemble)),
            )?);
        }
        drop(to_start);
        {
            let to_assemble = to_assemble.clone();
            let place = place.clone();
            threads.push(spawn(
                "c2q-urgent",
                Box::new(move || stages::urgent(urgent_jobs, place, urgent_to_start, to_assemble)),
            )?);
        }
        let quarantine = Arc::new(stages::Quarantine::new(quarantine_after, backends.len()));
        let in_progress = Arc::new(stages::StartsInProgress::default());
        for (i, backend) in backends.into_iter().enumerate() {
            let rx = stages::Lanes::new(urgent_start_rx.clone(), start_rx.clone());
            let tx = stages::FinishQueues {
                urgent: urgent_to_finish.clone(),
                normal: to_finish.clone(),
            };
            let to_assemble = to_assemble.clone();
            let quarantine = quarantine.clone();
            let in_progress = in_progress.clone();
            let place = place.clone();
            threads.push(spawn(
                &format!("c2q-start-{i}"),
                Box::new(move || {
                    stages::start(backend, place, quarantine, in_progress, rx, tx, to_assemble)
                }),
            )?);
        }
        drop(to_finish);
        drop(urgent_to_finish);
        for i in 0..finalizers.max(1) {
            let rx = stages::Lanes::new(urgent_finish_rx.clone(), finish_rx.clone());
            let tx = to_assemble.clone();
            threads.push(spawn(
                &format!("c2q-g2-{i}"),
                Box::new(move || stages::finalize(rx, tx)),
            )?);
        }
        drop(to_assemble);
        threads.push(spawn(
            "c2q-assemble",
            Box::new(move || stages::assemble(assemble_rx)),
        )?);
        Ok(Pipeline {
            submit: Some(submit),
            submit_urgent: Some(submit_urgent),
            threads,
            quarantine,
        })
    }

    /// Names of the backends taken out of service after repeated failures.
    pub fn backends_out_of_service(&self) -> Vec<String> {
        self.quarantine.out_of_service()
    }

    /// Hand a job to the pipeline; blocks while the synthesis stage is busy with another job
    /// and one is already waiting (for the urgent lane: while [`URGENT_WAITING`] urgent jobs
    /// wait), so call it from a blocking context.
    pub fn submit(&self, submission: Submission) -> Result<()> {
        let lane = match submission.priority {
            Priority::Normal => &self.submit,
            Priority::Urgent => &self.submit_urgent,
        };
        lane.as_ref()
            .context("pipeline is shut down")?
            .send(submission)
            .map_err(|_| anyhow::anyhow!("pipeline threads have stopped"))
    }

    /// Let the stages finish what they hold, then join them.
    pub fn shutdown(mut self) {
        self.join();
    }

    fn join(&mut self) {
        self.submit.take();
        self.submit_urgent.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.join();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;
    use crate::canary::CanaryJob;
    use crate::groth16::{CpuBackend, Evaluations, Multiexps, Srs, Witness};

    /// A CPU backend that counts the partitions it proved, standing in for one GPU.
    struct Counted(AtomicUsize);

    impl Backend for Counted {
        fn name(&self) -> String {
            "counted cpu".into()
        }

        fn start(&self, srs: &Srs, evals: Evaluations, witness: &Witness) -> Result<Multiexps> {
            self.0.fetch_add(1, Ordering::SeqCst);
            // Long enough that the other proving thread takes the next partition meanwhile.
            std::thread::sleep(std::time::Duration::from_millis(50));
            CpuBackend.start(srs, evals, witness)
        }
    }

    /// A GPU that has gone bad: every proving start fails.
    struct Failing(AtomicUsize);

    impl Backend for Failing {
        fn name(&self) -> String {
            "failing gpu".into()
        }

        fn start(&self, _: &Srs, _: Evaluations, _: &Witness) -> Result<Multiexps> {
            self.0.fetch_add(1, Ordering::SeqCst);
            anyhow::bail!("device lost")
        }
    }

    /// A GPU that makes A, B, C itself but finds no room for this circuit's constraints.
    struct NoRoom(AtomicUsize);

    impl Backend for NoRoom {
        fn name(&self) -> String {
            "gpu without room".into()
        }

        fn products_on_device(&self) -> bool {
            true
        }

        fn start_from_constraints(
            &self,
            _: &Srs,
            _: &crate::groth16::R1cs,
            _: &crate::groth16::PackedWitness,
        ) -> Result<Option<Multiexps>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(None)
        }

        fn start(&self, srs: &Srs, evals: Evaluations, witness: &Witness) -> Result<Multiexps> {
            CpuBackend.start(srs, evals, witness)
        }
    }

    /// A backend that takes packed witnesses as a GPU does, expanding them itself (here on the
    /// CPU): the finalizer gets the packed witness back and expands it for the B multiexp in G2.
    struct TakesPacked(AtomicUsize);

    impl Backend for TakesPacked {
        fn name(&self) -> String {
            "takes packed witnesses".into()
        }

        fn products_on_device(&self) -> bool {
            true
        }

        fn start_from_constraints(
            &self,
            srs: &Srs,
            r1cs: &crate::groth16::R1cs,
            packed: &crate::groth16::PackedWitness,
        ) -> Result<Option<Multiexps>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            let witness = r1cs.witness(packed.input.clone(), packed.expand_aux())?;
            let evals = r1cs.evaluate(&witness.input, &witness.aux)?;
            CpuBackend.start(srs, evals, &witness).map(Some)
        }

        fn start(&self, _: &Srs, _: Evaluations, _: &Witness) -> Result<Multiexps> {
            anyhow::bail!("every start here goes through start_from_constraints")
        }
    }

    #[test]
    fn packed_witnesses_go_to_the_backend_and_come_back_for_the_finalizer() {
        let backend = Arc::new(TakesPacked(AtomicUsize::new(0)));
        let pipeline = Pipeline::start(vec![backend.clone() as Arc<dyn Backend>], 1, 1, 3)
            .expect("pipeline starts");
        let (proved, reports) = prove_one_reporting(&pipeline, "packed", 3);
        let proved = proved.expect("proved and verified");
        pipeline.shutdown();
        assert_eq!(proved.proof.len(), 3 * 192);
        assert_eq!(backend.0.load(Ordering::SeqCst), 3);
        assert_reported(&reports, 3, true);
    }

    /// A GPU with the B query's G2 points resident: proving start makes the B multiexp in G2
    /// (here on the CPU, as `finish` would), or, `wrong`, hands over a wrong one.
    struct G2OnStart {
        wrong: bool,
        starts: AtomicUsize,
    }

    impl Backend for G2OnStart {
        fn name(&self) -> String {
            "gpu with B in G2".into()
        }

        fn start(&self, srs: &Srs, evals: Evaluations, witness: &Witness) -> Result<Multiexps> {
            self.starts.fetch_add(1, Ordering::SeqCst);
            let sums = CpuBackend.start(srs, evals, witness)?;
            let b_g2 = match self.wrong {
                false => crate::groth16::msm::b_g2(srs, witness)?,
                true => <blstrs::G2Projective as group::Group>::generator(),
            };
            Ok(Multiexps {
                b_g2: Some(b_g2),
                ..sums
            })
        }
    }

    /// With the B multiexp in G2 from proving start, the partitions are finished from it (the
    /// witness was dropped at the start): right, the job verifies; wrong, it fails verification
    /// rather than being quietly made again on the CPU.
    #[test]
    fn the_finalizer_takes_the_b_multiexp_in_g2_from_proving_start() {
        for wrong in [false, true] {
            let gpu = Arc::new(G2OnStart {
                wrong,
                starts: AtomicUsize::new(0),
            });
            let pipeline = Pipeline::start(vec![gpu.clone() as Arc<dyn Backend>], 1, 1, 3)
                .expect("pipeline starts");
            let proved = prove_one(&pipeline, "g2-on-start", 3);
            pipeline.shutdown();
            assert_eq!(gpu.starts.load(Ordering::SeqCst), 3);
            match proved {
                Ok(p) => {
                    assert!(!wrong, "a wrong B in G2 verified");
                    assert_eq!(p.proof.len(), 3 * 192);
                }
                Err(e) => {
                    assert!(wrong, "{e}");
                    assert_eq!(e.stage, Stage::Verify, "{e}");
                }
            }
        }
    }

    #[test]
    fn products_fall_back_to_the_cpu_when_the_gpu_has_no_room() {
        let gpu = Arc::new(NoRoom(AtomicUsize::new(0)));
        let pipeline = Pipeline::start(vec![gpu.clone() as Arc<dyn Backend>], 1, 1, 3)
            .expect("pipeline starts");
        let (proved, reports) = prove_one_reporting(&pipeline, "no-room", 3);
        let proved = proved.expect("proved and verified");
        assert_eq!(proved.proof.len(), 3 * 192);
        assert_reported(&reports, 3, false);
        // Declined once, the circuit's products are made ahead on the CPU: partitions packed
        // before the first refusal may still be offered, none after it.
        let offered = gpu.0.load(Ordering::SeqCst);
        assert!((1..=3).contains(&offered), "offered {offered} times");
        let (proved, reports) = prove_one_reporting(&pipeline, "no-room-again", 3);
        pipeline.shutdown();
        assert_eq!(proved.expect("proved and verified").proof.len(), 3 * 192);
        assert_reported(&reports, 3, false);
        assert_eq!(gpu.0.load(Ordering::SeqCst), offered, "offered again");
    }

    fn prove_one(pipeline: &Pipeline, id: &str, partitions: usize) -> Result<Proved, StageError> {
        prove_one_reporting(pipeline, id, partitions).0
    }

    /// Proves a canary job and returns what the pipeline reported as its partitions finished.
    fn prove_one_reporting(
        pipeline: &Pipeline,
        id: &str,
        partitions: usize,
    ) -> (Result<Proved, StageError>, Vec<PartitionDone>) {
        let job = Arc::new(CanaryJob::new(partitions, 11).expect("canary job"));
        let (done, answer) = oneshot::channel();
        let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = reports.clone();
        pipeline
            .submit(Submission {
                id: id.into(),
                job,
                priority: Priority::Normal,
                progress: Box::new(move |d| sink.lock().expect("not poisoned").push(d)),
                done,
            })
            .expect("submitted");
        let proved = answer.blocking_recv().expect("answered");
        let reports = reports.lock().expect("not poisoned").clone();
        (proved, reports)
    }

    /// Each partition is reported with where its A, B and C were made: the memory gate
    /// shrinks a job's reservation by it.
    fn assert_reported(reports: &[PartitionDone], partitions: usize, products_on_gpu: bool) {
        let remaining: Vec<usize> = reports.iter().map(|d| d.remaining).collect();
        assert_eq!(remaining, (0..partitions).rev().collect::<Vec<_>>());
        assert!(
            reports.iter().all(|d| d.products_on_gpu == products_on_gpu),
            "{reports:?}"
        );
    }

    /// A GPU whose every proving start takes a while, as a full-size partition does.
    struct Slow;

    impl Backend for Slow {
        fn name(&self) -> String {
            "slow cpu".into()
        }

        fn start(&self, srs: &Srs, evals: Evaluations, witness: &Witness) -> Result<Multiexps> {
            std::thread::sleep(std::time::Duration::from_millis(150));
            CpuBackend.start(srs, evals, witness)
        }
    }

    /// An urgent job submitted while a long normal job is being proved starts on the GPU as
    /// soon as the partition in progress there is done, ahead of every other normal partition,
    /// though synthesis of those is queued and waiting.
    #[test]
    fn an_urgent_job_starts_ahead_of_every_normal_partition_not_yet_started() {
        let pipeline =
            Pipeline::start(vec![Arc::new(Slow) as Arc<dyn Backend>], 2, 1, 3).expect("starts");
        let submit = |id: &str, partitions, priority| {
            let (done, answer) = oneshot::channel();
            let job = Arc::new(CanaryJob::new(partitions, 5).expect("canary job"));
            let started = Arc::new(AtomicUsize::new(0));
            let seen = started.clone();
            pipeline
                .submit(Submission {
                    id: id.into(),
                    job,
                    priority,
                    progress: Box::new(move |_| {
                        seen.fetch_add(1, Ordering::SeqCst);
                    }),
                    done,
                })
                .expect("submitted");
            (answer, started)
        };
        let (normal, normal_done) = submit("normal", 10, Priority::Normal);
        // Once two of the normal job's partitions are proved, the pipeline is full.
        while normal_done.load(Ordering::SeqCst) < 2 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let submitted_at = unix_ms();
        let (urgent, _) = submit("urgent", 1, Priority::Urgent);
        let urgent = urgent.blocking_recv().expect("answered").expect("proved");
        let normal = normal.blocking_recv().expect("answered").expect("proved");
        pipeline.shutdown();
        let urgent_start = urgent.origin_unix_ms + urgent.timings[0].start_start_ms;
        // Normal partitions that went to the GPU after the urgent job came and before it:
        // at most the one whose start was already under way (its synthesis done) when the
        // urgent partition became ready.
        let overtaking: Vec<u64> = normal
            .timings
            .iter()
            .map(|t| normal.origin_unix_ms + t.start_start_ms)
            .filter(|&at| at > submitted_at && at < urgent_start)
            .collect();
        assert!(
            overtaking.len() <= 1,
            "normal partitions started at {overtaking:?} after the urgent job came at \
             {submitted_at}, before it started at {urgent_start}"
        );
        let after = normal
            .timings
            .iter()
            .filter(|t| normal.origin_unix_ms + t.start_start_ms > urgent_start)
            .count();
        assert!(
            after >= 5,
            "only {after} normal partitions started after the urgent one"
        );
    }

    fn unix_ms() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as u64
    }

    #[test]
    fn a_failing_backend_leaves_the_others_to_carry_on() {
        let good = Arc::new(Counted(AtomicUsize::new(0)));
        let bad = Arc::new(Failing(AtomicUsize::new(0)));
        let backends: Vec<Arc<dyn Backend>> = vec![good.clone(), bad.clone()];
        let pipeline = Pipeline::start(backends, 2, 1, 2).expect("pipeline starts");
        // Jobs fail while the bad GPU takes some of their partitions; two failures in a row
        // take it out of service.
        let mut jobs = 0;
        while pipeline.backends_out_of_service().is_empty() {
            jobs += 1;
            assert!(jobs <= 20, "the bad GPU was never taken out of service");
            if let Err(err) = prove_one(&pipeline, "while-bad", 4) {
                assert_eq!(err.stage, Stage::Start, "{err}");
            }
        }
        assert_eq!(
            pipeline.backends_out_of_service(),
            vec!["failing gpu".to_string()]
        );
        assert_eq!(bad.0.load(Ordering::SeqCst), 2);
        // From now on every partition goes to the good GPU.
        let before = good.0.load(Ordering::SeqCst);
        let proved = prove_one(&pipeline, "after", 6).expect("proved on the good GPU");
        assert_eq!(proved.timings.len(), 6);
        assert_eq!(good.0.load(Ordering::SeqCst) - before, 6);
        assert_eq!(bad.0.load(Ordering::SeqCst), 2);
        pipeline.shutdown();
    }

    #[test]
    fn the_last_backend_in_service_is_never_taken_out() {
        let bad = Arc::new(Failing(AtomicUsize::new(0)));
        let pipeline = Pipeline::start(vec![bad.clone() as Arc<dyn Backend>], 1, 1, 1)
            .expect("pipeline starts");
        // Its failures keep reaching the worker (which then judges the backend broken) instead
        // of jobs waiting forever for a backend.
        for k in 0..3 {
            let err = prove_one(&pipeline, &format!("job-{k}"), 2).expect_err("fails");
            assert_eq!(err.stage, Stage::Start, "{err}");
        }
        assert!(pipeline.backends_out_of_service().is_empty());
        assert!(bad.0.load(Ordering::SeqCst) >= 3);
        pipeline.shutdown();
    }

    /// What the backends of `Watched` saw, together.
    #[derive(Default)]
    struct Watch {
        in_start: AtomicUsize,
        told_idle_during_a_start: AtomicUsize,
        told_idle_since_the_last_start: AtomicBool,
    }

    /// A CPU backend standing in for one of several GPUs, whose starts take `delay_ms` longer.
    struct Watched {
        watch: Arc<Watch>,
        delay_ms: u64,
    }

    impl Backend for Watched {
        fn name(&self) -> String {
            format!("watched gpu ({} ms a start)", self.delay_ms)
        }

        fn start(&self, srs: &Srs, evals: Evaluations, witness: &Witness) -> Result<Multiexps> {
            self.watch.in_start.fetch_add(1, Ordering::SeqCst);
            self.watch
                .told_idle_since_the_last_start
                .store(false, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(self.delay_ms));
            let sums = CpuBackend.start(srs, evals, witness);
            self.watch.in_start.fetch_sub(1, Ordering::SeqCst);
            sums
        }

        fn idle(&self) {
            if self.watch.in_start.load(Ordering::SeqCst) > 0 {
                self.watch
                    .told_idle_during_a_start
                    .fetch_add(1, Ordering::SeqCst);
            }
            self.watch
                .told_idle_since_the_last_start
                .store(true, Ordering::SeqCst);
        }
    }

    /// With several GPUs, one waiting while another proves is not idle: the job is still in
    /// flight, and a GPU that let go of its kept evaluations then would make the next
    /// partition lock them anew. A backend is told it is idle only when no start is in
    /// progress, and is told once the last one is done.
    #[test]
    fn backends_are_told_they_are_idle_only_when_no_start_is_in_progress() {
        let watch = Arc::new(Watch::default());
        let backends: Vec<Arc<dyn Backend>> = [5, 150]
            .into_iter()
            .map(|delay_ms| {
                Arc::new(Watched {
                    watch: watch.clone(),
                    delay_ms,
                }) as Arc<dyn Backend>
            })
            .collect();
        let pipeline = Pipeline::start(backends, 2, 1, 3).expect("pipeline starts");
        for k in 0..2 {
            prove_one(&pipeline, &format!("job-{k}"), 6).expect("proved");
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !watch.told_idle_since_the_last_start.load(Ordering::SeqCst) {
            assert!(
                std::time::Instant::now() < deadline,
                "no backend was told it is idle after the last start"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        pipeline.shutdown();
        assert_eq!(
            watch.told_idle_during_a_start.load(Ordering::SeqCst),
            0,
            "a backend was told it is idle while another was proving"
        );
    }

    #[test]
    fn every_backend_proves_partitions_of_one_job() {
        let gpus: Vec<Arc<Counted>> = (0..2)
            .map(|_| Arc::new(Counted(AtomicUsize::new(0))))
            .collect();
        let backends: Vec<Arc<dyn Backend>> =
            gpus.iter().map(|g| g.clone() as Arc<dyn Backend>).collect();
        let pipeline = Pipeline::start(backends, 2, 2, 3).expect("pipeline starts");
        let partitions = 8;
        let job = Arc::new(CanaryJob::new(partitions, 7).expect("canary job"));
        let (done, answer) = oneshot::channel();
        pipeline
            .submit(Submission {
                id: "two-backends".into(),
                job: job.clone(),
                priority: Priority::Normal,
                progress: Box::new(|_| {}),
                done,
            })
            .expect("submitted");
        let proved = answer
            .blocking_recv()
            .expect("answered")
            .expect("proved and verified");
        pipeline.shutdown();
        assert_eq!(proved.proof.len(), 192 * partitions);
        assert_eq!(proved.timings.len(), partitions);
        let counts: Vec<usize> = gpus.iter().map(|g| g.0.load(Ordering::SeqCst)).collect();
        assert_eq!(counts.iter().sum::<usize>(), partitions, "{counts:?}");
        assert!(
            counts.iter().all(|&c| c > 0),
            "a backend proved nothing: {counts:?}"
        );
    }
}
