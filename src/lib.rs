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
pub mod post;
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

/// Unit tests prove with the test parameters. filecoin-proofs reads
/// `FIL_PROOFS_PARAMETER_CACHE` once, when any test first touches its settings, so the
/// variable is set by a constructor of the test binary, before the first test starts, rather
/// than by the tests themselves: which test came first would otherwise decide where every later
/// one looks for its verifying keys.
#[cfg(all(test, target_os = "linux"))]
mod test_parameter_cache {
    extern "C" fn use_test_parameters() {
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", "/var/tmp/c2q-test-params");
    }

    #[used]
    #[link_section = ".init_array"]
    static SET_BEFORE_ANY_TEST: extern "C" fn() = use_test_parameters;
}
