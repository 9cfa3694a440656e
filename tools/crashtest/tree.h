// `wizq crashtest`, part: copying, fingerprinting and comparing install
// directories.
//
// These are the user's files (a template copied into a scratch directory,
// the end state a workflow leaves there), not wizq's state: nothing here
// needs durability or fault injection, so this file walks directories with
// std::filesystem and reads files with plain read(2) (to hash them) or
// Env::Posix() (a text file's lines), with no fault injection.
#ifndef WIZQ_TOOLS_CRASHTEST_TREE_H_
#define WIZQ_TOOLS_CRASHTEST_TREE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/status.h"

namespace wizq::crashtest {

// One path of a directory tree.
struct TreeEntry {
  char type = '?';    // 'f' file, 'd' directory, 'l' symlink, 'o' other
  uint32_t mode = 0;  // permission bits (07777)
  // A file: XXH3-128 of its content (32 hex digits); a symlink: its target.
  std::string content;
};

// Relative path ("etc/a.conf") -> entry, sorted.
using Tree = std::map<std::string, TreeEntry>;

// True if `rel` (a path relative to the tree's root) matches one of the
// globs: fnmatch(3) against the whole relative path, where `*` also matches
// `/`; a glob without a `/` also matches the last component alone (so
// "*.log" skips a .log file at any depth).
bool Ignored(const std::string& rel, const std::vector<std::string>& globs);

// Fingerprints every path under `root`, except `.wizard/` at the top and
// the paths `ignore` matches (an ignored directory with all it holds).
// Symlinks are not followed.
Status SnapshotTree(const std::string& root,
                    const std::vector<std::string>& ignore, Tree* out);

// What differs in one path between two trees.
struct PathDiff {
  std::string path;
  // "missing", "extra", "content" (a file's bytes), "lines" (a text file:
  // `added` and `missing` say which), "order" (a text file with the same
  // lines in another order), "mode 0644 -> 0600", "type file -> directory",
  // "symlink target a -> b".
  std::string what;
  std::vector<std::string> added, missing;  // lines ("lines" only)
  // "steps.log: 1 line added: \"build\"".
  std::string Describe() const;
};

// What differs between the expected tree and another, one entry per path,
// sorted by path. A file whose content differs is "content"; LineDiff
// tells more.
std::vector<PathDiff> CompareTrees(const Tree& want, const Tree& got);

// For a "content" difference of a file under `want_root` and `got_root`:
// if both are text (no NUL byte, at most 4 MiB), the lines one has more
// than the other, as a multiset ("lines"), or "order" when they are the
// same lines in another order.
void LineDiff(const std::string& want_root, const std::string& got_root,
              PathDiff* d);

// Copies the tree at `from` (a directory) to `to` (created; must not
// exist): files with their content and permission bits, directories,
// symlinks as symlinks.
Status CopyTree(const std::string& from, const std::string& to);

// Removes `path` and everything under it (no error if it is missing).
Status RemoveTree(const std::string& path);

// Renames `from` to `to`.
Status MoveTree(const std::string& from, const std::string& to);

}  // namespace wizq::crashtest

#endif  // WIZQ_TOOLS_CRASHTEST_TREE_H_
