//! The handle of one opened GPU: its context, the streams work is queued on ([`Lane`]), the
//! kernels loaded for it, and ordering between lanes (events, waits, syncs).
//!
//! What the handle rests on lives beside it: finding GPUs in `discovery`, building the kernels
//! in `compile`, device memory in `memory`, and launching (typed, per kernel) in `kernels`.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use cudarc::driver::result as dres;
use cudarc::driver::sys as dsys;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream};
use cudarc::nvrtc::Ptx;

use super::compile::build_program;
use super::discovery::{device_info, driver_present, nvrtc_present, DeviceInfo};
use super::kernels::PROGRAMS;
use super::memory::DeviceMemory;

/// One GPU, ready to run c2q's kernels: its context, one stream per [`Lane`], the kernels,
/// and the device memory c2q holds on it.
pub struct Gpu {
    pub info: DeviceInfo,
    /// Shared with every `DevBuf`, which binds it to free itself.
    pub(super) ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    side: Arc<CudaStream>,
    copy: Arc<CudaStream>,
    functions: HashMap<&'static str, CudaFunction>,
    pub(super) memory: DeviceMemory,
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
            memory: DeviceMemory::new(),
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

    /// The stream behind `lane`.
    pub(super) fn lane(&self, lane: Lane) -> &Arc<CudaStream> {
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

    /// The kernel `name` as loaded at `open` (for `kernels`, which launches it).
    pub(super) fn function(&self, name: &str) -> Result<&CudaFunction> {
        self.functions
            .get(name)
            .ok_or_else(|| anyhow!("unknown kernel {name}"))
    }

    /// Record a timing event on the stream.
    pub fn event(&self) -> Result<cudarc::driver::CudaEvent> {
        self.stream
            .record_event(Some(dsys::CUevent_flags::CU_EVENT_DEFAULT))
            .context("cannot record a CUDA event")
    }
}
