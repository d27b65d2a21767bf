//! Device memory: owned buffers ([`DevBuf`]) and typed addresses into them ([`DevPtr`]), the
//! accounting of what c2q holds on a GPU against an optional limit, and the copies between
//! host and device (uploads through pinned staging buffers, downloads, device copies).
//!
//! Accounting lives beside allocation so that every byte allocated is counted and every
//! `DevBuf` gives its bytes back on drop, whichever module made it.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use blstrs::Scalar as Fr;
use cudarc::driver::result as dres;
use cudarc::driver::sys as dsys;
use cudarc::driver::CudaContext;

use super::device::{Gpu, Lane};

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

/// What c2q holds on one GPU: bytes allocated now and at most, the cap it may hold, and the
/// pinned staging buffers of large uploads.
pub(super) struct DeviceMemory {
    /// Shared with every live `DevBuf`, which gives its bytes back on drop.
    pool: Arc<Pool>,
    /// The most `allocated` has been since the last `reset_peak`.
    peak: AtomicU64,
    /// The most device memory c2q may hold on this GPU (0: what the GPU has).
    limit: AtomicU64,
    staging: Mutex<Option<Staging>>,
}

impl DeviceMemory {
    pub(super) fn new() -> DeviceMemory {
        DeviceMemory {
            pool: Arc::new(Pool {
                allocated: AtomicU64::new(0),
                keeping: AtomicUsize::new(0),
                kept: Blocks::default(),
                set_aside: Blocks::default(),
            }),
            peak: AtomicU64::new(0),
            limit: AtomicU64::new(0),
            staging: Mutex::new(None),
        }
    }
}

/// The bytes c2q holds on one GPU, the blocks kept for reuse while a `KeepFreed` scope is
/// open, and the blocks set aside for the next proving start (`Gpu::set_aside`).
struct Pool {
    /// Bytes allocated, kept and set-aside blocks included.
    allocated: AtomicU64,
    /// Open `KeepFreed` scopes.
    keeping: AtomicUsize,
    /// Blocks given back inside a scope, held for the next allocations instead of freed.
    kept: Blocks,
    /// Blocks allocated ahead of the allocations that will take them; counted as free.
    set_aside: Blocks,
}

/// One device allocation: its address and size in bytes.
#[derive(Clone, Copy)]
struct Block {
    ptr: dsys::CUdeviceptr,
    bytes: usize,
}

/// What c2q holds on a GPU, in bytes: all it has allocated, and the part of it set aside.
struct Held {
    allocated: usize,
    set_aside: usize,
}

impl Held {
    /// (free, total) for c2q, from the driver's `free` and `total`: the blocks set aside count
    /// as free, and within a `limit` c2q has what it does not hold otherwise.
    fn usable(&self, free: usize, total: usize, limit: Option<usize>) -> (usize, usize) {
        let free = free + self.set_aside;
        match limit {
            Some(limit) => {
                let held = self.allocated.saturating_sub(self.set_aside);
                (free.min(limit.saturating_sub(held)), total.min(limit))
            }
            None => (free, total),
        }
    }
}

/// Allocated blocks owned by no buffer, each waiting to be taken by an allocation of about
/// its size.
#[derive(Default)]
struct Blocks(Mutex<Vec<Block>>);

impl Blocks {
    /// The list, also after a thread panicked holding it: it is plain data, whole between
    /// calls.
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Block>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The smallest block of at least `bytes` and at most twice that (a small request does
    /// not take a large block that a later one of its size would miss).
    fn take(&self, bytes: usize) -> Option<Block> {
        let mut blocks = self.lock();
        let at = blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.bytes >= bytes && b.bytes <= bytes.saturating_mul(2))
            .min_by_key(|(_, b)| b.bytes)
            .map(|(i, _)| i)?;
        Some(blocks.swap_remove(at))
    }

    fn push(&self, block: Block) {
        self.lock().push(block);
    }

    fn take_all(&self) -> Vec<Block> {
        std::mem::take(&mut *self.lock())
    }

    /// The blocks other than those of exactly `bytes`, taken out.
    fn take_other_than(&self, bytes: usize) -> Vec<Block> {
        let mut blocks = self.lock();
        let (same, other) = blocks.iter().partition(|b| b.bytes == bytes);
        *blocks = same;
        other
    }

    fn count(&self) -> usize {
        self.lock().len()
    }

    fn bytes(&self) -> usize {
        self.lock().iter().map(|b| b.bytes).sum()
    }
}

/// While alive, device buffers of its GPU that are dropped are kept for reuse by the next
/// allocations of about their size, instead of freed; they are freed when the last scope ends
/// (`Gpu::keep_freed`). cuMemFree waits for all work on the GPU, the copies on other lanes
/// included: a streamed MSM freeing its scratch after each piece waited for the copy of the next
/// piece, so that its copies and sums ran one after the other.
///
/// Only for code whose buffers are done with on every lane by the time they are dropped, or
/// that orders each lane's later use after the work of the lane that last used them (the MSM:
/// its sorts wait for the main lane, and every piece ends with the main lane synchronised).
#[must_use = "the buffers are kept only while the scope is alive"]
pub struct KeepFreed<'a> {
    gpu: &'a Gpu,
}

impl Drop for KeepFreed<'_> {
    fn drop(&mut self) {
        if self.gpu.memory.pool.keeping.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.gpu.free_blocks(self.gpu.memory.pool.kept.take_all());
        }
    }
}

/// Two pinned host buffers: large uploads are copied into one (by all cores) while the GPU
/// pulls the other, since DMA from pageable memory runs at a fraction of PCIe speed.
struct Staging {
    bufs: [*mut u8; 2],
    events: [dsys::CUevent; 2],
}

const STAGING_BYTES: usize = 64 << 20;

/// Page-locked host memory each GPU holds for its staging buffers, once it has uploaded
/// anything large: counted in the memory gate's baseline.
pub const PINNED_STAGING_BYTES: usize = 2 * STAGING_BYTES;

/// Runs `f` (the host side of a staging copy: filling a pinned buffer, selecting values) on
/// threads of its own rather than rayon's global pool: on a busy worker that pool is full of
/// other stages' CPU work (witnesses, A, B and C made on the CPU for GPUs without room for
/// the constraints), and a proving start's copies queued behind it left the GPU waiting. A
/// few threads fill a 64 MB buffer faster than PCIe drains it.
fn on_copy_threads<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism()
            .map_or(4, |n| n.get() / 2)
            .clamp(2, 8);
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("c2q-copy-{i}"))
            .build()
            .map_err(|e| {
                tracing::warn!(error = %e, "no threads of their own for host-to-device copies: they share rayon's pool")
            })
            .ok()
    });
    match pool {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// Host memory page-locked for the GPUs (`Gpu::page_lock`): uploads from inside it go to the
/// device by DMA straight from it, with no copy into the staging buffers and no CPU time. On a
/// worker whose points are streamed, the staging copies of 30–47 GB per 32 GiB partition
/// competed with the CPU's other stages for cores and memory bandwidth. Unlocked on drop, which
/// must come before the memory is freed (`Srs::pins` holds it for an SRS's points).
pub struct PageLocked {
    ctx: Arc<CudaContext>,
    range: std::ops::Range<usize>,
}

/// Address ranges page-locked now (few: one per streamed point set or evaluation vector).
static PAGE_LOCKED: Mutex<Vec<std::ops::Range<usize>>> = Mutex::new(Vec::new());

/// Held while a range is being page-locked, so that two GPUs streaming the same points do not
/// both lock them (the driver refuses the second). Not `PAGE_LOCKED` itself: uploads look that
/// up, and locking gigabytes takes the driver a good part of a second.
static LOCKING: Mutex<()> = Mutex::new(());

/// Whether all of `bytes` lies in one page-locked range.
fn is_page_locked<T>(data: &[T]) -> bool {
    let range = data.as_ptr_range();
    let (start, end) = (range.start as usize, range.end as usize);
    PAGE_LOCKED
        .lock()
        .is_ok_and(|locked| locked.iter().any(|r| r.start <= start && end <= r.end))
}

impl Drop for PageLocked {
    fn drop(&mut self) {
        if let Ok(mut locked) = PAGE_LOCKED.lock() {
            locked.retain(|r| *r != self.range);
        }
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the range was registered by `page_lock` and is unregistered once, before
            // its memory is freed; no copy from it is in flight (its owner is being dropped).
            let _ = unsafe { dsys::cuMemHostUnregister(self.range.start as *mut std::ffi::c_void) };
        }
    }
}

/// Element types that cross between host and device memory as raw bytes: integers, with no
/// padding, no pointers, and every bit pattern a valid value, so that viewing them as bytes
/// (an upload) or filling them with any bytes (a download) is sound. Sealed: no other type can
/// claim it.
pub trait DeviceWord: Copy + Send + Sync + 'static + sealed::Sealed {}

impl DeviceWord for u32 {}
impl DeviceWord for u64 {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

impl Gpu {
    /// Page-locks `data` for copies to every GPU (cuMemHostRegister, portable); `None` where
    /// it is page-locked already. The caller keeps the guard for as long as `data` lives.
    /// Only the address range of `data` is registered: nothing is read through `T`.
    pub fn page_lock<T>(&self, data: &[T]) -> Result<Option<PageLocked>> {
        let bytes = std::mem::size_of_val(data);
        if bytes == 0 {
            return Ok(None);
        }
        let _locking = LOCKING
            .lock()
            .map_err(|_| anyhow!("page-locking poisoned"))?;
        if is_page_locked(data) {
            return Ok(None);
        }
        self.bind()?;
        let start = data.as_ptr() as usize;
        // SAFETY: `data` is live host memory of `bytes` bytes; the guard unregisters it.
        unsafe {
            dsys::cuMemHostRegister_v2(
                start as *mut std::ffi::c_void,
                bytes,
                dsys::CU_MEMHOSTREGISTER_PORTABLE,
            )
        }
        .result()
        .with_context(|| {
            format!(
                "cannot page-lock {bytes} bytes of host memory for {}",
                self.info
            )
        })?;
        let range = start..start + bytes;
        PAGE_LOCKED
            .lock()
            .map_err(|_| anyhow!("the page-locked ranges are poisoned"))?
            .push(range.clone());
        Ok(Some(PageLocked {
            ctx: self.ctx.clone(),
            range,
        }))
    }
}

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

impl Gpu {
    /// Bytes of device memory c2q holds on this GPU now.
    pub fn allocated(&self) -> u64 {
        self.memory.pool.allocated.load(Ordering::Relaxed)
    }

    /// The most device memory c2q has held on this GPU since the last `reset_peak`.
    pub fn peak_allocated(&self) -> u64 {
        self.memory.peak.load(Ordering::Relaxed)
    }

    /// Starts a new peak measurement from what is held now.
    pub fn reset_peak(&self) {
        self.memory.peak.store(self.allocated(), Ordering::Relaxed);
    }

    /// Caps the device memory c2q holds on this GPU at `bytes` (None: what the GPU has), for
    /// a GPU shared with other work: allocations past it fail as if the GPU were full, and
    /// `mem_info` reports the GPU as that large.
    pub fn set_memory_limit(&self, bytes: Option<usize>) {
        self.memory
            .limit
            .store(bytes.map_or(0, |b| b.max(1) as u64), Ordering::Relaxed);
    }

    pub fn memory_limit(&self) -> Option<usize> {
        match self.memory.limit.load(Ordering::Relaxed) {
            0 => None,
            b => Some(b as usize),
        }
    }

    /// (free, total) device memory c2q can use: as the driver sees it, within the limit. Blocks
    /// set aside count as free: the first allocations to come take them, and any allocation
    /// that finds no room frees them.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        let (free, total) = dres::mem_get_info().context("cannot query free device memory")?;
        let held = Held {
            allocated: self.allocated() as usize,
            set_aside: self.memory.pool.set_aside.bytes(),
        };
        Ok(held.usable(free, total, self.memory_limit()))
    }

    /// Opens a scope in which dropped device buffers are kept for reuse (`KeepFreed`).
    pub fn keep_freed(&self) -> KeepFreed<'_> {
        self.memory.pool.keeping.fetch_add(1, Ordering::AcqRel);
        KeepFreed { gpu: self }
    }

    /// Allocates `count` blocks of `bytes` ahead of the allocations of about that size that
    /// will take them (`alloc` looks there first), keeping those set aside already; blocks
    /// of other sizes set aside are freed. Stops at the first that finds no room. Returns
    /// how many are set aside.
    ///
    /// A streamed proving start from host-made a, b and c sets aside the next start's first
    /// three domain-sized buffers (`gpu::backend`'s `set_aside_buffers`).
    pub fn set_aside(&self, bytes: usize, count: usize) -> usize {
        let pool = &self.memory.pool;
        self.free_blocks(pool.set_aside.take_other_than(bytes));
        while pool.set_aside.count() < count {
            let Ok(block) = self.alloc_block(bytes) else {
                break;
            };
            pool.set_aside.push(block);
        }
        pool.set_aside.count()
    }

    /// Frees the blocks set aside; returns how many bytes.
    pub fn release_set_aside(&self) -> usize {
        self.free_blocks(self.memory.pool.set_aside.take_all())
    }

    /// Frees `blocks` (each free waits for the GPU's work); returns how many bytes.
    fn free_blocks(&self, blocks: Vec<Block>) -> usize {
        let mut bytes = 0;
        if !blocks.is_empty() && self.bind().is_ok() {
            for b in blocks {
                // SAFETY: each block came from cuMemAlloc, is owned by no DevBuf, and is freed
                // once. cuMemFree waits for the work still using it.
                let _ = unsafe { dres::free_sync(b.ptr) };
                self.memory
                    .pool
                    .allocated
                    .fetch_sub(b.bytes as u64, Ordering::Relaxed);
                bytes += b.bytes;
            }
        }
        bytes
    }

    /// Allocate `len` elements of `T` (uninitialised): a block set aside, or a kept block inside
    /// a `KeepFreed` scope, else a new one; where that finds no room, the blocks held for reuse
    /// are freed first.
    pub fn alloc<T: DeviceWord>(&self, len: usize) -> Result<DevBuf<T>> {
        self.bind()?;
        let bytes = len.max(1) * std::mem::size_of::<T>();
        let pool = &self.memory.pool;
        if let Some(block) = pool.set_aside.take(bytes) {
            return Ok(self.buf_at(block, len));
        }
        if pool.keeping.load(Ordering::Acquire) > 0 {
            if let Some(block) = pool.kept.take(bytes) {
                return Ok(self.buf_at(block, len));
            }
        }
        let block = match self.alloc_block(bytes) {
            Ok(block) => block,
            // Out of room with blocks held: free them (waiting for the GPU) and try once more.
            Err(e) if e.is::<OutOfDeviceMemory>() && self.release_held() > 0 => {
                self.alloc_block(bytes)?
            }
            Err(e) => return Err(e),
        };
        Ok(self.buf_at(block, len))
    }

    /// Frees the kept and set-aside blocks; returns how many bytes.
    fn release_held(&self) -> usize {
        let pool = &self.memory.pool;
        self.free_blocks(pool.kept.take_all()) + self.release_set_aside()
    }

    /// `block` as a buffer of `len` elements.
    fn buf_at<T: DeviceWord>(&self, block: Block, len: usize) -> DevBuf<T> {
        DevBuf {
            ptr: block.ptr,
            len,
            bytes: len.max(1) * std::mem::size_of::<T>(),
            block: block.bytes,
            ctx: self.ctx.clone(),
            pool: self.memory.pool.clone(),
            _t: PhantomData,
        }
    }

    /// A new allocation of `bytes`, counted against the limit.
    fn alloc_block(&self, bytes: usize) -> Result<Block> {
        // Reserve the bytes first, so that threads allocating at once cannot pass the limit
        // together; given back if the allocation fails.
        let allocated = &self.memory.pool.allocated;
        let held = allocated.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
        if let Some(limit) = self.memory_limit() {
            if held as usize > limit {
                allocated.fetch_sub(bytes as u64, Ordering::Relaxed);
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
            allocated.fetch_sub(bytes as u64, Ordering::Relaxed);
        }
        match result {
            Ok(ptr) => {
                self.memory.peak.fetch_max(held, Ordering::Relaxed);
                Ok(Block { ptr, bytes })
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
    pub fn alloc_zeroed<T: DeviceWord>(&self, len: usize) -> Result<DevBuf<T>> {
        let buf = self.alloc::<T>(len)?;
        self.memset_zero(&buf)?;
        Ok(buf)
    }

    pub fn memset_zero<T: DeviceWord>(&self, buf: &DevBuf<T>) -> Result<()> {
        self.memset_zero_in(Lane::Main, buf)
    }

    pub fn memset_zero_in<T: DeviceWord>(&self, lane: Lane, buf: &DevBuf<T>) -> Result<()> {
        self.bind()?;
        // SAFETY: the range lies inside `buf`; ordered on the lane's stream.
        unsafe { dres::memset_d8_async(buf.ptr, 0, buf.bytes, self.lane(lane).cu_stream()) }
            .context("cuMemsetD8Async failed")
    }

    /// Copy host data into `buf` starting at element `offset`, on the main lane.
    pub fn upload<T: DeviceWord>(&self, buf: &DevBuf<T>, offset: usize, src: &[T]) -> Result<()> {
        self.upload_in(Lane::Main, buf, offset, src)
    }

    /// Copy host data into `buf` on `lane`; returns when the copy is done (only that lane is
    /// waited for, so work on the other lanes keeps running meanwhile).
    pub fn upload_in<T: DeviceWord>(
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
        // SAFETY: T is a DeviceWord (an integer: no padding, no pointers); the byte view covers
        // exactly `src`.
        let bytes = unsafe {
            std::slice::from_raw_parts(src.as_ptr() as *const u8, std::mem::size_of_val(src))
        };
        // Page-locked memory goes by DMA straight from where it is.
        if bytes.len() >= 4 * STAGING_BYTES && !is_page_locked(src) {
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
            .memory
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
            on_copy_threads(|| {
                stage
                    .par_chunks_mut(1 << 20)
                    .zip(piece.par_chunks(1 << 20))
                    .for_each(|(d, s)| d.copy_from_slice(s))
            });
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
    pub fn upload_selected<B: DeviceWord>(
        &self,
        lane: Lane,
        buf: &DevBuf<B>,
        offset: usize,
        values: &[Fr],
        present: &(dyn Fn(usize) -> bool + Sync),
    ) -> Result<usize> {
        let size = std::mem::size_of::<Fr>();
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
            let counts = on_copy_threads(|| crate::groth16::select::count(piece, first, present));
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
            // aligned for Fr) and no DMA reads it now; `gather` writes all `count` values
            // before the bytes are read, and Fr is four u64 limbs with no padding.
            let stage = unsafe { std::slice::from_raw_parts_mut(st.bufs[k] as *mut Fr, count) };
            on_copy_threads(|| {
                crate::groth16::select::gather(piece, first, present, &counts, stage)
            });
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
    pub fn download<T: DeviceWord>(
        &self,
        buf: &DevBuf<T>,
        offset: usize,
        dst: &mut [T],
    ) -> Result<()> {
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
        unsafe { dres::memcpy_dtoh_async(dst, src, self.lane(Lane::Main).cu_stream()) }
            .context("device-to-host copy failed")?;
        self.sync_lane(Lane::Main)
    }

    /// Device-to-device copy of `len` elements.
    pub fn copy<T: DeviceWord>(
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
                self.lane(Lane::Main).cu_stream(),
            )
        }
        .context("device-to-device copy failed")
    }
}

/// Host-to-device bandwidth as streamed points travel: by DMA from page-locked host memory
/// (streamed point sets are page-locked once), or through the pinned staging buffers where
/// the driver refuses to lock (`page_locked` false).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct HostToDevice {
    pub bytes: u64,
    pub gb_per_s: f64,
    pub page_locked: bool,
}

impl HostToDevice {
    /// Seconds to copy `bytes` at this bandwidth.
    pub fn seconds_for(&self, bytes: u64) -> f64 {
        bytes as f64 / (self.gb_per_s * 1e9)
    }

    /// How the copies went, for the lines that print the bandwidth.
    pub fn how(&self) -> &'static str {
        if self.page_locked {
            "by DMA from page-locked host memory"
        } else {
            "through the staging buffers: host memory could not be page-locked"
        }
    }
}

impl Gpu {
    /// Measures `HostToDevice` with copies of `bytes` (the best of three, after one warm-up),
    /// from page-locked host memory where the driver locks it.
    pub fn measure_host_to_device(&self, bytes: usize) -> Result<HostToDevice> {
        let words = bytes.div_ceil(4).max(1);
        let host: Vec<u32> = (0..words as u32).collect();
        // Unlocked before `host` is freed: declared after it, so dropped first.
        let locked = self.page_lock(&host).ok().flatten();
        let dev = self.alloc::<u32>(words)?;
        self.upload_in(Lane::Copy, &dev, 0, &host)?;
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            self.upload_in(Lane::Copy, &dev, 0, &host)?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        let bytes = (words * 4) as u64;
        Ok(HostToDevice {
            bytes,
            gb_per_s: bytes as f64 / best.max(1e-9) / 1e9,
            page_locked: locked.is_some(),
        })
    }
}

/// Owned device memory, freed on drop. Elements are plain limbs (`u32`).
pub struct DevBuf<T> {
    ptr: dsys::CUdeviceptr,
    len: usize,
    /// `len` elements' bytes.
    bytes: usize,
    /// The allocation's bytes, as counted: more than `bytes` for a kept block reused.
    block: usize,
    ctx: Arc<CudaContext>,
    pool: Arc<Pool>,
    _t: PhantomData<T>,
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
    pub fn at(&self, i: usize) -> DevPtr<T> {
        DevPtr::new(self.ptr + (i * std::mem::size_of::<T>()) as u64)
    }
    /// Device address of the first element (for kernel arguments).
    pub fn ptr(&self) -> DevPtr<T> {
        DevPtr::new(self.ptr)
    }
}

/// The device address of an element of type `T`: what a kernel parameter `T*` takes. Typed so
/// that a launch passing a `u64` buffer where the kernel reads `u32` limbs (or a size where it
/// wants an address) does not compile; see `kernels`.
#[repr(transparent)]
pub struct DevPtr<T> {
    addr: dsys::CUdeviceptr,
    // fn() -> T: an address, not an owner of T, and Send + Sync whatever T is.
    _t: PhantomData<fn() -> T>,
}

impl<T> DevPtr<T> {
    fn new(addr: dsys::CUdeviceptr) -> DevPtr<T> {
        DevPtr {
            addr,
            _t: PhantomData,
        }
    }

    /// The address as the driver takes it.
    pub fn addr(&self) -> &dsys::CUdeviceptr {
        &self.addr
    }
}

// Not derived: derive would require T: Copy, and an address is copyable whatever it points to.
impl<T> Clone for DevPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for DevPtr<T> {}

impl<T> Drop for DevBuf<T> {
    fn drop(&mut self) {
        let block = Block {
            ptr: self.ptr,
            bytes: self.block,
        };
        // Inside a `KeepFreed` scope the block stays allocated (and counted) for reuse.
        if self.pool.keeping.load(Ordering::Acquire) > 0 {
            self.pool.kept.push(block);
            return;
        }
        // Freeing needs the context current; errors here cannot be returned, and a failed free
        // only leaks device memory that context teardown reclaims.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc and is freed once. cuMemFree waits for all
            // work on the GPU, this buffer's included.
            let _ = unsafe { dres::free_sync(block.ptr) };
        }
        self.pool
            .allocated
            .fetch_sub(block.bytes as u64, Ordering::Relaxed);
    }
}

// SAFETY: a device pointer is an address in the GPU's space; access goes through the context.
unsafe impl<T> Send for DevBuf<T> {}
unsafe impl<T> Sync for DevBuf<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks_of(sizes: &[usize]) -> Blocks {
        let blocks = Blocks::default();
        for (i, &bytes) in sizes.iter().enumerate() {
            blocks.push(Block {
                ptr: 0x1000 * (i as u64 + 1),
                bytes,
            });
        }
        blocks
    }

    /// A held block serves a request of at least half its size, the smallest that fits first,
    /// so that the next piece's scratch reuses the last piece's whatever its exact sizes.
    #[test]
    fn a_held_block_serves_the_closest_request() {
        let blocks = blocks_of(&[1000, 4000, 2500, 600]);
        assert_eq!(blocks.bytes(), 8100);
        assert_eq!(blocks.take(2200).map(|b| b.bytes), Some(2500));
        // 4000 is more than twice 1500 and 2500 is gone: none fits.
        assert_eq!(blocks.take(1500).map(|b| b.bytes), None);
        assert_eq!(blocks.take(2100).map(|b| b.bytes), Some(4000));
        assert_eq!(blocks.take(600).map(|b| b.bytes), Some(600));
        assert_eq!(blocks.take(600).map(|b| b.bytes), Some(1000));
        assert!(blocks.take(1).is_none());
        assert_eq!(blocks.count(), 0);
    }

    /// Blocks set aside count as free, with or without a limit; what else c2q holds counts
    /// against the limit.
    #[test]
    fn blocks_set_aside_count_as_free() {
        let held = Held {
            allocated: 10_000,
            set_aside: 3_000,
        };
        assert_eq!(held.usable(50_000, 80_000, None), (53_000, 80_000));
        // Within a limit of 16,000: 7,000 held otherwise leave 9,000.
        assert_eq!(held.usable(50_000, 80_000, Some(16_000)), (9_000, 16_000));
        // The driver's free memory still bounds it.
        assert_eq!(held.usable(2_000, 80_000, Some(16_000)), (5_000, 16_000));
        let none = Held {
            allocated: 10_000,
            set_aside: 0,
        };
        assert_eq!(none.usable(50_000, 80_000, Some(16_000)), (6_000, 16_000));
    }

    /// Setting aside blocks of one size lets go of those of any other: a start of another
    /// circuit does not leave the last one's blocks held.
    #[test]
    fn blocks_of_another_size_are_taken_out() {
        let blocks = blocks_of(&[4096, 100, 4096, 4097]);
        let other: Vec<usize> = blocks
            .take_other_than(4096)
            .iter()
            .map(|b| b.bytes)
            .collect();
        assert_eq!(other, [100, 4097]);
        assert_eq!((blocks.count(), blocks.bytes()), (2, 8192));
        assert_eq!(blocks.take_all().len(), 2);
        assert_eq!(blocks.bytes(), 0);
    }

    #[test]
    fn page_locked_ranges_cover_whole_uploads_only() {
        let data = vec![7u8; 4096];
        let (start, len) = (data.as_ptr() as usize, data.len());
        PAGE_LOCKED
            .lock()
            .expect("page-locked ranges")
            .push(start..start + len);
        assert!(is_page_locked(&data));
        assert!(is_page_locked(&data[100..200]));
        let other = vec![7u8; 16];
        assert!(!is_page_locked(&other));
        PAGE_LOCKED
            .lock()
            .expect("page-locked ranges")
            .retain(|r| r.start != start);
        assert!(!is_page_locked(&data));
    }
}
