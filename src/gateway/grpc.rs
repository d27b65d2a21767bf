//! The gRPC door: Curio's proving-engine protocol (`cuzk.v1.ProvingEngine`, written in
//! `proto/cuzk/v1/proving.proto` with the same package, service, methods and field numbers), so
//! that a Curio whose `[Cuzk] Address` names the gateway sends its PoRep C2 here unchanged.
//!
//! - `SubmitProof` / `AwaitProof` / `Prove`: every kind Curio sends: PoRep C2
//!   (`POREP_SEAL_COMMIT`), SnapDeals (`SNAP_DEALS_UPDATE`), a WindowPoSt partition
//!   (`WINDOW_POST_PARTITION`) and WinningPoSt (`WINNING_POST`). `request_id` is any UTF-8
//!   text up to 512 bytes, mapped to a job id as [`super::request_id`] says. For PoRep and
//!   SnapDeals the same request id with the same payload is the same job (answered from the
//!   ledger once proved) and with another payload is refused `ALREADY_EXISTS`. Curio sends
//!   every partition of a deadline under one request id, so a PoSt job's id also carries its
//!   payload's digest: another partition is another job, the same partition again the same
//!   job. `AwaitProof` and `CancelProof` take the job id or the request id (the job asked for
//!   last under it). A proof's reply carries its times (`total_ms`, `queue_wait_ms`,
//!   `srs_load_ms`, `synthesis_ms`, `gpu_compute_ms`) from the ledger.
//! - `HIGH` and `CRITICAL` jobs go to their class's urgent queue, which workers empty first.
//! - `CancelProof`, `GetStatus`, `GetMetrics`, `PreloadSRS`, `EvictSRS`: answered from the
//!   ledger and the broker, for the fleet (see each method).
//!
//! Every call presents the bearer token when one is configured (`authorization` metadata);
//! calls that wait (`SubmitProof`, `AwaitProof`, `Prove`) count against the client's limit of
//! open requests; a message over `gateway.max_body_bytes` is refused `OUT_OF_RANGE` from its
//! length prefix, before it is read.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::extract::ConnectInfo;
use axum::Router;
use tonic::{Code, Request, Response, Status};

use super::job::{
    porep_job, post_job, proof_from_number, snap_job, PartitionProofs, PorepRequest, PostRequest,
    Refusal, SnapRequest,
};
use super::listener::{Incoming, Peer};
use super::request_id::RequestId;
use super::{Gateway, OpenRequest, Submitted, Urgency, Waited};
use crate::broker::UNSORTED;
use crate::classes::SizeClass;
use crate::ledger::{Cancellation, SeenWorker, SEEN_RECENTLY};
use crate::schema::job::is_valid_job_id;
use crate::schema::DecodedJob;

/// The messages and the service trait generated from `proto/cuzk/v1/proving.proto`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod proto {
    tonic::include_proto!("cuzk.v1");
}

use proto::await_proof_response::Status as ProofStatus;
use proto::proving_engine_server::{ProvingEngine, ProvingEngineServer};
use proto::*;

/// Serve the gRPC door on `incoming` until the gateway stops.
pub(super) async fn serve(gateway: Arc<Gateway>, incoming: Incoming, tls: bool) -> Result<()> {
    let addr =
        axum::serve::Listener::local_addr(&incoming).context("gateway: the bound address")?;
    let authenticated = gateway.token.is_some() && !gateway.cfg.grpc_allow_no_token;
    tracing::info!(addr = %addr, tls, authenticated,
        service = "cuzk.v1.ProvingEngine", "gateway grpc listening");
    let limit = usize::try_from(gateway.cfg.max_body_bytes).unwrap_or(usize::MAX);
    let service = ProvingEngineServer::new(Door {
        gateway: gateway.clone(),
    })
    .max_decoding_message_size(limit)
    .max_encoding_message_size(usize::MAX);
    let counted = gateway.clone();
    let app = Router::new()
        .fallback_service(service)
        // Refusals tonic makes before a method runs (a message over the size limit) are
        // counted here, from the status they carry.
        .layer(axum::middleware::map_response(
            move |response: axum::response::Response| {
                let gateway = counted.clone();
                async move {
                    let status = response
                        .headers()
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok());
                    if status == Some("11") {
                        gateway.count("grpc", "too_large");
                    }
                    response
                }
            },
        ));
    axum::serve(incoming, app.into_make_service_with_connect_info::<Peer>())
        .with_graceful_shutdown(gateway.stop.clone().cancelled_owned())
        .await
        .context("gateway: serving gRPC")
}

/// The `ProvingEngine` service over the gateway.
struct Door {
    gateway: Arc<Gateway>,
}

/// A refused or failed call, counted under `outcome` in `c2q_gateway_requests_total`.
struct Refused {
    outcome: &'static str,
    status: Status,
}

impl Refused {
    fn new(outcome: &'static str, code: Code, message: impl Into<String>) -> Refused {
        Refused {
            outcome,
            status: Status::new(code, message),
        }
    }

    fn unavailable(e: &anyhow::Error) -> Refused {
        Refused::new("unavailable", Code::Unavailable, format!("{e:#}"))
    }
}

impl Door {
    /// The token check every call makes (none with `gateway.grpc_allow_no_token`, which is
    /// allowed on a loopback address only).
    fn authorize<T>(&self, request: &Request<T>) -> Result<(), Refused> {
        if self.gateway.cfg.grpc_allow_no_token {
            return Ok(());
        }
        let headers = request.metadata().clone().into_headers();
        match self.gateway.authorized(&headers) {
            true => Ok(()),
            false => Err(Refused::new(
                "unauthorized",
                Code::Unauthenticated,
                "missing or wrong bearer token (metadata `authorization: Bearer <token>`)",
            )),
        }
    }

    /// The token check, and a slot among the client's open requests (calls that wait).
    fn admit<T>(&self, request: &Request<T>) -> Result<OpenRequest, Refused> {
        self.authorize(request)?;
        let peer = request
            .extensions()
            .get::<ConnectInfo<Peer>>()
            .map(|ConnectInfo(Peer(addr))| addr.ip())
            .ok_or_else(|| {
                Refused::new("refused", Code::Internal, "the client's address is unknown")
            })?;
        self.gateway.open_request(peer).ok_or_else(|| {
            Refused::new(
                "too_many_requests",
                Code::ResourceExhausted,
                format!(
                    "this client already has {} requests open (gateway.max_requests_per_client)",
                    self.gateway.cfg.max_requests_per_client
                ),
            )
        })
    }

    /// Count a call's outcome and log it; the reply as tonic wants it.
    fn finish<T>(
        &self,
        method: &'static str,
        started: Instant,
        job_id: &str,
        result: Result<(T, &'static str), Refused>,
    ) -> Result<Response<T>, Status> {
        let outcome = match &result {
            Ok((_, outcome)) => *outcome,
            Err(refused) => refused.outcome,
        };
        self.gateway.count("grpc", outcome);
        tracing::info!(
            method,
            job_id,
            outcome,
            seconds = started.elapsed().as_secs_f64(),
            "gateway: grpc call"
        );
        match result {
            Ok((reply, _)) => Ok(Response::new(reply)),
            Err(refused) => Err(refused.status),
        }
    }

    /// Check a submission and build its job (off the async threads: a 32 GiB C1 takes seconds).
    async fn job_of(&self, submit: SubmitProofRequest) -> Result<Asked, Refused> {
        let request_id = RequestId::parse(&submit.request_id)
            .map_err(|why| Refused::new("malformed", Code::InvalidArgument, why))?;
        let urgency = urgency_of(submit.priority);
        let job = self.checked_job(submit, &request_id).await?;
        Ok(Asked {
            job,
            urgency,
            request_id,
        })
    }

    /// The job a submission asks for, checked as a worker will check it.
    async fn checked_job(
        &self,
        submit: SubmitProofRequest,
        request_id: &RequestId,
    ) -> Result<DecodedJob, Refused> {
        let kind = ProofKind::try_from(submit.proof_kind).unwrap_or(ProofKind::Unspecified);
        match kind {
            ProofKind::PorepSealCommit => {}
            ProofKind::SnapDealsUpdate => return self.snap_job_of(submit, request_id).await,
            ProofKind::WindowPostPartition => {
                return self.post_job_of(submit, true, request_id).await
            }
            ProofKind::WinningPost => return self.post_job_of(submit, false, request_id).await,
            ProofKind::Unspecified => {
                return Err(Refused::new(
                    "malformed",
                    Code::InvalidArgument,
                    "proof_kind is unset: c2q proves POREP_SEAL_COMMIT, SNAP_DEALS_UPDATE, \
                     WINDOW_POST_PARTITION and WINNING_POST",
                ))
            }
        }
        let malformed = |why: String| Refused::new("malformed", Code::InvalidArgument, why);
        let proof = proof_from_number(submit.registered_proof).ok_or_else(|| {
            malformed(format!(
                "registered_proof {} is not a registered PoRep proof (0 to 19)",
                submit.registered_proof
            ))
        })?;
        let size = u64::from(proof.sector_size());
        if submit.sector_size != 0 && submit.sector_size != size {
            return Err(malformed(format!(
                "sector_size {} disagrees with registered_proof {} ({size} bytes)",
                submit.sector_size, submit.registered_proof
            )));
        }
        if submit.vanilla_proof.is_empty() {
            return Err(malformed(
                "vanilla_proof is empty: it carries the C1 output JSON".into(),
            ));
        }
        let job_id = Some(request_id.job_id());
        let limits = self.gateway.config.limits.clone();
        let built = tokio::task::spawn_blocking(move || {
            let request = PorepRequest {
                c1: &submit.vanilla_proof,
                proof,
                proof_field: "registered_proof",
                miner: submit.miner_id,
                sector: submit.sector_number,
                job_id,
            };
            porep_job(request, &limits)
        })
        .await;
        checked(built, "the C1 output")
    }

    /// A PoSt submission's job (a WindowPoSt partition if `window`, else a WinningPoSt):
    /// `registered_proof` Go's PoSt proof number, `randomness`, `miner_id`, `partition_index`,
    /// one vanilla proof per sector in `vanilla_proofs`.
    async fn post_job_of(
        &self,
        submit: SubmitProofRequest,
        window: bool,
        request_id: &RequestId,
    ) -> Result<DecodedJob, Refused> {
        let request_id = request_id.clone();
        let limits = self.gateway.config.limits.clone();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let deadline = self
            .gateway
            .config
            .gateway
            .post_deadline_unix_ms(window, now_ms);
        let built = tokio::task::spawn_blocking(move || {
            let request = PostRequest {
                window,
                proof_number: submit.registered_proof,
                sector_size: submit.sector_size,
                miner: submit.miner_id,
                randomness: &submit.randomness,
                partition_index: submit.partition_index,
                vanilla_proofs: &submit.vanilla_proofs,
                request_id,
                deadline_unix_ms: Some(deadline),
            };
            post_job(request, &limits)
        })
        .await;
        checked(built, "the PoSt input")
    }

    /// A SnapDeals submission's job: `registered_proof` the update proof's number, the
    /// partition proofs in `vanilla_proofs` (one each, as Curio sends them) or in
    /// `vanilla_proof` (a JSON array of base64 strings), the three commitments.
    async fn snap_job_of(
        &self,
        submit: SubmitProofRequest,
        request_id: &RequestId,
    ) -> Result<DecodedJob, Refused> {
        let malformed = |why: String| Refused::new("malformed", Code::InvalidArgument, why);
        if let Some(proof) = usize::try_from(submit.registered_proof)
            .ok()
            .and_then(|i| crate::snap::REGISTERED_UPDATE_PROOFS.get(i))
        {
            let size = u64::from(proof.sector_size());
            if submit.sector_size != 0 && submit.sector_size != size {
                return Err(malformed(format!(
                    "sector_size {} disagrees with registered_proof {} ({size} bytes)",
                    submit.sector_size, submit.registered_proof
                )));
            }
        }
        match (
            submit.vanilla_proofs.is_empty(),
            submit.vanilla_proof.is_empty(),
        ) {
            (true, true) => {
                return Err(malformed(
                    "vanilla_proofs is empty: it carries the vanilla partition proofs, one \
                     bincode-serialized PartitionProof per partition"
                        .into(),
                ))
            }
            (false, false) => {
                return Err(malformed(
                    "both vanilla_proofs and vanilla_proof are set: send the partition proofs \
                     in one of them"
                        .into(),
                ))
            }
            _ => {}
        }
        let job_id = Some(request_id.job_id());
        let limits = self.gateway.config.limits.clone();
        let built = tokio::task::spawn_blocking(move || {
            let request = SnapRequest {
                proof_number: submit.registered_proof,
                vanilla_proofs: if submit.vanilla_proofs.is_empty() {
                    PartitionProofs::Json(&submit.vanilla_proof)
                } else {
                    PartitionProofs::Each(&submit.vanilla_proofs)
                },
                sector_key_cid: &submit.sector_key_cid,
                new_sealed_cid: &submit.new_sealed_cid,
                new_unsealed_cid: &submit.new_unsealed_cid,
                miner: submit.miner_id,
                sector: submit.sector_number,
                job_id,
            };
            snap_job(request, &limits)
        })
        .await;
        checked(built, "the SnapDeals input")
    }

    /// Submit a checked job: recorded and enqueued (or known already).
    async fn submit(&self, asked: &Asked) -> Result<(), Refused> {
        let job = &asked.job;
        match self
            .gateway
            .submit(job, asked.urgency, Some(&asked.request_id))
            .await
        {
            Err(e) => Err(Refused::unavailable(&e)),
            Ok(Submitted::Mismatch) => Err(Refused::new(
                "mismatch",
                Code::AlreadyExists,
                format!(
                    "request_id {:?} (job {}) was used for another payload; that job is \
                     unaffected",
                    asked.request_id.as_str(),
                    job.job.job_id
                ),
            )),
            // Answered by AwaitProof from the ledger, like any other state.
            Ok(Submitted::Proved(_) | Submitted::Refused(_) | Submitted::Waiting) => Ok(()),
        }
    }

    /// Wait for a job and say how it ended.
    async fn await_result(
        &self,
        job_id: &str,
        deadline: Option<Instant>,
    ) -> Result<(AwaitProofResponse, &'static str), Refused> {
        let mut reply = AwaitProofResponse {
            job_id: job_id.to_string(),
            ..Default::default()
        };
        let (status, outcome) = match self.gateway.wait(job_id, deadline).await {
            Waited::Proved(proof, times) => {
                reply.proof = proof;
                reply.total_ms = times.total_ms;
                reply.queue_wait_ms = times.queue_wait_ms;
                reply.srs_load_ms = times.stages.srs_load_ms;
                reply.synthesis_ms = times.stages.synthesis_ms;
                reply.gpu_compute_ms = times.stages.start_ms;
                (ProofStatus::Completed, "proved")
            }
            Waited::Refused(why) => {
                reply.error_message = why;
                (ProofStatus::Failed, "refused")
            }
            Waited::Failed(why) => {
                reply.error_message = format!("proving failed: {why}");
                (ProofStatus::Failed, "failed")
            }
            Waited::Cancelled => (ProofStatus::Cancelled, "cancelled"),
            Waited::TimedOut => {
                reply.error_message =
                    "still proving; the job goes on: await it again, or submit it again".into();
                (ProofStatus::Timeout, "still_proving")
            }
            Waited::ShuttingDown => {
                return Err(Refused::new(
                    "shutting_down",
                    Code::Unavailable,
                    "the gateway is stopping; the job goes on: await it again",
                ))
            }
        };
        reply.set_status(status);
        Ok((reply, outcome))
    }

    /// Jobs waiting in the queues of `job`'s size class, itself not counted.
    async fn queue_position(&self, job: &DecodedJob) -> u32 {
        let class = SizeClass::of(&job.job).map_or_else(|| UNSORTED.to_string(), |c| c.key());
        let Ok(broker) = self.gateway.broker().await else {
            return 0;
        };
        match broker.job_queue_depths().await {
            Ok(depths) => depths
                .iter()
                .find(|d| d.class == class)
                .map_or(0, |d| d.ready.saturating_sub(1)),
            Err(_) => 0,
        }
    }

    async fn status(&self) -> Result<GetStatusResponse> {
        let gateway = &self.gateway;
        let totals = gateway.ledger.totals().await?;
        let running = gateway.ledger.running().await?;
        let workers = gateway.ledger.workers_seen(SEEN_RECENTLY).await?;
        let depths = gateway.broker().await?.job_queue_depths().await?;
        // Curio adds up `pending + in_progress` over the entries against its MaxPending:
        // one entry per size class with jobs waiting, and the jobs being proved in one more.
        let mut queues: Vec<QueueStatus> = depths
            .iter()
            .filter(|d| d.ready > 0)
            .map(|d| QueueStatus {
                proof_kind: d.class.clone(),
                pending: d.ready,
                in_progress: 0,
            })
            .collect();
        queues.push(QueueStatus {
            proof_kind: "proving".into(),
            pending: 0,
            in_progress: u32::try_from(running.len()).unwrap_or(u32::MAX),
        });
        Ok(GetStatusResponse {
            gpus: gpus_of(&workers),
            loaded_srs: loaded_srs(&workers),
            queues,
            total_proofs_completed: totals.proved,
            total_proofs_failed: totals.failed,
            uptime_seconds: gateway.started.elapsed().as_secs(),
            pinned_memory_bytes: 0,
            pinned_memory_limit_bytes: 0,
        })
    }
}

/// The GPUs of the workers seen recently: one entry per CUDA backend a worker announced
/// (`cuda:0 (NVIDIA H200)`), named with the worker. Memory figures are not reported by workers.
fn gpus_of(workers: &[SeenWorker]) -> Vec<GpuStatus> {
    workers
        .iter()
        .flat_map(|w| {
            w.backend
                .split(", ")
                .filter_map(|backend| {
                    let rest = backend.strip_prefix("cuda:")?;
                    let ordinal = rest.split(|c: char| !c.is_ascii_digit()).next()?;
                    Some(GpuStatus {
                        ordinal: ordinal.parse().ok()?,
                        name: format!("{} {backend}", w.name),
                        ..Default::default()
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The circuits whose parameters workers keep loaded, with how many workers keep each
/// (`ref_count`) and the host memory one worker's copy holds (`size_bytes`, the most any of
/// them reports); all of them `HOT`: a worker keeps a circuit's parameters in memory after
/// proving one of its jobs, until a job of another circuit needs the memory.
fn loaded_srs(workers: &[SeenWorker]) -> Vec<SrsStatus> {
    let mut held: BTreeMap<&str, (u32, u64)> = BTreeMap::new();
    for w in workers {
        for (i, circuit) in w.resident.iter().enumerate() {
            let entry = held.entry(circuit.as_str()).or_default();
            entry.0 += 1;
            entry.1 = entry.1.max(w.resident_bytes.get(i).copied().unwrap_or(0));
        }
    }
    held.into_iter()
        .map(|(circuit, (workers, bytes))| SrsStatus {
            circuit_id: circuit.to_string(),
            tier: proto::srs_status::Tier::Hot.into(),
            size_bytes: bytes,
            ref_count: workers,
        })
        .collect()
}

#[tonic::async_trait]
impl ProvingEngine for Door {
    /// Check the request, record it in the ledger as queued and enqueue it.
    async fn submit_proof(
        &self,
        request: Request<SubmitProofRequest>,
    ) -> Result<Response<SubmitProofResponse>, Status> {
        let started = Instant::now();
        let mut job_id = String::new();
        let result = async {
            let _open = self.admit(&request)?;
            let asked = self.job_of(request.into_inner()).await?;
            job_id.clone_from(&asked.job.job.job_id);
            self.submit(&asked).await?;
            let reply = SubmitProofResponse {
                job_id: asked.job.job.job_id.clone(),
                queue_position: self.queue_position(&asked.job).await,
                assigned_gpu: String::new(),
            };
            Ok((reply, "submitted"))
        }
        .await;
        self.finish("SubmitProof", started, &job_id, result)
    }

    /// Wait up to `timeout_ms` (0: until it ends) for a job the ledger knows, named by the
    /// job id `SubmitProof` answered or by the client's request id.
    async fn await_proof(
        &self,
        request: Request<AwaitProofRequest>,
    ) -> Result<Response<AwaitProofResponse>, Status> {
        let started = Instant::now();
        let mut job_id = request.get_ref().job_id.clone();
        let result = async {
            let _open = self.admit(&request)?;
            job_id = self.job_named(&request.get_ref().job_id).await?;
            let timeout_ms = request.get_ref().timeout_ms;
            let deadline = (timeout_ms > 0).then(|| started + Duration::from_millis(timeout_ms));
            self.await_result(&job_id, deadline).await
        }
        .await;
        self.finish("AwaitProof", started, &job_id, result)
    }

    /// `SubmitProof`, then wait up to `gateway.wait_s`.
    async fn prove(
        &self,
        request: Request<ProveRequest>,
    ) -> Result<Response<ProveResponse>, Status> {
        let started = Instant::now();
        let mut job_id = String::new();
        let result = async {
            let _open = self.admit(&request)?;
            let submit = request.into_inner().submit.ok_or_else(|| {
                Refused::new(
                    "malformed",
                    Code::InvalidArgument,
                    "ProveRequest.submit is missing",
                )
            })?;
            let asked = self.job_of(submit).await?;
            job_id.clone_from(&asked.job.job.job_id);
            self.submit(&asked).await?;
            let deadline = self.gateway.default_deadline();
            let (result, outcome) = self.await_result(&job_id, Some(deadline)).await?;
            Ok((
                ProveResponse {
                    result: Some(result),
                },
                outcome,
            ))
        }
        .await;
        self.finish("Prove", started, &job_id, result)
    }

    /// Cancel a job not yet ended, named by its job id or the client's request id: a worker
    /// that fetches it later does not prove it; one proving it now (`was_running`) finishes,
    /// and the job is answered `CANCELLED`. Recorded in the ledger (`c2q status` counts it).
    /// Submitting it again asks for it again.
    async fn cancel_proof(
        &self,
        request: Request<CancelProofRequest>,
    ) -> Result<Response<CancelProofResponse>, Status> {
        let started = Instant::now();
        let mut job_id = request.get_ref().job_id.clone();
        let result = async {
            self.authorize(&request)?;
            job_id = self.job_named(&request.get_ref().job_id).await?;
            let cancelled = self
                .gateway
                .ledger
                .cancel(&job_id)
                .await
                .map_err(|e| Refused::unavailable(&e))?;
            match cancelled {
                Cancellation::Cancelled { was_running } => {
                    Ok((CancelProofResponse { was_running }, "cancelled"))
                }
                Cancellation::AlreadyCancelled => {
                    Ok((CancelProofResponse { was_running: false }, "cancelled"))
                }
                Cancellation::Ended { status } => Err(Refused::new(
                    "refused",
                    Code::FailedPrecondition,
                    format!("job {job_id} has ended ({status}): nothing to cancel"),
                )),
                Cancellation::Unknown => Err(Refused::new(
                    "not_found",
                    Code::NotFound,
                    format!("no job {job_id:?} was submitted"),
                )),
            }
        }
        .await;
        self.finish("CancelProof", started, &job_id, result)
    }

    /// The fleet as the broker and the ledger see it: jobs waiting per size class, jobs being
    /// proved, the GPUs and loaded circuits of the workers seen in the last minute, and the
    /// ledger's totals.
    async fn get_status(
        &self,
        request: Request<GetStatusRequest>,
    ) -> Result<Response<GetStatusResponse>, Status> {
        let started = Instant::now();
        let result = async {
            self.authorize(&request)?;
            let status = self.status().await.map_err(|e| Refused::unavailable(&e))?;
            Ok((status, "status"))
        }
        .await;
        self.finish("GetStatus", started, "", result)
    }

    /// The gateway's metrics, as `/metrics` on the HTTP door serves them.
    async fn get_metrics(
        &self,
        request: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        let started = Instant::now();
        let result = self.authorize(&request).map(|()| {
            let prometheus_text = self.gateway.metrics_text();
            (GetMetricsResponse { prometheus_text }, "metrics")
        });
        self.finish("GetMetrics", started, "", result)
    }

    /// `already_loaded` when a worker seen recently holds the circuit's parameters. The gateway
    /// cannot load them on a worker's behalf: a worker loads a circuit's parameters with its
    /// first job of that circuit and keeps them, which is said with `FAILED_PRECONDITION`.
    async fn preload_srs(
        &self,
        request: Request<PreloadSrsRequest>,
    ) -> Result<Response<PreloadSrsResponse>, Status> {
        let started = Instant::now();
        let circuit = request.get_ref().circuit_id.clone();
        let result = async {
            self.authorize(&request)?;
            let (holding, fetching) = self.workers_with(&circuit).await?;
            if holding > 0 {
                let reply = PreloadSrsResponse {
                    already_loaded: true,
                    load_time_ms: 0,
                };
                return Ok((reply, "srs"));
            }
            Err(Refused::new(
                "refused",
                Code::FailedPrecondition,
                format!(
                    "no worker holds {circuit} loaded; {fetching} running worker(s) fetch its \
                     jobs and load its parameters with the first one"
                ),
            ))
        }
        .await;
        self.finish("PreloadSRS", started, "", result)
    }

    /// Workers keep a circuit's parameters after its jobs and release them themselves when a
    /// job of another circuit needs the memory: the gateway cannot release them, and says so
    /// with `FAILED_PRECONDITION` and how many workers hold them.
    async fn evict_srs(
        &self,
        request: Request<EvictSrsRequest>,
    ) -> Result<Response<EvictSrsResponse>, Status> {
        let started = Instant::now();
        let circuit = request.get_ref().circuit_id.clone();
        let result = async {
            self.authorize(&request)?;
            let (holding, _) = self.workers_with(&circuit).await?;
            Err::<(EvictSrsResponse, &'static str), _>(Refused::new(
                "refused",
                Code::FailedPrecondition,
                format!(
                    "{holding} worker(s) hold {circuit} loaded; a worker releases kept \
                     parameters itself when a job of another circuit needs the memory (or stop \
                     it, or narrow its classes)"
                ),
            ))
        }
        .await;
        self.finish("EvictSRS", started, "", result)
    }
}

impl Door {
    /// The job `key` names: a job id the ledger knows, else the job registered last under
    /// `key` as the client's request id.
    async fn job_named(&self, key: &str) -> Result<String, Refused> {
        let ledger = &self.gateway.ledger;
        let unavailable = |e: anyhow::Error| Refused::unavailable(&e);
        // Only a valid job id can be one (and only such text fits the ledger's job id column).
        if is_valid_job_id(key) && ledger.answer(key).await.map_err(unavailable)?.is_some() {
            return Ok(key.to_string());
        }
        ledger
            .job_for_request(key)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| {
                Refused::new(
                    "not_found",
                    Code::NotFound,
                    format!("no job {key:?} was submitted (as a job id or a request id)"),
                )
            })
    }

    /// Of the workers seen recently: how many hold `circuit`'s parameters loaded, and how many
    /// fetch its jobs. An id that names no size class is refused.
    async fn workers_with(&self, circuit: &str) -> Result<(usize, usize), Refused> {
        SizeClass::parse(circuit)
            .map_err(|e| Refused::new("malformed", Code::InvalidArgument, format!("{e:#}")))?;
        let workers = self
            .gateway
            .ledger
            .workers_seen(SEEN_RECENTLY)
            .await
            .map_err(|e| Refused::unavailable(&e))?;
        let holding = workers
            .iter()
            .filter(|w| w.resident.iter().any(|c| c == circuit))
            .count();
        let fetching = workers
            .iter()
            .filter(|w| w.classes.iter().any(|c| c == circuit))
            .count();
        Ok((holding, fetching))
    }
}

/// A submission's checked job, how urgently it is wanted, and the client's name for it.
struct Asked {
    job: DecodedJob,
    urgency: Urgency,
    request_id: RequestId,
}

/// Urgent for Curio's `HIGH` and `CRITICAL` priorities: the class's urgent queue.
fn urgency_of(priority: i32) -> Urgency {
    match Priority::try_from(priority) {
        Ok(Priority::High | Priority::Critical) => Urgency::Urgent,
        _ => Urgency::Normal,
    }
}

/// A request's job as the blocking check of `what` (its C1, its SnapDeals input) built it, or
/// the refusal the client is told.
fn checked(
    built: Result<Result<DecodedJob, Refusal>, tokio::task::JoinError>,
    what: &str,
) -> Result<DecodedJob, Refused> {
    match built {
        Ok(Ok(job)) => Ok(job),
        Ok(Err(Refusal::Malformed(why))) => {
            Err(Refused::new("malformed", Code::InvalidArgument, why))
        }
        Ok(Err(Refusal::Unprovable(why))) => {
            Err(Refused::new("refused", Code::InvalidArgument, why))
        }
        Err(e) => Err(Refused::new(
            "refused",
            Code::InvalidArgument,
            format!("checking {what} failed: {e}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(name: &str, backend: &str, resident: &[&str]) -> SeenWorker {
        SeenWorker {
            name: name.into(),
            classes: vec!["porep-32g".into()],
            backend: backend.into(),
            resident: resident.iter().map(|s| s.to_string()).collect(),
            resident_bytes: resident.iter().map(|_| 1 << 30).collect(),
            seen_s_ago: 1,
            ..Default::default()
        }
    }

    #[test]
    fn gpus_are_the_cuda_backends_of_the_workers_seen() {
        let workers = [
            worker("a", "cuda:0 (NVIDIA H200), cuda:1 (NVIDIA H200)", &[]),
            worker("b", "cpu", &[]),
        ];
        let gpus = gpus_of(&workers);
        assert_eq!(gpus.len(), 2);
        assert_eq!(
            (gpus[0].ordinal, gpus[0].name.as_str()),
            (0, "a cuda:0 (NVIDIA H200)")
        );
        assert_eq!(
            (gpus[1].ordinal, gpus[1].name.as_str()),
            (1, "a cuda:1 (NVIDIA H200)")
        );
    }

    #[test]
    fn loaded_circuits_count_the_workers_holding_them() {
        let workers = [
            worker("a", "cpu", &["porep-32g", "porep-2k"]),
            worker("b", "cpu", &["porep-32g"]),
        ];
        let srs = loaded_srs(&workers);
        let seen: Vec<(&str, u32)> = srs
            .iter()
            .map(|s| (s.circuit_id.as_str(), s.ref_count))
            .collect();
        assert_eq!(seen, [("porep-2k", 1), ("porep-32g", 2)]);
        assert!(srs.iter().all(|s| s.size_bytes == 1 << 30));
    }
}
