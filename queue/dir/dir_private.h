// Included first by every private header of the directory store (queue/dir/
// and audit/): they compile only inside its library (wizq_dirstore in
// CMakeLists.txt) and in the tests, benchmarks, fuzzers and tools that
// look at its files on purpose (docs/ARCHITECTURE.md, "Exceptions"). Code
// elsewhere holds a run only through queue/store.h, and a violation does
// not compile.
#ifndef WIZQ_QUEUE_DIR_DIR_PRIVATE_H_
#define WIZQ_QUEUE_DIR_DIR_PRIVATE_H_

#ifndef WIZQ_DIR_STORE_INTERNAL
#error \
    "a header private to the directory store (queue/dir/, audit/): use queue/store.h (Store::Open) instead"
#endif

#endif  // WIZQ_QUEUE_DIR_DIR_PRIVATE_H_
