//! The queue side of the CLI: `c2q submit`, `c2q dlq …`, `c2q status` (and `c2q worker`, in
//! `worker`). Each entry point builds its own runtime, so `main.rs` stays a plain dispatcher.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use base64::Engine;
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::BasicProperties;
use sha2::{Digest, Sha256};

use crate::broker::dead_letter::DeadLetterRecord;
use crate::broker::{dlq, publish_confirmed, topology::JOB_KEY, Broker, QueueDepth, UNSORTED};
use crate::classes::SizeClass;
use crate::config::Config;
use crate::ledger::{Ledger, SeenWorker, SEEN_RECENTLY};
use crate::schema::{self, CanarySpec, JobKind, JobV1, ResultV1, Status};

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

async fn connect(config: &Config) -> Result<Broker> {
    Broker::connect(&config.broker, config.retry.max_retries, "c2q-cli").await
}

#[derive(clap::Args, Debug)]
pub struct SubmitArgs {
    /// C1 output (raw JSON as filecoin-ffi wrote it, or lotus-bench `Commit2In` JSON), a
    /// SnapDeals input (`c2q prove` says what it holds), queued as a `snap-prove` job, or a
    /// PoSt input, queued as a `window-post` or `winning-post` job.
    #[arg(required_unless_present = "canary")]
    pub file: Option<PathBuf>,
    /// The miner; a PoSt input names its own (this must agree when given).
    #[arg(long)]
    pub miner: Option<u64>,
    /// The sector number (not for PoSt, which proves many).
    #[arg(long)]
    pub sector: Option<u64>,
    /// Submit a canary job (the built-in circuit) instead of a C1 file.
    #[arg(long, conflicts_with = "file")]
    pub canary: bool,
    /// Partitions of a canary job.
    #[arg(long, default_value_t = 2, requires = "canary")]
    pub partitions: u32,
    /// Seed of a canary job (default: from the clock). Printed either way: `c2q verify
    /// --canary --seed` needs it.
    #[arg(long, requires = "canary")]
    pub seed: Option<u64>,
    /// Job id (idempotency key); default derived from miner, sector and payload, so that
    /// submitting the same job twice is answered once.
    #[arg(long)]
    pub job_id: Option<String>,
    /// Wait for the result, print it and save the proof.
    #[arg(long)]
    pub wait: bool,
    /// Where `--wait` saves the proof (default `<job_id>.proof`).
    #[arg(long, requires = "wait")]
    pub out: Option<PathBuf>,
    /// Give up waiting after this many seconds.
    #[arg(long, default_value_t = 3600, requires = "wait")]
    pub timeout: u64,
    #[arg(long, env = "C2Q_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Read a C1 file in either accepted form: `(c1 json bytes, registered proof name)`.
pub fn read_c1(path: &Path) -> Result<(Vec<u8>, String)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not JSON", path.display()))?;
    let c1 = match value.get("Phase1Out").and_then(|v| v.as_str()) {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .context("Commit2In Phase1Out is not base64")?,
        None => bytes,
    };
    let proof = if c1.len() < 1024 * 1024 * 1024 {
        let parsed: serde_json::Value =
            serde_json::from_slice(&c1).context("the C1 output is not JSON")?;
        parsed
            .get("registered_proof")
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .context("the C1 output has no registered_proof")?
    } else {
        bail!("C1 output is implausibly large")
    };
    Ok((c1, proof))
}

/// A SnapDeals input file as `c2q submit` queues it.
struct SnapFile {
    bytes: Vec<u8>,
    registered_proof: String,
}

/// The SnapDeals input `args.file` holds, parsed so that a bad one is refused here; `None`
/// when it holds something else (a C1 output).
fn read_snap_input(args: &SubmitArgs) -> Result<Option<SnapFile>> {
    let Some(path) = args.file.as_deref() else {
        return Ok(None);
    };
    if !crate::snap::is_snap_input_file(path)? {
        return Ok(None);
    }
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let input = crate::snap::parse_snap_input(&bytes)
        .with_context(|| format!("{} is not a valid SnapDeals input", path.display()))?;
    Ok(Some(SnapFile {
        bytes,
        registered_proof: crate::snap::update_proof_name(input.registered_proof),
    }))
}

/// A PoSt input file as `c2q submit` queues it.
struct PostFile {
    bytes: Vec<u8>,
    kind: JobKind,
    registered_proof: String,
    miner: u64,
}

/// The PoSt input `args.file` holds, parsed so that a bad one is refused here; `None` when
/// it holds something else.
fn read_post_input(args: &SubmitArgs) -> Result<Option<PostFile>> {
    let Some(path) = args.file.as_deref() else {
        return Ok(None);
    };
    if !crate::post::is_post_input_file(path)? {
        return Ok(None);
    }
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let input = crate::post::parse_post_input(&bytes)
        .with_context(|| format!("{} is not a valid PoSt input", path.display()))?;
    let kind = if input.is_window() {
        JobKind::WindowPost
    } else {
        JobKind::WinningPost
    };
    let name = crate::post::post_proof_name(input.registered_proof);
    Ok(Some(PostFile {
        bytes,
        kind,
        registered_proof: name,
        miner: input.miner_id,
    }))
}

/// Build the job message for `c2q submit`.
pub fn build_job(args: &SubmitArgs) -> Result<JobV1> {
    if let Some(PostFile {
        bytes,
        kind,
        registered_proof,
        miner,
    }) = read_post_input(args)?
    {
        if let Some(given) = args.miner.filter(|&m| m != miner) {
            bail!("--miner {given} disagrees with the PoSt input's miner_id {miner}");
        }
        if args.sector.is_some() {
            bail!("a PoSt job proves many sectors: --sector does not apply");
        }
        // The default job id hashes the input: the same partition submitted twice is proved
        // once, another partition of the same deadline is another job.
        let d = Sha256::digest(&bytes);
        let job_id = args
            .job_id
            .clone()
            .unwrap_or_else(|| format!("{}-{miner}-{}", kind.as_str(), hex::encode(&d[..6])));
        return Ok(JobV1 {
            v: schema::VERSION,
            job_id,
            kind,
            registered_proof,
            miner_id: miner,
            sector_number: 0,
            phase1_output: zstd::encode_all(&bytes[..], 3).context("compressing the PoSt input")?,
            deadline_unix_ms: None,
            canary: None,
        });
    }
    let (Some(miner), Some(sector)) = (args.miner, args.sector) else {
        bail!("give --miner and --sector (a PoSt input alone names its miner)");
    };
    let mut digest = Sha256::new();
    let (kind, registered_proof, payload, canary) = if args.canary {
        let seed = args.seed.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        });
        digest.update(seed.to_le_bytes());
        digest.update(args.partitions.to_le_bytes());
        let spec = CanarySpec {
            partitions: args.partitions,
            seed,
        };
        (JobKind::Canary, "canary".to_string(), vec![], Some(spec))
    } else if let Some(input) = read_snap_input(args)? {
        // The default job id hashes the input, as for C1 outputs.
        digest.update(&input.bytes);
        let compressed =
            zstd::encode_all(&input.bytes[..], 3).context("compressing the SnapDeals input")?;
        (JobKind::SnapProve, input.registered_proof, compressed, None)
    } else {
        let path = args.file.as_deref().context("a C1 file is required")?;
        let (c1, proof) = read_c1(path)?;
        // The default job id hashes the C1 itself (as `ops/examples/producer.py` does), so
        // the same sector submitted twice, in either file form, is proved once.
        digest.update(&c1);
        let compressed = zstd::encode_all(&c1[..], 3).context("compressing the C1 output")?;
        (JobKind::PorepC2, proof, compressed, None)
    };
    let job_id = args.job_id.clone().unwrap_or_else(|| {
        let d = digest.finalize();
        format!("{miner}-{sector}-{}", hex::encode(&d[..6]))
    });
    Ok(JobV1 {
        v: schema::VERSION,
        job_id,
        kind,
        registered_proof,
        miner_id: miner,
        sector_number: sector,
        phase1_output: payload,
        deadline_unix_ms: None,
        canary,
    })
}

/// `c2q submit`.
pub fn submit(args: SubmitArgs) -> Result<()> {
    let config = Config::load(args.config.as_deref())?;
    let job = build_job(&args)?;
    runtime()?.block_on(async move {
        let broker = connect(&config).await?;
        let timeout = Duration::from_secs(args.timeout);
        let reply_queue = if args.wait {
            let reply = ReplyQueue::new(&config.broker.prefix, timeout);
            reply.declare(&broker).await?;
            Some(reply)
        } else {
            None
        };
        let payload = schema::job::encode(&job)?;
        let mut props = BasicProperties::default()
            .with_content_type(schema::CONTENT_TYPE.into())
            .with_delivery_mode(2)
            .with_message_id(ShortString::from(job.job_id.clone()))
            .with_timestamp(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
            );
        if let Some(q) = &reply_queue {
            props = props.with_reply_to(ShortString::from(q.name.clone()));
        }
        // Routed by size class, to the workers that can hold it; a job no class holds goes to
        // the unsorted queue, where a worker refuses it with the reason.
        let key = SizeClass::of(&job).map_or_else(|| JOB_KEY.to_string(), |c| c.key());
        publish_confirmed(
            &broker.publish,
            &broker.names.jobs_exchange(),
            &key,
            &payload,
            props,
        )
        .await
        .context("publishing the job")?;
        match &job.canary {
            Some(spec) => eprintln!(
                "submitted canary job {} ({} bytes, {} partitions, seed {})",
                job.job_id,
                payload.len(),
                spec.partitions,
                spec.seed
            ),
            None => eprintln!("submitted job {} ({} bytes)", job.job_id, payload.len()),
        }
        println!("{}", job.job_id);
        let Some(q) = reply_queue else {
            broker.close().await;
            return Ok(());
        };
        let deadline = Instant::now() + timeout;
        let result = tokio::time::timeout(
            timeout,
            wait_for(&config, broker, &q, &job.job_id, deadline),
        )
        .await
        .with_context(|| format!("timed out waiting for the result of {}", job.job_id))??;
        let out = args
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("{}.proof", job.job_id)));
        print_result(&result, job.canary.as_ref(), &out)?;
        if result.status != Status::Ok {
            bail!("job {} failed", job.job_id);
        }
        Ok(())
    })
}

/// `c2q submit --wait`'s own reply queue: durable and not exclusive, so that it and a result
/// in it outlive a broker restart (an exclusive queue is deleted with its connection, and a
/// result published after that is unroutable). `x-expires` removes it if `submit` never comes
/// back for it: the wait plus a minute, so it cannot expire while `submit` is reconnecting.
struct ReplyQueue {
    name: String,
    expires: Duration,
}

impl ReplyQueue {
    fn new(prefix: &str, wait: Duration) -> ReplyQueue {
        ReplyQueue {
            name: format!("{prefix}.reply.{}", uuid::Uuid::new_v4()),
            expires: wait.saturating_add(Duration::from_secs(60)),
        }
    }

    /// Idempotent: every reconnection declares it again with the same arguments.
    async fn declare(&self, broker: &Broker) -> Result<()> {
        let mut args = FieldTable::default();
        let expires_ms = i64::try_from(self.expires.as_millis()).unwrap_or(i64::MAX);
        args.insert("x-expires".into(), AMQPValue::LongLongInt(expires_ms));
        let opts = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        broker
            .fetch
            .queue_declare(self.name.as_str().into(), opts, args)
            .await
            .with_context(|| format!("declaring the reply queue {}", self.name))?;
        Ok(())
    }

    /// Best effort: what is left behind expires by itself.
    async fn delete(&self, broker: &Broker) {
        let deleted = broker
            .fetch
            .queue_delete(self.name.as_str().into(), QueueDeleteOptions::default())
            .await;
        if let Err(e) = deleted {
            eprintln!(
                "could not delete the reply queue {} ({e}); it expires by itself",
                self.name
            );
        }
    }
}

/// How one stretch of waiting on one connection ended, short of an error that reconnecting
/// cannot mend.
enum Waited {
    Answer(Box<ResultV1>),
    /// The connection or the consumer went away (a broker restart, say): reconnect.
    BrokerLost(anyhow::Error),
}

/// Wait for the answer to `job_id` on `reply`, reconnecting with backoff whenever the broker
/// goes away, until `deadline`; the reply queue is deleted once the answer is read.
async fn wait_for(
    config: &Config,
    first: Broker,
    reply: &ReplyQueue,
    job_id: &str,
    deadline: Instant,
) -> Result<ResultV1> {
    let mut broker = first;
    loop {
        match consume_reply(&broker, &reply.name, job_id).await? {
            Waited::Answer(result) => {
                reply.delete(&broker).await;
                broker.close().await;
                return Ok(*result);
            }
            Waited::BrokerLost(e) => {
                eprintln!("lost the broker while waiting for {job_id} ({e:#}); reconnecting");
            }
        }
        broker = Broker::connect_with_backoff(
            &config.broker,
            config.retry.max_retries,
            "c2q-cli",
            deadline.saturating_duration_since(Instant::now()),
        )
        .await
        .context("RabbitMQ stayed unreachable while waiting for the result")?;
        reply.declare(&broker).await?;
        eprintln!("reconnected; still waiting for {job_id}");
    }
}

/// Consume the reply queue on `broker` until the answer to `job_id` arrives or the connection
/// goes away.
async fn consume_reply(broker: &Broker, queue: &str, job_id: &str) -> Result<Waited> {
    let consumer = broker
        .fetch
        .basic_consume(
            queue.into(),
            "c2q-submit".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await;
    let mut consumer = match consumer {
        Ok(c) => c,
        Err(e) => {
            return Ok(Waited::BrokerLost(
                anyhow::Error::new(e).context("consuming the reply queue"),
            ))
        }
    };
    while let Some(delivery) = consumer.next().await {
        let delivery = match delivery {
            Ok(d) => d,
            Err(e) => {
                return Ok(Waited::BrokerLost(
                    anyhow::Error::new(e).context("reading the reply queue"),
                ))
            }
        };
        let result = ResultV1::decode(&delivery.data).context("decoding the result")?;
        if let Err(e) = crate::broker::settled(delivery.acker.ack(BasicAckOptions::default()).await)
        {
            // Kept all the same: it is in hand, and the queue is deleted once it is used.
            eprintln!("could not ack a result ({e:#}); going on");
        }
        // Results may arrive twice (at-least-once): the first one for our job wins. A message
        // that reused the job id of another payload is answered under its own identity,
        // naming the id it reused.
        if result.job_id == job_id || result.reused_job_id.as_deref() == Some(job_id) {
            return Ok(Waited::Answer(Box::new(result)));
        }
    }
    Ok(Waited::BrokerLost(anyhow::anyhow!(
        "the broker ended the consumer of the reply queue"
    )))
}

/// `canary`: the spec of a canary job, whose seed verifying the proof needs.
fn print_result(result: &ResultV1, canary: Option<&CanarySpec>, out: &Path) -> Result<()> {
    let mut summary = serde_json::json!({
        "job_id": result.job_id,
        "status": result.status,
        "worker": result.worker,
        "attempts": result.attempts,
        "from_ledger": result.from_ledger,
        "error": result.error,
    });
    if let Some(reused) = &result.reused_job_id {
        summary["reused_job_id"] = reused.as_str().into();
    }
    if let Some(spec) = canary {
        summary["seed"] = spec.seed.into();
    }
    if let Some(proof) = &result.proof {
        std::fs::write(out, proof).with_context(|| format!("writing {}", out.display()))?;
        summary["proof_bytes"] = proof.len().into();
        summary["proof_file"] = out.display().to_string().into();
        summary["partitions"] = result.timings.len().into();
    }
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct DlqArgs {
    #[command(subcommand)]
    pub command: DlqCommand,
    #[arg(long, env = "C2Q_CONFIG", global = true)]
    pub config: Option<PathBuf>,
}

#[derive(clap::Subcommand, Debug)]
pub enum DlqCommand {
    /// Dead-lettered jobs: address, job id, reason, attempts, miner, sector, error.
    List,
    /// One dead-lettered job in full, by job id or by the address `dlq list` shows.
    Show {
        #[arg(value_name = "JOB_ID|ADDRESS")]
        job_id: String,
    },
    /// Send dead-lettered jobs back to the job queue, attempts reset: those with this job id
    /// or address, or all of them.
    Replay {
        #[arg(required_unless_present = "all", value_name = "JOB_ID|ADDRESS")]
        job_id: Option<String>,
        #[arg(long, conflicts_with = "job_id")]
        all: bool,
    },
    /// Delete every dead-lettered job.
    Purge,
}

/// `c2q dlq …`.
pub fn dlq(args: DlqArgs) -> Result<()> {
    let config = Config::load(args.config.as_deref())?;
    runtime()?.block_on(async move {
        let broker = connect(&config).await?;
        let r = dlq_command(&broker, &args.command, &config.limits).await;
        broker.close().await;
        r
    })
}

/// `limits`: the configuration's, for decoding the dead-lettered jobs as the worker would.
async fn dlq_command(broker: &Broker, command: &DlqCommand, limits: &schema::Limits) -> Result<()> {
    let summary = |props: &BasicProperties, body: &[u8]| DeadLetter::of(props, body, limits);
    match command {
        DlqCommand::List => {
            let held = dlq::browse(broker).await?;
            let or_dash = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
            println!(
                "{:<12} {:<40} {:<22} {:>8} {:>20} {:>20}  error",
                "address", "job_id", "reason", "attempts", "miner", "sector"
            );
            for d in &held {
                let s = summary(&d.properties, &d.data);
                let error: String = s.error.chars().take(80).collect();
                let job_id = if s.job_id.is_empty() { "-" } else { &s.job_id };
                println!(
                    "{:<12} {job_id:<40} {:<22} {:>8} {:>20} {:>20}  {error}",
                    s.address,
                    s.reason,
                    s.attempts,
                    or_dash(s.miner),
                    or_dash(s.sector)
                );
            }
            println!("{} dead-lettered", held.len());
        }
        DlqCommand::Show { job_id: selector } => {
            let held = dlq::browse(broker).await?;
            let d = held
                .iter()
                .find(|d| summary(&d.properties, &d.data).is(selector))
                .with_context(|| format!("no dead-lettered job with id or address {selector:?}"))?;
            let s = summary(&d.properties, &d.data);
            let described = match schema::job::decode_message(&d.data, limits) {
                Ok(job) => {
                    let mut described = serde_json::json!({
                        "job_id": job.job_id,
                        "kind": job.kind.as_str(),
                        "registered_proof": job.registered_proof,
                        "miner_id": job.miner_id,
                        "sector_number": job.sector_number,
                    });
                    match schema::job::validate(job, limits) {
                        Ok(valid) => described["c1_bytes"] = valid.c1.len().into(),
                        Err(e) => described["invalid"] = e.to_string().into(),
                    }
                    described
                }
                Err(e) => serde_json::json!({ "undecodable": e.to_string() }),
            };
            let out = serde_json::json!({
                "address": s.address, "job_id": s.job_id, "reason": s.reason,
                "attempts": s.attempts, "miner": s.miner, "sector": s.sector, "error": s.error,
                "message_bytes": d.data.len(),
                "reply_to": d.properties.reply_to().as_ref().map(|s| s.to_string()),
                "job": described,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        DlqCommand::Replay { job_id, all } => {
            let n = dlq::replay(broker, |props, body| {
                *all || job_id
                    .as_deref()
                    .is_some_and(|sel| summary(props, body).is(sel))
            })
            .await?;
            if n == 0 && !*all {
                bail!(
                    "no dead-lettered job with id or address {:?}",
                    job_id.as_deref().unwrap_or("")
                );
            }
            println!("replayed {n} jobs");
        }
        DlqCommand::Purge => {
            let n = dlq::purge(broker).await?;
            println!("purged {n} dead-lettered jobs");
        }
    }
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    #[arg(long, env = "C2Q_CONFIG")]
    pub config: Option<PathBuf>,
}

/// `c2q status`: queue depths, jobs waiting per size class and the workers that fetch them,
/// jobs in flight, ledger counts.
pub fn status(args: StatusArgs) -> Result<()> {
    let config = Config::load(args.config.as_deref())?;
    runtime()?.block_on(async move {
        let broker = connect(&config).await?;
        let names = &broker.names;
        let queues = names.all_queues(config.retry.max_retries);
        println!("{:<40} {:>10} {:>10}", "queue", "messages", "consumers");
        for q in queues {
            let opts = QueueDeclareOptions {
                passive: true,
                ..Default::default()
            };
            let info = broker
                .fetch
                .queue_declare(q.as_str().into(), opts, FieldTable::default())
                .await
                .with_context(|| format!("inspecting {q}"))?;
            println!(
                "{:<40} {:>10} {:>10}",
                q,
                info.message_count(),
                info.consumer_count()
            );
        }
        let depths = broker.job_queue_depths().await?;
        broker.close().await;
        let ledger = Ledger::connect(&config.ledger).await?;
        let workers = ledger.workers_seen(SEEN_RECENTLY).await?;
        println!("\n{}", class_table(&depths, &workers));
        println!(
            "workers seen in the last {} s: {}",
            SEEN_RECENTLY.as_secs(),
            workers.len()
        );
        for w in &workers {
            print!("{}", worker_lines(w));
        }
        println!("\nledger ({}):", config.ledger.schema);
        for (status, n) in ledger.counts().await? {
            println!("  {status:<12} {n}");
        }
        let running = ledger.running().await?;
        println!("\nin flight: {}", running.len());
        for (job, worker, since) in running {
            println!("  {job}  {}  since {since}", worker.unwrap_or_default());
        }
        Ok(())
    })
}

/// What `c2q status` says of one worker: its classes, the parameters it keeps loaded (and
/// why: what they hold, since when unused), its last releases, and a stall.
pub fn worker_lines(w: &SeenWorker) -> String {
    let mut out = format!(
        "  {}  {}  classes {}  (seen {} s ago)\n",
        w.name,
        w.backend,
        w.classes.join(","),
        w.seen_s_ago
    );
    if let Some(s) = w.stalled_s {
        out += &format!(
            "    STALLED for {s} s: holds no job while jobs of its classes are ready \
             (its log says what it holds)\n"
        );
    }
    for (i, circuit) in w.resident.iter().enumerate() {
        let bytes = w.resident_bytes.get(i).copied().unwrap_or(0);
        let idle = w.resident_idle_s.get(i).copied().unwrap_or(0);
        out += &format!(
            "    keeps {circuit} loaded: {:.1} GB, last used {idle} s ago (released when a \
             job of another circuit needs the memory)\n",
            bytes as f64 / 1e9
        );
    }
    for line in &w.evicted {
        out += &format!("    released {line}\n");
    }
    out
}

/// Jobs ready per size class beside the running workers that fetch it; a class with jobs and
/// no such worker is flagged: its jobs wait until one starts.
pub fn class_table(depths: &[QueueDepth], workers: &[SeenWorker]) -> String {
    let mut out = format!("{:<14} {:>8} {:>8}\n", "size class", "ready", "workers");
    for d in depths {
        let fetching = workers
            .iter()
            .filter(|w| d.class == UNSORTED || w.classes.contains(&d.class))
            .count();
        let note = if d.ready > 0 && fetching == 0 {
            "  waiting: no running worker fetches this class"
        } else {
            ""
        };
        out += &format!("{:<14} {:>8} {:>8}{note}\n", d.class, d.ready, fetching);
    }
    out
}
/// What `c2q dlq list` and `show` say of one dead letter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    /// The first 12 hex digits of the message body's SHA-256: an address every dead letter
    /// has, even one that never decoded and came without a `message_id`.
    pub address: String,
    /// The AMQP `message_id` (the job id), empty when the message had none.
    pub job_id: String,
    pub reason: String,
    pub attempts: i64,
    pub miner: Option<u64>,
    pub sector: Option<u64>,
    pub error: String,
}

impl DeadLetter {
    /// Summarize a dead letter from its headers, and its body where the worker did not record
    /// the miner and sector (RabbitMQ dead-letters poison messages itself, without them).
    pub fn of(props: &BasicProperties, body: &[u8], limits: &schema::Limits) -> DeadLetter {
        let job_id = props
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default();
        let record = DeadLetterRecord::from_properties(props);
        let (miner, sector) = match record.identity {
            Some((m, s)) => (Some(m), Some(s)),
            None => schema::job::decode_message(body, limits)
                .ok()
                .map_or((None, None), |j| (Some(j.miner_id), Some(j.sector_number))),
        };
        DeadLetter {
            address: dead_letter_address(body),
            job_id,
            reason: record.reason,
            attempts: record.attempts,
            miner,
            sector,
            error: record.error,
        }
    }

    /// Whether `selector` names this dead letter: its job id or its address.
    pub fn is(&self, selector: &str) -> bool {
        !selector.is_empty() && (self.job_id == selector || self.address == selector)
    }
}

/// The address `c2q dlq` gives a dead letter: the start of the SHA-256 of its body, the same
/// on every listing and for every copy of the same message.
pub fn dead_letter_address(body: &[u8]) -> String {
    hex::encode(&Sha256::digest(body)[..6])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_table_flags_jobs_no_running_worker_fetches() {
        let depth = |class: &str, ready| QueueDepth {
            class: class.into(),
            queue: format!("c2q.jobs.{class}"),
            ready,
            consumers: 0,
        };
        let small = SeenWorker {
            name: "small".into(),
            classes: vec!["canary-4".into(), "canary-1".into()],
            backend: "cpu".into(),
            seen_s_ago: 3,
            ..Default::default()
        };
        let table = class_table(
            &[
                depth("canary-1", 0),
                depth("canary-4", 2),
                depth("canary-16", 1),
                depth("porep-32g", 0),
                depth(UNSORTED, 1),
            ],
            &[small],
        );
        let line = |class: &str| {
            table
                .lines()
                .find(|l| l.split_whitespace().next() == Some(class))
                .unwrap()
                .to_string()
        };
        assert!(!line("canary-4").contains("waiting"), "{table}");
        assert!(
            line("canary-16").contains("waiting: no running worker"),
            "{table}"
        );
        // Nothing waits in an unserved class without jobs, nor in the unsorted queue while any
        // worker runs.
        assert!(!line("porep-32g").contains("waiting"), "{table}");
        assert!(!line(UNSORTED).contains("waiting"), "{table}");
        assert!(line("canary-4").ends_with(" 2        1"), "{table}");
    }

    #[test]
    fn status_says_what_a_worker_keeps_releases_and_whether_it_stalls() {
        let w = SeenWorker {
            name: "w1".into(),
            classes: vec!["porep-32g".into(), "snap-32g".into()],
            backend: "cuda:0 (NVIDIA H200)".into(),
            resident: vec!["snap-32g".into()],
            resident_bytes: vec![38_654_705_664],
            resident_idle_s: vec![12],
            evicted: vec![
                "porep-32g (55834574848 bytes) released 30 s ago for a snap-32g job".into(),
            ],
            stalled_s: Some(40),
            seen_s_ago: 2,
        };
        let text = worker_lines(&w);
        assert!(text.contains("STALLED for 40 s"), "{text}");
        assert!(
            text.contains("keeps snap-32g loaded: 38.7 GB, last used 12 s ago"),
            "{text}"
        );
        assert!(text.contains("released porep-32g"), "{text}");
        let calm = SeenWorker {
            stalled_s: None,
            ..w
        };
        assert!(!worker_lines(&calm).contains("STALLED"));
    }
}
