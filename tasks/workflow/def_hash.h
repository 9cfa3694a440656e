// DefHasher: the def_hash of a step (SPEC §11), what `task_completed`
// records so that a later run can tell whether a task's recorded result
// still stands for what the step does today (orchestrator/reuse.h).
//
// The hash (32 hex digits, XXH3-128) covers, in this order:
//   1. "wizq-def-1\n" (the recipe's version: a change of recipe is a
//      change of every hash);
//   2. the canonical JSON (util/canonical_json.h) of the step as frozen,
//      without its name: `action` (every field, whatever its kind),
//      `value_schema`, `next`, `finally`, and `options` as in effect: the
//      top-level options overlaid by the step's, with every option wizq
//      knows resolved to its value (defaults included);
//   3. for each file found below, sorted by path: "file <path>\n" and the
//      XXH3-128 of its bytes, where <path> is relative to the workflow's
//      directory. The files are:
//      - every token of the action's and the hook's `script` that names a
//        regular file under the workflow's directory (tokens are split at
//        blanks, quotes and shell punctuation: `./process.sh`,
//        `python3 steps/x.py`, `--config=conf/a.yml`), except a token
//        right after `>` (`>> out.log`: what the script writes is output,
//        not definition). Files those files use in turn (a helper that
//        process.sh runs) are not followed: list them in reuse_files;
//      - what `options.reuse_files` lists: files, directories (every file
//        beneath, recursively) and globs (`*`, `?`, `[...]` within one path
//        component, fnmatch(3)), relative to the workflow's directory.
// What the hash cannot cover makes the step unhashable: Hash() returns ""
// and a reason, and its tasks always run live (never a wrong reuse):
//   - a reuse_files entry that matches nothing, or escapes the workflow's
//     directory (`..`);
//   - a file found above that cannot be read (permissions, a symlink, a
//     FIFO), or more than kMaxFiles files / kMaxBytes bytes in all;
//   - a step the workflow does not have.
// Not covered (document, do not guess): programs outside the workflow's
// directory (`python3`, `jq`), the environment, the network, and files a
// script reaches by a computed name — list those in reuse_files.
//
// Thread-safety: Hash() may be called from several threads at once.
#ifndef WIZQ_TASKS_DEF_HASH_H_
#define WIZQ_TASKS_DEF_HASH_H_

#include <map>
#include <memory>
#include <string>

#include "util/status.h"

namespace wizq {

class Env;
class Workflow;

class DefHasher {
 public:
  static constexpr int kMaxFiles = 256;
  static constexpr uint64_t kMaxBytes = 64 << 20;

  // `wf` must outlive the hasher; its base_dir is the workflow's directory.
  // env: nullptr is Env::Posix().
  DefHasher(const Workflow& wf, Env* env);
  ~DefHasher();

  // The def_hash of step `step` as its files are now; "" and *why (if not
  // null) when it cannot be hashed. A finally hook's task uses its step's.
  std::string Hash(const std::string& step, std::string* why) const;

  // What in step `step`'s scripts (its action's and its hook's) lists or
  // globs a directory: `ls`, `find`, or a word with an unquoted glob
  // (`*.c`, `dir/*`). The hash covers the files a script names, not what
  // a directory holds, so a file added there or removed leaves the hash
  // as it was. "" when there is none, or when the step lists
  // `reuse_files` (it names what it reads). A heuristic over the shell
  // text: what a named script file does in turn is not read.
  std::string DirectoryListing(const std::string& step) const;

  // The files the workflow's hashable steps are defined by (item 3 above,
  // over every step but Functions' and those that cannot be hashed), each
  // with the XXH3-128 of its bytes now: what a run on a store that several
  // machines share records, so that a worker whose copy differs is refused
  // (SPEC §14). Keyed by path relative to the workflow's directory.
  std::map<std::string, std::string> Files() const;

 private:
  struct StepDef {
    std::string canonical;         // item 2
    std::string scripts;           // the action's and hook's scripts
    std::string reuse_files_json;  // the effective reuse_files, JSON array
  };
  bool Defined(const std::string& step, std::string* why) const;
  Status CollectFiles(const StepDef& def,
                      std::map<std::string, std::string>* files) const;

  const Workflow& wf_;
  Env* env_;
  std::map<std::string, StepDef> steps_;
};

}  // namespace wizq

#endif  // WIZQ_TASKS_DEF_HASH_H_
