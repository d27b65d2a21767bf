//! c2q: a Filecoin PoRep Commit2 prover and queue worker.
//!
//! See `ARCHITECTURE.md` for the map. Dependencies run one way:
//! `broker/ledger/pipeline → porep → groth16 → gpu`.

pub mod canary;
pub mod gpu;
pub mod groth16;
pub mod job;
pub mod porep;
pub mod prove;

pub mod broker;
pub mod cli_queue;
pub mod config;
pub mod gate;
pub mod ledger;
pub mod pipeline;
pub mod schema;
pub mod telemetry;
pub mod worker;
