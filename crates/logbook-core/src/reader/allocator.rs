//! glibc's malloc settings for a process that scans tables. Binaries call
//! [`tune_allocator`] first thing in `main` (the `logbook` CLI and the
//! benchmark binaries that stand for it); a library never does, because it
//! changes the whole process.
//!
//! A scan allocates a file's column chunk, its decompressed pages and its
//! dictionary (about half a MiB for the analyst workload's files), decodes
//! them and frees them as it moves to the next file. glibc's default gives
//! such memory back to the kernel as soon as a thread's heap has a few
//! hundred KiB free at its top (its trim threshold follows the largest
//! block it has seen mapped), so every file faulted the same pages in
//! again: 3,926 page faults per process running the analyst workload's
//! time-travel query, against 2,170 with the settings below, and 35.1
//! against 30.6 ms for the whole process (`perf stat -r 20`).
//!
//! Measured on that query (BENCHMARKS.md, "How each half was chosen"; 11
//! alternating rounds of one process each): glibc's defaults 22.5 ms,
//! these settings 17.3 ms, DuckDB 21.5 ms. Peak memory of replacing then compacting a 2 GiB partition did
//! not move (269 and 239 MiB, 338 and 342 MiB, against 296 and 348 MiB with
//! the defaults). Alternatives measured and not kept:
//! - mimalloc as the global allocator: 18.8 to 19.0 ms, but 50% more peak
//!   memory on the replace (446 against 296 MiB), over issue #19's 512 MiB
//!   on a 5 GiB partition; with its purge delay at 0, peak memory falls
//!   and the replace takes twice as long;
//! - a trim threshold of 128 MiB: 16.7 ms, no better within the noise,
//!   and four times the memory a thread may keep.

/// Blocks up to this size come from the heap, not from a mapping of their
/// own: glibc's own ceiling for its moving threshold on 64-bit systems
/// (setting the trim threshold turns the moving threshold off, so it is
/// set to where it would go).
#[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
const MMAP_THRESHOLD: libc::c_int = 32 * 1024 * 1024;

/// A thread's heap keeps up to this much free memory at its top before
/// giving it back to the kernel.
#[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
const TRIM_THRESHOLD: libc::c_int = 32 * 1024 * 1024;

/// Keep the memory a scan frees for the next file instead of handing it
/// back to the kernel (see the module's doc). Call it at the start of
/// `main`; the settings are the process's, so threads already running
/// follow them at their next allocation. Returns whether glibc took them:
/// false off 64-bit Linux with glibc, where it does nothing. It has no
/// effect on a process with its own global allocator.
pub fn tune_allocator() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
    // SAFETY: `mallopt` sets two of malloc's global parameters; it has no
    // pointer arguments and touches no memory of ours. Arenas that read the
    // parameters without its lock see either the old or the new value.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64")))]
    false
}
