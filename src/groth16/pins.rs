//! Host memory page-locked for GPU copies, held beside the values it locks.

use std::any::Any;
use std::sync::Mutex;

/// What must be let go of before some host values are freed: the page-locking that lets GPUs
/// copy them by DMA straight from host memory (`gpu::memory::PageLocked`), held as `Any` so
/// that the values' owners (an SRS's points, a partition's evaluations) need not know the
/// GPU's types. An owner declares it as its first field: fields drop in order, so the locks go
/// before the memory they refer to.
#[derive(Default)]
pub struct Pins(Mutex<Vec<Box<dyn Any + Send + Sync>>>);

impl Pins {
    /// Keeps `pin` until these pins are dropped.
    pub fn hold(&self, pin: Box<dyn Any + Send + Sync>) {
        // A poisoned lock still holds its vector: keep the pin either way.
        match self.0.lock() {
            Ok(mut pins) => pins.push(pin),
            Err(poisoned) => poisoned.into_inner().push(pin),
        }
    }
}

impl std::fmt::Debug for Pins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.0.lock().map_or(0, |p| p.len());
        write!(f, "Pins({held})")
    }
}

/// A copy of the values is not page-locked: its pins start empty.
impl Clone for Pins {
    fn clone(&self) -> Pins {
        Pins::default()
    }
}

/// Pins say how values are held, not what they are: values compare equal whatever their pins.
impl PartialEq for Pins {
    fn eq(&self, _: &Pins) -> bool {
        true
    }
}
