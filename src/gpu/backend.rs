//! The CUDA backend of proving start, and the choice between backends.
//!
//! Per partition: a, b, c go to the GPU (and their host memory is released as each is
//! uploaded), H comes out of the NTTs without leaving the device, and the four G1 MSMs run over
//! parameter point sets kept resident on the GPU between proofs (keyed by `Srs::id`), or, when
//! they do not fit, streamed from host memory piece by piece.

use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use blstrs::{G1Affine, G1Projective, Scalar as Fr};
use ff::Field;

use super::device::{list_devices, DevBuf, Gpu, OutOfDeviceMemory};
use super::limbs::{
    affine_as_limbs, scalars_as_limbs, scalars_as_limbs_mut, AFFINE_LIMBS, FR_LIMBS,
};
use super::msm::{msm, msm_streamed, scratch_bytes};
use super::ntt::Ntt;
use crate::groth16::{Backend, CpuBackend, Evaluations, G1Sums, Srs, Witness};

/// Which backend proves: `auto` takes a usable GPU when there is one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    #[default]
    Auto,
    Cpu,
    Cuda,
}

/// The proving-start backends for `choice`: one per listed GPU for CUDA, one CPU backend
/// otherwise. `auto` falls back to the CPU (and says why in the log) when no GPU can be used;
/// `cuda` without a usable GPU is an error, and so is any listed GPU that cannot be opened.
pub fn select_backends(choice: BackendChoice, devices: &[usize]) -> Result<Vec<Arc<dyn Backend>>> {
    let open_all = |why: &str| -> Result<Vec<Arc<dyn Backend>>> {
        if devices.is_empty() {
            bail!("no GPU listed (give at least one device number)");
        }
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<Arc<dyn Backend>> = Vec::new();
        for &d in devices {
            if !seen.insert(d) {
                bail!("GPU {d} is listed twice");
            }
            let b = CudaBackend::new(d).with_context(|| format!("GPU {d}: {why}"))?;
            tracing::info!(gpu = %b.gpu.info, "backend: cuda");
            out.push(Arc::new(b));
        }
        Ok(out)
    };
    match choice {
        BackendChoice::Cpu => {
            tracing::info!("backend: cpu (asked for)");
            Ok(vec![Arc::new(CpuBackend)])
        }
        BackendChoice::Cuda => open_all(
            "--backend cuda was asked for, but this GPU is not usable (use --backend cpu or auto)",
        ),
        BackendChoice::Auto => {
            let found = match list_devices() {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "backend: cpu (the CUDA driver is present but failed)");
                    return Ok(vec![Arc::new(CpuBackend)]);
                }
            };
            if found.is_empty() {
                tracing::info!("backend: cpu (no CUDA GPU found)");
                return Ok(vec![Arc::new(CpuBackend)]);
            }
            // A GPU that is there but fails is reported, not quietly replaced by the CPU:
            // `--backend cpu` is how an operator says the CPU is acceptable.
            open_all("a CUDA GPU is present but unusable (use --backend cpu to prove on the CPU)")
        }
    }
}

/// One circuit's G1 point sets on the device.
struct Resident {
    id: String,
    lens: [usize; 4],
    h: DevBuf<u32>,
    l: DevBuf<u32>,
    a: DevBuf<u32>,
    b_g1: DevBuf<u32>,
    last_use: u64,
}

impl Resident {
    fn bytes(&self) -> usize {
        self.h.bytes() + self.l.bytes() + self.a.bytes() + self.b_g1.bytes()
    }
}

struct State {
    ntt: Ntt,
    resident: Vec<Resident>,
    clock: u64,
}

/// Proving start on one CUDA GPU. Calls are serialised: one partition at a time per GPU.
pub struct CudaBackend {
    gpu: Gpu,
    state: Mutex<State>,
}

fn set_lens(srs: &Srs) -> [usize; 4] {
    [srs.h.len(), srs.l.len(), srs.a.len(), srs.b_g1.len()]
}

fn upload_points(gpu: &Gpu, p: &[G1Affine]) -> Result<DevBuf<u32>> {
    let buf = gpu.alloc::<u32>(p.len() * AFFINE_LIMBS)?;
    gpu.upload(&buf, 0, affine_as_limbs(p))?;
    Ok(buf)
}

fn upload_scalars_padded(gpu: &Gpu, s: &[Fr], len: usize) -> Result<DevBuf<u32>> {
    let buf = gpu.alloc::<u32>(len * FR_LIMBS)?;
    if s.len() < len {
        gpu.memset_zero(&buf)?;
    }
    gpu.upload(&buf, 0, scalars_as_limbs(s))?;
    Ok(buf)
}

impl CudaBackend {
    pub fn new(device: usize) -> Result<CudaBackend> {
        super::limbs::layout_self_check()?;
        let gpu = Gpu::open(device)?;
        Ok(CudaBackend {
            gpu,
            state: Mutex::new(State {
                ntt: Ntt::new(),
                resident: Vec::new(),
                clock: 0,
            }),
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Device bytes held by resident parameters.
    pub fn resident_bytes(&self) -> usize {
        self.state
            .lock()
            .map(|s| s.resident.iter().map(Resident::bytes).sum())
            .unwrap_or(0)
    }

    /// Makes `srs`'s G1 sets resident if they fit next to `working` bytes of per-proof memory,
    /// evicting the least recently used other circuits if needed. Returns the index of the
    /// resident entry, or None when the sets must be streamed.
    fn ensure_resident(&self, st: &mut State, srs: &Srs, working: usize) -> Result<Option<usize>> {
        st.clock += 1;
        let lens = set_lens(srs);
        if let Some(i) = st
            .resident
            .iter()
            .position(|r| r.id == srs.id && r.lens == lens)
        {
            st.resident[i].last_use = st.clock;
            return Ok(Some(i));
        }
        // Same id, different shape: the file changed; the old copy is useless.
        st.resident.retain(|r| r.id != srs.id);
        let need = lens.iter().sum::<usize>() * AFFINE_LIMBS * 4;
        let (_, total) = self.gpu.mem_info()?;
        if need + working > total {
            tracing::info!(srs = %srs.id, need, total, "parameters larger than the GPU: streaming them");
            return Ok(None);
        }
        loop {
            let (free, _) = self.gpu.mem_info()?;
            if need + working <= free {
                break;
            }
            let Some(victim) = st
                .resident
                .iter()
                .enumerate()
                .min_by_key(|(_, r)| r.last_use)
                .map(|(i, _)| i)
            else {
                tracing::info!(srs = %srs.id, need, free, "not enough free device memory: streaming parameters");
                return Ok(None);
            };
            let r = st.resident.remove(victim);
            tracing::info!(evicted = %r.id, bytes = r.bytes(), "evicting resident parameters");
        }
        let uploaded = (|| -> Result<Resident> {
            Ok(Resident {
                id: srs.id.clone(),
                lens,
                h: upload_points(&self.gpu, &srs.h)?,
                l: upload_points(&self.gpu, &srs.l)?,
                a: upload_points(&self.gpu, &srs.a)?,
                b_g1: upload_points(&self.gpu, &srs.b_g1)?,
                last_use: st.clock,
            })
        })();
        match uploaded {
            Ok(r) => {
                tracing::info!(srs = %srs.id, bytes = r.bytes(), gpu = %self.gpu.info, "parameters resident on the GPU");
                st.resident.push(r);
                Ok(Some(st.resident.len() - 1))
            }
            Err(e) if e.downcast_ref::<OutOfDeviceMemory>().is_some() => {
                tracing::info!(srs = %srs.id, "parameters did not fit after all: streaming them");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn start_locked(
        &self,
        st: &mut State,
        srs: &Srs,
        evals: Evaluations,
        witness: &Witness,
    ) -> Result<G1Sums> {
        let gpu = &self.gpu;
        gpu.bind()?;
        let n = evals.constraints();
        let domain = n.max(1).next_power_of_two();
        let log_n = domain.trailing_zeros();
        if srs.h.len() + 1 != domain {
            bail!(
                "circuit needs a domain of {domain}, the parameters hold {} H points",
                srs.h.len()
            );
        }
        let working = 3 * domain * FR_LIMBS * 4
            + scratch_bytes(domain)
            + super::ntt::twiddle_bytes(domain.trailing_zeros());
        let resident = self.ensure_resident(st, srs, working)?;

        // H: upload a, b, c (freeing each host vector once it is on the device), NTTs.
        let Evaluations { a, b, c } = evals;
        let da = upload_scalars_padded(gpu, &a, domain)?;
        drop(a);
        let db = upload_scalars_padded(gpu, &b, domain)?;
        drop(b);
        let dc = upload_scalars_padded(gpu, &c, domain)?;
        drop(c);
        st.ntt.h_quotient(gpu, &da, &db, &dc, log_n)?;
        drop(db);
        drop(dc);

        let a_scalars = witness.a_query_scalars();
        let b_scalars = witness.b_query_scalars();
        let sums = match resident {
            Some(i) => {
                let r = &st.resident[i];
                let h = msm(gpu, &r.h, &da, domain - 1)?;
                drop(da);
                let l = device_msm(gpu, &r.l, &witness.aux)?;
                let a = device_msm(gpu, &r.a, &a_scalars)?;
                let b_g1 = device_msm(gpu, &r.b_g1, &b_scalars)?;
                G1Sums { h, l, a, b_g1 }
            }
            None => {
                let mut h_scalars = vec![Fr::ZERO; domain - 1];
                gpu.download(&da, 0, scalars_as_limbs_mut(&mut h_scalars))?;
                drop(da);
                G1Sums {
                    h: msm_streamed(gpu, &srs.h, &h_scalars)?,
                    l: msm_streamed(gpu, &srs.l, &witness.aux)?,
                    a: msm_streamed(gpu, &srs.a, &a_scalars)?,
                    b_g1: msm_streamed(gpu, &srs.b_g1, &b_scalars)?,
                }
            }
        };
        Ok(sums)
    }
}

/// An MSM over resident points with host scalars.
fn device_msm(gpu: &Gpu, points: &DevBuf<u32>, scalars: &[Fr]) -> Result<G1Projective> {
    if points.len() != scalars.len() * AFFINE_LIMBS {
        bail!(
            "{} scalars for {} points",
            scalars.len(),
            points.len() / AFFINE_LIMBS
        );
    }
    let ds = upload_scalars_padded(gpu, scalars, scalars.len())?;
    msm(gpu, points, &ds, scalars.len())
}

impl Backend for CudaBackend {
    fn name(&self) -> String {
        format!("cuda:{}", self.gpu.info.ordinal)
    }

    fn start(&self, srs: &Srs, evals: Evaluations, witness: &Witness) -> Result<G1Sums> {
        let mut st = self.state.lock().map_err(|_| {
            anyhow!(
                "GPU state poisoned by an earlier failure on {}",
                self.gpu.info
            )
        })?;
        self.start_locked(&mut st, srs, evals, witness)
            .with_context(|| format!("proving start on {}", self.gpu.info))
    }
}
