// The fault injector of the machines torture: see faults.h.
#include "tests/machines/torture/faults.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace wizq::machines {

const std::vector<std::string> kFaultKinds = {"partition",
                                              "machine_death",
                                              "freeze_machine",
                                              "stop_worker",
                                              "db_crash",
                                              "terminate",
                                              "stall",
                                              "drop",
                                              "half_open",
                                              "drop_commit",
                                              "drop_commit_reply"};

Injector::Injector(Bed* bed, uint32_t seed, int64_t lease_ms,
                   std::vector<std::string> machines,
                   std::vector<std::string> kinds, std::string log,
                   std::string ledger)
    : bed_(bed),
      rng_(seed),
      lease_ms_(lease_ms),
      machines_(std::move(machines)),
      kinds_(std::move(kinds)),
      log_(std::move(log)),
      ledger_(std::move(ledger)) {}

int64_t Injector::Pick(int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
}

// A machine that is up (not killed and waiting to start again), if any:
// a fault on a dead machine hits no attempt.
std::set<std::string> Injector::Busy() {
  std::ifstream in(ledger_);
  in.seekg(ledger_read_);
  for (std::string line; std::getline(in, line) && !in.eof();) {
    ledger_read_ = in.tellg();
    const Json j = Json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    const std::string key = j.value("m", "") + " " + j.value("run", "") + " " +
                            std::to_string(j.value("pid", 0));
    const std::string e = j.value("e", "");
    if (e == "start") running_[key] = {j.value("m", ""), j.value("mono", 0)};
    if (e == "end") running_.erase(key);
  }
  // A killed attempt has no end: after 7 s (the longest body runs 6) it
  // is taken for over.
  std::set<std::string> busy;
  const int64_t now = MonoMs();
  for (auto it = running_.begin(); it != running_.end();) {
    if (now - it->second.second > 7000) {
      it = running_.erase(it);
      continue;
    }
    busy.insert(it->second.first);
    ++it;
  }
  return busy;
}

// A machine that is up, one with an attempt in flight if there is one (a
// fault counts only then).
std::string Injector::PickMachine() {
  const std::set<std::string> busy = Busy();
  std::vector<std::string> up, aimed;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const std::string& m : machines_) {
      auto it = down_until_.find(m);
      if (it != down_until_.end() && it->second > MonoMs()) continue;
      up.push_back(m);
      if (busy.count(m) > 0) aimed.push_back(m);
    }
  }
  if (!aimed.empty()) up = aimed;
  if (up.empty()) up = machines_;
  return up[static_cast<size_t>(Pick(0, up.size() - 1))];
}

// The COMMIT faults the proxy's log shows fired, by "kind conn" (the
// kind as kFaultKinds names it), in order.
std::map<std::string, std::vector<Json>> Injector::Firings() {
  std::map<std::string, std::vector<Json>> out;
  std::ifstream in(bed_->proxy_log());
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    std::string kind = j.value("fault", "");
    std::replace(kind.begin(), kind.end(), '-', '_');
    out[kind + " " + std::to_string(j.value("conn", 0))].push_back(j);
  }
  return out;
}

// How many of each COMMIT fault fired.
std::map<std::string, int> Injector::Fired() {
  std::map<std::string, int> out;
  for (const auto& [key, lines] : Firings()) {
    out[key.substr(0, key.find(' '))] += static_cast<int>(lines.size());
  }
  return out;
}

// The kinds that occurred least so far (a COMMIT fault once the proxy
// fired it, not when armed), one of them at random: every kind gets its
// share whatever the size.
std::string Injector::PickKind() {
  const std::map<std::string, int> fired = Fired();
  std::lock_guard<std::mutex> l(mu_);
  std::map<std::string, int> n;
  for (const std::string& k : kinds_) {
    auto it = fired.find(k);
    n[k] = k.rfind("drop_commit", 0) == 0 ? (it == fired.end() ? 0 : it->second)
                                          : occurred_[k];
  }
  int least = INT32_MAX;
  for (const std::string& k : kinds_) least = std::min(least, n[k]);
  std::vector<std::string> some;
  for (const std::string& k : kinds_) {
    if (n[k] <= least + 1) some.push_back(k);
  }
  return some[static_cast<size_t>(Pick(0, some.size() - 1))];
}

void Injector::Sleep(int64_t ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

Json FaultJson(const Fault& f) {
  return {
      {"kind", f.kind},    {"machine", f.machine},     {"t0", f.t0},
      {"t1", f.t1},        {"may_rerun", f.may_rerun}, {"occurred", f.occurred},
      {"detail", f.detail}};
}

void Injector::Record(Fault f) {
  std::lock_guard<std::mutex> l(mu_);
  // Two short faults of one machine less than a lease apart are one long
  // outage to a claim held there: a renewal sent into the first is
  // retransmitted (TCP backs off: +0.2, +0.6, +1.4, +3 s) into the second,
  // and may pass the local deadline, four fifths of a lease after the last
  // renewal. Seen: partitions of 0.8 s and 1 s, 0.3 s apart.
  const bool one_machine_short = !f.may_rerun && !f.machine.empty();
  for (const Fault& before : faults_) {
    if (one_machine_short && before.occurred && before.machine == f.machine &&
        before.t1 >= f.t0 - lease_ms_) {
      f.may_rerun = true;
      f.detail += " (within a lease of the last fault of this machine)";
      break;
    }
  }
  std::ofstream(log_, std::ios::app) << FaultJson(f).dump() << "\n";
  if (f.occurred) occurred_[f.kind]++;
  faults_.push_back(std::move(f));
}

int Injector::Injected() {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(faults_.size());
}

int64_t Injector::DownUntil(const std::string& machine) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = down_until_.find(machine);
  return it == down_until_.end() ? 0 : it->second;
}

// Short: well within what a worker rides out (its renewals come every
// third of the lease, its local deadline four fifths after the last one).
// Long: past the lease.
static int64_t Length(bool long_fault, int64_t lease, int64_t pick_lo) {
  return long_fault ? lease + pick_lo : pick_lo;
}

void Injector::Partition(Fault* f) {
  const bool lng = Pick(0, 2) == 0;
  const int64_t ms =
      Length(lng, lease_ms_, lng ? Pick(1000, 4000) : Pick(300, 1200));
  f->may_rerun = lng;
  f->detail = lng ? "long" : "short";
  f->t0 = MonoMs();
  bed_->Machines({"link-down", f->machine});
  Sleep(ms);
  bed_->Machines({"link-up", f->machine});
  f->t1 = MonoMs();
}

void Injector::Death(Fault* f) {
  const bool reboot = Pick(0, 1) == 0;
  f->may_rerun = true;
  f->detail = reboot ? "reboot" : "kill-all";
  {
    std::lock_guard<std::mutex> l(mu_);
    down_until_[f->machine] = INT64_MAX;
  }
  f->t0 = MonoMs();
  bed_->Machines({reboot ? "reboot" : "kill-all", f->machine});
  f->t1 = MonoMs();
  // Back after 0.5-3 s, or one time in three past the lease.
  const int64_t back =
      Pick(0, 2) == 0 ? lease_ms_ + Pick(0, 3000) : Pick(500, 3000);
  std::lock_guard<std::mutex> l(mu_);
  down_until_[f->machine] = MonoMs() + back;
}

void Injector::Freeze(Fault* f) {
  const bool lng = Pick(0, 2) == 0;
  const int64_t ms =
      Length(lng, lease_ms_, lng ? Pick(1000, 3000) : Pick(300, 1200));
  f->may_rerun = lng;
  f->whole_machine_freeze = true;
  f->detail = lng ? "long" : "short";
  f->t0 = MonoMs();
  bed_->Machines({"freeze", f->machine});
  Sleep(ms);
  bed_->Machines({"thaw", f->machine});
  f->t1 = MonoMs();
}

void Injector::StopWorker(Fault* f) {
  const std::string slot = f->machine + ".w" + std::to_string(Pick(1, 2));
  std::ifstream in(bed_->PidFile(slot));
  std::string pid;
  in >> pid;
  f->occurred = !pid.empty();
  if (pid.empty()) return;
  const bool lng = Pick(0, 2) == 0;
  const int64_t ms =
      Length(lng, lease_ms_, lng ? Pick(1000, 3000) : Pick(300, 1200));
  f->may_rerun = lng;
  f->detail = std::string(lng ? "long" : "short") + " " + slot + " pid " + pid;
  f->t0 = MonoMs();
  f->occurred = bed_->Machines({"stop", f->machine, pid}).code == 0;
  Sleep(ms);
  bed_->Machines({"cont", f->machine, pid});
  ContinueStoppedChildren();
  f->t1 = MonoMs();
}

void Injector::Terminate(Fault* f) {
  std::string sql;
  if (Pick(0, 1) == 0) {
    // A transaction or listener session, of whichever machine.
    f->machine = "";
    f->detail = "a transaction or listener session";
    sql =
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
        "application_name IN ('wizq', 'wizq listener') "
        "ORDER BY random() LIMIT 1";
  } else {
    f->may_rerun = true;
    f->detail = "a liveness session";
    sql =
        "SELECT pg_terminate_backend(backend_pid) FROM wizq.workers WHERE "
        "host LIKE '" +
        bed_->BootId(f->machine) +
        "%' AND backend_pid IN "
        "(SELECT pid FROM pg_stat_activity) ORDER BY random() LIMIT 1";
  }
  f->t0 = MonoMs();
  Ran r = bed_->Machines({"psql", "db", "-At", "-c", sql}, 20);
  f->t1 = MonoMs();
  f->occurred = r.code == 0 && r.out.find('t') != std::string::npos;
  f->detail += f->occurred ? "" : " (none found)";
}

bool Injector::PickConnection(const std::string& machine,
                              const std::string& app, std::string* id,
                              std::string* app_found) {
  Ran r = bed_->Proxy("list");
  std::istringstream in(r.out);
  std::vector<std::pair<std::string, std::string>> all, wanted;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string word, conn, client, name, state;
    f >> word >> conn;
    if (word != "conn") continue;
    for (std::string kv; f >> kv;) {
      if (kv.rfind("client=", 0) == 0) client = kv.substr(7);
      if (kv.rfind("state=", 0) == 0) state = kv.substr(6);
    }
    const size_t a = line.find("application_name=");
    const size_t e = line.find(" state=");
    if (a != std::string::npos && e != std::string::npos) {
      name = line.substr(a + 17, e - a - 17);
    }
    if (state != "forwarding" || bed_->MachineOfAddress(client) != machine)
      continue;
    all.push_back({conn, name});
    if (name == app) wanted.push_back({conn, name});
  }
  const auto& from = !wanted.empty() || !app.empty() ? wanted : all;
  if (from.empty()) return false;
  const auto& c = from[static_cast<size_t>(Pick(0, from.size() - 1))];
  *id = c.first;
  *app_found = c.second;
  return true;
}

void Injector::ProxyFault(Fault* f) {
  const bool commit = f->kind.rfind("drop_commit", 0) == 0;
  std::string app;
  if (commit) {
    app = "wizq";
  } else if (Pick(0, 1) == 0) {
    app = "wizq worker";
  }
  std::string id, found;
  f->t0 = MonoMs();
  if (!PickConnection(f->machine, app, &id, &found)) {
    f->occurred = false;
    f->t1 = MonoMs();
    f->detail = "no connection";
    return;
  }
  f->detail = "conn " + id + " (" + found + ")";
  // The liveness session lost: its worker is gone for the store.
  f->may_rerun = found == "wizq worker" && f->kind != "stall";
  if (f->kind == "stall") {
    bed_->Proxy("stall " + id);
    Sleep(Pick(300, 2000));
    bed_->Proxy("resume " + id);
  } else if (f->kind == "drop" || f->kind == "half_open") {
    bed_->Proxy((f->kind == "drop" ? "drop " : "half-open ") + id);
  } else {
    bed_->Proxy(
        (f->kind == "drop_commit" ? "drop-commit " : "drop-commit-reply ") +
        id);
    f->occurred = false;  // until the proxy's log shows it
  }
  f->t1 = MonoMs();
}

void Injector::InjectOne() {
  Fault f;
  f.kind = PickKind();
  f.machine = PickMachine();
  if (f.kind == "partition") {
    Partition(&f);
  } else if (f.kind == "machine_death") {
    Death(&f);
  } else if (f.kind == "freeze_machine") {
    Freeze(&f);
  } else if (f.kind == "stop_worker") {
    StopWorker(&f);
  } else if (f.kind == "db_crash") {
    f.machine = "";
    f.t0 = MonoMs();
    f.occurred = bed_->Machines({"db-crash"}, 120).code == 0;
    f.t1 = MonoMs();
  } else if (f.kind == "terminate") {
    Terminate(&f);
  } else {
    ProxyFault(&f);
  }
  Record(std::move(f));
}

std::vector<Fault> Injector::Faults() {
  std::vector<Fault> out;
  {
    std::lock_guard<std::mutex> l(mu_);
    out = faults_;
  }
  // The COMMIT faults happened when the proxy's log says (once per arming).
  std::map<std::string, std::vector<Json>> fired = Firings();
  for (Fault& f : out) {
    if (f.kind.rfind("drop_commit", 0) != 0 || f.detail.rfind("conn ", 0) != 0)
      continue;
    const std::string conn = f.detail.substr(5, f.detail.find(' ', 5) - 5);
    auto& lines = fired[f.kind + " " + conn];
    if (lines.empty()) continue;
    f.occurred = true;
    f.t0 = f.t1 = lines.front().value("mono_ms", int64_t{0});
    f.detail +=
        " " + lines.front().value("outcome", std::string("not committed"));
    lines.erase(lines.begin());
  }
  return out;
}

}  // namespace wizq::machines
