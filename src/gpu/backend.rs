//! The CUDA backend of proving start, and the choice between backends.
//!
//! Per partition: a, b, c go to the GPU (their host memory is released once they are there),
//! H comes out of the NTTs without leaving the device, and the four G1 MSMs run over parameter
//! point sets kept resident on the GPU between proofs (keyed by `Srs::id`), or, when
//! they do not fit, streamed from host memory piece by piece.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use blstrs::{G1Affine, Scalar as Fr};
use ff::Field;

use super::device::{list_devices, DevBuf, Gpu, Lane, OutOfDeviceMemory};
use super::limbs::{
    affine_as_limbs, scalars_as_limbs, scalars_as_limbs_mut, AFFINE_LIMBS, FR_LIMBS,
};
use super::msm::{msm, msm_streamed, scratch_bytes};
use super::ntt::Ntt;
use super::products::DeviceR1cs;
use crate::groth16::{Backend, CpuBackend, Density, Evaluations, Multiexps, R1cs, Srs, Witness};

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
/// `memory_limit` caps the device memory c2q uses on each GPU (None: all of it).
pub fn select_backends(
    choice: BackendChoice,
    devices: &[usize],
    memory_limit: Option<usize>,
) -> Result<Vec<Arc<dyn Backend>>> {
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
            let b = CudaBackend::with_memory_limit(d, memory_limit)
                .with_context(|| format!("GPU {d}: {why}"))?;
            tracing::info!(gpu = %b.gpu.info, memory_limit, "backend: cuda");
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
    /// The recorded constraints of the circuit proved last, when they fit beside its points.
    constraints: Option<DeviceR1cs>,
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

/// A query's scalars (parts of the witness, each whole or as selected by a density) into a new
/// device buffer of `len` scalars, over the copy lane, without building them on the host.
fn upload_query(gpu: &Gpu, parts: &[(&[Fr], Option<&Density>)], len: usize) -> Result<DevBuf<u32>> {
    let buf = gpu.alloc::<u32>(len * FR_LIMBS)?;
    let mut at = 0;
    for (values, density) in parts {
        at += match density {
            None => {
                gpu.upload_in(Lane::Copy, &buf, at * FR_LIMBS, scalars_as_limbs(values))?;
                values.len()
            }
            Some(d) => {
                gpu.upload_selected(Lane::Copy, &buf, at * FR_LIMBS * 4, values, &|i| d.get(i))?
            }
        };
    }
    if at != len {
        bail!("{at} query scalars for a query of {len}");
    }
    Ok(buf)
}

/// Copies `s` into a new device buffer of `len` scalars over `lane`, zeros after it.
fn upload_scalars_padded(gpu: &Gpu, lane: Lane, s: &[Fr], len: usize) -> Result<DevBuf<u32>> {
    let buf = gpu.alloc::<u32>(len * FR_LIMBS)?;
    if s.len() < len {
        gpu.memset_zero_in(lane, &buf)?;
    }
    gpu.upload_in(lane, &buf, 0, scalars_as_limbs(s))?;
    Ok(buf)
}

impl CudaBackend {
    pub fn new(device: usize) -> Result<CudaBackend> {
        CudaBackend::with_memory_limit(device, None)
    }

    /// A backend that uses at most `memory_limit` bytes of the GPU (None: all of it).
    pub fn with_memory_limit(device: usize, memory_limit: Option<usize>) -> Result<CudaBackend> {
        super::limbs::layout_self_check()?;
        let gpu = Gpu::open(device)?;
        gpu.set_memory_limit(memory_limit);
        Ok(CudaBackend {
            gpu,
            state: Mutex::new(State {
                ntt: Ntt::new(),
                resident: Vec::new(),
                constraints: None,
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
    ) -> Result<Multiexps> {
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
        let working = start_peak_bytes(
            domain,
            [
                witness.aux.len(),
                witness.a_query_len(),
                witness.b_query_len(),
            ],
        ) + super::ntt::twiddle_bytes(domain.trailing_zeros());
        let resident = self.ensure_resident(st, srs, working)?;

        match resident {
            Some(i) => {
                let r = &st.resident[i];
                let sets = PointSets {
                    h: &r.h,
                    l: &r.l,
                    a: &r.a,
                    b_g1: &r.b_g1,
                };
                let (sums, phases) =
                    start_resident(gpu, &mut st.ntt, sets, Abc::Host(evals), witness)?;
                tracing::debug!(gpu = %gpu.info, ?phases, "proving start");
                Ok(sums)
            }
            None => {
                // Streaming: one step at a time, the device memory going to the MSM pieces.
                // H holds two of a, b, c at a time (a·b is formed before c comes over), so
                // that a GPU with room for two domains and the twiddles can prove.
                let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
                let t = Instant::now();
                let Evaluations { a, b, c } = evals;
                let da = upload_scalars_padded(gpu, Lane::Main, &a, domain)?;
                drop(a);
                st.ntt.coset_evaluations(gpu, &da, log_n)?;
                let db = upload_scalars_padded(gpu, Lane::Main, &b, domain)?;
                drop(b);
                st.ntt.coset_evaluations(gpu, &db, log_n)?;
                st.ntt.coset_multiply(gpu, &da, &db, log_n)?;
                drop(db);
                let dc = upload_scalars_padded(gpu, Lane::Main, &c, domain)?;
                drop(c);
                st.ntt.coset_evaluations(gpu, &dc, log_n)?;
                st.ntt.h_from_coset_product(gpu, &da, &dc, log_n)?;
                drop(dc);
                let mut h_scalars = vec![Fr::ZERO; domain - 1];
                gpu.download(&da, 0, scalars_as_limbs_mut(&mut h_scalars))?;
                drop(da);
                let h_ms = ms(t);
                let mut msm_ms = [0.0; 4];
                let mut timed = |k: usize, points: &[G1Affine], scalars: &[Fr]| {
                    let t = Instant::now();
                    let sum = msm_streamed(gpu, points, scalars);
                    msm_ms[k] = ms(t);
                    sum
                };
                let sums = Multiexps {
                    h: timed(0, &srs.h, &h_scalars)?,
                    l: timed(1, &srs.l, &witness.aux)?,
                    a: timed(2, &srs.a, &witness.a_query_scalars())?,
                    b_g1: timed(3, &srs.b_g1, &witness.b_query_scalars())?,
                    b_g2: None,
                };
                tracing::info!(gpu = %gpu.info, h_ms, msm_h_ms = msm_ms[0], msm_l_ms = msm_ms[1],
                    msm_a_ms = msm_ms[2], msm_b_ms = msm_ms[3], "streamed proving start");
                Ok(sums)
            }
        }
    }
}

/// Device bytes `start_resident` holds at its peak besides the point sets and the NTT's tables,
/// for a domain of `domain` and L, A, B MSMs of `msm_lens` scalars. a, b and c (3 domains) are
/// on the device only while H is computed; then H's coefficients (one domain), the witness
/// scalars and an MSM's scratch. Counting the larger phase rather than the sum of both is what
/// lets a 32 GiB sector's points (41 GB) stay resident on an 80 GB GPU: ~37 GB at the peak
/// instead of ~45.
pub fn start_peak_bytes(domain: usize, msm_lens: [usize; 3]) -> usize {
    let scalar = FR_LIMBS * 4;
    let witness = msm_lens.iter().sum::<usize>() * scalar;
    let largest_msm = msm_lens.into_iter().fold(domain, usize::max);
    let h_phase = 3 * domain * scalar;
    let msm_phase = domain * scalar + witness + scratch_bytes(largest_msm);
    h_phase.max(msm_phase)
}

/// Where a proving start's A, B, C evaluations come from.
pub enum Abc<'a> {
    /// Made on the host: copied over.
    Host(Evaluations),
    /// Made on the device from the witness and the recorded constraints resident there.
    Device(&'a DeviceR1cs),
}

impl Abc<'_> {
    fn constraints(&self) -> usize {
        match self {
            Abc::Host(e) => e.constraints(),
            Abc::Device(d) => d.rows,
        }
    }
}

/// One circuit's G1 point sets on the device.
pub struct PointSets<'a> {
    pub h: &'a DevBuf<u32>,
    pub l: &'a DevBuf<u32>,
    pub a: &'a DevBuf<u32>,
    pub b_g1: &'a DevBuf<u32>,
}

/// Where the time of one proving start went, on the host clock.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StartPhases {
    /// Copying a to the device: nothing to hide it behind yet.
    pub upload_a_ms: f64,
    /// From there until H's coefficients are ready: seven NTTs, with b and c copied meanwhile.
    pub h_ms: f64,
    /// Within `h_ms`: the copies of b and c, and the wait for the NTTs after them.
    pub upload_b_ms: f64,
    pub upload_c_ms: f64,
    pub h_wait_ms: f64,
    /// The MSM over H's coefficients, with the witness scalars copied meanwhile.
    pub msm_h_ms: f64,
    /// The selection of the A and B queries' scalars from the witness and the witness copy
    /// (beside the MSM), then freeing the host memory of a, b and c (also beside the MSM), and
    /// the wait for both if the MSM finished first.
    pub witness_copy_ms: f64,
    pub release_abc_ms: f64,
    pub witness_wait_ms: f64,
    pub msm_l_ms: f64,
    pub msm_a_ms: f64,
    pub msm_b_ms: f64,
    pub total_ms: f64,
}

/// Proving start over resident point sets. Copies overlap arithmetic: a goes first; while the
/// GPU transforms it, b goes over the copy lane, then c; while the GPU computes H's MSM,
/// another host thread selects the A and B queries' scalars from the witness, copies them and
/// the aux values over, and then frees the host memory of a, b and c.
pub fn start_resident(
    gpu: &Gpu,
    ntt: &mut Ntt,
    sets: PointSets,
    abc: Abc,
    witness: &Witness,
) -> Result<(Multiexps, StartPhases)> {
    gpu.bind()?;
    let n = abc.constraints();
    let domain = n.max(1).next_power_of_two();
    let log_n = domain.trailing_zeros();
    let lens = [
        witness.aux.len(),
        witness.a_query_len(),
        witness.b_query_len(),
    ];
    let pairs = [
        ("H", sets.h, domain - 1),
        ("L", sets.l, lens[0]),
        ("A", sets.a, lens[1]),
        ("B", sets.b_g1, lens[2]),
    ];
    for (name, points, len) in pairs {
        if points.len() != len * AFFINE_LIMBS {
            bail!(
                "{len} scalars for the {} {name} points",
                points.len() / AFFINE_LIMBS
            );
        }
    }
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let mut phases = StartPhases::default();
    let total = Instant::now();

    // H from a, b, c: copied from the host (b and c while the GPU transforms a, then b), or
    // made on the device from the witness and the recorded constraints.
    let (host_abc, aux_on_device) = match abc {
        Abc::Host(Evaluations { a, b, c }) => {
            let t = Instant::now();
            let da = upload_scalars_padded(gpu, Lane::Main, &a, domain)?;
            phases.upload_a_ms = ms(t);
            let t = Instant::now();
            ntt.coset_evaluations(gpu, &da, log_n)?;
            let tb = Instant::now();
            let db = upload_scalars_padded(gpu, Lane::Copy, &b, domain)?;
            phases.upload_b_ms = ms(tb);
            gpu.wait_for(Lane::Main, Lane::Copy)?;
            ntt.coset_evaluations(gpu, &db, log_n)?;
            let tc = Instant::now();
            let dc = upload_scalars_padded(gpu, Lane::Copy, &c, domain)?;
            phases.upload_c_ms = ms(tc);
            gpu.wait_for(Lane::Main, Lane::Copy)?;
            ntt.coset_evaluations(gpu, &dc, log_n)?;
            ntt.h_from_coset_evaluations(gpu, &da, &db, &dc, log_n)?;
            let tw = Instant::now();
            gpu.sync_lane(Lane::Main)?;
            phases.h_wait_ms = ms(tw);
            drop((db, dc));
            phases.h_ms = ms(t);
            (Some([a, b, c]), (da, None))
        }
        Abc::Device(constraints) => {
            let t = Instant::now();
            let dw = upload_scalars_padded(gpu, Lane::Main, &witness.aux, lens[0])?;
            let din = upload_scalars_padded(gpu, Lane::Main, &witness.input, witness.input.len())?;
            phases.upload_a_ms = ms(t);
            let t = Instant::now();
            let product = |which: usize| -> Result<DevBuf<u32>> {
                let out = gpu.alloc::<u32>(domain * FR_LIMBS)?;
                constraints.product(gpu, which, &dw, &din, &out, domain)?;
                Ok(out)
            };
            let da = product(0)?;
            ntt.coset_evaluations(gpu, &da, log_n)?;
            let db = product(1)?;
            ntt.coset_evaluations(gpu, &db, log_n)?;
            let dc = product(2)?;
            ntt.coset_evaluations(gpu, &dc, log_n)?;
            ntt.h_from_coset_evaluations(gpu, &da, &db, &dc, log_n)?;
            let tw = Instant::now();
            gpu.sync_lane(Lane::Main)?;
            phases.h_wait_ms = ms(tw);
            drop((db, dc, din));
            phases.h_ms = ms(t);
            (None, (da, Some(dw)))
        }
    };
    let (da, aux_on_device) = aux_on_device;

    let (h, witness) = std::thread::scope(|scope| {
        let copier = scope.spawn(move || -> Result<([DevBuf<u32>; 3], f64, f64)> {
            let t = Instant::now();
            gpu.bind()?;
            let dl = match aux_on_device {
                Some(dw) => dw,
                None => upload_scalars_padded(gpu, Lane::Copy, &witness.aux, lens[0])?,
            };
            let bufs = [
                dl,
                upload_query(
                    gpu,
                    &[
                        (&witness.input, None),
                        (&witness.aux, Some(&witness.a_aux_density)),
                    ],
                    lens[1],
                )?,
                upload_query(
                    gpu,
                    &[
                        (&witness.input, Some(&witness.b_input_density)),
                        (&witness.aux, Some(&witness.b_aux_density)),
                    ],
                    lens[2],
                )?,
            ];
            let copy_ms = ms(t);
            // The copies are over: a, b and c go back to the system now, while the GPU is busy
            // with the MSM. Freeing gigabytes takes a good part of a second and holds up the
            // process's memory mappings (and so the CUDA driver's allocations): during copies
            // it made them up to 3× slower, and before the next MSM it delayed that by 0.35 s.
            let t = Instant::now();
            drop(host_abc);
            Ok((bufs, copy_ms, ms(t)))
        });
        let t = Instant::now();
        let h = msm(gpu, sets.h, &da, domain - 1);
        phases.msm_h_ms = ms(t);
        let t = Instant::now();
        let witness = copier
            .join()
            .map_err(|_| anyhow!("the witness copy thread panicked"));
        phases.witness_wait_ms = ms(t);
        (h, witness)
    });
    let h = h?;
    drop(da);
    let ([dl, d_a, d_b], copy_ms, release_ms) = witness??;
    phases.witness_copy_ms = copy_ms;
    phases.release_abc_ms = release_ms;
    gpu.wait_for(Lane::Main, Lane::Copy)?;

    let t = Instant::now();
    let l = msm(gpu, sets.l, &dl, lens[0])?;
    phases.msm_l_ms = ms(t);
    let t = Instant::now();
    let a = msm(gpu, sets.a, &d_a, lens[1])?;
    phases.msm_a_ms = ms(t);
    let t = Instant::now();
    let b_g1 = msm(gpu, sets.b_g1, &d_b, lens[2])?;
    phases.msm_b_ms = ms(t);
    phases.total_ms = ms(total);
    let sums = Multiexps {
        h,
        l,
        a,
        b_g1,
        b_g2: None,
    };
    Ok((sums, phases))
}

impl CudaBackend {
    /// Proving start with A, B, C made on this GPU from `r1cs`, which stays resident beside the
    /// circuit's points when both fit with a proving start's working memory. `None` when they
    /// do not (or the points are streamed): the caller makes A, B, C on the CPU.
    fn start_from_constraints_locked(
        &self,
        st: &mut State,
        srs: &Srs,
        r1cs: &R1cs,
        witness: &Witness,
    ) -> Result<Option<Multiexps>> {
        let gpu = &self.gpu;
        gpu.bind()?;
        let domain = r1cs.constraints().max(1).next_power_of_two();
        if srs.h.len() + 1 != domain {
            bail!(
                "circuit needs a domain of {domain}, the parameters hold {} H points",
                srs.h.len()
            );
        }
        let lens = [
            witness.aux.len(),
            witness.a_query_len(),
            witness.b_query_len(),
        ];
        // Besides the usual working memory, the witness is on the device while H is made.
        let working = start_peak_bytes(domain, lens)
            + (witness.aux.len() + witness.input.len()) * FR_LIMBS * 4
            + super::ntt::twiddle_bytes(domain.trailing_zeros());
        if st
            .constraints
            .as_ref()
            .is_some_and(|d| d.id != r1cs.circuit_id)
        {
            st.constraints = None;
        }
        // The points first: keeping them resident matters more than products on the device.
        let Some(i) = self.ensure_resident(st, srs, working)? else {
            return Ok(None);
        };
        if st.constraints.is_none() {
            let need = DeviceR1cs::bytes_for(r1cs);
            let (free, _) = gpu.mem_info()?;
            if need + working > free {
                tracing::info!(circuit = %r1cs.circuit_id, need, free, working, "recorded constraints do not fit beside the points");
                return Ok(None);
            }
            match DeviceR1cs::upload(gpu, r1cs) {
                Ok(d) => {
                    tracing::info!(circuit = %r1cs.circuit_id, bytes = d.bytes(), gpu = %gpu.info, "recorded constraints resident on the GPU");
                    st.constraints = Some(d);
                }
                Err(e) if e.downcast_ref::<OutOfDeviceMemory>().is_some() => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let State {
            ntt,
            resident,
            constraints,
            ..
        } = st;
        let (Some(r), Some(d)) = (resident.get(i), constraints.as_ref()) else {
            return Ok(None);
        };
        let sets = PointSets {
            h: &r.h,
            l: &r.l,
            a: &r.a,
            b_g1: &r.b_g1,
        };
        let (sums, phases) = start_resident(gpu, ntt, sets, Abc::Device(d), witness)?;
        tracing::debug!(gpu = %gpu.info, ?phases, "proving start, products on the device");
        Ok(Some(sums))
    }

    fn state(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        self.state.lock().map_err(|_| {
            anyhow!(
                "GPU state poisoned by an earlier failure on {}",
                self.gpu.info
            )
        })
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> String {
        format!("cuda:{}", self.gpu.info.ordinal)
    }

    fn products_on_device(&self) -> bool {
        true
    }

    fn start_from_constraints(
        &self,
        srs: &Srs,
        r1cs: &R1cs,
        witness: &Witness,
    ) -> Result<Option<Multiexps>> {
        let mut st = self.state()?;
        self.start_from_constraints_locked(&mut st, srs, r1cs, witness)
            .with_context(|| format!("proving start on {}", self.gpu.info))
    }

    fn start(&self, srs: &Srs, evals: Evaluations, witness: &Witness) -> Result<Multiexps> {
        let mut st = self.state()?;
        self.start_locked(&mut st, srs, evals, witness)
            .with_context(|| format!("proving start on {}", self.gpu.info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::ntt::twiddle_bytes;

    const GIB: usize = 1 << 30;

    /// A 32 GiB PoRep partition (130,278,869 constraints and aux variables, A density 99.6 %,
    /// B density 25.5 %): its G1 points and the proving start's peak fit in an 80 GB GPU
    /// (79.6 GiB as the driver reports an H100 or A100 80 GB), with a GiB left for the CUDA
    /// context and kernels.
    #[test]
    fn a_32_gib_partition_stays_resident_on_80_gb() {
        let domain = 1usize << 27;
        let lens = [130_278_869usize, 129_757_753, 33_221_111];
        let points = (domain - 1) + lens.iter().sum::<usize>();
        let need = points * AFFINE_LIMBS * 4;
        let working = start_peak_bytes(domain, lens) + twiddle_bytes(27);
        assert!(
            need + working + GIB <= 79 * GIB,
            "{} GiB of points + {} GiB working",
            need / GIB,
            working / GIB
        );
        // The H phase alone is smaller than the MSM phase here.
        assert!(start_peak_bytes(domain, lens) > 3 * domain * FR_LIMBS * 4);
    }

    /// More witness scalars than domain points: the MSM scratch follows the larger MSM.
    #[test]
    fn peak_follows_the_largest_msm() {
        let domain = 1usize << 20;
        let small = start_peak_bytes(domain, [domain / 2, domain / 2, 10]);
        let large = start_peak_bytes(domain, [domain / 2, 4 * domain, 10]);
        assert!(large - small >= scratch_bytes(4 * domain) - scratch_bytes(domain));
    }
}
