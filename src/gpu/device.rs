//! Finding GPUs, building the kernels for them, launching, and device memory.
//!
//! The CUDA driver and NVRTC are loaded when first needed (cudarc's dynamic loading), so the
//! same binary runs where neither exists. Kernels are compiled by NVRTC for the GPU found and
//! cached on disk: a cold start compiles once per (source, architecture, driver) and later
//! starts load the cached CUBIN in milliseconds.

use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use cudarc::driver::result as dres;
use cudarc::driver::sys as dsys;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::sys as nsys;
use cudarc::nvrtc::Ptx;
use sha2::{Digest, Sha256};

/// Kernel headers, handed to NVRTC by name so that `#include "field.cuh"` resolves.
const HEADERS: &[(&str, &str)] = &[
    ("field.cuh", include_str!("../../kernels/field.cuh")),
    ("fp2.cuh", include_str!("../../kernels/fp2.cuh")),
    ("curve.cuh", include_str!("../../kernels/curve.cuh")),
];

/// The compiled programs: (name, source, kernels it exports).
const PROGRAMS: &[(&str, &str, &[&str])] = &[
    (
        "ntt",
        include_str!("../../kernels/ntt.cu"),
        &[
            "ntt_pass",
            "bit_reverse_tiles",
            "bit_reverse_permute",
            "gen_powers",
            "scale_powers",
            "h_combine",
            "h_mul",
            "h_sub_div",
        ],
    ),
    (
        "msm",
        include_str!("../../kernels/msm.cu"),
        &[
            "msm_classify",
            "msm_digits",
            "msm_histogram",
            "scan_blocks",
            "scan_add",
            "msm_scatter",
            "msm_accumulate",
            "msm_bucket_fix",
            "msm_bucket_reduce",
            "msm_sum_indexed",
            "xyzz_reduce",
            "xyzz_to_jacobian_kernel",
            "msm_accumulate_g2",
            "msm_bucket_fix_g2",
            "msm_bucket_reduce_g2",
            "msm_sum_indexed_g2",
            "xyzz_reduce_g2",
            "xyzz_to_jacobian_kernel_g2",
        ],
    ),
    (
        "gen",
        include_str!("../../kernels/gen.cu"),
        &["gen_scalars", "gen_points", "gen_points_g2"],
    ),
    (
        "r1cs",
        include_str!("../../kernels/r1cs.cu"),
        &["r1cs_rows"],
    ),
    (
        "witness",
        include_str!("../../kernels/witness.cu"),
        &["witness_expand", "witness_select"],
    ),
];

/// NVRTC options besides the architecture. `.ci/check-kernels` compiles with the same ones.
const COMPILE_OPTIONS: &[&str] = &["-std=c++17"];

/// The options in effect: `$C2Q_KERNELS_PORTABLE` (any value) swaps the carry-chain assembly
/// of the field arithmetic for plain C++, to rule it out when diagnosing a GPU mismatch;
/// `$C2Q_KERNEL_DEFINES` adds `-DNAME[=VALUE]` definitions (tuning knobs the kernels read,
/// such as `C2Q_ACCUMULATE_BLOCKS`), so that variants can be compared with one binary.
fn compile_options() -> Result<Vec<String>> {
    let mut o: Vec<String> = COMPILE_OPTIONS.iter().map(|s| s.to_string()).collect();
    if std::env::var_os("C2Q_KERNELS_PORTABLE").is_some() {
        o.push("-DC2Q_PORTABLE".into());
    }
    if let Ok(defines) = std::env::var("C2Q_KERNEL_DEFINES") {
        for d in defines.split_whitespace() {
            let name = d.strip_prefix("-D").unwrap_or("");
            let ident = name.split('=').next().unwrap_or("");
            if ident.is_empty() || !ident.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                bail!("C2Q_KERNEL_DEFINES holds {d:?}: only -DNAME or -DNAME=VALUE are accepted");
            }
            o.push(d.to_string());
        }
    }
    Ok(o)
}

/// A device-memory allocation failed. Retryable: the memory may be free again once other work
/// on the GPU finishes (or after resident parameters are evicted).
#[derive(Debug, thiserror::Error)]
#[error("GPU {device}: out of device memory allocating {requested} bytes ({free} free of {total})")]
pub struct OutOfDeviceMemory {
    pub device: usize,
    pub requested: usize,
    pub free: usize,
    pub total: usize,
}

/// What `c2q` can say about a GPU without using it.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub total_memory: usize,
    pub multiprocessors: i32,
    /// Shared memory one SM can give its resident blocks, in bytes.
    pub shared_per_sm: i32,
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cuda:{} {} (sm_{}{}, {} SMs, {:.1} GiB)",
            self.ordinal,
            self.name,
            self.compute_capability.0,
            self.compute_capability.1,
            self.multiprocessors,
            self.total_memory as f64 / (1u64 << 30) as f64
        )
    }
}

/// Whether the CUDA driver library can be loaded at all (no GPU needed to answer).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library; nothing is called through it.
    unsafe { dsys::is_culib_present() }
}

fn nvrtc_present() -> bool {
    // SAFETY: as above, for libnvrtc.
    unsafe { nsys::is_culib_present() }
}

/// The GPUs visible to this process. An error means the driver is present but broken; no
/// driver at all is an empty list.
pub fn list_devices() -> Result<Vec<DeviceInfo>> {
    if !driver_present() {
        return Ok(Vec::new());
    }
    match dres::init() {
        Ok(()) => {}
        // A driver without devices (or with none visible) reports this on init.
        Err(e) if e.0 == dsys::cudaError_enum::CUDA_ERROR_NO_DEVICE => return Ok(Vec::new()),
        Err(e) => return Err(anyhow!("CUDA driver initialisation failed: {e}")),
    }
    let count = dres::device::get_count().context("cannot count CUDA devices")?;
    let mut out = Vec::new();
    for ordinal in 0..count.max(0) as usize {
        out.push(device_info(ordinal)?);
    }
    Ok(out)
}

fn device_info(ordinal: usize) -> Result<DeviceInfo> {
    let dev = dres::device::get(ordinal as i32)
        .with_context(|| format!("cannot open CUDA device {ordinal}"))?;
    let attr = |a| -> Result<i32> {
        // SAFETY: `dev` is a valid device handle from cuDeviceGet.
        unsafe { dres::device::get_attribute(dev, a) }
            .with_context(|| format!("cannot query CUDA device {ordinal}"))
    };
    use dsys::CUdevice_attribute_enum as A;
    let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let multiprocessors = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let shared_per_sm = attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?;
    let name = dres::device::get_name(dev).unwrap_or_else(|_| "unknown GPU".into());
    // SAFETY: as above.
    let total_memory = unsafe { dres::device::total_mem(dev) }
        .with_context(|| format!("cannot query memory of CUDA device {ordinal}"))?;
    Ok(DeviceInfo {
        ordinal,
        name,
        compute_capability: (major, minor),
        total_memory,
        multiprocessors,
        shared_per_sm,
    })
}

fn driver_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: writes one int.
    unsafe { dsys::cuDriverGetVersion(&mut v) }
        .result()
        .context("cannot read the CUDA driver version")?;
    Ok(v)
}

fn nvrtc_version() -> Result<(i32, i32)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints.
    let rc = unsafe { nsys::nvrtcVersion(&mut major, &mut minor) };
    if rc != nsys::nvrtcResult::NVRTC_SUCCESS {
        bail!("cannot read the NVRTC version: {rc:?}");
    }
    Ok((major, minor))
}

/// Where compiled kernels are kept: `$C2Q_KERNEL_CACHE`, else `$XDG_CACHE_HOME/c2q/kernels`,
/// else `~/.cache/c2q/kernels`.
pub fn kernel_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("C2Q_KERNEL_CACHE") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("c2q/kernels"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/c2q/kernels"))
}

/// One GPU, ready to run c2q's kernels: its context, one stream per [`Lane`], the kernels,
/// and the device memory c2q holds on it.
pub struct Gpu {
    pub info: DeviceInfo,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    side: Arc<CudaStream>,
    copy: Arc<CudaStream>,
    functions: HashMap<&'static str, CudaFunction>,
    allocated: Arc<AtomicU64>,
    /// The most `allocated` has been since the last `reset_peak`.
    peak: AtomicU64,
    /// The most device memory c2q may hold on this GPU (0: what the GPU has).
    limit: AtomicU64,
    staging: Mutex<Option<Staging>>,
}

/// Two pinned host buffers: large uploads are copied into one (by all cores) while the GPU
/// pulls the other, since DMA from pageable memory runs at a fraction of PCIe speed.
struct Staging {
    bufs: [*mut u8; 2],
    events: [dsys::CUevent; 2],
}

const STAGING_BYTES: usize = 64 << 20;

// SAFETY: the pinned buffers and events are only used under the Mutex that holds them.
unsafe impl Send for Staging {}

impl Staging {
    fn new() -> Result<Staging> {
        let mut bufs = [std::ptr::null_mut(); 2];
        let mut events: [dsys::CUevent; 2] = [std::ptr::null_mut(); 2];
        for k in 0..2 {
            // SAFETY: plain pinned allocation, freed in Drop.
            bufs[k] = unsafe { dres::malloc_host(STAGING_BYTES, 0) }
                .context("cannot allocate pinned staging memory")? as *mut u8;
            events[k] = dres::event::create(dsys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
                .context("cannot create a staging event")?;
        }
        Ok(Staging { bufs, events })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        for k in 0..2 {
            // SAFETY: created in `new`, released once; failures only leak.
            unsafe {
                if !self.events[k].is_null() {
                    let _ = dres::event::synchronize(self.events[k]);
                    let _ = dres::event::destroy(self.events[k]);
                }
                if !self.bufs[k].is_null() {
                    let _ = dres::free_host(self.bufs[k] as *mut std::ffi::c_void);
                }
            }
        }
    }
}

/// The streams of a GPU. Work on one lane runs in order; work on different lanes may run side
/// by side, which is how copies and sorting hide behind arithmetic. Everything is on `Main`
/// unless a caller asks otherwise, and crossing lanes needs [`Gpu::wait_for`] or
/// [`Gpu::wait_event`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Arithmetic.
    Main,
    /// Short memory-bound kernels beside the main lane's long ones (high priority).
    Side,
    /// Host-to-device copies.
    Copy,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gpu({})", self.info)
    }
}

impl Gpu {
    /// Open device `ordinal` and build (or load from the cache) every kernel for it.
    pub fn open(ordinal: usize) -> Result<Gpu> {
        if !driver_present() {
            bail!("no CUDA driver (libcuda.so) on this machine");
        }
        if !nvrtc_present() {
            bail!("NVRTC (libnvrtc.so) not found: it is needed to build the GPU kernels");
        }
        let ctx = CudaContext::new(ordinal)
            .with_context(|| format!("cannot create a CUDA context on device {ordinal}"))?;
        let info = device_info(ordinal)?;
        ctx.bind_to_thread()
            .with_context(|| format!("cannot use the CUDA context of device {ordinal}"))?;
        let (normal, highest) = dres::stream::get_priority_range()
            .with_context(|| format!("cannot query stream priorities on device {ordinal}"))?;
        let new_stream = |priority| {
            ctx.new_stream_with_priority(priority)
                .with_context(|| format!("cannot create a CUDA stream on device {ordinal}"))
        };
        // The side lane carries short memory-bound kernels (sorting) beside long ones on the
        // main lane: with the higher priority, the block scheduler gives them SMs as soon as
        // blocks of the long kernel retire instead of after the whole kernel.
        let (stream, side, copy) = (
            new_stream(normal)?,
            new_stream(highest)?,
            new_stream(normal)?,
        );
        let mut functions = HashMap::new();
        for (name, source, kernels) in PROGRAMS {
            let image = build_program(name, source, &info)?;
            let module = ctx
                .load_module(Ptx::from_binary(image))
                .with_context(|| format!("cannot load kernel module {name} on {info}"))?;
            for kernel in kernels.iter() {
                let f = module
                    .load_function(kernel)
                    .with_context(|| format!("kernel {kernel} missing from module {name}"))?;
                functions.insert(*kernel, f);
            }
        }
        Ok(Gpu {
            info,
            ctx,
            stream,
            side,
            copy,
            functions,
            allocated: Arc::new(AtomicU64::new(0)),
            peak: AtomicU64::new(0),
            limit: AtomicU64::new(0),
            staging: Mutex::new(None),
        })
    }

    /// Make this GPU's context current on the calling thread: every entry point that calls the
    /// driver directly starts with this, since callers may move between threads.
    pub fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .with_context(|| format!("cannot bind the CUDA context of {}", self.info))
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Bytes of device memory c2q holds on this GPU now.
    pub fn allocated(&self) -> u64 {
        self.allocated.load(Ordering::Relaxed)
    }

    /// The most device memory c2q has held on this GPU since the last `reset_peak`.
    pub fn peak_allocated(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Starts a new peak measurement from what is held now.
    pub fn reset_peak(&self) {
        self.peak.store(self.allocated(), Ordering::Relaxed);
    }

    /// Caps the device memory c2q holds on this GPU at `bytes` (None: what the GPU has), for
    /// a GPU shared with other work: allocations past it fail as if the GPU were full, and
    /// `mem_info` reports the GPU as that large.
    pub fn set_memory_limit(&self, bytes: Option<usize>) {
        self.limit
            .store(bytes.map_or(0, |b| b.max(1) as u64), Ordering::Relaxed);
    }

    pub fn memory_limit(&self) -> Option<usize> {
        match self.limit.load(Ordering::Relaxed) {
            0 => None,
            b => Some(b as usize),
        }
    }

    /// (free, total) device memory c2q can use: as the driver sees it, within the limit.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        let (free, total) = dres::mem_get_info().context("cannot query free device memory")?;
        Ok(match self.memory_limit() {
            Some(limit) => {
                let room = limit.saturating_sub(self.allocated() as usize);
                (free.min(room), total.min(limit))
            }
            None => (free, total),
        })
    }

    /// Allocate `len` elements of `T` (uninitialised).
    pub fn alloc<T: Copy>(&self, len: usize) -> Result<DevBuf<T>> {
        self.bind()?;
        let bytes = len.max(1) * std::mem::size_of::<T>();
        // Reserve the bytes first, so that threads allocating at once cannot pass the limit
        // together; given back if the allocation fails.
        let held = self.allocated.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
        if let Some(limit) = self.memory_limit() {
            if held as usize > limit {
                self.allocated.fetch_sub(bytes as u64, Ordering::Relaxed);
                return Err(OutOfDeviceMemory {
                    device: self.info.ordinal,
                    requested: bytes,
                    free: limit.saturating_sub(held as usize - bytes),
                    total: limit,
                }
                .into());
            }
        }
        // SAFETY: plain cuMemAlloc; the pointer is owned by the returned DevBuf.
        let result = unsafe { dres::malloc_sync(bytes) };
        if result.is_err() {
            self.allocated.fetch_sub(bytes as u64, Ordering::Relaxed);
        }
        match result {
            Ok(ptr) => {
                self.peak.fetch_max(held, Ordering::Relaxed);
                Ok(DevBuf {
                    ptr,
                    len,
                    bytes,
                    ctx: self.ctx.clone(),
                    allocated: self.allocated.clone(),
                    _t: std::marker::PhantomData,
                })
            }
            Err(e) if e.0 == dsys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY => {
                let (free, total) = dres::mem_get_info().unwrap_or((0, 0));
                Err(OutOfDeviceMemory {
                    device: self.info.ordinal,
                    requested: bytes,
                    free,
                    total,
                }
                .into())
            }
            Err(e) => Err(anyhow!(
                "cuMemAlloc of {bytes} bytes failed on {}: {e}",
                self.info
            )),
        }
    }

    /// Allocate and fill with zero bytes.
    pub fn alloc_zeroed<T: Copy>(&self, len: usize) -> Result<DevBuf<T>> {
        let buf = self.alloc::<T>(len)?;
        self.memset_zero(&buf)?;
        Ok(buf)
    }

    pub fn memset_zero<T: Copy>(&self, buf: &DevBuf<T>) -> Result<()> {
        self.memset_zero_in(Lane::Main, buf)
    }

    pub fn memset_zero_in<T: Copy>(&self, lane: Lane, buf: &DevBuf<T>) -> Result<()> {
        self.bind()?;
        // SAFETY: the range lies inside `buf`; ordered on the lane's stream.
        unsafe { dres::memset_d8_async(buf.ptr, 0, buf.bytes, self.lane(lane).cu_stream()) }
            .context("cuMemsetD8Async failed")
    }

    fn lane(&self, lane: Lane) -> &Arc<CudaStream> {
        match lane {
            Lane::Main => &self.stream,
            Lane::Side => &self.side,
            Lane::Copy => &self.copy,
        }
    }

    /// Marks the work queued on `lane` so far, for [`Gpu::wait_event`].
    pub fn record(&self, lane: Lane) -> Result<cudarc::driver::CudaEvent> {
        self.lane(lane)
            .record_event(None)
            .with_context(|| format!("cannot record a CUDA event on {}", self.info))
    }

    /// Work queued on `lane` from now on starts only after the work `event` marks.
    pub fn wait_event(&self, lane: Lane, event: &cudarc::driver::CudaEvent) -> Result<()> {
        self.lane(lane)
            .wait(event)
            .with_context(|| format!("cannot order the streams of {}", self.info))
    }

    /// Work queued on `waiter` from now on starts only after what is queued on `on` now.
    pub fn wait_for(&self, waiter: Lane, on: Lane) -> Result<()> {
        if waiter == on {
            return Ok(());
        }
        self.lane(waiter)
            .join(self.lane(on))
            .with_context(|| format!("cannot order the streams of {}", self.info))
    }

    /// Copy host data into `buf` starting at element `offset`, on the main lane.
    pub fn upload<T: Copy>(&self, buf: &DevBuf<T>, offset: usize, src: &[T]) -> Result<()> {
        self.upload_in(Lane::Main, buf, offset, src)
    }

    /// Copy host data into `buf` on `lane`; returns when the copy is done (only that lane is
    /// waited for, so work on the other lanes keeps running meanwhile).
    pub fn upload_in<T: Copy>(
        &self,
        lane: Lane,
        buf: &DevBuf<T>,
        offset: usize,
        src: &[T],
    ) -> Result<()> {
        if offset + src.len() > buf.len {
            bail!(
                "upload of {} elements at {offset} overruns a buffer of {}",
                src.len(),
                buf.len
            );
        }
        if src.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let dst = buf.ptr + (offset * std::mem::size_of::<T>()) as u64;
        // SAFETY: T is plain data (Copy limbs); the byte view covers exactly `src`.
        let bytes = unsafe {
            std::slice::from_raw_parts(src.as_ptr() as *const u8, std::mem::size_of_val(src))
        };
        if bytes.len() >= 4 * STAGING_BYTES {
            return self.upload_staged(lane, dst, bytes);
        }
        let stream = self.lane(lane);
        // SAFETY: bounds checked above. The copy is synchronised before returning, so `src`
        // outlives it.
        unsafe { dres::memcpy_htod_async(dst, bytes, stream.cu_stream()) }
            .context("host-to-device copy failed")?;
        self.sync_lane(lane)
    }

    /// The pinned staging buffers, made on first use, held for one upload at a time.
    fn staging(&self) -> Result<std::sync::MutexGuard<'_, Option<Staging>>> {
        let mut guard = self
            .staging
            .lock()
            .map_err(|_| anyhow!("staging buffers poisoned"))?;
        if guard.is_none() {
            *guard = Some(Staging::new()?);
        }
        Ok(guard)
    }

    /// Large upload through the two pinned buffers, the host copy of one piece overlapping
    /// the DMA of the previous one.
    fn upload_staged(&self, lane: Lane, dst: u64, bytes: &[u8]) -> Result<()> {
        let stream = self.lane(lane);
        use rayon::prelude::*;
        let guard = self.staging()?;
        let st = guard
            .as_ref()
            .ok_or_else(|| anyhow!("staging buffers missing"))?;
        for (i, piece) in bytes.chunks(STAGING_BYTES).enumerate() {
            let k = i % 2;
            // SAFETY: the event was recorded after the last DMA out of buffer k (or never).
            unsafe { dres::event::synchronize(st.events[k]) }
                .context("waiting for a staging copy failed")?;
            // SAFETY: buffer k holds STAGING_BYTES and no DMA reads it now.
            let stage = unsafe { std::slice::from_raw_parts_mut(st.bufs[k], piece.len()) };
            stage
                .par_chunks_mut(1 << 20)
                .zip(piece.par_chunks(1 << 20))
                .for_each(|(d, s)| d.copy_from_slice(s));
            let at = dst + (i * STAGING_BYTES) as u64;
            // SAFETY: pinned source of piece.len() bytes, destination inside the buffer the
            // caller checked; the event marks when the source may be reused.
            unsafe {
                dres::memcpy_htod_async(at, &*stage, stream.cu_stream())
                    .context("host-to-device copy failed")?;
                dres::event::record(st.events[k], stream.cu_stream())
                    .context("cannot record a staging event")?;
            }
        }
        self.sync_lane(lane)
    }

    /// Uploads, in order, the elements `values[i]` for which `present(i)` holds into `buf`
    /// from byte `offset` on, over `lane`; returns how many, once the copy is done. The
    /// selection is made while filling the pinned staging buffers (each piece counted, then
    /// gathered to its place by all cores), so that no host copy of the selected values is
    /// made: for a 32 GiB partition's A query that copy, 4 GB of fresh memory, took seconds.
    pub fn upload_selected<T: Copy + Send + Sync, B: Copy>(
        &self,
        lane: Lane,
        buf: &DevBuf<B>,
        offset: usize,
        values: &[T],
        present: &(dyn Fn(usize) -> bool + Sync),
    ) -> Result<usize> {
        let size = std::mem::size_of::<T>();
        let per_piece = (STAGING_BYTES / size).max(1);
        self.bind()?;
        let stream = self.lane(lane);
        let guard = self.staging()?;
        let st = guard
            .as_ref()
            .ok_or_else(|| anyhow!("staging buffers missing"))?;
        let mut at = offset;
        for (i, piece) in values.chunks(per_piece).enumerate() {
            let first = i * per_piece;
            let counts = crate::groth16::select::count(piece, first, present);
            let count: usize = counts.iter().sum();
            if count == 0 {
                continue;
            }
            let bytes = count * size;
            if at + bytes > buf.bytes {
                bail!(
                    "selected values overrun a buffer of {} bytes at byte {at}",
                    buf.bytes
                );
            }
            let k = i % 2;
            // SAFETY: the event was recorded after the last DMA out of buffer k (or never).
            unsafe { dres::event::synchronize(st.events[k]) }
                .context("waiting for a staging copy failed")?;
            // SAFETY: buffer k holds STAGING_BYTES ≥ count · size bytes, is page-aligned (so
            // aligned for T) and no DMA reads it now.
            let stage = unsafe { std::slice::from_raw_parts_mut(st.bufs[k] as *mut T, count) };
            crate::groth16::select::gather(piece, first, present, &counts, stage);
            // SAFETY: the first `bytes` bytes of buffer k were just written (pinned memory);
            // the destination range was checked above; the event marks when k may be reused.
            unsafe {
                let src = std::slice::from_raw_parts(st.bufs[k] as *const u8, bytes);
                dres::memcpy_htod_async(buf.ptr + at as u64, src, stream.cu_stream())
                    .context("host-to-device copy failed")?;
                dres::event::record(st.events[k], stream.cu_stream())
                    .context("cannot record a staging event")?;
            }
            at += bytes;
        }
        self.sync_lane(lane)?;
        Ok((at - offset) / size)
    }

    /// Copy `dst.len()` elements from `buf` at element `offset` to the host.
    pub fn download<T: Copy>(&self, buf: &DevBuf<T>, offset: usize, dst: &mut [T]) -> Result<()> {
        if offset + dst.len() > buf.len {
            bail!(
                "download of {} elements at {offset} overruns a buffer of {}",
                dst.len(),
                buf.len
            );
        }
        if dst.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let src = buf.ptr + (offset * std::mem::size_of::<T>()) as u64;
        // SAFETY: bounds checked above; synchronised before `dst` is used.
        unsafe { dres::memcpy_dtoh_async(dst, src, self.stream.cu_stream()) }
            .context("device-to-host copy failed")?;
        self.sync_lane(Lane::Main)
    }

    /// Device-to-device copy of `len` elements.
    pub fn copy<T: Copy>(
        &self,
        src: &DevBuf<T>,
        src_off: usize,
        dst: &DevBuf<T>,
        dst_off: usize,
        len: usize,
    ) -> Result<()> {
        if src_off + len > src.len || dst_off + len > dst.len {
            bail!("device copy of {len} elements out of bounds");
        }
        if len == 0 {
            return Ok(());
        }
        self.bind()?;
        let size = std::mem::size_of::<T>();
        // SAFETY: both ranges checked above; ordered on our stream.
        unsafe {
            dres::memcpy_dtod_async(
                dst.ptr + (dst_off * size) as u64,
                src.ptr + (src_off * size) as u64,
                len * size,
                self.stream.cu_stream(),
            )
        }
        .context("device-to-device copy failed")
    }

    /// Wait for all queued work on every lane, surfacing any asynchronous kernel error.
    pub fn sync(&self) -> Result<()> {
        self.sync_lane(Lane::Copy)?;
        self.sync_lane(Lane::Side)?;
        self.sync_lane(Lane::Main)
    }

    /// Wait for the work queued on `lane` only.
    pub fn sync_lane(&self, lane: Lane) -> Result<()> {
        self.lane(lane)
            .synchronize()
            .with_context(|| format!("GPU work failed on {}", self.info))
    }

    /// Launch `kernel` with `grid` blocks of `block` threads on the main lane; `args` are
    /// pushed in order.
    pub fn launch(
        &self,
        kernel: &str,
        grid: u32,
        block: u32,
        args: &[&dyn KernelArg],
    ) -> Result<()> {
        self.launch_in(Lane::Main, kernel, grid, block, args)
    }

    pub fn launch_in(
        &self,
        lane: Lane,
        kernel: &str,
        grid: u32,
        block: u32,
        args: &[&dyn KernelArg],
    ) -> Result<()> {
        let f = self
            .functions
            .get(kernel)
            .ok_or_else(|| anyhow!("unknown kernel {kernel}"))?;
        if grid == 0 {
            return Ok(());
        }
        let mut builder = self.lane(lane).launch_builder(f);
        for a in args {
            a.push(&mut builder);
        }
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the argument lists match the kernels' signatures in kernels/*.cu (each
        // launcher passes device pointers of buffers it checked the sizes of).
        unsafe { builder.launch(cfg) }.with_context(|| format!("launch of {kernel} failed"))?;
        Ok(())
    }

    /// Record a timing event on the stream.
    pub fn event(&self) -> Result<cudarc::driver::CudaEvent> {
        self.stream
            .record_event(Some(dsys::CUevent_flags::CU_EVENT_DEFAULT))
            .context("cannot record a CUDA event")
    }
}

/// A kernel argument: device pointers are passed as u64, sizes as u32/u64.
pub trait KernelArg {
    fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>);
}

impl KernelArg for u32 {
    fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>) {
        b.arg(self);
    }
}

impl KernelArg for u64 {
    fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>) {
        b.arg(self);
    }
}

/// Owned device memory, freed on drop. Elements are plain limbs (`u32`).
pub struct DevBuf<T> {
    ptr: dsys::CUdeviceptr,
    len: usize,
    bytes: usize,
    ctx: Arc<CudaContext>,
    allocated: Arc<AtomicU64>,
    _t: std::marker::PhantomData<T>,
}

impl<T> DevBuf<T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    /// Device address of element `i` (for kernel arguments).
    pub fn at(&self, i: usize) -> u64 {
        self.ptr + (i * std::mem::size_of::<T>()) as u64
    }
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
}

impl<T> Drop for DevBuf<T> {
    fn drop(&mut self) {
        // Freeing needs the context current; errors here cannot be returned, and a failed free
        // only leaks device memory that context teardown reclaims.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc and is freed once. cuMemFree synchronises
            // with work still using it.
            let _ = unsafe { dres::free_sync(self.ptr) };
        }
        self.allocated
            .fetch_sub(self.bytes as u64, Ordering::Relaxed);
    }
}

// SAFETY: a device pointer is an address in the GPU's space; access goes through the context.
unsafe impl<T> Send for DevBuf<T> {}
unsafe impl<T> Sync for DevBuf<T> {}

/// What the kernels are told about the GPU they are built for: the shared memory of an SM, from
/// which ntt.cu works out how many of its blocks can share one (and so its register budget).
fn device_defines(info: &DeviceInfo) -> Vec<String> {
    vec![format!("-DC2Q_SHARED_PER_SM={}", info.shared_per_sm)]
}

/// Compile `source` for the GPU's `sm_XY` with NVRTC, or take the CUBIN from the disk cache.
fn build_program(name: &str, source: &str, info: &DeviceInfo) -> Result<Vec<u8>> {
    let cc = info.compute_capability;
    let arch = format!("sm_{}{}", cc.0, cc.1);
    let nvrtc = nvrtc_version()?;
    let driver = driver_version()?;
    let mut options = compile_options()?;
    options.extend(device_defines(info));
    let mut h = Sha256::new();
    h.update(source.as_bytes());
    for (hname, hsrc) in HEADERS {
        h.update(hname.as_bytes());
        h.update(hsrc.as_bytes());
    }
    for o in &options {
        h.update(o.as_bytes());
    }
    h.update(format!("nvrtc {}.{}", nvrtc.0, nvrtc.1).as_bytes());
    let key = hex::encode(&h.finalize()[..12]);
    let file = format!("{name}-{arch}-drv{driver}-{key}.cubin");
    let cache = kernel_cache_dir();
    if let Some(dir) = &cache {
        if let Ok(bytes) = std::fs::read(dir.join(&file)) {
            if !bytes.is_empty() {
                tracing::debug!(kernel = name, %arch, "kernel loaded from cache");
                return Ok(bytes);
            }
        }
    }
    let started = std::time::Instant::now();
    let image = nvrtc_compile(name, source, &arch, &options)
        .with_context(|| format!("NVRTC could not build kernels/{name}.cu for {arch}"))?;
    tracing::info!(
        kernel = name,
        %arch,
        ms = started.elapsed().as_millis() as u64,
        "kernel compiled by NVRTC"
    );
    if let Some(dir) = &cache {
        // The cache is an optimisation: failing to write it costs a recompile next time.
        if let Err(e) = write_atomically(dir, &file, &image) {
            tracing::warn!(error = %e, dir = %dir.display(), "cannot write the kernel cache");
        }
    }
    Ok(image)
}

fn write_atomically(dir: &Path, file: &str, bytes: &[u8]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{file}.{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, dir.join(file))?;
    Ok(())
}

fn nvrtc_check(rc: nsys::nvrtcResult, what: &str) -> Result<()> {
    if rc == nsys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(anyhow!("{what} failed: {rc:?}"))
    }
}

/// Owns an nvrtcProgram so that it is destroyed on every path.
struct Program(nsys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed once.
        unsafe {
            let _ = nsys::nvrtcDestroyProgram(&mut self.0);
        }
    }
}

fn nvrtc_compile(name: &str, source: &str, arch: &str, options: &[String]) -> Result<Vec<u8>> {
    let src = CString::new(source)?;
    let pname = CString::new(format!("{name}.cu"))?;
    let hsrc: Vec<CString> = HEADERS
        .iter()
        .map(|(_, s)| CString::new(*s))
        .collect::<Result<_, _>>()?;
    let hname: Vec<CString> = HEADERS
        .iter()
        .map(|(n, _)| CString::new(*n))
        .collect::<Result<_, _>>()?;
    let hsrc_p: Vec<*const c_char> = hsrc.iter().map(|s| s.as_ptr()).collect();
    let hname_p: Vec<*const c_char> = hname.iter().map(|s| s.as_ptr()).collect();
    let mut prog: nsys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: all strings are NUL-terminated and outlive the program.
    nvrtc_check(
        unsafe {
            nsys::nvrtcCreateProgram(
                &mut prog,
                src.as_ptr(),
                pname.as_ptr(),
                HEADERS.len() as i32,
                hsrc_p.as_ptr(),
                hname_p.as_ptr(),
            )
        },
        "nvrtcCreateProgram",
    )?;
    let prog = Program(prog);
    let mut opts: Vec<CString> = vec![CString::new(format!("--gpu-architecture={arch}"))?];
    for o in options {
        opts.push(CString::new(o.as_str())?);
    }
    let opts_p: Vec<*const c_char> = opts.iter().map(|s| s.as_ptr()).collect();
    // SAFETY: the program is valid and the options are NUL-terminated strings.
    let rc = unsafe { nsys::nvrtcCompileProgram(prog.0, opts_p.len() as i32, opts_p.as_ptr()) };
    let log = program_log(&prog)?;
    if rc != nsys::nvrtcResult::NVRTC_SUCCESS {
        bail!("{rc:?}:\n{log}");
    }
    if !log.trim().is_empty() {
        tracing::warn!(kernel = name, log = %log.trim(), "NVRTC warnings");
    }
    let mut size = 0usize;
    // SAFETY: the program compiled; size is written once.
    nvrtc_check(
        unsafe { nsys::nvrtcGetCUBINSize(prog.0, &mut size) },
        "nvrtcGetCUBINSize",
    )?;
    if size == 0 {
        bail!("NVRTC produced no CUBIN for {arch}");
    }
    let mut image = vec![0u8; size];
    // SAFETY: `image` has the size NVRTC asked for.
    nvrtc_check(
        unsafe { nsys::nvrtcGetCUBIN(prog.0, image.as_mut_ptr() as *mut c_char) },
        "nvrtcGetCUBIN",
    )?;
    Ok(image)
}

fn program_log(prog: &Program) -> Result<String> {
    let mut size = 0usize;
    // SAFETY: valid program; writes the size.
    nvrtc_check(
        unsafe { nsys::nvrtcGetProgramLogSize(prog.0, &mut size) },
        "nvrtcGetProgramLogSize",
    )?;
    let mut buf = vec![0u8; size.max(1)];
    // SAFETY: the buffer has the size NVRTC reported.
    nvrtc_check(
        unsafe { nsys::nvrtcGetProgramLog(prog.0, buf.as_mut_ptr() as *mut c_char) },
        "nvrtcGetProgramLog",
    )?;
    Ok(CStr::from_bytes_until_nul(&buf)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default())
}

/// Blocks of `block` threads covering `n` items, as a grid size.
pub fn blocks(n: u64, block: u32) -> Result<u32> {
    let g = n.div_ceil(block as u64);
    u32::try_from(g).map_err(|_| anyhow!("{n} items is too many for one launch"))
}

#[cfg(test)]
mod tests {
    use super::PROGRAMS;

    /// Every kernel a program defines is one c2q can launch, and every kernel it lists exists:
    /// a missing name would only show on a GPU, as "unknown kernel".
    #[test]
    fn listed_kernels_match_the_sources() {
        for (name, source, listed) in PROGRAMS {
            let mut defined: Vec<&str> = source
                .split("extern \"C\" __global__ void")
                .skip(1)
                .filter_map(|rest| {
                    // Past an optional __launch_bounds__(…), the name runs up to '('.
                    let rest = rest.trim_start();
                    let rest = match rest.strip_prefix("__launch_bounds__") {
                        Some(r) => &r[r.find(')')? + 1..],
                        None => rest,
                    };
                    rest.trim_start().split('(').next().map(str::trim)
                })
                .collect();
            defined.sort_unstable();
            let mut listed: Vec<&str> = listed.to_vec();
            listed.sort_unstable();
            assert_eq!(defined, listed, "kernels of program {name}");
        }
    }
}
