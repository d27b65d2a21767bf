//! The CUDA backend: device discovery, NVRTC builds of `kernels/`, typed kernel launches, device
//! memory, NTT and MSM launchers, SRS residency and its placement by value, and `CudaBackend`
//! (proving start on a GPU).
//!
//! Only `backend` and its pool of CPU-made evaluations (`kept_evaluations`) know the Groth16
//! types; the launchers (`ntt`, `msm`) take device buffers of
//! plain limbs. Everything is loaded at run time: on a machine without a GPU, `list_devices`
//! is empty and `select_backends(Auto, ..)` gives the CPU backend.

pub mod backend;
pub mod compile;
pub mod device;
pub mod discovery;
mod kept_evaluations;
pub mod kernels;
pub mod limbs;
pub mod memory;
pub mod msm;
pub mod ntt;
pub mod placement;
pub mod products;
pub mod witness;

pub use backend::{select_backends, BackendChoice, CudaBackend};
pub use device::Gpu;
pub use discovery::{list_devices, DeviceInfo};
pub use memory::OutOfDeviceMemory;
