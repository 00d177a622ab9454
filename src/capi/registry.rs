//! The objects the C API hands out (handles, SMaT and MSREP matrices, SDDMM plans), named by values
//! that are never reused.
//!
//! A handle value is not an address. It is `kind << 56 | generation << 32 | slot`: `slot` indexes its
//! registry's table, and `generation` counts the objects that slot has held. Destroying an object
//! moves its slot on to the next generation, so a value names at most one object ever: a destroyed
//! handle stays invalid however many objects are made after it, where an address would name the next
//! object the allocator put there. A slot whose generation is exhausted is retired. The kind makes a
//! value of another family or kind recognisable as such, and, never 0, keeps every value non-NULL;
//! no value is a canonical address, so a caller dereferencing one faults instead of reading memory.
//!
//! The table's lock is held only to find or change a slot. The objects themselves are boxed at fixed
//! addresses and used without any lock: one thread uses an object at a time (the C API's contract),
//! and different objects are used concurrently from different threads.

use crate::alloc::try_reserve;
use crate::error::{Error, Result};
use std::marker::PhantomData;
use std::sync::{Mutex, MutexGuard};

// Handle values are 64-bit patterns in pointer-sized C types.
const _: () = assert!(usize::BITS == 64, "handle values need 64-bit pointers");

const SLOT_BITS: u32 = 32;
const GENERATION_BITS: u32 = 24;
const KIND_SHIFT: u32 = SLOT_BITS + GENERATION_BITS;
/// The last generation a slot holds before it is retired.
const LAST_GENERATION: u32 = (1 << GENERATION_BITS) - 1;

/// What a handle value names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ObjectKind {
    SpammHandle = 1,
    SmatHandle = 2,
    SmatMatrix = 3,
    MsrepHandle = 4,
    MsrepMatrix = 5,
    SddmmHandle = 6,
    SddmmPlan = 7,
    #[cfg(test)]
    Test = 255,
}

impl ObjectKind {
    const ALL: &[ObjectKind] = &[
        ObjectKind::SpammHandle,
        ObjectKind::SmatHandle,
        ObjectKind::SmatMatrix,
        ObjectKind::MsrepHandle,
        ObjectKind::MsrepMatrix,
        ObjectKind::SddmmHandle,
        ObjectKind::SddmmPlan,
        #[cfg(test)]
        ObjectKind::Test,
    ];

    /// The name messages give the kind.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ObjectKind::SpammHandle => "spamm handle",
            ObjectKind::SmatHandle => "smatHandle_t",
            ObjectKind::SmatMatrix => "smatMatrix_t",
            ObjectKind::MsrepHandle => "msrepHandle_t",
            ObjectKind::MsrepMatrix => "msrepMatrix_t",
            ObjectKind::SddmmHandle => "sddmm handle",
            ObjectKind::SddmmPlan => "sddmm plan",
            #[cfg(test)]
            ObjectKind::Test => "test object",
        }
    }

    fn of_value(value: usize) -> Option<ObjectKind> {
        ObjectKind::ALL.iter().copied().find(|kind| *kind as usize == value >> KIND_SHIFT)
    }
}

fn encode(kind: ObjectKind, generation: u32, slot: u32) -> usize {
    (kind as usize) << KIND_SHIFT | (generation as usize) << SLOT_BITS | slot as usize
}

/// (generation, slot) of a value.
fn decode(value: usize) -> (u32, u32) {
    (((value >> SLOT_BITS) & LAST_GENERATION as usize) as u32, value as u32)
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The generation of the slot's current or last object (0: none yet).
    generation: u32,
    /// The object's box, or 0 when the slot is free.
    object: usize,
}

#[derive(Debug, Default)]
struct Table {
    slots: Vec<Slot>,
    /// Slots that may hold another object, most recently freed last. It has room for every slot, so
    /// destroying never allocates.
    free: Vec<u32>,
}

/// The live objects of one kind.
pub(crate) struct Registry<T> {
    kind: ObjectKind,
    table: Mutex<Table>,
    objects: PhantomData<fn(T) -> T>,
}

impl<T> Registry<T> {
    pub(crate) const fn new(kind: ObjectKind) -> Self {
        Registry { kind, table: Mutex::new(Table { slots: Vec::new(), free: Vec::new() }), objects: PhantomData }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `object` to C: its value, never handed out before.
    pub(crate) fn register(&self, object: T) -> Result<*mut T> {
        let mut table = self.table();
        let slot = match table.free.pop() {
            Some(slot) => slot,
            None => {
                let slot = u32::try_from(table.slots.len()).map_err(|_| {
                    Error::alloc_failed(format!("every {} value has been handed out", self.kind.name()))
                })?;
                try_reserve(&mut table.slots, 1, "the handle table")?;
                try_reserve(&mut table.free, 1, "the handle table")?;
                table.slots.push(Slot { generation: 0, object: 0 });
                slot
            }
        };
        let entry = &mut table.slots[slot as usize];
        entry.generation += 1;
        entry.object = Box::into_raw(Box::new(object)) as usize;
        Ok(encode(self.kind, entry.generation, slot) as *mut T)
    }

    /// Checks `value` against this registry: NULL, another kind, or not live are INVALID_HANDLE
    /// (`destroying` words the last for a destroy). Returns the slot of a live object.
    fn live_slot(&self, table: &Table, value: *mut T, name: &str, destroying: bool) -> Result<u32> {
        if value.is_null() {
            return Err(Error::invalid_handle(format!("argument {name} is NULL")));
        }
        let kind = ObjectKind::of_value(value as usize);
        if let Some(other) = kind.filter(|&k| k != self.kind) {
            return Err(Error::invalid_handle(format!(
                "argument {name} = {value:p} is a {}, not a {}",
                other.name(),
                self.kind.name()
            )));
        }
        let (generation, slot) = decode(value as usize);
        match table.slots.get(slot as usize) {
            Some(entry) if kind.is_some() && entry.generation == generation && entry.object != 0 => Ok(slot),
            _ => Err(Error::invalid_handle(format!(
                "argument {name} = {value:p} is not a live {} ({}, or created by another family)",
                self.kind.name(),
                if destroying { "destroyed twice" } else { "destroyed" }
            ))),
        }
    }

    /// The object a live value names.
    ///
    /// # Safety
    /// One thread at a time uses an object, and the reference does not outlive it (the C API's
    /// contract: an object is not destroyed while it is in use).
    pub(crate) unsafe fn get<'a>(&self, value: *mut T, name: &str) -> Result<&'a mut T> {
        let table = self.table();
        let slot = self.live_slot(&table, value, name, false)?;
        let object = table.slots[slot as usize].object as *mut T;
        drop(table);
        // SAFETY: a live slot holds a box this registry made; see the contract above for exclusivity.
        Ok(unsafe { &mut *object })
    }

    /// Releases and drops the object `value` names. NULL is accepted (as `free`); any other value that
    /// does not name a live object is an error.
    ///
    /// # Safety
    /// No reference obtained from [`Registry::get`] for this object is in use.
    pub(crate) unsafe fn destroy(&self, value: *mut T, name: &str) -> Result<()> {
        if value.is_null() {
            return Ok(());
        }
        let mut table = self.table();
        let slot = self.live_slot(&table, value, name, true)?;
        let entry = &mut table.slots[slot as usize];
        let object = std::mem::replace(&mut entry.object, 0) as *mut T;
        if entry.generation < LAST_GENERATION {
            table.free.push(slot);
        }
        drop(table);
        // SAFETY: the box was made by `register` and is no longer reachable through the table.
        drop(unsafe { Box::from_raw(object) });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Status;

    #[test]
    fn a_destroyed_value_stays_invalid_whatever_is_made_after_it() {
        static REGISTRY: Registry<u32> = Registry::new(ObjectKind::Test);
        let first = REGISTRY.register(1).unwrap();
        unsafe { REGISTRY.destroy(first, "h") }.unwrap();
        let later: Vec<_> = (0..1000).map(|i| REGISTRY.register(i).unwrap()).collect();
        assert!(!later.contains(&first), "a value was handed out twice");
        let error = unsafe { REGISTRY.get(first, "h") }.unwrap_err();
        assert_eq!(error.status, Status::InvalidHandle);
        assert_eq!(
            error.message,
            format!("argument h = {first:p} is not a live test object (destroyed, or created by another family)")
        );
        let error = unsafe { REGISTRY.destroy(first, "h") }.unwrap_err();
        assert!(error.message.ends_with("(destroyed twice, or created by another family)"), "{}", error.message);
        for (i, &value) in later.iter().enumerate() {
            assert_eq!(*unsafe { REGISTRY.get(value, "h") }.unwrap(), i as u32);
            unsafe { REGISTRY.destroy(value, "h") }.unwrap();
        }
    }

    #[test]
    fn values_of_another_kind_null_and_foreign_values_are_rejected() {
        static TESTS: Registry<u32> = Registry::new(ObjectKind::Test);
        static PLANS: Registry<u32> = Registry::new(ObjectKind::SddmmPlan);
        let plan = PLANS.register(7).unwrap();
        let error = unsafe { TESTS.get(plan, "h") }.unwrap_err();
        assert_eq!(error.status, Status::InvalidHandle);
        assert_eq!(error.message, format!("argument h = {plan:p} is a sddmm plan, not a test object"));
        assert_eq!(unsafe { TESTS.destroy(plan, "h") }.unwrap_err().status, Status::InvalidHandle);
        assert_eq!(*unsafe { PLANS.get(plan, "p") }.unwrap(), 7, "the plan survives");
        let error = unsafe { TESTS.get(std::ptr::null_mut(), "h") }.unwrap_err();
        assert_eq!((error.status, error.message.as_str()), (Status::InvalidHandle, "argument h is NULL"));
        unsafe { TESTS.destroy(std::ptr::null_mut(), "h") }.unwrap();
        let mut local = 0u32;
        let forged = encode(ObjectKind::Test, 1, 12345) as *mut u32;
        for foreign in [&mut local as *mut u32, std::ptr::dangling_mut(), forged, usize::MAX as *mut u32] {
            let error = unsafe { TESTS.get(foreign, "h") }.unwrap_err();
            assert_eq!(error.status, Status::InvalidHandle, "{foreign:p}");
            assert!(error.message.contains("is not a live test object"), "{}", error.message);
        }
        unsafe { PLANS.destroy(plan, "p") }.unwrap();
    }

    #[test]
    fn a_slot_whose_generations_are_spent_is_retired() {
        static REGISTRY: Registry<u32> = Registry::new(ObjectKind::Test);
        let first = REGISTRY.register(1).unwrap();
        let (_, slot) = decode(first as usize);
        unsafe { REGISTRY.destroy(first, "h") }.unwrap();
        REGISTRY.table().slots[slot as usize].generation = LAST_GENERATION - 1;
        let last = REGISTRY.register(2).unwrap();
        assert_eq!(decode(last as usize), (LAST_GENERATION, slot));
        unsafe { REGISTRY.destroy(last, "h") }.unwrap();
        let next = REGISTRY.register(3).unwrap();
        assert_ne!(decode(next as usize).1, slot, "a retired slot was used again");
        assert!(unsafe { REGISTRY.get(last, "h") }.is_err());
        assert_eq!(*unsafe { REGISTRY.get(next, "h") }.unwrap(), 3);
    }

    #[test]
    fn different_objects_are_used_from_different_threads_at_once() {
        static REGISTRY: Registry<u64> = Registry::new(ObjectKind::Test);
        std::thread::scope(|scope| {
            for t in 0..4u64 {
                scope.spawn(move || {
                    for round in 0..2000u64 {
                        let value = REGISTRY.register(t).unwrap();
                        let object = unsafe { REGISTRY.get(value, "h") }.unwrap();
                        *object += round;
                        assert_eq!(*unsafe { REGISTRY.get(value, "h") }.unwrap(), t + round);
                        unsafe { REGISTRY.destroy(value, "h") }.unwrap();
                        assert!(unsafe { REGISTRY.get(value, "h") }.is_err());
                    }
                });
            }
        });
    }
}
