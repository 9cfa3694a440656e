// Helpers shared by the tests: scratch directories and file editing.
#ifndef WIZQ_TESTS_TEST_UTIL_H_
#define WIZQ_TESTS_TEST_UTIL_H_

#include <string>
#include <vector>

namespace wizq::test {

// A fresh empty directory under $TMPDIR (or /tmp), removed by the destructor.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadAll(const std::string& path);
void WriteAll(const std::string& path, const std::string& data);
// The text of an audit.jsonl without the free space (blank lines, NULs)
// after its last line: what a user editing the log would see, ending with
// one newline (FORMAT.md, "Free space").
std::string WithoutFreeSpace(const std::string& log);
// The build directory (for helper binaries) and the source directory.
std::string BuildDir();
std::string SourceDir();
// The process groups of every task attempt of the run in `install_dir`,
// i.e. the leaders its attempt journal records (each attempt's shell; a
// per-attempt supervisor in runs of older wizq versions), and those the
// previous layout's `pgid` files name: what a test kills for a power cut.
std::vector<long> AttemptGroups(const std::string& install_dir);
// Whether process `pid` no longer runs: gone, or a zombie nobody reaped yet
// (a spawner keeps its shells' zombies until wizq releases them).
bool ProcessGone(long pid);

// A ThreadSanitizer build: it intercepts vfork as fork, so a spawned
// child may run after its parent went on.
inline bool UnderThreadSanitizer() {
#if defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

}  // namespace wizq::test

#endif  // WIZQ_TESTS_TEST_UTIL_H_
