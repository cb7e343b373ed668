//! A cache hint: start loading a value's line now, without waiting for it.

/// Hints that `value` will be read soon. A hint only: it never faults and has no
/// effect a run can observe; a no-op where there is no instruction for it.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    safe_arch::prefetch_t0(value);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
