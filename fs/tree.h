// Whole directory trees, through an Env: their size and their removal. For
// the files nothing durable depends on (a task's attempt files, pruned by
// `wizq prune`).
#ifndef WIZQ_FS_TREE_H_
#define WIZQ_FS_TREE_H_

#include <cstdint>
#include <string>

#include "util/status.h"

namespace wizq {

class Env;

// The bytes of every regular file under `path` (symlinks are not followed
// and count nothing). NotFound if `path` does not exist.
Status TreeBytes(Env* env, const std::string& path, uint64_t* bytes);

// Removes `path` and everything under it (symlinks are removed, never
// followed); *bytes (may be null) gets the bytes of the files removed. OK if
// `path` does not exist. Not synced: a crash may leave part of it.
Status RemoveTree(Env* env, const std::string& path, uint64_t* bytes);

}  // namespace wizq

#endif  // WIZQ_FS_TREE_H_
