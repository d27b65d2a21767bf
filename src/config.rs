//! Worker and CLI configuration: a TOML file, then environment overrides.
//!
//! Any key can be overridden as `C2Q__SECTION__KEY=value` (the value is read as TOML, falling
//! back to a plain string). Credentials never live in the file or on the command line: the
//! broker password comes from `C2Q_AMQP_PASSWORD` or the file named by `C2Q_AMQP_PASSWORD_FILE`
//! (or `broker.password_file`), the database password likewise from `C2Q_PG_PASSWORD[_FILE]`.
//!
//! Choices are enums, checked when the configuration is loaded: `pipeline.backend`
//! ([`BackendChoice`]), `pipeline.on_unhealthy` ([`OnUnhealthy`]) and `telemetry.log_format`
//! ([`LogFormat`]). Any other value stops the command before it does anything, naming the key
//! and the values it takes.
//!
//! # Other environment variables
//!
//! Connections and credentials, kept out of the file:
//!
//! | Variable | What it does |
//! |---|---|
//! | `C2Q_CONFIG` | The configuration file, for every command that takes `--config`. |
//! | `C2Q_AMQP_URL` | Replaces `broker.url` ([`BrokerConfig::effective_url`]). |
//! | `C2Q_AMQP_PASSWORD`, `C2Q_AMQP_PASSWORD_FILE` | The broker password ([`BrokerConfig::password`]). |
//! | `C2Q_PG_URL` | Replaces `ledger.url` ([`LedgerConfig::effective_url`]). |
//! | `C2Q_PG_PASSWORD`, `C2Q_PG_PASSWORD_FILE` | The database password ([`LedgerConfig::password`]). |
//! | `C2Q_PG_SSLROOTCERT` | A PEM file of CA certificates the ledger's TLS trusts besides the system's ([`LedgerConfig::extra_root_certs`]). |
//! | `C2Q_GATEWAY_TOKEN`, `C2Q_GATEWAY_TOKEN_FILE` | The gateway's bearer token ([`GatewayConfig::token`]). |
//!
//! # Debugging overrides
//!
//! For diagnosing and tuning the GPU code; a production worker sets none of them. They are
//! read where they act, in `gpu/`, which imports nothing of the crate but `gpu` and `groth16`
//! (so not this module). Each takes effect when a GPU is opened (kernels are compiled then) or
//! when an MSM runs.
//!
//! | Variable | What it does |
//! |---|---|
//! | `C2Q_KERNEL_CACHE` | Directory of compiled kernels (default `$XDG_CACHE_HOME/c2q/kernels`, else `~/.cache/c2q/kernels`). |
//! | `C2Q_KERNELS_PORTABLE` | Any value: the kernels are built with `-DC2Q_PORTABLE`, plain C++ field arithmetic instead of the carry-chain assembly, to rule that out when a GPU disagrees with the CPU. |
//! | `C2Q_KERNEL_DEFINES` | `-DNAME[=VALUE] …` passed to NVRTC: the kernels' tuning macros (`C2Q_ACCUMULATE_BLOCKS`, `C2Q_ACCUMULATE_BLOCKS_G2`, `C2Q_NTT_BLOCKS`, `C2Q_NTT_SPECIALIZE`, `C2Q_NTT_RADIX`, `C2Q_NTT_HI_FIRST`, `C2Q_MUL_SPLIT`, `C2Q_MUL_SUB_SPLIT`, `C2Q_MUL_WIDE`, `C2Q_FR_REDC`, `C2Q_SQR`, `C2Q_LAZY`, `C2Q_FP_INLINE`, `C2Q_MSM_PREFETCH`; `kernels/README.md`), so one binary can time variants. The kernel cache keys on them. |
//! | `C2Q_MSM_WINDOW` | The MSM window in bits (clamped to 3–22) instead of the one `window_bits` chooses for the MSM's size (for timing runs). |
//! | `C2Q_PLACEMENT` | `whole`: a circuit's points are resident whole or not at all, as before placement by value (`gpu::placement`), for comparison runs. |
//! | `C2Q_STREAMED_PIECES` | `N` (2 to 16): the pieces a streamed start's working-memory estimate takes its largest MSMs in, for every streamed start (at run time pieces size themselves to what is free). Unset, c2q takes 4, or 8 where only that keeps the circuit's recorded constraints on the GPU (a 24 GB card at 32 GiB). |
//! | `C2Q_SET_ASIDE_BUFFERS` | `N` (0 to 3, default 3): the domain-sized device buffers a streamed start from CPU-made A, B, C sets aside at its end for the next start's H; 0 allocates them when the next start needs them, for comparisons. |
//! | `C2Q_MSM_TOGETHER` | `0`: H's and L's streamed multiexps are summed one after the other instead of their pieces in turns (`gpu::msm::msm_streamed_together`), for comparisons. |
//! | `C2Q_MSM_CONT_GROUP` | `N` (1 to 1024, default 16): how many continuation slots of one long bucket `msm_cont_fold` sums together; 1 turns the fold off. |
//! | `C2Q_MSM_SORT_BLOCK` | `N` (32 to 256, a multiple of 32; default 128): threads per block of the MSM's sort kernels, which run beside the bucket accumulation (for timing runs). |
//! | `C2Q_MSM_SORT_BESIDE` | `N` (0 to 64, default 2): blocks per SM of the MSM's sort kernels while a window's bucket accumulation runs beside them; 0: as many as fit, so that the sort takes every SM slot the accumulation's blocks leave and the two run one after the other (for timing runs). |
//! | `C2Q_MSM_TRACE` | Any value: each MSM phase is synchronised and timed (so phases no longer overlap), and the totals are printed to stderr. |
//! | `C2Q_WITNESS` | `native` or `gadgets`: the ignored timing test `witness_of_a_32gib_partition_timed` times only that way of computing the witness; `native`, `gadgets` or `sequential` (or a comma-separated list): likewise for `window_post_witness_of_a_32gib_partition_timed`. |
//!
//! `C2Q_PORTABLE` and `C2Q_SHARED_PER_SM` are not environment variables: they are macros c2q
//! defines for the kernels itself (the first when `C2Q_KERNELS_PORTABLE` is set, the second
//! from the GPU's shared memory per SM).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::gpu::BackendChoice;
use crate::schema::Limits;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Name recorded in the ledger and results; defaults to `hostname:pid`.
    pub worker_name: Option<String>,
    pub broker: BrokerConfig,
    pub ledger: LedgerConfig,
    pub limits: Limits,
    pub gate: GateConfig,
    pub retry: RetryConfig,
    pub telemetry: TelemetryConfig,
    pub pipeline: PipelineConfig,
    pub lease: LeaseConfig,
    pub params: ParamsConfig,
    pub gateway: GatewayConfig,
}

/// `c2q gateway`: the doors existing pipelines use, turning requests into ordinary jobs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Where the HTTP door (lotus's remote C2) listens; empty: no HTTP door.
    pub http_listen: String,
    /// Where the gRPC door (Curio's proving-engine protocol, `cuzk.v1.ProvingEngine`) listens;
    /// empty: no gRPC door. Curio's `[Cuzk] Address` names it.
    pub grpc_listen: String,
    /// The path lotus posts `RemoteCommit2Params` to (its `RemoteCommit2Endpoint` ends with it).
    pub lotus_path: String,
    /// Largest request body accepted, checked against `Content-Length` (HTTP) or the message's
    /// length prefix (gRPC) before reading (a 32 GiB sector's C1 is ~51 MB, ~68 MB in base64).
    pub max_body_bytes: u64,
    /// Requests one client (IP address) may have open at once, over both doors; more are
    /// answered 429 (HTTP) or `RESOURCE_EXHAUSTED` (gRPC).
    pub max_requests_per_client: u32,
    /// How long a request waits for its proof before it is answered 504 (HTTP) or `TIMEOUT`
    /// (gRPC `Prove`; `AwaitProof` has its own `timeout_ms`). The job goes on; the same request
    /// later is answered from the ledger.
    pub wait_s: u64,
    /// PEM certificate chain and private key: with both, both doors speak TLS only.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// File holding the bearer token clients must present; `C2Q_GATEWAY_TOKEN` (or the file
    /// named by `C2Q_GATEWAY_TOKEN_FILE`) takes precedence. Without any token the gateway
    /// refuses to start unless it listens on a loopback address only.
    pub token_file: Option<PathBuf>,
    /// Take gRPC calls without a token. Curio's client sends none: set this for a gateway on
    /// Curio's host, with `grpc_listen` on a loopback address (the gateway refuses to start
    /// with it set on any other). The HTTP door still wants the token.
    pub grpc_allow_no_token: bool,
    /// The deadline a WindowPoSt partition's job gets, in seconds from its submission: a job
    /// still waiting then is answered failed (`deadline_exceeded`) instead of proved late. A
    /// WindowPoSt must land within its deadline's 30-minute window.
    pub window_post_deadline_s: u64,
    /// The same for a WinningPoSt, whose block is due within its 30-second epoch.
    pub winning_post_deadline_s: u64,
}

impl GatewayConfig {
    /// The deadline of a PoSt job submitted at `now_unix_ms` (`window`: a WindowPoSt partition,
    /// else a WinningPoSt).
    pub fn post_deadline_unix_ms(&self, window: bool, now_unix_ms: u64) -> u64 {
        let seconds = if window {
            self.window_post_deadline_s
        } else {
            self.winning_post_deadline_s
        };
        now_unix_ms.saturating_add(seconds.saturating_mul(1000))
    }
    /// The bearer token: `$C2Q_GATEWAY_TOKEN`, else the file named by
    /// `$C2Q_GATEWAY_TOKEN_FILE`, else `gateway.token_file`; `None` when none is set or it is
    /// empty.
    pub fn token(&self) -> Result<Option<String>> {
        Ok(secret("C2Q_GATEWAY_TOKEN", self.token_file.as_deref())?.filter(|t| !t.is_empty()))
    }
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            http_listen: "127.0.0.1:9821".into(),
            grpc_listen: "127.0.0.1:9820".into(),
            lotus_path: "/remote-commit2".into(),
            max_body_bytes: 128 << 20,
            max_requests_per_client: 16,
            wait_s: 3 * 3600,
            tls_cert: None,
            tls_key: None,
            token_file: None,
            grpc_allow_no_token: false,
            window_post_deadline_s: 30 * 60,
            winning_post_deadline_s: 30,
        }
    }
}

/// The parameter files the worker checks before it takes jobs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ParamsConfig {
    /// Registered proofs (`StackedDrg32GiBV1_1`), sector sizes (`32GiB`) or SnapDeals update
    /// circuits (`snap-32GiB`) this worker serves:
    /// at start, each one's `.params` and `.vk` must be in `$FIL_PROOFS_PARAMETER_CACHE` with
    /// the length its counts declare, or the worker refuses to start and names the file. Empty
    /// (the default): nothing is checked at start, and a job whose parameters are missing
    /// fails when it loads them. Digests are `c2q params check`'s job (minutes per large file).
    pub proofs: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrokerConfig {
    /// `amqp://host:port/vhost` or `amqps://...`; credentials are added from the environment.
    pub url: String,
    pub username: String,
    pub password_file: Option<PathBuf>,
    /// Prefix shared by every exchange and queue name, so fleets and tests can share a broker.
    pub prefix: String,
    /// `x-delivery-limit` of the job queue: deliveries before a job that keeps killing workers
    /// is dead-lettered.
    pub delivery_limit: u32,
    /// How long the fetch loop sleeps when the job queue is empty.
    pub poll_interval_ms: u64,
    /// AMQP heartbeat in seconds.
    pub heartbeat_s: u16,
}

impl BrokerConfig {
    /// The broker URL: `$C2Q_AMQP_URL` when set, else `broker.url`. A URL that holds
    /// credentials can then stay out of the file.
    pub fn effective_url(&self) -> String {
        std::env::var("C2Q_AMQP_URL").unwrap_or_else(|_| self.url.clone())
    }

    /// The broker password: `$C2Q_AMQP_PASSWORD`, else the file named by
    /// `$C2Q_AMQP_PASSWORD_FILE`, else the file named by `broker.password_file`.
    pub fn password(&self) -> Result<Option<String>> {
        secret("C2Q_AMQP_PASSWORD", self.password_file.as_deref())
    }
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            url: "amqp://127.0.0.1:5672/%2f".into(),
            username: "guest".into(),
            password_file: None,
            prefix: "c2q".into(),
            delivery_limit: 5,
            poll_interval_ms: 250,
            heartbeat_s: 30,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LedgerConfig {
    /// libpq-style connection string or URL without password (`sslmode=require` for TLS).
    pub url: String,
    pub password_file: Option<PathBuf>,
    /// Postgres schema holding the ledger tables (created if missing).
    pub schema: String,
    pub pool_size: usize,
}

impl LedgerConfig {
    /// The connection string: `$C2Q_PG_URL` when set, else `ledger.url`.
    pub fn effective_url(&self) -> String {
        std::env::var("C2Q_PG_URL").unwrap_or_else(|_| self.url.clone())
    }

    /// The database password: `$C2Q_PG_PASSWORD`, else the file named by
    /// `$C2Q_PG_PASSWORD_FILE`, else the file named by `ledger.password_file`.
    pub fn password(&self) -> Result<Option<String>> {
        secret("C2Q_PG_PASSWORD", self.password_file.as_deref())
    }

    /// A PEM file of CA certificates the ledger's TLS trusts besides the system's:
    /// `$C2Q_PG_SSLROOTCERT`.
    pub fn extra_root_certs(&self) -> Option<PathBuf> {
        std::env::var_os("C2Q_PG_SSLROOTCERT").map(PathBuf::from)
    }
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            url: "host=127.0.0.1 port=5432 user=postgres dbname=test".into(),
            password_file: None,
            schema: "c2q".into(),
            pool_size: 8,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GateConfig {
    /// Memory budget in bytes; default: machine or cgroup memory minus `margin_bytes`.
    pub budget_bytes: Option<u64>,
    /// Kept free for the OS and other processes; default: 10% of memory, at least 1 GiB.
    pub margin_bytes: Option<u64>,
    /// The worker's own footprint outside jobs (runtime, buffers, code); default 256 MiB and
    /// each GPU's pinned staging buffers (128 MiB).
    pub baseline_bytes: Option<u64>,
    /// Kept free for urgent (PoSt) jobs while the worker proves others; default: the largest
    /// worst case, parameters included, of the urgent classes it serves; 0: no reserve.
    pub urgent_reserve_bytes: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryConfig {
    /// Retries of a transient failure before the job is dead-lettered.
    pub max_retries: u32,
    /// Delay before the first retry; doubles each time, with ±50% jitter.
    pub base_delay_ms: u64,
    pub max_delay_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 5,
            base_delay_ms: 5_000,
            max_delay_ms: 600_000,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// `/metrics`, `/healthz`, `/readyz`; localhost unless configured otherwise. Empty: off.
    pub listen: String,
    /// `human` or `json`.
    pub log_format: LogFormat,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            listen: "127.0.0.1:9464".into(),
            log_format: LogFormat::Human,
        }
    }
}

/// `telemetry.log_format`: how log lines are written to stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// One readable line per event (coloured on a terminal).
    #[default]
    Human,
    /// One JSON object per line, for log collectors.
    Json,
}

/// `pipeline.on_unhealthy`: what a worker whose backend is broken does once it has handed its
/// jobs back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnhealthy {
    /// Exit non-zero, so that systemd (`Restart=on-failure`) starts it again with a fresh GPU
    /// context.
    #[default]
    Exit,
    /// Stay up and not ready (`/readyz` 503) until an operator restarts it.
    Stay,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// `auto` (CUDA when a usable GPU is present, else CPU), `cpu` or `cuda` (in any case, as
    /// `--backend` takes them).
    #[serde(with = "backend_choice")]
    pub backend: BackendChoice,
    /// Which GPUs the CUDA backend proves on; each gets its own proving-start thread.
    pub devices: Vec<usize>,
    /// Device memory c2q may use on each GPU, in GiB (default: all of it), for a GPU shared
    /// with other work. Parameters stay on the GPU between proofs only if they fit within it
    /// beside a proving start; otherwise they are streamed from host memory for every MSM.
    pub gpu_memory_gib: Option<f64>,
    /// Partitions whose witnesses are computed at once. Each partition's witness is itself
    /// computed on several threads (one per challenge, on the shared thread pool) and waits in
    /// compact form (~0.4 bytes per variable, ~100 MB for a 32 GiB sector), so two keep the
    /// pool busy between partitions.
    pub synthesis_threads: usize,
    /// Threads running the G2 finalizer, so it keeps up with the backend.
    pub finalizer_threads: usize,
    /// Consecutive proving-start failures (no success in between) after which the backend
    /// counts as broken: the worker stops taking jobs and hands back the ones it holds.
    pub max_backend_failures: u32,
    /// What a worker with a broken backend does once it has handed its jobs back: `exit`
    /// (non-zero, so systemd's `Restart=on-failure` starts it again with a fresh GPU context)
    /// or `stay` (up, `/readyz` 503, until an operator restarts it).
    pub on_unhealthy: OnUnhealthy,
    /// Jobs this worker holds fetched but not yet begun (handed to the pipeline), at most;
    /// default: the partitions the pipeline keeps in flight (`2 × GPUs + 1`). The memory gate
    /// alone would fetch every job its budget admits: dozens of small jobs could then wait
    /// behind one long proof while other workers idle, and a worker that dies would strand
    /// them all until their leases lapse. At least 1.
    pub prefetch: Option<usize>,
    /// Test-only fault injection: `backend-error` makes every proving start fail;
    /// `kill-after-publish` sends SIGKILL to the worker itself between the confirmed publish
    /// of a result and the ack of its job.
    pub fault: Option<String>,
}

/// A GiB figure from the configuration or the command line, in bytes.
pub fn gib_to_bytes(gib: f64) -> Result<usize> {
    if !gib.is_finite() || gib <= 0.0 {
        bail!("a GPU memory limit must be a positive number of GiB, not {gib}");
    }
    Ok((gib * (1u64 << 30) as f64) as usize)
}

impl PipelineConfig {
    /// `gpu_memory_gib` in bytes.
    pub fn gpu_memory_limit(&self) -> Result<Option<usize>> {
        self.gpu_memory_gib
            .map(gib_to_bytes)
            .transpose()
            .context("pipeline.gpu_memory_gib")
    }

    pub fn synthesizers(&self) -> usize {
        self.synthesis_threads.max(1)
    }

    /// Full-size partitions of one job the pipeline keeps alive with these devices, what the
    /// memory gate reserves for (the pipeline's figure: [`crate::pipeline::partitions_in_flight`]).
    pub fn partitions_in_flight(&self) -> u64 {
        crate::pipeline::partitions_in_flight(self.devices.len())
    }

    /// `prefetch`, or its default: jobs fetched and not yet begun that the worker holds.
    pub fn prefetch_jobs(&self) -> Result<usize> {
        match self.prefetch {
            Some(0) => bail!(
                "pipeline.prefetch must be at least 1 (a worker that may fetch no job proves none)"
            ),
            Some(n) => Ok(n),
            None => Ok(self.partitions_in_flight() as usize),
        }
    }
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            backend: BackendChoice::Auto,
            devices: vec![0],
            gpu_memory_gib: None,
            synthesis_threads: 2,
            finalizer_threads: 1,
            max_backend_failures: 3,
            on_unhealthy: OnUnhealthy::Exit,
            prefetch: None,
            fault: None,
        }
    }
}

/// The ledger lease a worker holds on a job while proving it, so that no second worker proves
/// the same job at the same time.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaseConfig {
    /// How long a lease lasts without renewal: after a worker dies (kill -9, power loss),
    /// another worker takes its job over once this has passed.
    pub duration_s: u64,
    /// How often a proving worker renews its leases; a fraction of `duration_s`, so that a
    /// slow database round or two does not lose the lease.
    pub renew_s: u64,
    /// How long a delivery of a job that another worker is proving waits in the delay queue
    /// before it is looked at again (then answered from the ledger once the proof is there).
    pub busy_delay_ms: u64,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig {
            duration_s: 60,
            renew_s: 15,
            busy_delay_ms: 5_000,
        }
    }
}

impl LeaseConfig {
    pub fn check(&self) -> Result<()> {
        if self.renew_s == 0 || self.renew_s.saturating_mul(2) > self.duration_s {
            bail!(
                "lease.renew_s ({}) must be at least 1 and at most half of lease.duration_s ({})",
                self.renew_s,
                self.duration_s
            );
        }
        if self.busy_delay_ms == 0 {
            bail!("lease.busy_delay_ms must be positive");
        }
        Ok(())
    }
}

impl Config {
    /// Read the file (if any) and apply the environment.
    pub fn load(path: Option<&Path>) -> Result<Config> {
        let mut value = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("reading config {}", p.display()))?;
                text.parse::<toml::Table>()
                    .with_context(|| format!("parsing config {}", p.display()))?
            }
            None => toml::Table::new(),
        };
        apply_env(&mut value, std::env::vars())?;
        Config::from_table(value)
    }

    /// The configuration a file's table (with the environment applied) describes. Choices are
    /// checked here, so that a bad value stops the command at once, naming the key and the
    /// values it takes ("unknown variant \`gpu\`, expected one of \`auto\`, \`cpu\`,
    /// \`cuda\` in \`pipeline.backend\`"), rather than when the value is first used.
    fn from_table(table: toml::Table) -> Result<Config> {
        toml::Value::Table(table)
            .try_into()
            .context("invalid configuration")
    }

    pub fn worker_name(&self) -> String {
        self.worker_name.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "worker".into());
            format!("{host}:{}", std::process::id())
        })
    }
}

/// `pipeline.backend` in the configuration: the names `--backend` takes, in any case (as it
/// takes them), so a file or `C2Q__PIPELINE__BACKEND` means what the command-line flag means.
mod backend_choice {
    use clap::ValueEnum;
    use serde::{de::Error as _, ser::Error as _, Deserialize, Deserializer, Serializer};

    use crate::gpu::BackendChoice;

    /// What the error for any other value lists.
    pub(super) const NAMES: &[&str] = &["auto", "cpu", "cuda"];

    pub fn serialize<S: Serializer>(choice: &BackendChoice, s: S) -> Result<S::Ok, S::Error> {
        let value = choice
            .to_possible_value()
            .ok_or_else(|| S::Error::custom("a backend choice without a name"))?;
        s.serialize_str(value.get_name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BackendChoice, D::Error> {
        let text = String::deserialize(d)?;
        BackendChoice::from_str(&text, true).map_err(|_| D::Error::unknown_variant(&text, NAMES))
    }
}

/// `C2Q__A__B=v` sets key `b` of table `a`.
fn apply_env(table: &mut toml::Table, vars: impl Iterator<Item = (String, String)>) -> Result<()> {
    for (key, raw) in vars {
        let Some(path) = key.strip_prefix("C2Q__") else {
            continue;
        };
        let parts: Vec<String> = path.split("__").map(|p| p.to_ascii_lowercase()).collect();
        let Some((last, sections)) = parts.split_last() else {
            continue;
        };
        let mut t = &mut *table;
        for s in sections {
            let entry = t
                .entry(s.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            t = match entry {
                toml::Value::Table(inner) => inner,
                _ => bail!("{key}: `{s}` is not a section"),
            };
        }
        let value = format!("x = {raw}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("x"))
            .unwrap_or(toml::Value::String(raw));
        t.insert(last.clone(), value);
    }
    Ok(())
}

/// A secret from `$VAR`, else from the file named by `$VAR_FILE`, else from `file`.
pub fn secret(var: &str, file: Option<&Path>) -> Result<Option<String>> {
    if let Ok(v) = std::env::var(var) {
        return Ok(Some(v));
    }
    let from_env = std::env::var_os(format!("{var}_FILE")).map(PathBuf::from);
    match from_env.as_deref().or(file) {
        Some(p) => {
            let s = std::fs::read_to_string(p)
                .with_context(|| format!("reading secret file {}", p.display()))?;
            Ok(Some(s.trim_end_matches(['\n', '\r']).to_string()))
        }
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_memory_limits_are_positive_gib() {
        assert_eq!(gib_to_bytes(1.5).unwrap(), 3 << 29);
        for bad in [0.0, -2.0, f64::NAN, f64::INFINITY] {
            assert!(gib_to_bytes(bad).is_err(), "{bad}");
        }
        let cfg = PipelineConfig {
            gpu_memory_gib: Some(0.0),
            ..PipelineConfig::default()
        };
        let err = format!("{:#}", cfg.gpu_memory_limit().unwrap_err());
        assert!(err.contains("pipeline.gpu_memory_gib"), "{err}");
        assert_eq!(PipelineConfig::default().gpu_memory_limit().unwrap(), None);
    }

    #[test]
    fn env_overrides_nested_keys_with_typed_values() {
        let mut t: toml::Table = "[broker]\nprefix = \"a\"\n".parse().unwrap();
        let vars = vec![
            ("C2Q__BROKER__PREFIX".to_string(), "b".to_string()),
            ("C2Q__BROKER__DELIVERY_LIMIT".to_string(), "9".to_string()),
            ("C2Q__GATE__BUDGET_BYTES".to_string(), "1024".to_string()),
            ("OTHER".to_string(), "x".to_string()),
        ];
        apply_env(&mut t, vars.into_iter()).unwrap();
        let c: Config = toml::Value::Table(t).try_into().unwrap();
        assert_eq!(c.broker.prefix, "b");
        assert_eq!(c.broker.delivery_limit, 9);
        assert_eq!(c.gate.budget_bytes, Some(1024));
    }

    #[test]
    fn lease_renewal_must_be_a_fraction_of_the_lease() {
        assert!(LeaseConfig::default().check().is_ok());
        for renew_s in [0, 31, 60] {
            let l = LeaseConfig {
                renew_s,
                ..LeaseConfig::default()
            };
            assert!(l.check().is_err(), "renew_s {renew_s}");
        }
    }

    #[test]
    fn prefetch_defaults_to_the_partitions_in_flight_and_is_never_zero() {
        let one_gpu = PipelineConfig::default();
        assert_eq!(one_gpu.prefetch_jobs().unwrap(), 3);
        let two_gpus = PipelineConfig {
            devices: vec![0, 1],
            ..PipelineConfig::default()
        };
        assert_eq!(two_gpus.prefetch_jobs().unwrap(), 5);
        let set = |prefetch| PipelineConfig {
            prefetch: Some(prefetch),
            ..PipelineConfig::default()
        };
        assert_eq!(set(1).prefetch_jobs().unwrap(), 1);
        let err = set(0).prefetch_jobs().unwrap_err().to_string();
        assert!(err.contains("pipeline.prefetch"), "{err}");
    }

    /// The error for a bad choice, as `c2q` prints it.
    fn load_error(text: &str) -> String {
        let table: toml::Table = text.parse().unwrap();
        format!("{:#}", Config::from_table(table).unwrap_err())
    }

    #[test]
    fn a_bad_choice_is_refused_at_load_naming_the_key_and_the_values() {
        let err = load_error("[pipeline]\nbackend = \"gpu\"\n");
        assert!(err.contains("pipeline.backend"), "{err}");
        assert!(
            err.contains("expected one of `auto`, `cpu`, `cuda`"),
            "{err}"
        );
        assert!(err.contains("`gpu`"), "{err}");

        let err = load_error("[pipeline]\non_unhealthy = \"restart\"\n");
        assert!(err.contains("pipeline.on_unhealthy"), "{err}");
        assert!(err.contains("expected `exit` or `stay`"), "{err}");

        let err = load_error("[telemetry]\nlog_format = \"text\"\n");
        assert!(err.contains("telemetry.log_format"), "{err}");
        assert!(err.contains("expected `human` or `json`"), "{err}");
    }

    /// The table of no file with `vars` as the environment.
    fn from_env(vars: &[(&str, &str)]) -> toml::Table {
        let mut t = toml::Table::new();
        let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        apply_env(&mut t, vars).unwrap();
        t
    }

    #[test]
    fn a_bad_choice_in_the_environment_is_refused_too() {
        let t = from_env(&[("C2Q__PIPELINE__ON_UNHEALTHY", "Exit")]);
        let err = format!("{:#}", Config::from_table(t).unwrap_err());
        assert!(err.contains("pipeline.on_unhealthy"), "{err}");
    }

    #[test]
    fn choices_are_spelled_as_before() {
        let c = Config::default();
        assert_eq!(c.pipeline.backend, BackendChoice::Auto);
        assert_eq!(c.pipeline.on_unhealthy, OnUnhealthy::Exit);
        assert_eq!(c.telemetry.log_format, LogFormat::Human);

        let text = "[pipeline]\nbackend = \"cpu\"\non_unhealthy = \"stay\"\n\
                    [telemetry]\nlog_format = \"json\"\n";
        let c = Config::from_table(text.parse().unwrap()).unwrap();
        assert_eq!(c.pipeline.backend, BackendChoice::Cpu);
        assert_eq!(c.pipeline.on_unhealthy, OnUnhealthy::Stay);
        assert_eq!(c.telemetry.log_format, LogFormat::Json);

        // The backend takes `--backend`'s names in any case, as it always has; unquoted in
        // the environment (not TOML, so read as a plain string).
        let t = from_env(&[
            ("C2Q__PIPELINE__BACKEND", "CUDA"),
            ("C2Q__TELEMETRY__LOG_FORMAT", "json"),
        ]);
        let c = Config::from_table(t).unwrap();
        assert_eq!(c.pipeline.backend, BackendChoice::Cuda);
        assert_eq!(c.telemetry.log_format, LogFormat::Json);

        // Written back as they are read.
        let written = toml::to_string(&c).unwrap();
        assert!(written.contains("backend = \"cuda\""), "{written}");
        assert!(written.contains("log_format = \"json\""), "{written}");
        assert!(written.contains("on_unhealthy = \"exit\""), "{written}");
    }

    #[test]
    fn the_example_configuration_loads() {
        let text = include_str!("../compose/worker.toml");
        let c = Config::from_table(text.parse().unwrap()).unwrap();
        assert_eq!(c.pipeline.on_unhealthy, OnUnhealthy::Exit);
        assert_eq!(c.telemetry.log_format, LogFormat::Json);
    }

    #[test]
    fn the_backend_names_are_the_command_line_names() {
        use clap::ValueEnum;
        let flags: Vec<String> = BackendChoice::value_variants()
            .iter()
            .filter_map(|c| c.to_possible_value())
            .map(|v| v.get_name().to_string())
            .collect();
        assert_eq!(flags, backend_choice::NAMES);
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let t: toml::Table = "[broker]\npasword = \"x\"\n".parse().unwrap();
        assert!(toml::Value::Table(t).try_into::<Config>().is_err());
    }
}
