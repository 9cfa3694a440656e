// jemalloc's compiled-in options, read at its first allocation (linked into
// wizq and queue_bench; see docs/DEPENDENCIES.md, "jemalloc").
//
// thp:always: jemalloc madvise()s its memory MADV_HUGEPAGE, so the kernel
// backs wizq's heap with 2 MiB pages where it can. Loading a large run
// allocates its whole state at once; in 4 KiB pages that is one page fault
// per 4 KiB, which on virtual machines costs up to ~10 us each (nested
// paging): 38,000 faults for a 100,000-task run. See docs/BENCHMARKS.md.
//
// narenas:1: wizq has two threads that allocate (the run loop and the
// commit thread); one arena keeps the huge pages of a small run to a few
// (12 MiB peak RSS for the installer example instead of 16).
//
// MALLOC_CONF in the environment still overrides these.
extern "C" {
const char* malloc_conf = "thp:always,narenas:1";
}
