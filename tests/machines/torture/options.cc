// wizq_machines_torture's command line (options.h).
#include "tests/machines/torture/options.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace wizq::machines {
namespace {

std::vector<std::string> Kinds(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string k; std::getline(in, k, ',');) {
    if (std::find(kFaultKinds.begin(), kFaultKinds.end(), k) ==
        kFaultKinds.end())
      throw std::invalid_argument("--kinds: no fault kind " + k);
    out.push_back(k);
  }
  if (out.empty()) throw std::invalid_argument("--kinds: none given");
  return out;
}

}  // namespace

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto next = [&](const char* name) -> std::string {
      if (i + 1 >= argc)
        throw std::invalid_argument(std::string(name) + " needs a value");
      return argv[++i];
    };
    if (a == "--build")
      o->build = next("--build");
    else if (a == "--source")
      o->source = next("--source");
    else if (a == "--machines")
      o->machines = std::stoi(next("--machines"));
    else if (a == "--faults")
      o->faults = std::stoi(next("--faults"));
    else if (a == "--min-per-kind")
      o->min_per_kind = std::stoi(next("--min-per-kind"));
    else if (a == "--lease")
      o->lease_s = std::stoll(next("--lease"));
    else if (a == "--seed")
      o->seed = static_cast<uint32_t>(std::stoul(next("--seed")));
    else if (a == "--max-seconds")
      o->max_seconds = std::stoll(next("--max-seconds"));
    else if (a == "--run-seconds")
      o->run_seconds = std::stoll(next("--run-seconds"));
    else if (a == "--kinds")
      o->kinds = Kinds(next("--kinds"));
    else if (a == "--keep")
      o->keep = true;
    else if (a == "--allow-unmatched")
      o->allow_unmatched = true;
    else
      throw std::invalid_argument("unknown argument " + a);
  }
  if (o->build.empty() || o->source.empty())
    throw std::invalid_argument("--build and --source are needed");
  // The workflows' steps run the build's programs on the machines, whose
  // working directories are not this one.
  o->build = std::filesystem::absolute(o->build).lexically_normal().string();
  o->source = std::filesystem::absolute(o->source).lexically_normal().string();
  if (o->machines < 2 || o->machines > 20)
    throw std::invalid_argument("--machines: 2 to 20");
  if (o->lease_s < 2) throw std::invalid_argument("--lease: at least 2");
  return true;
}

}  // namespace wizq::machines
