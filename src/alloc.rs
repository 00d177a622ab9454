//! Host allocations whose size comes from the caller.
//!
//! Rust's infallible allocations (`vec!`, `Vec::with_capacity`, `collect`, growing a vector) abort the
//! whole host program when memory runs out. Every allocation sized by a caller's dimensions goes
//! through this module instead, so that a request the machine cannot satisfy becomes
//! `SGPU_STATUS_ALLOCATION_FAILED` with the byte count, and one that no machine could satisfy (more
//! bytes than an allocation can address, `isize::MAX`) becomes `SGPU_STATUS_INVALID_SIZE`. Parallel
//! code allocates its outputs here first and then fills them in place, so nothing inside a rayon task
//! allocates in proportion to the caller's sizes.

use crate::error::{Error, Result};

/// The bytes of `len` elements of `T`, or INVALID_SIZE when no allocation can hold them. `what`
/// names the array in the message.
pub fn byte_count<T>(len: usize, what: impl std::fmt::Display) -> Result<usize> {
    let size = size_of::<T>();
    len.checked_mul(size).filter(|&bytes| bytes <= isize::MAX as usize).ok_or_else(|| {
        Error::invalid_size(format!("{what} would take {len} elements of {size} bytes, more than can be addressed"))
    })
}

/// `a · b` elements, or INVALID_SIZE when the count itself overflows.
pub fn element_count(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_mul(b)
        .ok_or_else(|| Error::invalid_size(format!("{what} would take {a} x {b} elements, more than can be addressed")))
}

/// Makes room for `additional` more elements of `v` (exactly that many), or fails with the byte count.
pub fn try_reserve<T>(v: &mut Vec<T>, additional: usize, what: &str) -> Result<()> {
    let len = v.len().checked_add(additional).ok_or_else(|| {
        Error::invalid_size(format!("{what} would take more than {} elements, more than can be addressed", usize::MAX))
    })?;
    let bytes = byte_count::<T>(len, what)?;
    v.try_reserve_exact(additional)
        .map_err(|_| Error::alloc_failed(format!("cannot allocate {bytes} bytes for {what}")))?;
    advise_huge_pages(v.as_ptr().cast(), v.capacity() * size_of::<T>());
    Ok(())
}

/// Allocations at least this large are backed by huge pages where the system allows it.
const HUGE_PAGE_ADVICE_BYTES: usize = 4 << 20;

/// Asks the kernel to back the `bytes` at `ptr` (a fresh allocation) by transparent huge pages
/// (`MADV_HUGEPAGE`, what glibc's `glibc.malloc.hugetlb=1` asks for every allocation). A large array
/// here is filled right after it is allocated, and with 4 KiB pages each first touch of a page is a
/// page fault: they took about 60 % of building MSREP's partitions and a third of SMaT's analysis of
/// a 3 M-entry matrix; a 2 MiB page takes one fault where 512 small ones took 512. Only advice:
/// where transparent huge pages are off (or on other systems) nothing changes.
fn advise_huge_pages(ptr: *const u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    if bytes >= HUGE_PAGE_ADVICE_BYTES {
        const PAGE: usize = 4096;
        let start = (ptr as usize).next_multiple_of(PAGE);
        let end = (ptr as usize + bytes) & !(PAGE - 1);
        if end > start {
            // SAFETY: the range lies inside an allocation this process owns; MADV_HUGEPAGE changes
            // how it is backed, never its contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes);
}

/// An empty vector with room for exactly `capacity` elements.
pub fn try_with_capacity<T>(capacity: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    try_reserve(&mut v, capacity, what)?;
    Ok(v)
}

/// `len` copies of `value`.
pub fn try_vec<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = try_with_capacity(len, what)?;
    v.resize(len, value);
    Ok(v)
}

/// Plain element types whose all-zero bytes are the value zero (`false`, `0`, `0.0`), so that a zeroed
/// allocation already holds `len` zeros.
///
/// # Safety
/// The all-zero bit pattern must be a valid value of the type, and the type must have no drop glue.
pub unsafe trait ZeroBits: Copy + Send {}

macro_rules! zero_bits {
    ($($t:ty),*) => { $(unsafe impl ZeroBits for $t {})* };
}
// SAFETY: integers, floats and bool are plain data whose all-zero pattern is 0, 0.0 and false.
zero_bits!(bool, u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);
// SAFETY: 16-bit floats are their bits; all zero is +0.0.
zero_bits!(half::f16, half::bf16);

/// `len` zeros. Where the operating system hands out fresh zero pages, a zeroed allocation writes
/// nothing, and each page is first touched by whoever fills it — in parallel, for the analyses'
/// arrays. But the allocator reuses freed blocks (glibc raises its threshold for fresh mappings to
/// the size of large blocks freed before), and clears a reused block itself, in one thread: in a
/// profile of SMaT's analysis, repeated on one process, that serial clearing took 11 % of the time.
/// So large arrays are cleared in parallel here instead.
pub fn try_zeros<T: ZeroBits>(len: usize, what: &str) -> Result<Vec<T>> {
    let bytes = byte_count::<T>(len, what)?;
    if bytes == 0 {
        return Ok(Vec::new());
    }
    if bytes >= HUGE_PAGE_ADVICE_BYTES {
        // SAFETY: the all-zero bit pattern is a value of T (ZeroBits).
        return try_collect_par(len, what, |_| unsafe { std::mem::zeroed::<T>() });
    }
    let layout = std::alloc::Layout::array::<T>(len)
        .map_err(|_| Error::invalid_size(format!("{what} would take {bytes} bytes, more than can be addressed")))?;
    // SAFETY: the layout has a nonzero size.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return Err(Error::alloc_failed(format!("cannot allocate {bytes} bytes for {what}")));
    }
    advise_huge_pages(ptr.cast(), bytes);
    // SAFETY: `ptr` comes from the global allocator with the layout of `len` elements of T, all of
    // them valid zeros (ZeroBits).
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// `item(0), …, item(len − 1)`.
pub fn try_collect<T>(len: usize, what: &str, item: impl FnMut(usize) -> T) -> Result<Vec<T>> {
    let mut v = try_with_capacity(len, what)?;
    v.extend((0..len).map(item));
    Ok(v)
}

/// Elements a task fills when a large array is filled in parallel.
const PARALLEL_FILL_CHUNK: usize = 1 << 16;

/// `item(0), …, item(len − 1)`, computed in parallel: arrays of many millions of elements (a
/// partition's copy of a caller's matrix) take one thread a fraction of the memory bandwidth.
pub fn try_collect_par<T: Send>(len: usize, what: &str, item: impl Fn(usize) -> T + Sync) -> Result<Vec<T>> {
    use rayon::prelude::*;
    let mut v = try_with_capacity(len, what)?;
    v.spare_capacity_mut()[..len].par_chunks_mut(PARALLEL_FILL_CHUNK).enumerate().for_each(|(c, slots)| {
        for (k, slot) in slots.iter_mut().enumerate() {
            slot.write(item(c * PARALLEL_FILL_CHUNK + k));
        }
    });
    // SAFETY: the capacity is at least `len`, and the loop above wrote each of the first `len`
    // elements (a panic in `item` propagates before this, leaving `v` empty).
    unsafe { v.set_len(len) };
    Ok(v)
}

/// A copy of `items`, copied in parallel (see [`try_collect_par`]).
pub fn try_copy_par<T: Copy + Send + Sync>(items: &[T], what: &str) -> Result<Vec<T>> {
    try_collect_par(items.len(), what, |i| items[i])
}

/// A copy of `items`.
pub fn try_copy<T: Clone>(items: &[T], what: &str) -> Result<Vec<T>> {
    let mut v = try_with_capacity(items.len(), what)?;
    v.extend_from_slice(items);
    Ok(v)
}

/// Appends `items` to `v`, growing it fallibly (amortised like `extend`: at least doubling).
pub fn try_extend<T: Clone>(v: &mut Vec<T>, items: &[T], what: &str) -> Result<()> {
    if v.capacity() - v.len() < items.len() {
        try_reserve(v, items.len().max(v.capacity()), what)?;
    }
    v.extend_from_slice(items);
    Ok(())
}

/// Appends `item` to `v`, growing it fallibly (amortised: at least doubling).
pub fn try_push<T>(v: &mut Vec<T>, item: T, what: &str) -> Result<()> {
    if v.len() == v.capacity() {
        try_reserve(v, v.capacity().max(4), what)?;
    }
    v.push(item);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Status;

    #[test]
    fn sizes_beyond_the_address_space_are_invalid() {
        let e = try_vec(usize::MAX / 4, 0u64, "the test array").unwrap_err();
        assert_eq!(e.status, Status::InvalidSize);
        assert_eq!(
            e.message,
            format!("the test array would take {} elements of 8 bytes, more than can be addressed", usize::MAX / 4)
        );
        assert_eq!(byte_count::<u16>(isize::MAX as usize / 2, "x").unwrap(), isize::MAX as usize - 1);
        assert_eq!(byte_count::<u16>(isize::MAX as usize / 2 + 1, "x").unwrap_err().status, Status::InvalidSize);
        assert_eq!(element_count(usize::MAX, 2, "x").unwrap_err().status, Status::InvalidSize);
    }

    #[test]
    fn an_allocation_the_machine_refuses_fails_with_its_byte_count() {
        // 2^60 bytes: addressable, and more than any machine has.
        let e = try_with_capacity::<u64>(1 << 57, "the test array").unwrap_err();
        assert_eq!(e.status, Status::AllocationFailed);
        assert_eq!(e.message, "cannot allocate 1152921504606846976 bytes for the test array");
    }

    #[test]
    fn helpers_fill_as_their_infallible_counterparts() {
        assert_eq!(try_vec(3, 7u8, "x").unwrap(), vec![7, 7, 7]);
        assert_eq!(try_collect(4, "x", |i| i * i).unwrap(), vec![0, 1, 4, 9]);
        assert_eq!(try_copy(&[1, 2], "x").unwrap(), vec![1, 2]);
        let mut v = vec![1];
        try_extend(&mut v, &[2, 3], "x").unwrap();
        try_push(&mut v, 4, "x").unwrap();
        assert_eq!(v, vec![1, 2, 3, 4]);
        assert_eq!(try_vec(0, (), "x").unwrap().len(), 0);
        assert_eq!(try_zeros::<u32>(5, "x").unwrap(), vec![0; 5]);
        assert_eq!(try_zeros::<f64>(3, "x").unwrap(), vec![0.0; 3]);
        assert!(try_zeros::<u16>(0, "x").unwrap().is_empty());
        let e = try_zeros::<u64>(1 << 57, "the test array").unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (Status::AllocationFailed, "cannot allocate 1152921504606846976 bytes for the test array")
        );
        assert_eq!(try_zeros::<u64>(usize::MAX / 4, "x").unwrap_err().status, Status::InvalidSize);
    }

    #[test]
    fn parallel_fills_match_the_serial_ones() {
        // Several tasks' chunks and a partial last one; a large array is also advised huge pages.
        for len in [0, 1, PARALLEL_FILL_CHUNK - 1, 3 * PARALLEL_FILL_CHUNK + 17, (5 << 20) / 8 + 3] {
            let serial = try_collect(len, "x", |i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).unwrap();
            assert_eq!(try_collect_par(len, "x", |i| (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).unwrap(), serial);
            assert_eq!(try_copy_par(&serial, "x").unwrap(), serial);
        }
        assert_eq!(
            try_collect_par::<u64>(1 << 57, "the test array", |i| i as u64).unwrap_err().status,
            Status::AllocationFailed
        );
    }
}
