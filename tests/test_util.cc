#include "tests/test_util.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace wizq::test {

ScratchDir::ScratchDir() {
  const char* tmp = getenv("TMPDIR");
  std::string tmpl =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/wizq-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp");
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

std::string BuildDir() {
  const char* env = getenv("WIZQ_BUILD_DIR");
  if (env && *env) return env;
#ifdef WIZQ_BUILD_DIR
  return WIZQ_BUILD_DIR;
#else
  return "build";
#endif
}

std::string SourceDir() {
#ifdef WIZQ_SOURCE_DIR
  return WIZQ_SOURCE_DIR;
#else
  return ".";
#endif
}

std::string WithoutFreeSpace(const std::string& log) {
  const size_t last = log.find_last_not_of(std::string_view("\n\0", 2));
  if (last == std::string::npos) return "";
  return log.substr(0, last + 1) + "\n";
}

}  // namespace wizq::test
