//! The PostgreSQL job ledger: the idempotency record behind at-least-once delivery.
//!
//! A job is claimed before it is proved, its proof recorded before its result is published,
//! and marked published before its message is acked. Whatever point a worker dies at, the next
//! delivery finds either nothing to reuse (prove) or the proof (answer from the ledger).

mod fleet;
mod lease;
pub mod migrate;
mod submitted;

use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result};
use backon::{ExponentialBuilder, Retryable};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};

use crate::config::LedgerConfig;
use crate::schema::StageTimes;
pub use fleet::{Announcement, KeptCircuit, SeenWorker, SEEN_RECENTLY};
pub use submitted::{Cancellation, ProofTimes, Registration, Totals};

fn manager_config() -> ManagerConfig {
    ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    }
}

/// The ledger's TLS: the system's root certificates, plus the PEM certificates in
/// `extra_roots` (`C2Q_PG_SSLROOTCERT`, a private CA) when set.
fn tls_connector(
    extra_roots: Option<&std::path::Path>,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};

    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        // A system store with a certificate rustls cannot parse still serves the others.
        let _ = roots.add(cert);
    }
    if let Some(path) = extra_roots {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect())
            .with_context(|| format!("C2Q_PG_SSLROOTCERT: reading {}", path.display()))?;
        if certs.is_empty() {
            anyhow::bail!(
                "C2Q_PG_SSLROOTCERT: {} holds no PEM certificate",
                path.display()
            );
        }
        for cert in certs {
            roots.add(cert).with_context(|| {
                format!("C2Q_PG_SSLROOTCERT: a certificate in {}", path.display())
            })?;
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("initialising TLS")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// A TLS failure anywhere in an error's causes. rustls reports handshake failures inside an
/// `io::Error`, whose `source()` skips the error it wraps, so that wrapper is opened by hand.
fn is_tls_failure(cause: &(dyn std::error::Error + 'static)) -> bool {
    if cause.downcast_ref::<rustls::Error>().is_some() {
        return true;
    }
    cause
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

/// Failures that waiting will not cure: a server certificate that does not verify (or any
/// other TLS failure) and refused credentials. They end the operation at once, so that a
/// misconfigured worker says so instead of retrying through its whole patience.
fn is_permanent(e: &anyhow::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.chain().any(|cause| {
        is_tls_failure(cause)
            || cause
                .downcast_ref::<tokio_postgres::Error>()
                .and_then(|pg| pg.code())
                .is_some_and(|code| {
                    *code == SqlState::INVALID_PASSWORD
                        || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
                })
    })
}

/// What identifies a job and its payload.
#[derive(Clone, Debug)]
pub struct JobIdentity {
    pub job_id: String,
    pub kind: String,
    pub registered_proof: String,
    pub miner_id: u64,
    pub sector_number: u64,
    pub digest: [u8; 32],
}

/// The ledger's answer when a worker starts on a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Prove it; `attempts` counts this start. The claimant now holds the job's lease.
    Prove { attempts: u32 },
    /// Already proved: publish this proof without proving again.
    Proved { proof: Vec<u8>, attempts: u32 },
    /// Another live worker holds the lease and is proving the job now: do not prove it too.
    Busy {
        /// The worker holding the lease, as recorded.
        worker: String,
        /// How much longer its lease lasts unless renewed.
        lease_left: Duration,
    },
    /// The job id is known with a different payload.
    Mismatch,
    /// The job was cancelled (`Ledger::cancel`): do not prove it.
    Cancelled,
}

/// A proof as recorded (`Ledger::record_proof`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedProof {
    /// The proof of record: this one, or the one recorded first.
    pub proof: Vec<u8>,
    /// The job was cancelled while it was proved: its result is not published.
    pub cancelled: bool,
}

/// Who claims a job, and for how long.
#[derive(Clone, Debug)]
pub struct Holder {
    /// The worker's name, recorded in the ledger and in results.
    pub worker: String,
    /// Unique to one worker process, so that a restarted worker with the same name does not
    /// take its dead predecessor's lease for its own.
    pub token: String,
    pub lease: Duration,
}

#[derive(Clone, Debug)]
pub struct LedgerRow {
    pub job_id: String,
    pub status: String,
    pub attempts: i32,
    pub proofs_computed: i32,
    pub worker: Option<String>,
    pub error_kind: Option<String>,
    pub has_proof: bool,
    /// Worker name and process token of the lease, while one is held.
    pub lease_holder: Option<String>,
}

/// Where a job stands (`Ledger::answer`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub state: AnswerState,
    /// Times a worker started on it.
    pub attempts: u32,
    /// A live worker holds its lease: it is being proved now.
    pub leased: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnswerState {
    /// Claimed and not finished, or waiting for a redelivery.
    Pending,
    /// Proved and verified: the proof bytes.
    Proved(Vec<u8>),
    /// Failed, with the error kind and message the worker recorded.
    Failed { kind: String, message: String },
    /// Cancelled (`Ledger::cancel`) and not submitted again since.
    Cancelled,
}

#[derive(Clone)]
pub struct Ledger {
    pool: Pool,
    /// How long one operation keeps retrying through a database outage.
    patience: Duration,
}

impl Ledger {
    /// Connect, create the schema and apply migrations.
    pub async fn connect(cfg: &LedgerConfig) -> Result<Ledger> {
        migrate::check_schema_name(&cfg.schema)?;
        let url = cfg.effective_url();
        let mut pg =
            tokio_postgres::Config::from_str(&url).context("invalid ledger connection string")?;
        if let Some(password) = cfg.password()? {
            pg.password(password);
        }
        pg.options(format!("-c search_path={}", cfg.schema));
        pg.application_name("c2q");
        pg.connect_timeout(Duration::from_secs(5));
        let manager = if pg.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            // `sslmode=require`: TLS, with the server certificate verified against the system
            // roots plus the CA in `C2Q_PG_SSLROOTCERT`, if set.
            let extra_roots = cfg.extra_root_certs();
            Manager::from_config(pg, tls_connector(extra_roots.as_deref())?, manager_config())
        } else {
            // `disable`, and `prefer` (the default) as a plain connection: an unverified
            // "opportunistic" TLS session would only add the appearance of security.
            Manager::from_config(pg, tokio_postgres::NoTls, manager_config())
        };
        let pool = Pool::builder(manager)
            .max_size(cfg.pool_size.max(1))
            .build()
            .context("building the ledger pool")?;
        let ledger = Ledger {
            pool,
            patience: Duration::from_secs(60),
        };
        let schema = cfg.schema.clone();
        ledger
            .retrying(|| async {
                let mut client = ledger
                    .pool
                    .get()
                    .await
                    .context("connecting to PostgreSQL")?;
                migrate::migrate(&mut client, &schema).await
            })
            .await?;
        Ok(ledger)
    }

    /// Retry `op` with backoff through a database restart, then give up visibly.
    async fn retrying<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(5))
            .with_total_delay(Some(self.patience))
            .without_max_times()
            .with_jitter();
        op.retry(backoff)
            .when(|e| !is_permanent(e))
            .notify(|e, wait| {
                tracing::warn!(error = format!("{e:#}"), retry_in = ?wait, "ledger unavailable")
            })
            .await
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.context("connecting to PostgreSQL")
    }

    /// Start (or restart) work on a job and take its lease, or find its proof, or find that
    /// another worker holds it.
    pub async fn claim(&self, id: &JobIdentity, holder: &Holder) -> Result<Claim> {
        // The columns are signed 64-bit: a value beyond them is refused at once, not retried
        // through the patience meant for database outages.
        let context = || format!("ledger: claiming job {}", id.job_id);
        let miner = i64::try_from(id.miner_id)
            .with_context(|| format!("miner id {} does not fit the ledger", id.miner_id))
            .with_context(context)?;
        let sector = i64::try_from(id.sector_number)
            .with_context(|| format!("sector number {} does not fit the ledger", id.sector_number))
            .with_context(context)?;
        self.retrying(|| self.claim_once(id, miner, sector, holder))
            .await
            .with_context(context)
    }

    async fn claim_once(
        &self,
        id: &JobIdentity,
        miner: i64,
        sector: i64,
        holder: &Holder,
    ) -> Result<Claim> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let lease_s = holder.lease.as_secs_f64();
        // Lease times are the database's clock (`now()`), so workers' clocks need not agree.
        let inserted = tx
            .execute(
                "INSERT INTO jobs (job_id, kind, registered_proof, miner_id, sector_number,
                                   c1_digest, status, attempts, worker, started_at,
                                   lease_holder, lease_until)
                 VALUES ($1, $2, $3, $4, $5, $6, 'running', 1, $7, now(),
                         $8, now() + make_interval(secs => $9))
                 ON CONFLICT (job_id) DO NOTHING",
                &[
                    &id.job_id,
                    &id.kind,
                    &id.registered_proof,
                    &miner,
                    &sector,
                    &&id.digest[..],
                    &holder.worker,
                    &holder.token,
                    &lease_s,
                ],
            )
            .await?;
        if inserted == 1 {
            tx.commit().await?;
            return Ok(Claim::Prove { attempts: 1 });
        }
        let row = tx
            .query_one(
                "SELECT c1_digest, status, attempts, proof, worker, lease_holder,
                        greatest(extract(epoch FROM lease_until - now()), 0)::float8
                 FROM jobs WHERE job_id = $1 FOR UPDATE",
                &[&id.job_id],
            )
            .await?;
        let digest: Vec<u8> = row.get(0);
        let status: String = row.get(1);
        let attempts: i32 = row.get(2);
        let proof: Option<Vec<u8>> = row.get(3);
        let worker: Option<String> = row.get(4);
        let lease_holder: Option<String> = row.get(5);
        let lease_left: Option<f64> = row.get(6);
        if digest != id.digest {
            tx.commit().await?;
            return Ok(Claim::Mismatch);
        }
        if status == "cancelled" {
            tx.commit().await?;
            return Ok(Claim::Cancelled);
        }
        if let (Some(proof), "proved" | "published") = (proof, status.as_str()) {
            tx.commit().await?;
            return Ok(Claim::Proved {
                proof,
                attempts: attempts.max(0) as u32,
            });
        }
        let held_by_other = status == "running"
            && lease_holder.as_deref().is_some_and(|h| h != holder.token)
            && lease_left.is_some_and(|s| s > 0.0);
        if held_by_other {
            tx.commit().await?;
            return Ok(Claim::Busy {
                worker: worker.unwrap_or_default(),
                lease_left: Duration::from_secs_f64(lease_left.unwrap_or(0.0)),
            });
        }
        // Never started (queued by a gateway), failed, handed back, or its holder stopped
        // renewing (died): ours.
        let attempts: i32 = tx
            .query_one(
                "UPDATE jobs SET status = 'running', attempts = attempts + 1, worker = $2,
                        started_at = now(), updated_at = now(), error_kind = NULL,
                        error_message = NULL, lease_holder = $3,
                        lease_until = now() + make_interval(secs => $4)
                 WHERE job_id = $1 RETURNING attempts",
                &[&id.job_id, &holder.worker, &holder.token, &lease_s],
            )
            .await?
            .get(0);
        tx.commit().await?;
        Ok(Claim::Prove {
            attempts: attempts.max(0) as u32,
        })
    }

    /// Record a verified proof: from now on the job is answered from the ledger. Returns the
    /// proof of record: this one, or the one recorded first if another worker's lease lapsed
    /// and both proved (every published result then carries the same bytes). The lease ends.
    /// A job cancelled meanwhile keeps the proof but stays cancelled.
    pub async fn record_proof(
        &self,
        job_id: &str,
        proof: &[u8],
        timings_json: &str,
        stages: &StageTimes,
    ) -> Result<RecordedProof> {
        let stages_json = serde_json::to_string(stages).context("encoding the stage times")?;
        self.retrying(|| async {
            let row = self
                .client()
                .await?
                .query_opt(
                    "UPDATE jobs SET
                        proof = CASE WHEN proof IS NOT NULL AND status IN ('proved', 'published')
                                     THEN proof ELSE $2 END,
                        timings = CASE WHEN proof IS NOT NULL AND status IN ('proved', 'published')
                                       THEN timings ELSE CAST($3::text AS jsonb) END,
                        stage_ms = CASE WHEN proof IS NOT NULL AND status IN ('proved', 'published')
                                        THEN stage_ms ELSE CAST($4::text AS jsonb) END,
                        proved_at = CASE WHEN proof IS NOT NULL AND status IN ('proved', 'published')
                                         THEN proved_at ELSE now() END,
                        status = CASE WHEN status IN ('published', 'cancelled') THEN status
                                      ELSE 'proved' END,
                        proofs_computed = proofs_computed + 1, lease_until = NULL,
                        updated_at = now()
                     WHERE job_id = $1 RETURNING proof, status = 'cancelled'",
                    &[&job_id, &proof, &timings_json, &stages_json],
                )
                .await?
                .context("the job's ledger row is gone")?;
            Ok(RecordedProof {
                proof: row.get(0),
                cancelled: row.get(1),
            })
        })
        .await
        .with_context(|| format!("ledger: recording the proof of {job_id}"))
    }

    pub async fn mark_published(&self, job_id: &str) -> Result<()> {
        self.retrying(|| async {
            self.client()
                .await?
                .execute(
                    "UPDATE jobs SET status = 'published', published_at = now(), updated_at = now()
                     WHERE job_id = $1 AND status IN ('proved', 'published')",
                    &[&job_id],
                )
                .await?;
            Ok(())
        })
        .await
        .with_context(|| format!("ledger: marking {job_id} published"))
    }

    /// Record a failure. A proved job keeps its proof and status (e.g. an unroutable reply).
    pub async fn record_failure(&self, job_id: &str, kind: &str, message: &str) -> Result<()> {
        self.retrying(|| async {
            self.client()
                .await?
                .execute(
                    "UPDATE jobs SET error_kind = $2, error_message = $3, updated_at = now(),
                            status = CASE WHEN status = 'running' THEN 'failed' ELSE status END,
                            lease_until = NULL
                     WHERE job_id = $1",
                    &[&job_id, &kind, &message],
                )
                .await?;
            Ok(())
        })
        .await
        .with_context(|| format!("ledger: recording the failure of {job_id}"))
    }

    pub async fn get(&self, job_id: &str) -> Result<Option<LedgerRow>> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT job_id, status, attempts, proofs_computed, worker, error_kind,
                        proof IS NOT NULL,
                        CASE WHEN lease_until > now() THEN lease_holder END
                 FROM jobs WHERE job_id = $1",
                &[&job_id],
            )
            .await
            .with_context(|| format!("ledger: reading {job_id}"))?;
        Ok(row.map(|r| LedgerRow {
            job_id: r.get(0),
            status: r.get(1),
            attempts: r.get(2),
            proofs_computed: r.get(3),
            worker: r.get(4),
            error_kind: r.get(5),
            has_proof: r.get(6),
            lease_holder: r.get(7),
        }))
    }

    /// Where a job stands, for a client waiting on it: `None` for a job id the ledger has not
    /// seen (not yet fetched by any worker).
    pub async fn answer(&self, job_id: &str) -> Result<Option<Answer>> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT status, attempts, proof, coalesce(error_kind, ''),
                        coalesce(error_message, ''), coalesce(lease_until > now(), false)
                 FROM jobs WHERE job_id = $1",
                &[&job_id],
            )
            .await
            .with_context(|| format!("ledger: reading job {job_id}"))?;
        Ok(row.map(|r| {
            let status: String = r.get(0);
            let proof: Option<Vec<u8>> = r.get(2);
            let state = match (status.as_str(), proof) {
                ("proved" | "published", Some(proof)) => AnswerState::Proved(proof),
                ("cancelled", _) => AnswerState::Cancelled,
                ("failed", _) => AnswerState::Failed {
                    kind: r.get(3),
                    message: r.get(4),
                },
                _ => AnswerState::Pending,
            };
            Answer {
                state,
                attempts: r.get::<_, i32>(1).max(0) as u32,
                leased: r.get(5),
            }
        }))
    }

    /// Jobs per status.
    pub async fn counts(&self) -> Result<Vec<(String, i64)>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT status, count(*) FROM jobs GROUP BY status ORDER BY status",
                &[],
            )
            .await
            .context("ledger: counting jobs")?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// Jobs being proved now, under a live lease: `(job_id, worker, started_at)`. A
    /// `running` row without one was handed back or its worker died; it waits for a delivery.
    pub async fn running(&self) -> Result<Vec<(String, Option<String>, String)>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT job_id, worker, coalesce(started_at::text, '') FROM jobs
                 WHERE status = 'running' AND lease_until > now()
                 ORDER BY started_at LIMIT 100",
                &[],
            )
            .await
            .context("ledger: listing running jobs")?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }

    /// Whether the database answers now (for `/readyz`).
    pub async fn ping(&self) -> bool {
        match self.client().await {
            Ok(c) => c.simple_query("SELECT 1").await.is_ok(),
            Err(_) => false,
        }
    }
}
