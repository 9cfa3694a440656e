// Path resolution: a path the user named (an install directory, the
// workflow's directory, a log to import or export) as its canonical
// absolute path. It opens and changes nothing; like every file operation
// it lives in fs/ (fs/env.h).
#ifndef WIZQ_FS_PATH_H_
#define WIZQ_FS_PATH_H_

#include <string>

#include "util/status.h"

namespace wizq {

// realpath(3) of `path`: absolute, symlinks resolved, no `.` or `..`.
// An error (IOError naming the path and errno's reason) if it does not
// exist or cannot be resolved.
Status RealPath(const std::string& path, std::string* out);

// RealPath, or `path` unchanged when it cannot be resolved.
std::string RealPathOr(const std::string& path);

}  // namespace wizq

#endif  // WIZQ_FS_PATH_H_
