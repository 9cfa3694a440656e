#include "fs/path.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

namespace wizq {

Status RealPath(const std::string& path, std::string* out) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) {
    return Status::IOErrorFromErrno("resolving", path, errno);
  }
  *out = buf;
  return Status::OK();
}

std::string RealPathOr(const std::string& path) {
  std::string real;
  return RealPath(path, &real).ok() ? real : path;
}

}  // namespace wizq
