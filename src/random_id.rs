//! Random-enough ids without another dependency: the `Via` pseudonym of a process and
//! the prefix of its fleet lease ids only need to differ between processes.

/// The hash of the process id and the time, through std's randomly keyed hasher.
pub(crate) fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish() as u32
}
