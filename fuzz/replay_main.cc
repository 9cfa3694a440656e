// A main() for the fuzz targets without libFuzzer: runs
// LLVMFuzzerTestOneInput once on each file named on the command line, or on
// each regular file in a directory named there (sorted, not recursive).
// This is how `make test` replays the seed corpus (fuzz/corpus/<target>/)
// with the ordinary compiler: a regression is a crash or a failed
// FUZZ_CHECK (abort), and the file being run is printed first.
//
//   <target>_replay fuzz/corpus/<target> [more files or directories...]
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc,
                                                          char*** argv);

namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ListFiles(const std::string& dir, std::vector<std::string>* files) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    std::string path = dir + "/" + name;
    if (!IsDirectory(path)) names.push_back(path);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  files->insert(files->end(), names.begin(), names.end());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> files;
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    if (!arg.empty() && arg[0] == '-') continue;  // libFuzzer flags: ignored
    if (IsDirectory(arg)) {
      if (!ListFiles(arg, &files)) {
        std::fprintf(stderr, "cannot list %s\n", arg.c_str());
        return 2;
      }
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", path.c_str());
      return 2;
    }
    std::string data((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    std::fprintf(stderr, "running %s (%zu bytes)\n", path.c_str(), data.size());
    // A copy on the heap of exactly the input's size, as libFuzzer passes
    // it, so that an overread is caught under AddressSanitizer.
    std::vector<uint8_t> buf(data.begin(), data.end());
    LLVMFuzzerTestOneInput(buf.data(), buf.size());
  }
  std::fprintf(stderr, "%zu input(s) ran without a crash\n", files.size());
  return 0;
}
