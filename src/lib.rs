//! c2q: a Filecoin PoRep Commit2 prover and queue worker.
//!
//! See `ARCHITECTURE.md` for the map. Dependencies run one way:
//! `worker → broker/ledger/pipeline → porep → groth16`; the GPU plugs into `groth16` through
//! its `Backend` trait (`gpu::backend`) and imports nothing else of the crate. `gpu-check` and
//! `bench gpu` live above both, in `diagnostics`.

pub mod bench;
pub mod canary;
pub mod classes;
pub mod diagnostics;
pub mod gpu;
pub mod groth16;
pub mod job;
pub mod kinds;
pub mod params;
pub mod porep;
pub mod prove;
pub mod snap;
pub mod verify;

pub mod broker;
pub mod cli_queue;
pub mod config;
pub mod gate;
pub mod gateway;
pub mod ledger;
pub mod pipeline;
pub mod schema;
pub mod telemetry;
pub mod worker;
