//! The CPU backend for proving start: rayon NTTs and blst multiexps.

use std::time::Instant;

use anyhow::Result;
use tracing::debug;

use super::{msm, ntt, Evaluations, Multiexps, Srs, Witness};
use crate::groth16::Backend;

#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl Backend for CpuBackend {
    fn name(&self) -> String {
        "cpu".to_string()
    }

    fn start(&self, srs: &Srs, evals: Evaluations, witness: &Witness) -> Result<Multiexps> {
        let t = Instant::now();
        let h_scalars = ntt::h_coefficients(evals)?;
        let t_ntt = t.elapsed();
        let h = msm::g1(&srs.h, &h_scalars);
        drop(h_scalars);
        let t_h = t.elapsed();
        let l = msm::g1(&srs.l, &witness.aux);
        let t_l = t.elapsed();
        let a = msm::g1(&srs.a, &witness.a_query_scalars());
        let b_g1 = msm::g1(&srs.b_g1, &witness.b_query_scalars());
        debug!(
            ntt = ?t_ntt,
            h_msm = ?(t_h - t_ntt),
            l_msm = ?(t_l - t_h),
            a_b_msm = ?(t.elapsed() - t_l),
            "cpu proving start"
        );
        // B in G2 is left to the finalizer (`groth16::finish`), on other threads.
        Ok(Multiexps {
            h,
            l,
            a,
            b_g1,
            b_g2: None,
        })
    }
}
