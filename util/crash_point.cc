#include "util/crash_point.h"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include "util/environment.h"

namespace wizq::internal {
namespace {

struct Target {
  std::string name;
  long n = 0;
  std::string text;  // WIZQ_CRASH_IF; empty: every pass counts
};

Target ParseTarget() {
  Target t;
  const char* spec = getenv(kEnvCrashAt);
  if (spec == nullptr || *spec == '\0') return t;
  const char* colon = strrchr(spec, ':');
  t.name = colon ? std::string(spec, colon) : std::string(spec);
  t.n = colon ? atol(colon + 1) : 1;
  if (t.n < 1) t.n = 1;
  const char* text = getenv(kEnvCrashIf);
  if (text != nullptr) t.text = text;
  return t;
}

const Target& GetTarget() {
  static const Target target = ParseTarget();
  return target;
}

std::atomic<long> g_passes{0};

}  // namespace

bool g_crash_points_armed = !GetTarget().name.empty();

void CrashPointSlow(const char* name, std::string_view text, bool has_text) {
  const Target& t = GetTarget();
  if (t.name != name) return;
  if (!t.text.empty() &&
      (!has_text || text.find(t.text) == std::string_view::npos)) {
    return;
  }
  if (g_passes.fetch_add(1) + 1 == t.n) _exit(kCrashExitCode);
}

}  // namespace wizq::internal
