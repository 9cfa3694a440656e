#include "tests/test_util.h"

#include <errno.h>
#include <signal.h>
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

// The attempt files of `tasks` (a run's tasks/ directory): their groups.
static void AttemptGroupsIn(const std::string& tasks, std::vector<long>* out) {
  std::vector<long>& pids = *out;
  // "start <key> <attempt> <pid> ..." (tasks/exec/attempt_journal.h).
  std::istringstream journal(ReadAll(tasks + "/attempts.journal"));
  std::string line;
  while (std::getline(journal, line)) {
    std::istringstream fields(line);
    std::string kind, key;
    int attempt = 0;
    long pid = 0;
    if (fields >> kind >> key >> attempt >> pid && kind == "start" && pid > 1) {
      pids.push_back(pid);
    }
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(tasks, ec)) {
    if (!e.is_directory()) continue;
    const long pid = std::atol(ReadAll((e.path() / "pgid").string()).c_str());
    if (pid > 1) pids.push_back(pid);
  }
}

std::vector<long> AttemptGroups(const std::string& install_dir) {
  std::vector<long> pids;
  AttemptGroupsIn(install_dir + "/.wizard/tasks", &pids);
  // With a store: each run's local workspace (docs/FORMAT.md).
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator(install_dir + "/.wizq-local", ec)) {
    if (e.is_directory()) AttemptGroupsIn((e.path() / "tasks").string(), &pids);
  }
  return pids;
}

bool ProcessGone(long pid) {
  if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  const std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return true;
  return stat[paren + 2] == 'Z' || stat[paren + 2] == 'X';
}

}  // namespace wizq::test
