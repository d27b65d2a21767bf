//! Test-only fault injection (`pipeline.fault`), so the failure paths that real hardware
//! produces rarely can be exercised end to end:
//! - `backend-error`: proving start always fails (a broken GPU context, say): retried as
//!   transient until the worker judges its backend broken (`health`);
//! - `kill-after-publish`: SIGKILL between the confirmed publish and the ack (in `reply`).

use std::sync::Arc;

use anyhow::{bail, Result};

use crate::groth16::{Backend, Evaluations, Multiexps, Srs, Witness};

struct FailingBackend;

impl Backend for FailingBackend {
    fn name(&self) -> String {
        "fault:backend-error".into()
    }

    fn start(&self, _srs: &Srs, _evals: Evaluations, _witness: &Witness) -> Result<Multiexps> {
        bail!("injected backend failure")
    }
}

pub fn wrap_backend(fault: Option<&str>, backend: Arc<dyn Backend>) -> Arc<dyn Backend> {
    match fault {
        Some("backend-error") => {
            tracing::warn!("fault injection: every proving start fails");
            Arc::new(FailingBackend)
        }
        _ => backend,
    }
}
