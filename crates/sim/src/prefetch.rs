//! A cache hint: start loading a value's cache line now, without waiting for it.
//!
//! `core::arch`'s prefetch takes a raw pointer and is `unsafe`, which longhaul keeps
//! out of the simulator; `safe_arch` wraps the same instruction behind a reference.
//! A prefetch never faults and changes nothing a run can observe, so determinism is
//! untouched: it only moves when a line arrives in the cache.

/// Hints that `value` will be read soon (into every cache level). A no-op on
/// targets other than x86-64.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    safe_arch::prefetch_t0(value);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
