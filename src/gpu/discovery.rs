//! What is installed and what GPUs there are, without opening any: whether the CUDA driver and
//! NVRTC libraries load, their versions, and a [`DeviceInfo`] per visible GPU.
//!
//! Both libraries are loaded when first needed (cudarc's dynamic loading), so the same binary
//! runs where neither exists: with no driver, `list_devices` is empty rather than an error.

use anyhow::{anyhow, bail, Context, Result};
use cudarc::driver::result as dres;
use cudarc::driver::sys as dsys;
use cudarc::nvrtc::sys as nsys;

/// What `c2q` can say about a GPU without using it.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub total_memory: usize,
    pub multiprocessors: i32,
    /// Threads one SM holds at once (2,048 on sm_80 and sm_90, 1,536 on sm_86, sm_89, sm_120).
    pub threads_per_sm: i32,
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

pub(super) fn nvrtc_present() -> bool {
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

pub(super) fn device_info(ordinal: usize) -> Result<DeviceInfo> {
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
    let threads_per_sm = attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?;
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
        threads_per_sm,
        shared_per_sm,
    })
}

pub(super) fn driver_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: writes one int.
    unsafe { dsys::cuDriverGetVersion(&mut v) }
        .result()
        .context("cannot read the CUDA driver version")?;
    Ok(v)
}

pub(super) fn nvrtc_version() -> Result<(i32, i32)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints.
    let rc = unsafe { nsys::nvrtcVersion(&mut major, &mut minor) };
    if rc != nsys::nvrtcResult::NVRTC_SUCCESS {
        bail!("cannot read the NVRTC version: {rc:?}");
    }
    Ok((major, minor))
}
