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

impl Pins {
    /// Whether nothing is held (the values are not page-locked).
    pub fn is_empty(&self) -> bool {
        self.0.lock().map_or(true, |p| p.is_empty())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Records its name when dropped.
    struct Probe(Arc<Mutex<Vec<&'static str>>>, &'static str);

    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.lock().expect("drop log").push(self.1);
        }
    }

    /// An owner that declares its pins first, as `Srs` and `Evaluations` do.
    struct Owner {
        pins: Pins,
        _values: Probe,
    }

    #[test]
    fn pins_go_before_the_values_they_lock() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let owner = Owner {
            pins: Pins::default(),
            _values: Probe(log.clone(), "values"),
        };
        owner.pins.hold(Box::new(Probe(log.clone(), "pin")));
        drop(owner);
        assert_eq!(*log.lock().expect("drop log"), ["pin", "values"]);
    }

    #[test]
    fn a_clone_holds_no_pins_and_pins_do_not_change_equality() {
        let pins = Pins::default();
        pins.hold(Box::new(1u8));
        assert_eq!(format!("{pins:?}"), "Pins(1)");
        assert_eq!(format!("{:?}", pins.clone()), "Pins(0)");
        assert_eq!(pins, Pins::default());
    }
}
