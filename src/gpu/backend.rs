//! The CUDA backend of proving start, and the choice between backends.
//!
//! Per partition: A, B, C are made on the GPU from the recorded constraints (or come from the
//! host, their host memory released once they are there), H comes out of the NTTs without
//! leaving the device, and the four G1 MSMs run over parameter point sets kept resident on the
//! GPU between proofs (keyed by `Srs::key`), or, when they do not fit, streamed from host
//! memory in pieces behind the sums (`Points::Host`). The B query's G2 points join the G1 sets
//! when there is room for them too: the B multiexp in G2 then runs beside the one in G1, over
//! its sort, and the CPU finalizer is left the randomization only.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, bail, ensure, Context, Result};
use blstrs::{G1Affine, G1Projective, G2Affine, Scalar as Fr};

use super::device::{Gpu, Lane};
use super::discovery::list_devices;
use super::limbs::{
    points_as_limbs, scalars_as_limbs, DeviceAffine, AFFINE_LIMBS, FR_LIMBS, G2_AFFINE_LIMBS,
};
use super::memory::{DevBuf, OutOfDeviceMemory};
use super::msm::{
    g1_streamed_piece, g2_scratch_bytes, msm_shared, msm_streamed, msm_streamed_together,
    scratch_bytes, streamed_piece_for, together_piece_for, HostPoints, ResidentPrefix, SharedSums,
    StreamedMsm, Streaming,
};
use super::ntt::Ntt;
use super::placement;
use super::products::{DeviceR1cs, DeviceWitness};
use super::witness::DeviceDensity;
use crate::groth16::pins::Pins;
use crate::groth16::{
    Backend, CpuBackend, Density, Evaluations, Multiexps, PackedWitness, R1cs, Srs, SrsKey, Witness,
};

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

/// One circuit's point sets on the device: the G1 sets, and the B query's G2 points when they
/// fit too; or, where they do not all fit, the first terms of the sets that save a start the
/// most time per byte (`placement`), the rest streamed.
struct Resident {
    /// Which parameters these are.
    key: SrsKey,
    lens: [usize; 4],
    /// How many of each set's points (H, L, A, B in G1) are on the device, from its first:
    /// `lens` where the whole set is.
    terms: [usize; 4],
    /// Placed by value in the room beside a streamed start (`ensure_placed`): every MSM is
    /// summed in pieces, even over sets resident whole, since the room left is a streamed
    /// start's and not every MSM's scratch at once.
    in_pieces: bool,
    h: DevBuf<u32>,
    l: DevBuf<u32>,
    a: DevBuf<u32>,
    b_g1: DevBuf<u32>,
    /// `Srs::b_g2`, summed beside `b_g1` over one sort; `None` while they do not fit, the B
    /// multiexp in G2 then being the CPU finalizer's (all sets resident) or streamed with the
    /// B query's G1 points (some streamed).
    b_g2: Option<DevBuf<u32>>,
    /// Whether the log has said why `b_g2` is not here (once per residency).
    b_g2_told: bool,
    last_use: u64,
}

impl Resident {
    fn bytes(&self) -> usize {
        self.h.bytes()
            + self.l.bytes()
            + self.a.bytes()
            + self.b_g1.bytes()
            + self.b_g2.as_ref().map_or(0, DevBuf::bytes)
    }

    /// Whether every G1 set is resident whole, for a start with every MSM at once.
    fn whole(&self) -> bool {
        self.terms == self.lens && !self.in_pieces
    }

    /// The sets as an MSM reads them: resident, streamed from `srs`, or partly each. Where
    /// not all are resident, even a whole resident set is summed in pieces (`Points::Split`):
    /// the placement left room for a streamed start's pieces, not for every MSM's scratch.
    fn sets<'a>(&'a self, srs: &'a Srs) -> PointSets<'a> {
        let whole = self.whole();
        let part = |buf: &'a DevBuf<u32>, terms: usize| (buf, terms);
        fn points<'a, P>(
            (buf, terms): (&'a DevBuf<u32>, usize),
            host: &'a [P],
            whole: bool,
        ) -> Points<'a, P> {
            match terms {
                _ if whole => Points::Device(buf),
                0 => Points::Host(host),
                t => Points::Split {
                    device: buf,
                    resident: t,
                    host,
                },
            }
        }
        let b_g2 = match (&self.b_g2, whole) {
            (Some(g2), true) => Some(Points::Device(g2)),
            (Some(g2), false) => Some(points(part(g2, self.terms[3]), &srs.b_g2, false)),
            (None, true) => None,
            // Streamed with the B query's G1 points, where they are the B query's.
            (None, false) => streamed_b_g2(srs, self.lens[3]),
        };
        PointSets {
            h: points(part(&self.h, self.terms[0]), &srs.h, whole),
            l: points(part(&self.l, self.terms[1]), &srs.l, whole),
            a: points(part(&self.a, self.terms[2]), &srs.a, whole),
            b_g1: points(part(&self.b_g1, self.terms[3]), &srs.b_g1, whole),
            b_g2,
        }
    }
}

/// The B query's G2 points to stream with its `b_query` G1 points, where they are the B
/// query's: parameters made for G1 checks only have others, and the finalizer reports that.
fn streamed_b_g2(srs: &Srs, b_query: usize) -> Option<Points<'_, G2Affine>> {
    (srs.b_g2.len() == b_query).then_some(Points::Host(&srs.b_g2[..]))
}

/// Every set streamed from host memory.
fn streamed_sets(srs: &Srs) -> PointSets<'_> {
    PointSets {
        h: Points::Host(&srs.h),
        l: Points::Host(&srs.l),
        a: Points::Host(&srs.a),
        b_g1: Points::Host(&srs.b_g1),
        b_g2: streamed_b_g2(srs, srs.b_g1.len()),
    }
}

/// Where the B multiexp in G2 runs, for a circuit whose G1 sets are resident.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum G2Place {
    /// On the device: its points fit in the free memory beside a proving start's working
    /// memory (G2 scratch included).
    Device,
    /// On the CPU finalizer: the parameters' G2 points are not the B query's (their number
    /// differs from the G1 points'; parameters made for G1 checks only). The finalizer reports
    /// the mismatch when it needs them.
    NotTheBQuery,
    /// On the CPU finalizer: not enough free device memory. They never evict anything: G1 sets
    /// and recorded constraints save more CPU time per byte.
    NoRoom,
}

/// Where the B multiexp in G2 runs, for `g2_points` parameter points in G2 and `b_points` in
/// G1, with `free` device bytes free and `working` bytes a proving start needs with the G2
/// multiexp.
fn place_b_g2(b_points: usize, g2_points: usize, free: usize, working: usize) -> G2Place {
    if g2_points != b_points {
        G2Place::NotTheBQuery
    } else if g2_points * G2_AFFINE_LIMBS * 4 + working <= free {
        G2Place::Device
    } else {
        G2Place::NoRoom
    }
}

struct State {
    ntt: Ntt,
    resident: Vec<Resident>,
    /// The recorded constraints of the circuit proved last, when they fit beside its points.
    constraints: Option<DeviceR1cs>,
    clock: u64,
    /// How the last streamed proving start went, for benchmarks.
    last_streamed: Option<StreamedPhases>,
    /// Host-to-device bytes per second, once measured (for the placement).
    bandwidth: Option<f64>,
    /// The circuit whose points were last found to have no room at all (said once).
    told_streamed: Option<SrsKey>,
    /// The circuit whose streamed points the driver last refused to page-lock (said once).
    told_page_lock: Option<SrsKey>,
    /// Whether a circuit's points are resident whole or not at all, never partly
    /// (`C2Q_PLACEMENT=whole`, for comparison runs; gpu-check's streamed starts).
    whole_sets_only: bool,
}

/// Device memory a partial placement leaves free beyond its estimate of a streamed start's
/// peak, out of `free`: an allocation that misses ends the start. A GiB on a GPU of any size
/// (the NTT's and the reductions' temporaries, the allocator's granularity), less where all
/// is small.
fn placement_margin(free: usize) -> usize {
    (free / 16).min(1 << 30)
}

/// Proving start on one CUDA GPU. Calls are serialised: one partition at a time per GPU.
pub struct CudaBackend {
    gpu: Gpu,
    state: Mutex<State>,
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        self.gpu.release_set_aside();
        super::kept_evaluations::gpu_closed();
    }
}

fn set_lens(srs: &Srs) -> [usize; 4] {
    [srs.h.len(), srs.l.len(), srs.a.len(), srs.b_g1.len()]
}

fn upload_points<P: DeviceAffine>(gpu: &Gpu, p: &[P]) -> Result<DevBuf<u32>> {
    let buf = gpu.alloc::<u32>(p.len() * P::LIMBS)?;
    gpu.upload(&buf, 0, points_as_limbs(p))?;
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
        super::kept_evaluations::gpu_opened();
        Ok(CudaBackend {
            gpu,
            state: Mutex::new(State {
                ntt: Ntt::new(),
                resident: Vec::new(),
                constraints: None,
                clock: 0,
                last_streamed: None,
                bandwidth: None,
                told_streamed: None,
                told_page_lock: None,
                whole_sets_only: std::env::var("C2Q_PLACEMENT").is_ok_and(|v| v == "whole"),
            }),
        })
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Points resident whole or not at all from now on: where not all fit, all are streamed
    /// (as `C2Q_PLACEMENT=whole` does).
    pub fn place_whole_sets_only(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.whole_sets_only = true;
        }
    }

    /// The phases of the last proving start that streamed its points, if any did.
    pub fn last_streamed(&self) -> Option<StreamedPhases> {
        self.state.lock().ok().and_then(|s| s.last_streamed.clone())
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
            .position(|r| r.key == srs.key && r.lens == lens)
        {
            st.resident[i].last_use = st.clock;
            return Ok(Some(i));
        }
        // Same key, different shape: the file changed; the old copy is useless.
        st.resident.retain(|r| r.key != srs.key);
        let need = lens.iter().sum::<usize>() * AFFINE_LIMBS * 4;
        let (_, total) = self.gpu.mem_info()?;
        if need + working > total {
            tracing::debug!(srs = %srs.key, need, total, "parameters larger than the GPU beside a start");
            return Ok(None);
        }
        if !self.make_room(st, need + working)? {
            let (free, _) = self.gpu.mem_info()?;
            tracing::debug!(srs = %srs.key, need, free, "not enough free device memory for all the parameters");
            return Ok(None);
        }
        let uploaded = (|| -> Result<Resident> {
            Ok(Resident {
                key: srs.key.clone(),
                lens,
                terms: lens,
                in_pieces: false,
                h: upload_points(&self.gpu, &srs.h)?,
                l: upload_points(&self.gpu, &srs.l)?,
                a: upload_points(&self.gpu, &srs.a)?,
                b_g1: upload_points(&self.gpu, &srs.b_g1)?,
                b_g2: None,
                b_g2_told: false,
                last_use: st.clock,
            })
        })();
        match uploaded {
            Ok(r) => {
                tracing::info!(srs = %srs.key, bytes = r.bytes(), gpu = %self.gpu.info, "parameters resident on the GPU");
                st.resident.push(r);
                Ok(Some(st.resident.len() - 1))
            }
            Err(e) if e.downcast_ref::<OutOfDeviceMemory>().is_some() => {
                tracing::info!(srs = %srs.key, "parameters did not fit after all");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Where not all of `srs`'s points fit: makes resident the first terms of the sets that
    /// save a start the most device time per byte (`placement::place`), in the room left
    /// beside `working` bytes of a streamed start, other circuits' points giving way; logs the
    /// choice once with the modelled MSM time. `full_width` is the fraction of the witness
    /// values that are neither 0 nor 1. Returns the entry (an existing one of this circuit,
    /// whole or partial, as it is), or None when nothing is worth placing: all is streamed.
    fn ensure_placed(
        &self,
        st: &mut State,
        srs: &Srs,
        working: usize,
        full_width: f64,
    ) -> Result<Option<usize>> {
        st.clock += 1;
        let lens = set_lens(srs);
        if let Some(i) = st
            .resident
            .iter()
            .position(|r| r.key == srs.key && r.lens == lens)
        {
            st.resident[i].last_use = st.clock;
            return Ok(Some(i));
        }
        st.resident.retain(|r| r.key != srs.key);
        if st.whole_sets_only {
            return Ok(None);
        }
        // The circuit being proved comes first: other circuits' points give way.
        self.make_room(st, usize::MAX)?;
        // A streamed start holds the twiddle table only while H is transformed, and `working`
        // counts it there: one made already must not count twice, out of `free` as well.
        st.ntt.release_twiddles(&self.gpu)?;
        let (free, _) = self.gpu.mem_info()?;
        let room = free.saturating_sub(working + placement_margin(free));
        let g2_with_b = srs.b_g2.len() == lens[3];
        let set = |name, terms, with_g2: bool, full_width| placement::PointSet {
            name,
            terms,
            bytes_per_term: AFFINE_LIMBS * 4 + if with_g2 { G2_AFFINE_LIMBS * 4 } else { 0 },
            with_g2,
            full_width,
        };
        let sets = [
            set("H", lens[0], false, 1.0),
            set("L", lens[1], false, full_width),
            set("A", lens[2], false, full_width),
            set("B", lens[3], g2_with_b, full_width),
        ];
        let bandwidth = self.host_to_device_bytes_per_s(st)?;
        let sms = u32::try_from(self.gpu.info.multiprocessors).unwrap_or(1);
        let plan = placement::place(&sets, room, sms, bandwidth);
        let terms: [usize; 4] = [
            plan.resident_terms[0],
            plan.resident_terms[1],
            plan.resident_terms[2],
            plan.resident_terms[3],
        ];
        let told = sets
            .iter()
            .zip(terms)
            .map(|(s, t)| format!("{} {t} of {}", s.name, s.terms))
            .collect::<Vec<_>>()
            .join(", ");
        if terms == [0; 4] {
            // Said once per circuit: every start of it asks again.
            if st.told_streamed.as_ref() == Some(&srs.key) {
                return Ok(None);
            }
            st.told_streamed = Some(srs.key.clone());
            tracing::info!(srs = %srs.key, room, working, gpu = %self.gpu.info, expected_msm_s = plan.all_streamed_s, "parameters streamed from host memory: no room for any of them beside a start");
            return Ok(None);
        }
        let uploaded = (|| -> Result<Resident> {
            let b_g2 = match g2_with_b && terms[3] == lens[3] {
                true => Some(upload_points(&self.gpu, &srs.b_g2)?),
                false => None,
            };
            Ok(Resident {
                key: srs.key.clone(),
                lens,
                terms,
                in_pieces: true,
                h: upload_points(&self.gpu, &srs.h[..terms[0]])?,
                l: upload_points(&self.gpu, &srs.l[..terms[1]])?,
                a: upload_points(&self.gpu, &srs.a[..terms[2]])?,
                b_g1: upload_points(&self.gpu, &srs.b_g1[..terms[3]])?,
                b_g2,
                b_g2_told: true,
                last_use: st.clock,
            })
        })();
        match uploaded {
            Ok(r) => {
                tracing::info!(srs = %srs.key, resident = %told, bytes = r.bytes(), room, gpu = %self.gpu.info, bandwidth_gb_s = bandwidth / 1e9, expected_msm_s = plan.expected_msm_s, all_streamed_msm_s = plan.all_streamed_s, "parameters partly resident, placed by the time each byte saves; the rest streamed from host memory");
                st.resident.push(r);
                Ok(Some(st.resident.len() - 1))
            }
            Err(e) if e.downcast_ref::<OutOfDeviceMemory>().is_some() => {
                tracing::info!(srs = %srs.key, resident = %told, "partly resident parameters did not fit after all: streaming them all");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// The host-to-device bandwidth, measured once per GPU the way streamed points go (up to
    /// 256 MiB, by DMA from page-locked memory where the driver locks it; a quarter of the
    /// free memory where that is less). Measured through the staging buffers, it read 28
    /// against the 53 – 55 GB/s the points' DMA runs at on an H200, and the placement
    /// overrated every copy.
    fn host_to_device_bytes_per_s(&self, st: &mut State) -> Result<f64> {
        if let Some(b) = st.bandwidth {
            return Ok(b);
        }
        let (free, _) = self.gpu.mem_info()?;
        let bytes = (free / 4).clamp(1 << 20, 256 << 20);
        let measured = self.gpu.measure_host_to_device(bytes)?.gb_per_s * 1e9;
        st.bandwidth = Some(measured);
        Ok(measured)
    }

    /// Evicts the least recently used resident parameters until `bytes` are free; whether
    /// they are.
    fn make_room(&self, st: &mut State, bytes: usize) -> Result<bool> {
        self.make_room_keeping(st, bytes, None)
    }

    /// `make_room`, the points of `keep` (the circuit being proved) left where they are.
    fn make_room_keeping(
        &self,
        st: &mut State,
        bytes: usize,
        keep: Option<&SrsKey>,
    ) -> Result<bool> {
        loop {
            let (free, _) = self.gpu.mem_info()?;
            if bytes <= free {
                return Ok(true);
            }
            let Some(victim) = st
                .resident
                .iter()
                .enumerate()
                .filter(|(_, r)| Some(&r.key) != keep)
                .min_by_key(|(_, r)| r.last_use)
                .map(|(i, _)| i)
            else {
                return Ok(false);
            };
            let r = st.resident.remove(victim);
            tracing::info!(evicted = %r.key, bytes = r.bytes(), "evicting resident parameters");
        }
    }

    /// Puts resident entry `i`'s B query in G2 on the device beside its G1 sets when it fits
    /// with `working` bytes of per-proof memory (the G2 multiexp's scratch included), and says
    /// once in the log why not when it does not: the B multiexp in G2 then stays on the CPU
    /// finalizer.
    fn ensure_b_g2(&self, st: &mut State, i: usize, srs: &Srs, working: usize) -> Result<()> {
        let Some(r) = st.resident.get_mut(i) else {
            bail!("no resident entry {i}");
        };
        if r.b_g2.is_some() {
            return Ok(());
        }
        let (free, _) = self.gpu.mem_info()?;
        let need = srs.b_g2.len() * G2_AFFINE_LIMBS * 4;
        let place = place_b_g2(srs.b_g1.len(), srs.b_g2.len(), free, working);
        if place == G2Place::Device {
            match upload_points(&self.gpu, &srs.b_g2) {
                Ok(d) => {
                    tracing::info!(srs = %srs.key, bytes = d.bytes(), gpu = %self.gpu.info, "B query in G2 resident on the GPU: its multiexp runs beside the one in G1");
                    r.b_g2 = Some(d);
                    return Ok(());
                }
                Err(e) if e.downcast_ref::<OutOfDeviceMemory>().is_none() => return Err(e),
                Err(_) => {}
            }
        }
        if !r.b_g2_told {
            r.b_g2_told = true;
            match place {
                G2Place::NotTheBQuery => {
                    tracing::warn!(srs = %srs.key, g2_points = srs.b_g2.len(), g1_points = srs.b_g1.len(), "the parameters' B points in G2 do not match those in G1: the B multiexp in G2 is left to the CPU finalizer")
                }
                _ => {
                    tracing::warn!(srs = %srs.key, need, free, working, gpu = %self.gpu.info, "the B query's G2 points do not fit on the GPU beside the G1 points: the B multiexp in G2 runs on the CPU finalizer (slower)")
                }
            }
        }
        Ok(())
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
        let tables = super::ntt::twiddle_bytes(domain.trailing_zeros());
        let working = start_peak_bytes(domain, lens, false) + tables;
        let mut resident = self.ensure_resident(st, srs, working)?;
        if resident.is_none() {
            let allow = StreamedAllowance::for_domain(domain);
            let streamed = streamed_start_peak_bytes(domain, lens, allow);
            resident = self.ensure_placed(st, srs, streamed, full_width_fraction(&witness.aux))?;
        }

        match resident {
            Some(i) if st.resident[i].whole() => {
                self.ensure_b_g2(st, i, srs, start_peak_bytes(domain, lens, true) + tables)?;
                let State { ntt, resident, .. } = st;
                let r = resident
                    .get(i)
                    .ok_or_else(|| anyhow!("no resident entry {i}"))?;
                let (sums, phases) =
                    start_resident(gpu, ntt, r.sets(srs), StartInput::Host { evals, witness })?;
                tracing::debug!(gpu = %gpu.info, ?phases, "proving start");
                Ok(sums)
            }
            placed => {
                let State {
                    ntt,
                    resident,
                    last_streamed,
                    told_page_lock,
                    ..
                } = st;
                let sets = match placed.and_then(|i| resident.get(i)) {
                    Some(r) => r.sets(srs),
                    None => streamed_sets(srs),
                };
                page_lock_streamed(gpu, srs, &sets, told_page_lock);
                let (sums, phases) = start_streamed(gpu, ntt, sets, evals, witness)?;
                tracing::debug!(gpu = %gpu.info, ?phases, "streamed proving start");
                *last_streamed = Some(phases);
                Ok(sums)
            }
        }
    }
}

/// The fraction of `values` that are neither 0 nor 1, from every 1024th (the placement's
/// model of the L, A and B sums needs no more).
fn full_width_fraction(values: &[Fr]) -> f64 {
    use ff::Field;
    let sample: Vec<&Fr> = values.iter().step_by(1024).collect();
    let others = sample
        .iter()
        .filter(|v| !bool::from(v.is_zero()) && ***v != Fr::ONE)
        .count();
    others as f64 / sample.len().max(1) as f64
}

/// What a streamed proving start spent its time on, on the host clock.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StreamedPhases {
    /// a, b, c copied over and H's six transforms, two domains on the device at a time.
    pub h_ms: f64,
    /// Within `h_ms`: a's copy (nothing to hide it behind; its buffer's allocation included,
    /// and apart), b's and c's (each beside a transform), whether c had a buffer of its own
    /// (else it waited for a·b), whether a, b, c were page-locked (copied by DMA), and the
    /// wait for the transforms queued after c.
    pub upload_a_ms: f64,
    pub alloc_a_ms: f64,
    pub upload_b_ms: f64,
    pub upload_c_ms: f64,
    pub c_own_buffer: bool,
    pub abc_page_locked: bool,
    pub transforms_wait_ms: f64,
    /// H's sums, and L's with them where `l_with_h`.
    pub msm_h_ms: f64,
    /// The aux values on the device (L's scalars): before H's sums where `l_with_h`.
    pub aux_ms: f64,
    /// Whether L's pieces were summed in turns with H's (`h_and_l_msms`).
    pub l_with_h: bool,
    /// L's sums, when not with H's.
    pub msm_l_ms: f64,
    /// The A and B queries' scalars selected from the aux values on the device.
    pub queries_ms: f64,
    pub msm_a_ms: f64,
    pub msm_b_ms: f64,
    /// Whether the B multiexp in G2 was streamed beside the one in G1 (its points are the B
    /// query's), rather than left to the CPU finalizer.
    pub b_g2_on_device: bool,
    /// The points' copies over all four MSMs: bytes, time, and the part not hidden.
    pub streaming: Streaming,
    /// Domain-sized buffers set aside at the end for the next start's H (`set_aside_buffers`),
    /// and the time their allocation took.
    pub set_aside: usize,
    pub set_aside_ms: f64,
    pub total_ms: f64,
}

/// How many domain-sized buffers a streamed start from host-made a, b and c sets aside for
/// the next start: a's, the twiddle table's and b's, the first three allocations of its H.
/// Made at that start's beginning instead, they waited ~0.2 s on the driver while the next
/// partition's products began on the host (`alloc_a_ms`); at the end of a start they take
/// ~1 ms: the products are done and the MSMs have freed the memory. A 32 GiB proof at 16 GiB
/// takes 27.7 s against 29.4 (`ops/bench/gpu-2026-12-05-z.md`).
/// `C2Q_SET_ASIDE_BUFFERS=N` (0 to 3) sets another count, 0 none, for comparisons.
fn set_aside_buffers() -> usize {
    std::env::var("C2Q_SET_ASIDE_BUFFERS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(3, |n| n.min(3))
}

/// Proving start with the points in host memory: H's transforms with two of a, b, c on the
/// device at a time (a·b is formed before c comes over), so that a GPU with room for two
/// domains and the twiddles can prove; then each MSM with its scalars on the device and its
/// points streamed in pieces behind the sums (`msm_streamed`). The B query's G2 points are
/// streamed with its G1 points where they are the B query's and there is room for pieces of
/// both, so the CPU finalizer has no multiexp in G2 to do.
fn start_streamed(
    gpu: &Gpu,
    ntt: &mut Ntt,
    sets: PointSets,
    evals: Evaluations,
    witness: &Witness,
) -> Result<(Multiexps, StreamedPhases)> {
    let total = Instant::now();
    let mut phases = StreamedPhases::default();
    let domain = evals.constraints().max(1).next_power_of_two();
    let lens = [
        witness.aux.len(),
        witness.a_query_len(),
        witness.b_query_len(),
    ];
    let pairs = [
        ("H", sets.h.len(), domain - 1),
        ("L", sets.l.len(), lens[0]),
        ("A", sets.a.len(), lens[1]),
        ("B", sets.b_g1.len(), lens[2]),
    ];
    for (name, points, len) in pairs {
        if points != len {
            bail!("{len} scalars for the {points} {name} points");
        }
    }

    let t = Instant::now();
    let da = h_coefficients_two_at_a_time(gpu, ntt, evals, domain, &mut phases)?;
    // The MSMs' pieces take the twiddle table's room; the next start makes it again.
    ntt.release_twiddles(gpu)?;
    phases.h_ms = ms(t);

    // With L's pieces in turns with H's, the aux values come first, beside H's coefficients,
    // where that room leaves H's pieces long enough (`aux_beside_h`); otherwise after them.
    let (hl, dl) = if both_stream(&sets) && aux_beside_h(gpu, domain - 1, lens[0])? {
        let t = Instant::now();
        let dl = aux_on_device(gpu, witness)?;
        phases.aux_ms = ms(t);
        let scalars = HAndLScalars {
            h: &da,
            h_len: domain - 1,
            l: &dl,
            l_len: lens[0],
        };
        let hl = h_and_l_msms(gpu, &sets, scalars, &mut phases.streaming)?;
        drop(da);
        (hl, dl)
    } else {
        let t = Instant::now();
        let h = msm_points(gpu, sets.h, None, &da, domain - 1, &mut phases.streaming)?.g1;
        let h_ms = ms(t);
        // H's coefficients make room for the aux values.
        drop(da);
        let t = Instant::now();
        let dl = aux_on_device(gpu, witness)?;
        phases.aux_ms = ms(t);
        let t = Instant::now();
        let l = msm_points(gpu, sets.l, None, &dl, lens[0], &mut phases.streaming)?.g1;
        let hl = HAndL {
            h,
            l,
            together: false,
            h_ms,
            l_ms: ms(t),
        };
        (hl, dl)
    };
    phases.msm_h_ms = hl.h_ms;
    phases.msm_l_ms = hl.l_ms;
    phases.l_with_h = hl.together;

    let t = Instant::now();
    let [d_a, d_b] = queries_on_device(gpu, witness, &dl, lens)?;
    drop(dl);
    phases.queries_ms = ms(t);

    let t = Instant::now();
    let a = msm_points(gpu, sets.a, None, &d_a, lens[1], &mut phases.streaming)?;
    drop(d_a);
    phases.msm_a_ms = ms(t);

    let t = Instant::now();
    let b = msm_points(
        gpu,
        sets.b_g1,
        sets.b_g2,
        &d_b,
        lens[2],
        &mut phases.streaming,
    )?;
    drop(d_b);
    phases.msm_b_ms = ms(t);
    phases.b_g2_on_device = b.g2.is_some();

    let t = Instant::now();
    phases.set_aside = gpu.set_aside(domain * FR_LIMBS * 4, set_aside_buffers());
    phases.set_aside_ms = ms(t);
    phases.total_ms = ms(total);
    let sums = Multiexps {
        h: hl.h,
        l: hl.l,
        a: a.g1,
        b_g1: b.g1,
        b_g2: b.g2,
    };
    Ok((sums, phases))
}

/// The witness's aux values on the device: expanded there from their compact form where the
/// witness has it (~90 MB over PCIe for a 32 GiB partition, against 4.2 GB of values copied
/// through the staging buffers, 0.12 s with the GPU waiting), else copied in full.
fn aux_on_device(gpu: &Gpu, witness: &Witness) -> Result<DevBuf<u32>> {
    let len = witness.aux.len();
    match &witness.compact_aux {
        Some(compact) => {
            ensure!(
                compact.len() == len,
                "compact aux values of {} variables for a witness of {len}",
                compact.len()
            );
            super::witness::expand(gpu, compact, len)
        }
        None => upload_scalars_padded(gpu, Lane::Main, &witness.aux, len),
    }
}

/// The A and B queries' scalars, selected on the device from the aux values `aux` (already
/// there for L's MSM) by the witness's densities: a few milliseconds of GPU time, against the
/// 0.2 and 0.15 s that host threads took to select a 32 GiB partition's from host memory while
/// the GPU waited. Queued on the main lane, with the inputs copied over beside them.
fn queries_on_device(
    gpu: &Gpu,
    witness: &Witness,
    aux: &DevBuf<u32>,
    lens: [usize; 3],
) -> Result<[DevBuf<u32>; 2]> {
    // Each query's device density is returned beside its scalars, so that it outlives the
    // selection queued over it (a freed buffer may be handed to the next allocation at once).
    let select = |len: usize, inputs: &[Fr], density: &Density| {
        let out = gpu.alloc::<u32>(len.max(1) * FR_LIMBS)?;
        gpu.upload(&out, 0, scalars_as_limbs(inputs))?;
        let density = DeviceDensity::upload(gpu, density)?;
        ensure!(
            inputs.len() + density.count() == len,
            "{} inputs and {} aux variables for a query of {len}",
            inputs.len(),
            density.count()
        );
        density.select(gpu, aux, &out, inputs.len())?;
        Ok::<_, anyhow::Error>((out, density))
    };
    let (a, a_density) = select(lens[1], &witness.input, &witness.a_aux_density)?;
    let b_inputs = witness.b_input_density.select(&witness.input);
    let (b, b_density) = select(lens[2], &b_inputs, &witness.b_aux_density)?;
    gpu.sync_lane(Lane::Main)?;
    drop((a_density, b_density));
    Ok([a, b])
}

/// H's coefficients from host-made a, b, c with at most two of them on the device at a time
/// besides the NTT's tables (three where the memory is free for c): a goes first; b goes over
/// the copy lane while a is transformed; a·b is formed in a's buffer, and c comes into b's
/// buffer once the product is made, or into its own while b is transformed where there is
/// room. The host memory of a, b and c is freed by another thread once they are over: freeing
/// gigabytes takes a good part of a second, which the GPU need not wait for.
fn h_coefficients_two_at_a_time(
    gpu: &Gpu,
    ntt: &mut Ntt,
    evals: Evaluations,
    domain: usize,
    phases: &mut StreamedPhases,
) -> Result<DevBuf<u32>> {
    let log_n = domain.trailing_zeros();
    phases.abc_page_locked = !evals.pins.is_empty();
    // Not taken apart: on an early return the whole drops, its page-locking before its values.
    let t = Instant::now();
    let da = gpu.alloc::<u32>(domain * FR_LIMBS)?;
    phases.alloc_a_ms = ms(t);
    if evals.a.len() < domain {
        gpu.memset_zero_in(Lane::Main, &da)?;
    }
    gpu.upload_in(Lane::Main, &da, 0, scalars_as_limbs(&evals.a))?;
    phases.upload_a_ms = ms(t);
    ntt.coset_evaluations(gpu, &da, log_n)?;
    let t = Instant::now();
    let db = upload_scalars_padded(gpu, Lane::Copy, &evals.b, domain)?;
    phases.upload_b_ms = ms(t);
    gpu.wait_for(Lane::Main, Lane::Copy)?;
    ntt.coset_evaluations(gpu, &db, log_n)?;
    // c beside a and b while b is transformed, where a third domain fits with a margin for
    // the transforms' temporaries; else into b's buffer once a·b is made.
    let (free, _) = gpu.mem_info()?;
    let scalar_bytes = FR_LIMBS * 4;
    let own_c = free >= domain * scalar_bytes + (free / 8).min(256 << 20);
    phases.c_own_buffer = own_c;
    let t = Instant::now();
    let dc = if own_c {
        let dc = upload_scalars_padded(gpu, Lane::Copy, &evals.c, domain)?;
        ntt.coset_multiply(gpu, &da, &db, log_n)?;
        drop(db);
        dc
    } else {
        ntt.coset_multiply(gpu, &da, &db, log_n)?;
        gpu.wait_for(Lane::Copy, Lane::Main)?;
        if evals.c.len() < domain {
            gpu.memset_zero_in(Lane::Copy, &db)?;
        }
        gpu.upload_in(Lane::Copy, &db, 0, scalars_as_limbs(&evals.c))?;
        db
    };
    phases.upload_c_ms = ms(t);
    gpu.wait_for(Lane::Main, Lane::Copy)?;
    // Their values are on the device: kept locked for the next partition's products, or let
    // go of off the GPU's path (unlocking and freeing take a good part of a second).
    super::kept_evaluations::give_back(evals);
    ntt.c_coefficients(gpu, &dc, log_n)?;
    ntt.h_from_coset_product(gpu, &da, &dc, log_n)?;
    let t = Instant::now();
    gpu.sync_lane(Lane::Main)?;
    phases.transforms_wait_ms = ms(t);
    drop(dc);
    Ok(da)
}

/// Device bytes `start_resident` holds at its peak besides the point sets and the NTT's tables,
/// for a domain of `domain` and L, A, B MSMs of `msm_lens` scalars, the B MSM in G2 too when
/// `b_g2`. a, b and c (3 domains) are on the device only while H is computed; then H's
/// coefficients (one domain), the witness scalars and an MSM's scratch: the largest one's, or
/// the B MSM's with its G2 half, whichever is more. Counting the larger phase rather than the
/// sum of both is what lets a 32 GiB sector's points (41 GB) stay resident on an 80 GB GPU:
/// ~37 GB at the peak instead of ~45.
pub fn start_peak_bytes(domain: usize, msm_lens: [usize; 3], b_g2: bool) -> usize {
    let scalar = FR_LIMBS * 4;
    let witness = msm_lens.iter().sum::<usize>() * scalar;
    let largest_msm = msm_lens.into_iter().fold(domain, usize::max);
    let mut scratch = scratch_bytes(largest_msm);
    if b_g2 {
        let b = msm_lens[2];
        scratch = scratch.max(scratch_bytes(b) + g2_scratch_bytes(b));
    }
    let h_phase = 3 * domain * scalar;
    let msm_phase = domain * scalar + witness + scratch;
    h_phase.max(msm_phase)
}

/// What the working-memory estimate of a streamed start allows beside the circuit's shape: the
/// NTT's tables (held while H is transformed), and the pieces its largest MSMs are taken to be
/// summed in. Pieces size themselves to what is free when each MSM comes, so the estimate's
/// count decides only what the GPU is asked to leave free: for the placement's room, and for
/// whether the recorded constraints fit beside a streamed start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamedAllowance {
    pub tables: usize,
    pub pieces: usize,
}

impl StreamedAllowance {
    /// The pieces an estimate takes unless told otherwise.
    pub const DEFAULT_PIECES: usize = 4;
    /// The pieces an estimate may take so that a circuit's recorded constraints stay on the
    /// GPU beside a streamed start (`pieces_beside_constraints`).
    pub const PIECES_FOR_CONSTRAINTS: usize = 8;

    /// The default estimate, or the pieces `C2Q_STREAMED_PIECES` names.
    pub fn for_domain(domain: usize) -> StreamedAllowance {
        let pieces = Self::pieces_override().unwrap_or(Self::DEFAULT_PIECES);
        Self::with_pieces(domain, pieces)
    }

    pub fn with_pieces(domain: usize, pieces: usize) -> StreamedAllowance {
        StreamedAllowance {
            tables: super::ntt::twiddle_bytes(domain.trailing_zeros()),
            pieces,
        }
    }

    /// `C2Q_STREAMED_PIECES=N` (2 to 16): a tuning knob that fixes the estimate's pieces for
    /// every streamed start, in place of the choice `pieces_beside_constraints` makes.
    pub fn pieces_override() -> Option<usize> {
        std::env::var("C2Q_STREAMED_PIECES")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .map(|p| p.clamp(2, 16))
    }

    /// Device bytes of one piece of an MSM of `n` terms, points and scratch.
    fn piece_bytes(&self, n: usize) -> usize {
        super::msm::streamed_bytes(n.div_ceil(self.pieces.max(1)), false)
    }
}

/// The pieces a streamed start from recorded constraints is estimated in: the default four,
/// or eight when only that lets the constraints (`constraints` bytes) stay beside the start in
/// `room` (device memory free once no points are resident). Pieces size themselves at run
/// time to what is free, so the estimate decides only what is asked to stay free. Keeping the
/// constraints is worth more than the longer pieces cost: A, B and C are then made on the GPU
/// (a 24 GiB GPU's start no longer copies 12.5 GB of host-made a, b, c, and the host no
/// longer makes them), where eight pieces add only their bucket work to the MSMs: 24.8 s per
/// 32 GiB proof at 24 GiB against 26.3 s with four (`ops/bench/gpu-2026-12-05-y.md`).
pub fn pieces_beside_constraints(
    constraints: usize,
    room: usize,
    working: impl Fn(usize) -> usize,
) -> usize {
    use StreamedAllowance as S;
    let fits = |pieces| constraints + working(pieces) <= room;
    if !fits(S::DEFAULT_PIECES) && fits(S::PIECES_FOR_CONSTRAINTS) {
        S::PIECES_FOR_CONSTRAINTS
    } else {
        S::DEFAULT_PIECES
    }
}

/// Device bytes `start_streamed` holds at its peak besides resident points, for a domain of
/// `domain` and L, A, B MSMs of `msm_lens` scalars, at the largest of its phases: two domains
/// and the NTT's tables while H is computed (the twiddle table is let go of after that); then
/// one MSM's scalars with its pieces (`allow.pieces` of them); the aux values with the A and B
/// queries selected from them; A's MSM with B's scalars waiting. For a 32 GiB partition
/// ~15 GB, the A query's phase.
pub fn streamed_start_peak_bytes(
    domain: usize,
    msm_lens: [usize; 3],
    allow: StreamedAllowance,
) -> usize {
    let scalar = FR_LIMBS * 4;
    let [l, a, b] = msm_lens;
    let phases = [
        2 * domain * scalar + allow.tables,
        domain * scalar + allow.piece_bytes(domain),
        l * scalar + allow.piece_bytes(l),
        (l + a + b) * scalar,
        (a + b) * scalar + allow.piece_bytes(a),
        b * scalar + allow.piece_bytes(b),
    ];
    phases.into_iter().max().unwrap_or(0)
}

/// As `streamed_start_peak_bytes` for a start from recorded constraints: the expanded witness
/// throughout, beside it the products and H's transforms (two domains: C's product takes B's
/// buffer once a·b is made, and the NTT's tables), or one MSM's scalars with its pieces.
pub fn device_streamed_peak_bytes(
    domain: usize,
    inputs: usize,
    msm_lens: [usize; 3],
    expand_scratch: usize,
    allow: StreamedAllowance,
) -> usize {
    let scalar = FR_LIMBS * 4;
    let witness = (inputs + msm_lens[0]) * scalar;
    let largest = msm_lens.into_iter().fold(domain, usize::max);
    witness
        + expand_scratch
            .max(2 * domain * scalar + allow.tables)
            .max(largest * scalar + allow.piece_bytes(largest))
}

/// Device bytes a proving start from recorded constraints (`StartInput::Device`) holds at its
/// peak besides the point sets, the constraints and the NTT's tables, for a domain of `domain`,
/// `inputs` inputs, L, A, B MSMs of `msm_lens` scalars (L's being the aux variables), and
/// `expand_scratch` bytes to expand the packed witness (`gpu::witness::expand_scratch_bytes`);
/// the B MSM in G2 too when `b_g2`. The expanded witness stays on the device throughout;
/// beside it, one phase at a time: the packed witness while it is expanded, the products and
/// H's transforms (two domains), H's MSM (one domain and the MSM's scratch), L's MSM (its
/// scratch), then A's and B's, each with its query's scalars, selected just before it and
/// freed after it. For a 32 GiB partition that is ~27 GB: its G1 points, constraints and G2
/// points (55 GB) and a start fit on an 80 GB GPU.
pub fn device_start_peak_bytes(
    domain: usize,
    inputs: usize,
    msm_lens: [usize; 3],
    expand_scratch: usize,
    b_g2: bool,
) -> usize {
    let scalar = FR_LIMBS * 4;
    let witness = (inputs + msm_lens[0]) * scalar;
    let [l, a, b] = msm_lens;
    let b_scratch = scratch_bytes(b) + if b_g2 { g2_scratch_bytes(b) } else { 0 };
    let phases = [
        expand_scratch,
        2 * domain * scalar,
        domain * scalar + scratch_bytes(domain),
        scratch_bytes(l),
        a * scalar + scratch_bytes(a),
        b * scalar + b_scratch,
    ];
    witness + phases.into_iter().max().unwrap_or(0)
}

/// What a proving start works from.
pub enum StartInput<'a> {
    /// a, b, c and the witness made on the host: copied over.
    Host {
        evals: Evaluations,
        witness: &'a Witness,
    },
    /// The packed witness, expanded on the device; A, B, C made there from the recorded
    /// constraints resident with the points, and the queries selected by their densities.
    Device {
        constraints: &'a DeviceR1cs,
        witness: &'a PackedWitness,
    },
}

impl StartInput<'_> {
    fn constraints(&self) -> usize {
        match self {
            StartInput::Host { evals, .. } => evals.constraints(),
            StartInput::Device { constraints, .. } => constraints.rows,
        }
    }

    /// Scalars of the L, A and B multiexps.
    fn msm_lens(&self) -> [usize; 3] {
        match self {
            StartInput::Host { witness, .. } => [
                witness.aux.len(),
                witness.a_query_len(),
                witness.b_query_len(),
            ],
            StartInput::Device { constraints, .. } => [
                constraints.aux,
                constraints.a_query_len(),
                constraints.b_query_len(),
            ],
        }
    }
}

impl<'a, P> Points<'a, P> {
    /// The set's host points, where any are streamed from there.
    fn streamed_host(&self) -> Option<&'a [P]> {
        match *self {
            Points::Device(_) => None,
            Points::Host(host) | Points::Split { host, .. } => Some(host),
        }
    }
}

/// Page-locks the host memory of every set that `sets` streams, once per SRS (`Srs::pins`
/// keeps the locks): their copies then go by DMA straight from the parameters, leaving the
/// CPU's cores and memory bandwidth to the other stages. Where the driver refuses, the copies
/// go through the staging buffers, as before, and the log says so once per circuit.
fn page_lock_streamed(gpu: &Gpu, srs: &Srs, sets: &PointSets, told: &mut Option<SrsKey>) {
    let t = Instant::now();
    let lock_all = || -> Result<usize> {
        let mut bytes = 0;
        for set in [&sets.h, &sets.l, &sets.a, &sets.b_g1] {
            bytes += page_lock_held(gpu, set.streamed_host().unwrap_or_default(), &srs.pins)?;
        }
        let g2 = sets.b_g2.as_ref().and_then(Points::streamed_host);
        Ok(bytes + page_lock_held(gpu, g2.unwrap_or_default(), &srs.pins)?)
    };
    match lock_all() {
        Ok(0) => {}
        Ok(bytes) => {
            tracing::info!(srs = %srs.key, bytes, ms = t.elapsed().as_millis() as u64, gpu = %gpu.info, "streamed points page-locked in host memory: copied by DMA straight from there")
        }
        Err(e) if told.as_ref() != Some(&srs.key) => {
            *told = Some(srs.key.clone());
            tracing::warn!(srs = %srs.key, gpu = %gpu.info, error = format!("{e:#}"), "streamed points could not be page-locked: they are copied through the staging buffers, at the cost of CPU time");
        }
        Err(_) => {}
    }
}

/// Page-locks `data` unless it is already, the lock held by `pins` (its owner's); returns the
/// bytes newly locked.
fn page_lock_held<T: Copy>(gpu: &Gpu, data: &[T], pins: &Pins) -> Result<usize> {
    Ok(match gpu.page_lock(data)? {
        Some(locked) => {
            pins.hold(Box::new(locked));
            std::mem::size_of_val(data)
        }
        None => 0,
    })
}

/// Where an MSM reads one set of points from.
pub enum Points<'a, P> {
    /// Resident on the device.
    Device(&'a DevBuf<u32>),
    /// In host memory: copied over in pieces behind the sums (`msm_streamed`).
    Host(&'a [P]),
    /// All of them in host memory, the first `resident` on the device too: those summed in
    /// place, the rest streamed.
    Split {
        device: &'a DevBuf<u32>,
        resident: usize,
        host: &'a [P],
    },
}

// Not derived: derive would require P: Copy of the points themselves.
impl<P> Clone for Points<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Points<'_, P> {}

impl<P: DeviceAffine> Points<'_, P> {
    fn len(&self) -> usize {
        match self {
            Points::Device(buf) => buf.len() / P::LIMBS,
            Points::Host(points) | Points::Split { host: points, .. } => points.len(),
        }
    }

    /// How many of the set's points are copied from host memory for each MSM.
    fn streamed_terms(&self) -> usize {
        match self {
            Points::Device(_) => 0,
            Points::Host(points) => points.len(),
            Points::Split { resident, host, .. } => host.len().saturating_sub(*resident),
        }
    }
}

/// One circuit's point sets, each resident or streamed: the G1 sets, and the B query's G2
/// points when the B multiexp in G2 is to run on the GPU too.
pub struct PointSets<'a> {
    pub h: Points<'a, G1Affine>,
    pub l: Points<'a, G1Affine>,
    pub a: Points<'a, G1Affine>,
    pub b_g1: Points<'a, G1Affine>,
    pub b_g2: Option<Points<'a, G2Affine>>,
}

impl PointSets<'_> {
    /// Whether no set streams any of its points.
    fn all_resident(&self) -> bool {
        [&self.h, &self.l, &self.a, &self.b_g1]
            .iter()
            .all(|p| p.streamed_host().is_none())
            && self
                .b_g2
                .as_ref()
                .is_none_or(|p| p.streamed_host().is_none())
    }
}

/// Σ s_i·P_i over `g1` and, when given, Σ s_i·Q_i over `g2`, for i < n: over one sort when
/// both are resident (`msm_shared`), in pieces when both are streamed, wholly or but for a
/// resident prefix (`msm_streamed`, whose copies are added to `streaming`). Streamed G2 points
/// with no room for pieces of both are left out (the result has no G2 sum, and the finalizer
/// makes it).
fn msm_points(
    gpu: &Gpu,
    g1: Points<G1Affine>,
    g2: Option<Points<G2Affine>>,
    scalars: &DevBuf<u32>,
    n: usize,
    streaming: &mut Streaming,
) -> Result<SharedSums> {
    match (g1, g2) {
        (Points::Device(p), None) => msm_shared(gpu, p, None, scalars, n),
        (Points::Device(p), Some(Points::Device(q))) => msm_shared(gpu, p, Some(q), scalars, n),
        (Points::Device(_), Some(_)) => bail!("G2 points streamed beside resident G1 points"),
        (g1, g2) => {
            let Some(g1) = Streamed::of(g1) else {
                bail!("resident G1 points taken for streamed ones");
            };
            let g2 = match g2.map(Streamed::of) {
                None => None,
                Some(Some(q)) => Some(q),
                Some(None) => bail!("G2 points resident beside streamed G1 points"),
            };
            if g2.is_some_and(|q| q.resident_terms() != g1.resident_terms()) {
                bail!("G1 and G2 points resident to different terms");
            }
            // Pieces over all n terms: the resident ones are summed in pieces too.
            let with_g2 = match g2 {
                Some(q) => streamed_piece_for(gpu, n, true)?.map(|piece| (q, piece)),
                None => None,
            };
            let (host, piece, g2_prefix) = match with_g2 {
                Some((q, piece)) => (
                    HostPoints {
                        g1: g1.host,
                        g2: Some(q.host),
                    },
                    piece,
                    q.resident.map(|(d, _)| d),
                ),
                None => (
                    HostPoints {
                        g1: g1.host,
                        g2: None,
                    },
                    g1_streamed_piece(gpu, n)?,
                    None,
                ),
            };
            let resident = g1.resident.map(|(device, terms)| ResidentPrefix {
                terms,
                g1: device,
                g2: g2_prefix,
            });
            let (sums, copied) = msm_streamed(gpu, host, resident, scalars, n, piece)?;
            *streaming += copied;
            Ok(sums)
        }
    }
}

/// Whether H's and L's multiexps are summed together where both sets stream
/// (`h_and_l_msms`). `C2Q_MSM_TOGETHER=0` sums them one after the other, for comparisons.
fn msm_together() -> bool {
    std::env::var("C2Q_MSM_TOGETHER").map_or(true, |v| v != "0")
}

/// Whether H's and L's multiexps are summed together: H streams, L streams at least half its
/// points, and `msm_together` allows it. Measured where L streams whole (24 and 16 GB cards,
/// `ops/bench/gpu-2026-12-05-aa.md`); where most of L is resident (48 GB cards), its copies
/// are short, and the third piece buffer would cost H's pieces more than it hides.
fn both_stream(sets: &PointSets) -> bool {
    msm_together() && sets.h.streamed_terms() > 0 && 2 * sets.l.streamed_terms() >= sets.l.len()
}

/// Milliseconds since `t`, as the start phases report them.
fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Whether a start from host-made a, b, c, with H's coefficients on the device, can make room
/// for L's scalars (`l_len` aux values) beside them, to sum H's and L's pieces in turns: only
/// where H then goes in at most twice the pieces it would take alone (each piece costs its own
/// bucket work). On an H100 capped at 16 GiB a 32 GiB partition's H goes in 8 pieces instead of
/// 4, its sums 0.12 s longer, and the start 0.09 s shorter (`ops/bench/gpu-2026-12-05-aa.md`);
/// a card with less room keeps H's pieces long.
fn aux_beside_h(gpu: &Gpu, h_len: usize, l_len: usize) -> Result<bool> {
    let (free, _) = gpu.mem_info()?;
    Ok(aux_fits_beside_h(free, h_len, l_len))
}

/// `aux_beside_h` for `free` device bytes.
fn aux_fits_beside_h(free: usize, h_len: usize, l_len: usize) -> bool {
    let room = super::msm::piece_room(free);
    let alone = super::msm::streamed_piece_len(h_len, room, false);
    let room = room.saturating_sub(l_len * FR_LIMBS * 4);
    let beside = super::msm::streamed_piece_len_with(
        h_len.max(l_len),
        room,
        false,
        super::msm::TOGETHER_BUFFERS,
    );
    match (alone, beside) {
        (Some(alone), Some(beside)) => h_len.div_ceil(beside) <= 2 * h_len.div_ceil(alone),
        _ => false,
    }
}

/// The scalars of H's and L's multiexps, on the device, and how many of each are summed.
struct HAndLScalars<'a> {
    h: &'a DevBuf<u32>,
    h_len: usize,
    l: &'a DevBuf<u32>,
    l_len: usize,
}

/// H's and L's sums, whether they were summed together, and the time each took (H's for both
/// when together, L's then 0).
struct HAndL {
    h: G1Projective,
    l: G1Projective,
    together: bool,
    h_ms: f64,
    l_ms: f64,
}

/// H's and L's multiexps: together where both sets stream enough (`both_stream`), their pieces
/// in turns (`msm_streamed_together`), so that the copies of L's points, whose sums are short
/// (its scalars are nearly all zeros and ones), go behind the sums of H's full-width ones
/// instead of leaving the GPU waiting; otherwise H's, then L's.
fn h_and_l_msms(
    gpu: &Gpu,
    sets: &PointSets,
    scalars: HAndLScalars,
    streaming: &mut Streaming,
) -> Result<HAndL> {
    let h = streamed_g1(sets.h, scalars.h, scalars.h_len);
    let l = streamed_g1(sets.l, scalars.l, scalars.l_len);
    let t = Instant::now();
    if let (Some(h), Some(l), true) = (h, l, both_stream(sets)) {
        let piece = together_piece_for(gpu, scalars.h_len.max(scalars.l_len))?;
        let (sums, copied) = msm_streamed_together(gpu, &[h, l], piece)?;
        *streaming += copied;
        return Ok(HAndL {
            h: sums[0].g1,
            l: sums[1].g1,
            together: true,
            h_ms: ms(t),
            l_ms: 0.0,
        });
    }
    let h = msm_points(gpu, sets.h, None, scalars.h, scalars.h_len, streaming)?.g1;
    let h_ms = ms(t);
    let t = Instant::now();
    let l = msm_points(gpu, sets.l, None, scalars.l, scalars.l_len, streaming)?.g1;
    Ok(HAndL {
        h,
        l,
        together: false,
        h_ms,
        l_ms: ms(t),
    })
}

/// A G1 multiexp over a set that streams at least some of its points, as
/// `msm_streamed_together` takes it; None for a set resident whole.
fn streamed_g1<'a>(
    points: Points<'a, G1Affine>,
    scalars: &'a DevBuf<u32>,
    n: usize,
) -> Option<StreamedMsm<'a>> {
    Streamed::of(points).map(|s| StreamedMsm {
        points: HostPoints {
            g1: s.host,
            g2: None,
        },
        resident: s.resident.map(|(g1, terms)| ResidentPrefix {
            terms,
            g1,
            g2: None,
        }),
        scalars,
        n,
    })
}

/// One streamed point set as an MSM takes it: all its points in host memory, and the first
/// terms' on the device where some are resident.
struct Streamed<'a, P> {
    host: &'a [P],
    resident: Option<(&'a DevBuf<u32>, usize)>,
}

// Not derived: derive would require P: Copy of the points themselves.
impl<P> Clone for Streamed<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Streamed<'_, P> {}

impl<'a, P> Streamed<'a, P> {
    /// None for a set resident whole.
    fn of(points: Points<'a, P>) -> Option<Self> {
        match points {
            Points::Device(_) => None,
            Points::Host(host) => Some(Streamed {
                host,
                resident: None,
            }),
            Points::Split {
                device,
                resident,
                host,
            } => Some(Streamed {
                host,
                resident: Some((device, resident)),
            }),
        }
    }

    fn resident_terms(&self) -> usize {
        self.resident.map_or(0, |(_, terms)| terms)
    }
}

/// Where the time of one proving start went, on the host clock.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StartPhases {
    /// Copying a to the device: nothing to hide it behind yet.
    pub upload_a_ms: f64,
    /// From there until H's coefficients are ready: six transforms, with b and c copied meanwhile.
    pub h_ms: f64,
    /// Within `h_ms`: the copies of b and c, and the wait for the NTTs after them.
    pub upload_b_ms: f64,
    pub upload_c_ms: f64,
    pub h_wait_ms: f64,
    /// The MSM over H's coefficients, with the witness scalars copied meanwhile (from host-made
    /// a, b, c), and L's with it where `l_with_h`.
    pub msm_h_ms: f64,
    /// Whether L's pieces were summed in turns with H's (`h_and_l_msms`; from recorded
    /// constraints, where both sets stream).
    pub l_with_h: bool,
    /// From host-made a, b, c: the selection of the A and B queries' scalars from the witness
    /// and the witness copy (beside the MSM), then freeing the host memory of a, b and c (also
    /// beside the MSM), and the wait for both if the MSM finished first. (From recorded
    /// constraints the queries are selected on the device, within `msm_a_ms` and `msm_b_ms`.)
    pub witness_copy_ms: f64,
    pub release_abc_ms: f64,
    pub witness_wait_ms: f64,
    /// L's sums, when not with H's.
    pub msm_l_ms: f64,
    pub msm_a_ms: f64,
    /// The B MSM: in G1, and in G2 over the same sort when its points are resident
    /// (`b_g2_on_device`).
    pub msm_b_ms: f64,
    pub b_g2_on_device: bool,
    /// The copies of streamed point sets (none when all are resident).
    pub streaming: Streaming,
    pub total_ms: f64,
}

/// Proving start over resident point sets: H (from host-made a, b, c, or all on the device
/// from a packed witness), then the L, A and B multiexps. With the B query's G2 points among
/// the sets, the B MSM sums them too (over its G1 half's sort), and the result carries the B
/// multiexp in G2.
pub fn start_resident(
    gpu: &Gpu,
    ntt: &mut Ntt,
    sets: PointSets,
    input: StartInput,
) -> Result<(Multiexps, StartPhases)> {
    gpu.bind()?;
    let n = input.constraints();
    let domain = n.max(1).next_power_of_two();
    let lens = input.msm_lens();
    let pairs = [
        ("H", sets.h, domain - 1),
        ("L", sets.l, lens[0]),
        ("A", sets.a, lens[1]),
        ("B", sets.b_g1, lens[2]),
    ];
    for (name, points, len) in pairs {
        if points.len() != len {
            bail!("{len} scalars for the {} {name} points", points.len());
        }
    }
    if let Some(b_g2) = sets.b_g2 {
        if b_g2.len() != lens[2] {
            bail!("{} scalars for the {} B points in G2", lens[2], b_g2.len());
        }
    }
    let mut phases = StartPhases::default();
    let total = Instant::now();

    let (h, l, a, b) = match input {
        StartInput::Host { evals, witness } => {
            let (h, [dl, d_a, d_b]) =
                h_from_host(gpu, ntt, sets.h, evals, witness, lens, &mut phases)?;
            let t = Instant::now();
            let l = msm_points(gpu, sets.l, None, &dl, lens[0], &mut phases.streaming)?.g1;
            phases.msm_l_ms = ms(t);
            drop(dl);
            let (a, b) = a_and_b_msms(gpu, &sets, lens, || Ok(d_a), || Ok(d_b), &mut phases)?;
            (h, l, a, b)
        }
        StartInput::Device {
            constraints,
            witness,
        } => {
            let release_tables = !sets.all_resident();
            let transform = HTransform {
                constraints,
                witness,
                release_tables,
            };
            let (dh, dw) = h_on_device(gpu, ntt, transform, &mut phases)?;
            // L's scalars, the aux values, are on the device already: where both sets stream,
            // L's pieces go in turns with H's.
            let msms = HAndLScalars {
                h: &dh,
                h_len: domain - 1,
                l: &dw.aux,
                l_len: lens[0],
            };
            let hl = h_and_l_msms(gpu, &sets, msms, &mut phases.streaming)?;
            drop(dh);
            phases.msm_h_ms = hl.h_ms;
            phases.msm_l_ms = hl.l_ms;
            phases.l_with_h = hl.together;
            // Each query's scalars are selected just before its MSM and freed after it, so
            // that no two selections and no MSM scratch but one share the device at once.
            let input = &witness.input;
            let (a, b) = a_and_b_msms(
                gpu,
                &sets,
                lens,
                || constraints.a_query(gpu, &dw, input),
                || constraints.b_query(gpu, &dw, input),
                &mut phases,
            )?;
            (hl.h, hl.l, a, b)
        }
    };
    phases.total_ms = ms(total);
    let sums = Multiexps {
        h,
        l,
        a,
        b_g1: b.g1,
        b_g2: b.g2,
    };
    Ok((sums, phases))
}

/// The A and B multiexps, in that order, over the scalars `a_query` and `b_query` give when
/// their turn comes (each freed when its MSM is done). With the B query's G2 points among the
/// sets, the B MSM sums them too.
fn a_and_b_msms(
    gpu: &Gpu,
    sets: &PointSets,
    lens: [usize; 3],
    a_query: impl FnOnce() -> Result<DevBuf<u32>>,
    b_query: impl FnOnce() -> Result<DevBuf<u32>>,
    phases: &mut StartPhases,
) -> Result<(G1Projective, super::msm::SharedSums)> {
    let t = Instant::now();
    let a = msm_points(
        gpu,
        sets.a,
        None,
        &a_query()?,
        lens[1],
        &mut phases.streaming,
    )?
    .g1;
    phases.msm_a_ms = ms(t);
    let t = Instant::now();
    let b = msm_points(
        gpu,
        sets.b_g1,
        sets.b_g2,
        &b_query()?,
        lens[2],
        &mut phases.streaming,
    )?;
    phases.msm_b_ms = ms(t);
    phases.b_g2_on_device = b.g2.is_some();
    Ok((a, b))
}

/// H's multiexp from host-made a, b, c: a goes first; while the GPU transforms it, b goes over
/// the copy lane, then c; while the GPU computes H's MSM, another host thread selects the A and
/// B queries' scalars from the witness, copies them and the aux values over, and then frees the
/// host memory of a, b and c. Returns H and the L, A, B scalars on the device.
fn h_from_host(
    gpu: &Gpu,
    ntt: &mut Ntt,
    h_points: Points<G1Affine>,
    evals: Evaluations,
    witness: &Witness,
    lens: [usize; 3],
    phases: &mut StartPhases,
) -> Result<(G1Projective, [DevBuf<u32>; 3])> {
    let domain = evals.constraints().max(1).next_power_of_two();
    let log_n = domain.trailing_zeros();
    // Not taken apart: on an early return the whole drops, its page-locking before its values.
    let t = Instant::now();
    let da = upload_scalars_padded(gpu, Lane::Main, &evals.a, domain)?;
    phases.upload_a_ms = ms(t);
    let t = Instant::now();
    ntt.coset_evaluations(gpu, &da, log_n)?;
    let tb = Instant::now();
    let db = upload_scalars_padded(gpu, Lane::Copy, &evals.b, domain)?;
    phases.upload_b_ms = ms(tb);
    gpu.wait_for(Lane::Main, Lane::Copy)?;
    ntt.coset_evaluations(gpu, &db, log_n)?;
    let tc = Instant::now();
    let dc = upload_scalars_padded(gpu, Lane::Copy, &evals.c, domain)?;
    phases.upload_c_ms = ms(tc);
    gpu.wait_for(Lane::Main, Lane::Copy)?;
    ntt.c_coefficients(gpu, &dc, log_n)?;
    ntt.h_from_coset_evaluations(gpu, &da, &db, &dc, log_n)?;
    let tw = Instant::now();
    gpu.sync_lane(Lane::Main)?;
    phases.h_wait_ms = ms(tw);
    drop((db, dc));
    phases.h_ms = ms(t);
    let host_abc = evals;

    let (h, queries) = std::thread::scope(|scope| {
        let copier = scope.spawn(move || -> Result<([DevBuf<u32>; 3], f64, f64)> {
            let t = Instant::now();
            gpu.bind()?;
            let bufs = [
                upload_scalars_padded(gpu, Lane::Copy, &witness.aux, lens[0])?,
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
            // The copies are over: a, b and c are kept for the next partition's products where
            // they are page-locked (`kept_evaluations`), else go back to the system now, while
            // the GPU is busy with the MSM. Freeing gigabytes takes a good part of a second and
            // holds up the process's memory mappings (and so the CUDA driver's allocations):
            // during copies it made them up to 3× slower, and before the next MSM it delayed
            // that by 0.35 s.
            let t = Instant::now();
            if host_abc.pins.is_empty() {
                drop(host_abc);
            } else {
                super::kept_evaluations::give_back(host_abc);
            }
            Ok((bufs, copy_ms, ms(t)))
        });
        let t = Instant::now();
        let h = msm_points(gpu, h_points, None, &da, domain - 1, &mut phases.streaming);
        phases.msm_h_ms = ms(t);
        let t = Instant::now();
        let queries = copier
            .join()
            .map_err(|_| anyhow!("the witness copy thread panicked"));
        phases.witness_wait_ms = ms(t);
        (h, queries)
    });
    let h = h?.g1;
    drop(da);
    let (bufs, copy_ms, release_ms) = queries??;
    phases.witness_copy_ms = copy_ms;
    phases.release_abc_ms = release_ms;
    gpu.wait_for(Lane::Main, Lane::Copy)?;
    Ok((h, bufs))
}

/// What `h_on_device` makes H from: the recorded constraints and the packed witness; and
/// whether the twiddle table is let go of after the transforms (a streamed start, whose MSMs'
/// pieces need the room more).
struct HTransform<'a> {
    constraints: &'a DeviceR1cs,
    witness: &'a PackedWitness,
    release_tables: bool,
}

/// H's coefficients with everything made on the device: the packed witness (~90 MB at 32 GiB)
/// is copied and expanded, and A, B, C are the recorded constraints' products with it, written
/// into the transforms' buffers. Nothing of size crosses PCIe and no host thread copies or
/// frees gigabytes. Returns H's coefficients and the expanded witness, whose aux values are
/// L's scalars and which the A and B queries are then selected from by the resident densities.
fn h_on_device(
    gpu: &Gpu,
    ntt: &mut Ntt,
    transform: HTransform,
    phases: &mut StartPhases,
) -> Result<(DevBuf<u32>, DeviceWitness)> {
    let HTransform {
        constraints,
        witness,
        release_tables,
    } = transform;
    let domain = constraints.rows.max(1).next_power_of_two();
    let log_n = domain.trailing_zeros();
    let t = Instant::now();
    let dw = constraints.witness(gpu, witness)?;
    phases.upload_a_ms = ms(t);
    let t = Instant::now();
    let product = |which: usize| -> Result<DevBuf<u32>> {
        let out = gpu.alloc::<u32>(domain * FR_LIMBS)?;
        constraints.product(gpu, which, &dw.aux, &dw.input, &out, domain)?;
        Ok(out)
    };
    // Two domains at a time, not three: a·b is formed in a's buffer, and C's product then
    // overwrites b's (every kernel here is on the main lane, so in order). The products'
    // phase is then never a start's peak (4.3 GB less for a 32 GiB partition).
    let da = product(0)?;
    ntt.coset_evaluations(gpu, &da, log_n)?;
    let dbc = product(1)?;
    ntt.coset_evaluations(gpu, &dbc, log_n)?;
    ntt.coset_multiply(gpu, &da, &dbc, log_n)?;
    constraints.product(gpu, 2, &dw.aux, &dw.input, &dbc, domain)?;
    ntt.c_coefficients(gpu, &dbc, log_n)?;
    ntt.h_from_coset_product(gpu, &da, &dbc, log_n)?;
    let tw = Instant::now();
    gpu.sync_lane(Lane::Main)?;
    phases.h_wait_ms = ms(tw);
    drop(dbc);
    if release_tables {
        ntt.release_twiddles(gpu)?;
    }
    phases.h_ms = ms(t);
    Ok((da, dw))
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
        witness: &PackedWitness,
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
            r1cs.aux,
            r1cs.inputs + r1cs.a_aux_density.count(),
            r1cs.b_input_density.count() + r1cs.b_aux_density.count(),
        ];
        let expand = super::witness::expand_scratch_bytes(&witness.aux);
        let tables = super::ntt::twiddle_bytes(domain.trailing_zeros());
        let working = device_start_peak_bytes(domain, r1cs.inputs, lens, expand, false) + tables;
        let working_g2 = device_start_peak_bytes(domain, r1cs.inputs, lens, expand, true) + tables;
        if st
            .constraints
            .as_ref()
            .is_some_and(|d| d.id != r1cs.circuit_id)
        {
            st.constraints = None;
        }
        // The G1 points first: keeping them resident matters more than products on the device,
        // and the products more than the B multiexp in G2 on the device (the CPU makes it in
        // a fraction of the time A, B and C take there).
        let i = match self.ensure_resident(st, srs, working)? {
            Some(i) if st.resident[i].whole() => i,
            _ => {
                let streamed = |pieces| {
                    let allow = StreamedAllowance::with_pieces(domain, pieces);
                    device_streamed_peak_bytes(domain, r1cs.inputs, lens, expand, allow)
                };
                return self.start_streamed_from_constraints(st, srs, r1cs, witness, streamed);
            }
        };
        let mut i = i;
        if st.constraints.is_none() {
            let need = DeviceR1cs::bytes_for(r1cs);
            // With the G2 points resident already, a start needs the G2 scratch as well.
            let working = match st.resident[i].b_g2 {
                Some(_) => working_g2,
                None => working,
            };
            // Other circuits' points give way to this circuit's constraints: a small circuit
            // proved in between (a WinningPoSt's) must not keep a large one's A, B and C off
            // the GPU by the few hundred MB its points hold, which go up again in milliseconds
            // when it comes back.
            if !self.make_room_keeping(st, need + working, Some(&srs.key))? {
                let (free, _) = gpu.mem_info()?;
                tracing::info!(circuit = %r1cs.circuit_id, need, free, working, "recorded constraints do not fit beside the points");
                return Ok(None);
            }
            // Evictions move the entries.
            i = st
                .resident
                .iter()
                .position(|r| r.key == srs.key)
                .context("the circuit's points left the GPU")?;
            match DeviceR1cs::upload(gpu, r1cs) {
                Ok(d) => {
                    tracing::info!(circuit = %r1cs.circuit_id, bytes = d.bytes(), gpu = %gpu.info, "recorded constraints resident on the GPU");
                    st.constraints = Some(d);
                }
                Err(e) if e.downcast_ref::<OutOfDeviceMemory>().is_some() => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        self.ensure_b_g2(st, i, srs, working_g2)?;
        let State {
            ntt,
            resident,
            constraints,
            ..
        } = st;
        let (Some(r), Some(d)) = (resident.get(i), constraints.as_ref()) else {
            return Ok(None);
        };
        let (sums, phases) = start_resident(
            gpu,
            ntt,
            r.sets(srs),
            StartInput::Device {
                constraints: d,
                witness,
            },
        )?;
        tracing::debug!(gpu = %gpu.info, ?phases, "proving start, products on the device");
        Ok(Some(sums))
    }

    /// Proving start from recorded constraints with the points left in host memory, for a GPU
    /// with room for the constraints and a streamed start's working memory (`working`) but not
    /// for all the points as well: A, B, C are still made on the GPU, so the host's cores and
    /// a, b, c's copies stay out of it; the room left holds the points that save the most
    /// time per byte (`ensure_placed`), and each MSM streams the rest (`msm_streamed`). `None`
    /// when the constraints do not fit either: the caller makes A, B, C on the CPU.
    fn start_streamed_from_constraints(
        &self,
        st: &mut State,
        srs: &Srs,
        r1cs: &R1cs,
        witness: &PackedWitness,
        streamed: impl Fn(usize) -> usize,
    ) -> Result<Option<Multiexps>> {
        let gpu = &self.gpu;
        // The working memory counts the twiddle table in H's phase, which is the only one that
        // holds it here: one kept from an earlier start must not count twice.
        st.ntt.release_twiddles(gpu)?;
        let need = DeviceR1cs::bytes_for(r1cs);
        let pieces = match StreamedAllowance::pieces_override() {
            Some(pieces) => pieces,
            None => {
                let (free, _) = gpu.mem_info()?;
                let held: usize = st.resident.iter().map(Resident::bytes).sum::<usize>()
                    + st.constraints.as_ref().map_or(0, DeviceR1cs::bytes);
                pieces_beside_constraints(need, free + held, &streamed)
            }
        };
        let working = streamed(pieces);
        if st.constraints.is_none() {
            // Resident points give way to the constraints, this circuit's own too: they save a
            // start more than any point set does. The points are placed again in what is left.
            if !self.make_room(st, need + working)? {
                let (free, _) = gpu.mem_info()?;
                tracing::debug!(circuit = %r1cs.circuit_id, need, free, working, pieces, "recorded constraints do not fit beside a streamed start");
                return Ok(None);
            }
            match DeviceR1cs::upload(gpu, r1cs) {
                Ok(d) => {
                    tracing::info!(circuit = %r1cs.circuit_id, bytes = d.bytes(), gpu = %gpu.info, estimated_pieces = pieces, "recorded constraints resident on the GPU, the points streamed from host memory where they do not fit");
                    st.constraints = Some(d);
                }
                Err(e) if e.downcast_ref::<OutOfDeviceMemory>().is_some() => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let census = witness.aux.census();
        let full_width = census.others as f64 / witness.aux.len().max(1) as f64;
        let placed = self.ensure_placed(st, srs, working, full_width)?;
        let State {
            ntt,
            constraints,
            resident,
            told_page_lock,
            ..
        } = st;
        let Some(d) = constraints.as_ref() else {
            return Ok(None);
        };
        let sets = match placed.and_then(|i| resident.get(i)) {
            Some(r) => r.sets(srs),
            None => streamed_sets(srs),
        };
        page_lock_streamed(gpu, srs, &sets, told_page_lock);
        let input = StartInput::Device {
            constraints: d,
            witness,
        };
        let (sums, phases) = start_resident(gpu, ntt, sets, input)?;
        tracing::debug!(gpu = %gpu.info, ?phases, "proving start, products on the device, points streamed");
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

    /// The staging buffers of large uploads (128 MiB), held once the GPU has uploaded anything
    /// large. Page-locked points and evaluations are not counted here: they are the parameters'
    /// and the partitions' own memory, which the gate counts already.
    fn pinned_host_bytes(&self) -> u64 {
        super::memory::PINNED_STAGING_BYTES as u64
    }

    fn products_on_device(&self) -> bool {
        true
    }

    fn start_from_constraints(
        &self,
        srs: &Srs,
        r1cs: &R1cs,
        witness: &PackedWitness,
    ) -> Result<Option<Multiexps>> {
        let mut st = self.state()?;
        self.start_from_constraints_locked(&mut st, srs, r1cs, witness)
            .with_context(|| format!("proving start on {}", self.gpu.info))
    }

    fn reusable_evaluations(&self, rows: usize) -> Option<Evaluations> {
        super::kept_evaluations::take(rows)
    }

    fn idle(&self) {
        self.gpu.release_set_aside();
        super::kept_evaluations::release_all();
    }

    fn prepare_evaluations(&self, evals: &Evaluations) {
        let t = Instant::now();
        let lock = || -> Result<usize> {
            let mut bytes = 0;
            for v in [&evals.a, &evals.b, &evals.c] {
                bytes += page_lock_held(&self.gpu, v, &evals.pins)?;
            }
            Ok(bytes)
        };
        match lock() {
            Ok(bytes) => {
                tracing::debug!(gpu = %self.gpu.info, bytes, ms = t.elapsed().as_millis() as u64, "evaluations page-locked")
            }
            Err(e) => {
                tracing::warn!(gpu = %self.gpu.info, error = format!("{e:#}"), "evaluations could not be page-locked: they are copied through the staging buffers, at the cost of CPU time")
            }
        }
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

    /// A 32 GiB PoRep partition: 130,278,869 constraints and aux variables, A density 99.6 %,
    /// B density 25.5 %.
    const DOMAIN_32G: usize = 1 << 27;
    const LENS_32G: [usize; 3] = [130_278_869, 129_757_753, 33_221_111];
    /// Its recorded constraints on the device (`DeviceR1cs::bytes`, as logged on an H200).
    const CONSTRAINTS_32G: usize = 7_342_536_468;

    fn g1_points_32g() -> usize {
        ((DOMAIN_32G - 1) + LENS_32G.iter().sum::<usize>()) * AFFINE_LIMBS * 4
    }

    /// With A, B, C made on the device, its G1 points, its recorded constraints, its B query's
    /// G2 points and the proving start's peak all fit in an 80 GB GPU (79.6 GiB), with a GiB
    /// left for the CUDA context and kernels: an 80 GB card proves as an H200 does.
    #[test]
    fn a_32_gib_partition_and_its_constraints_stay_resident_on_80_gb() {
        let aux = LENS_32G[0];
        // The packed witness of a PoRep partition: ~51 % zeros, ~47 % ones, ~2 % others.
        let expand = aux.div_ceil(64) * 20 + aux / 50 * FR_LIMBS * 4;
        let working = device_start_peak_bytes(DOMAIN_32G, 5, LENS_32G, expand, true);
        let g2_points = LENS_32G[2] * G2_AFFINE_LIMBS * 4;
        let all = g1_points_32g() + CONSTRAINTS_32G + g2_points + working + twiddle_bytes(27);
        assert!(
            all + GIB <= 79 * GIB,
            "{} GiB in all, {} GiB of it working",
            all / GIB,
            working / GIB
        );
        // H's MSM is the peak: one domain and the largest scratch beside the witness.
        assert_eq!(
            working,
            (5 + aux + DOMAIN_32G) * FR_LIMBS * 4 + scratch_bytes(DOMAIN_32G)
        );
        // Less than the host path's accounting plus the expanded witness, which held every
        // query at once.
        assert!(working + 8 * GIB < start_peak_bytes(DOMAIN_32G, LENS_32G, true) + aux * 32);
    }

    /// A 24 GiB GPU holds a 32 GiB partition's recorded constraints beside a streamed start
    /// when the estimate takes eight pieces (H's transforms then peak: 24.4 GB with the
    /// witness and the constraints), not with the default four (27.3 GB): pieces size
    /// themselves at run time, so only the estimate stands in the way, and the estimate takes
    /// eight there. A 48 GiB GPU holds them with four, a 16 GiB one with neither.
    #[test]
    fn a_24_gib_gpu_holds_the_constraints_beside_a_streamed_start_of_eight_pieces() {
        let aux = LENS_32G[0];
        let expand = aux.div_ceil(64) * 20 + aux / 50 * FR_LIMBS * 4;
        let cap = 24 * GIB;
        let working = |pieces| {
            let allow = StreamedAllowance::with_pieces(DOMAIN_32G, pieces);
            device_streamed_peak_bytes(DOMAIN_32G, 328, LENS_32G, expand, allow)
        };
        let need = |pieces| CONSTRAINTS_32G + working(pieces);
        let pieces_at = |gib: usize| pieces_beside_constraints(CONSTRAINTS_32G, gib * GIB, working);
        assert_eq!(pieces_at(24), 8);
        assert_eq!(pieces_at(48), 4);
        assert_eq!(pieces_at(16), 4);
        assert!(need(8) > 16 * GIB);
        assert!(need(4) > cap, "{:.1} GiB", need(4) as f64 / GIB as f64);
        assert!(
            need(8) + GIB < cap,
            "{:.1} GiB",
            need(8) as f64 / GIB as f64
        );
        // With eight, H's transforms are the peak: two domains, the tables and the witness.
        let transforms = (328 + aux + 2 * DOMAIN_32G) * FR_LIMBS * 4 + twiddle_bytes(27);
        assert_eq!(need(8), CONSTRAINTS_32G + transforms);
    }

    /// A streamed start of a 32 GiB partition peaks while A's MSM runs with the B query's
    /// scalars selected beside it: under a GiB above H's MSM (its scalars and pieces), the
    /// peak when the queries were selected on the host just before each MSM. The twiddle
    /// table (4.3 GB) is held only while H is transformed, under that peak, so it adds nothing.
    #[test]
    fn a_streamed_32_gib_start_peaks_in_the_a_query() {
        let allow = StreamedAllowance {
            tables: twiddle_bytes(27),
            pieces: 4,
        };
        let peak = streamed_start_peak_bytes(DOMAIN_32G, LENS_32G, allow);
        assert!(2 * DOMAIN_32G * FR_LIMBS * 4 + allow.tables < peak);
        let no_tables = StreamedAllowance { tables: 0, ..allow };
        assert_eq!(
            peak,
            streamed_start_peak_bytes(DOMAIN_32G, LENS_32G, no_tables)
        );
        let [_, a, b] = LENS_32G;
        let pieces = |n: usize| crate::gpu::msm::streamed_bytes(n.div_ceil(4), false);
        let a_phase = (a + b) * FR_LIMBS * 4 + pieces(a);
        let h_phase = DOMAIN_32G * FR_LIMBS * 4 + pieces(DOMAIN_32G);
        assert_eq!(peak, a_phase);
        assert!(
            peak - h_phase < GIB,
            "{:.2} GiB above H's",
            (peak - h_phase) as f64 / GIB as f64
        );
    }

    /// Its G1 points and the proving start's peak fit in an 80 GB GPU (79.6 GiB as the driver
    /// reports an H100 or A100 80 GB), with a GiB left for the CUDA context and kernels.
    #[test]
    fn a_32_gib_partition_stays_resident_on_80_gb() {
        let need = g1_points_32g();
        let working = start_peak_bytes(DOMAIN_32G, LENS_32G, false) + twiddle_bytes(27);
        assert!(
            need + working + GIB <= 79 * GIB,
            "{} GiB of points + {} GiB working",
            need / GIB,
            working / GIB
        );
        // The H phase alone is smaller than the MSM phase here.
        assert!(start_peak_bytes(DOMAIN_32G, LENS_32G, false) > 3 * DOMAIN_32G * FR_LIMBS * 4);
    }

    /// On an H200 (139.8 GiB) the B query's G2 points (6.4 GB) join the G1 points and the
    /// recorded constraints beside a start's working memory with tens of GiB to spare. (On an
    /// 80 GB GPU the same accounting leaves them under a GiB without the constraints, so there
    /// the free memory at run time decides.)
    #[test]
    fn the_b_query_in_g2_is_resident_on_an_h200() {
        let g2_points = LENS_32G[2];
        let working = start_peak_bytes(DOMAIN_32G, LENS_32G, true) + twiddle_bytes(27);
        let h200 = 139 * GIB + 8 * GIB / 10;
        let free = h200 - (g1_points_32g() + CONSTRAINTS_32G + GIB);
        assert_eq!(
            place_b_g2(g2_points, g2_points, free, working),
            G2Place::Device
        );
        let spare = free - (g2_points * G2_AFFINE_LIMBS * 4 + working);
        assert!(spare > 40 * GIB, "{} GiB to spare", spare / GIB);
    }

    /// The placement's edges: exactly enough room, one byte short, and G2 points that are not
    /// the B query's (gpu-check's G1-only parameters) stay off the device whatever the room.
    #[test]
    fn b_g2_placement() {
        let (points, working) = (1000, 5000);
        let need = points * G2_AFFINE_LIMBS * 4 + working;
        assert_eq!(place_b_g2(points, points, need, working), G2Place::Device);
        assert_eq!(
            place_b_g2(points, points, need - 1, working),
            G2Place::NoRoom
        );
        assert_eq!(
            place_b_g2(points, 0, usize::MAX / 2, working),
            G2Place::NotTheBQuery
        );
        // An empty B query goes on the device at no cost.
        assert_eq!(place_b_g2(0, 0, working, working), G2Place::Device);
    }

    /// The G2 half of the B MSM counts in the peak when it is bigger than the largest G1 MSM's
    /// scratch, and never lowers it.
    #[test]
    fn peak_counts_the_g2_half_of_the_b_msm() {
        let domain = 1usize << 20;
        // B as large as the domain: its G1 and G2 scratch together exceed any G1 MSM's.
        let lens = [domain, domain, domain];
        let with = start_peak_bytes(domain, lens, true);
        let without = start_peak_bytes(domain, lens, false);
        assert_eq!(with - without, g2_scratch_bytes(domain));
        // At the 32 GiB shape the B query is a quarter of L: its G1 and G2 scratch together
        // stay within H's MSM scratch, so the G2 half costs the peak nothing.
        let with = start_peak_bytes(DOMAIN_32G, LENS_32G, true);
        let without = start_peak_bytes(DOMAIN_32G, LENS_32G, false);
        let b = LENS_32G[2];
        assert!(scratch_bytes(b) + g2_scratch_bytes(b) <= scratch_bytes(DOMAIN_32G));
        assert_eq!(with, without);
    }

    /// A 16 GiB card's streamed start (12.5 GB free beside H's coefficients) makes room for
    /// L's scalars beside H's and sums their pieces in turns; with 9 GB free H's pieces would
    /// more than double, and it does not.
    #[test]
    fn l_goes_beside_h_only_where_h_keeps_long_pieces() {
        let (h, l) = ((1usize << 27) - 1, 130_169_893);
        assert!(aux_fits_beside_h(12_500_000_000, h, l));
        assert!(!aux_fits_beside_h(9_000_000_000, h, l));
        assert!(!aux_fits_beside_h(4_000_000_000, h, l));
    }

    /// More witness scalars than domain points: the MSM scratch follows the larger MSM.
    #[test]
    fn peak_follows_the_largest_msm() {
        let domain = 1usize << 20;
        let small = start_peak_bytes(domain, [domain / 2, domain / 2, 10], false);
        let large = start_peak_bytes(domain, [domain / 2, 4 * domain, 10], false);
        assert!(large - small >= scratch_bytes(4 * domain) - scratch_bytes(domain));
    }
}
