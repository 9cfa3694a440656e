#include "tools/crashtest/tree.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <system_error>

#include "fs/env.h"
#include "queue/dir/queue.h"

namespace wizq::crashtest {
namespace fs = std::filesystem;
namespace {

// ".wizard", spelled by WizardDir alone.
const std::string& WizardName() {
  static const std::string name = fs::path(WizardDir("")).filename().string();
  return name;
}

Status FsError(const std::string& what, const std::string& path,
               const std::error_code& ec) {
  return Status::IOError(what + " " + path + ": " + ec.message());
}

// XXH3-128 of the file's content, read in 1 MiB pieces.
Status HashFile(const std::string& path, std::string* hex) {
  // Plain read(2): a user's file, see the header.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::IOError("open " + path + ": " + strerror(errno));
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st(
      XXH3_createState(), &XXH3_freeState);
  XXH3_128bits_reset(st.get());
  std::string buf(1 << 20, '\0');
  Status s;
  while (true) {
    const ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) s = Status::IOError("read " + path + ": " + strerror(errno));
    if (n <= 0) break;
    XXH3_128bits_update(st.get(), buf.data(), static_cast<size_t>(n));
  }
  close(fd);
  const XXH128_hash_t h = XXH3_128bits_digest(st.get());
  char out[33];
  std::snprintf(out, sizeof(out), "%016llx%016llx",
                static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  *hex = out;
  return s;
}

Status Fingerprint(const fs::directory_entry& e, TreeEntry* out) {
  std::error_code ec;
  const fs::file_status st = e.symlink_status(ec);
  if (ec) return FsError("stat", e.path().string(), ec);
  out->mode = static_cast<uint32_t>(st.permissions()) & 07777;
  switch (st.type()) {
    case fs::file_type::regular:
      out->type = 'f';
      return HashFile(e.path().string(), &out->content);
    case fs::file_type::directory:
      out->type = 'd';
      return Status::OK();
    case fs::file_type::symlink:
      out->type = 'l';
      out->mode = 0;  // meaningless on Linux
      out->content = fs::read_symlink(e.path(), ec).string();
      return ec ? FsError("readlink", e.path().string(), ec) : Status::OK();
    default:
      out->type = 'o';
      return Status::OK();
  }
}

const char* TypeName(char type) {
  switch (type) {
    case 'f':
      return "file";
    case 'd':
      return "directory";
    case 'l':
      return "symlink";
    default:
      return "special file";
  }
}

std::string Octal(uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04o", mode);
  return buf;
}

// The difference of one path present in both trees, or "".
std::string Differ(const TreeEntry& a, const TreeEntry& b) {
  if (a.type != b.type) {
    return std::string("type ") + TypeName(a.type) + " -> " + TypeName(b.type);
  }
  if (a.content != b.content) {
    return a.type == 'l' ? "symlink target " + a.content + " -> " + b.content
                         : "content";
  }
  if (a.mode != b.mode) return "mode " + Octal(a.mode) + " -> " + Octal(b.mode);
  return "";
}

constexpr uint64_t kMaxTextBytes = 4 << 20;

// The lines of a text file (a last line without a newline is one too);
// false if it cannot be read, is larger than kMaxTextBytes or holds a NUL.
bool ReadLines(const std::string& path, std::vector<std::string>* lines) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxTextBytes) return false;
  std::string text;
  if (!Env::Posix()->ReadFile(path, &text).ok() ||
      text.find('\0') != std::string::npos) {
    return false;
  }
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    lines->push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return true;
}

// `1 line added: "a"`, `3 lines missing: "a", "b" (+1 more)`: a line cut
// to 60 bytes, control characters escaped.
std::string SomeLines(const std::vector<std::string>& lines, const char* how) {
  constexpr size_t kShown = 3, kWidth = 60;
  std::string out = std::to_string(lines.size()) +
                    (lines.size() == 1 ? " line " : " lines ") + how + ":";
  for (size_t i = 0; i < lines.size() && i < kShown; i++) {
    std::string l = lines[i].substr(0, kWidth);
    for (char& c : l) {
      if (static_cast<unsigned char>(c) < 0x20) c = '?';
    }
    out += std::string(i ? ", " : " ") + "\"" + l +
           (lines[i].size() > kWidth ? "...\"" : "\"");
  }
  if (lines.size() > kShown) {
    out += " (+" + std::to_string(lines.size() - kShown) + " more)";
  }
  return out;
}

}  // namespace

bool Ignored(const std::string& rel, const std::vector<std::string>& globs) {
  const size_t slash = rel.rfind('/');
  const std::string base =
      slash == std::string::npos ? rel : rel.substr(slash + 1);
  for (const std::string& g : globs) {
    if (fnmatch(g.c_str(), rel.c_str(), 0) == 0) return true;
    if (g.find('/') == std::string::npos &&
        fnmatch(g.c_str(), base.c_str(), 0) == 0) {
      return true;
    }
  }
  return false;
}

Status SnapshotTree(const std::string& root,
                    const std::vector<std::string>& ignore, Tree* out) {
  out->clear();
  std::error_code ec;
  fs::recursive_directory_iterator it(root, ec), end;
  if (ec) return FsError("cannot read", root, ec);
  for (; it != end; it.increment(ec)) {
    if (ec) return FsError("cannot read", root, ec);
    // Lexically: fs::relative would resolve a symlink to its target.
    const std::string rel =
        it->path().lexically_relative(root).generic_string();
    if ((it.depth() == 0 && rel == WizardName()) || Ignored(rel, ignore)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) {
        it.disable_recursion_pending();
      }
      continue;
    }
    TreeEntry entry;
    Status s = Fingerprint(*it, &entry);
    if (!s.ok()) return s;
    (*out)[rel] = std::move(entry);
  }
  return Status::OK();
}

std::vector<PathDiff> CompareTrees(const Tree& want, const Tree& got) {
  std::vector<PathDiff> out;
  auto a = want.begin(), b = got.begin();
  while (a != want.end() || b != got.end()) {
    if (b == got.end() || (a != want.end() && a->first < b->first)) {
      out.push_back({a->first, "missing", {}, {}});
      ++a;
    } else if (a == want.end() || b->first < a->first) {
      out.push_back({b->first, "extra", {}, {}});
      ++b;
    } else {
      const std::string d = Differ(a->second, b->second);
      if (!d.empty()) out.push_back({a->first, d, {}, {}});
      ++a;
      ++b;
    }
  }
  return out;
}

void LineDiff(const std::string& want_root, const std::string& got_root,
              PathDiff* d) {
  if (d->what != "content") return;
  std::vector<std::string> want, got;
  if (!ReadLines(want_root + "/" + d->path, &want) ||
      !ReadLines(got_root + "/" + d->path, &got)) {
    return;  // not text: the bytes differ, that is all
  }
  // The multiset difference, each side in its own order.
  std::map<std::string, int> left;
  for (const std::string& l : want) left[l]++;
  for (const std::string& l : got) {
    if (left[l] > 0) {
      left[l]--;
    } else {
      d->added.push_back(l);
    }
  }
  for (const std::string& l : want) {
    if (left[l] > 0) {
      left[l]--;
      d->missing.push_back(l);
    }
  }
  if (!d->added.empty() || !d->missing.empty()) {
    d->what = "lines";
  } else if (want != got) {
    d->what = "order";
  }  // else: the same lines; only the last one's newline differs
}

std::string PathDiff::Describe() const {
  if (what == "order") return path + ": the same lines in another order";
  if (what != "lines") return path + ": " + what;
  std::string out = path + ":";
  if (!added.empty()) out += " " + SomeLines(added, "added");
  if (!missing.empty()) {
    out +=
        std::string(added.empty() ? " " : ", ") + SomeLines(missing, "missing");
  }
  return out;
}

Status CopyTree(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (!fs::is_directory(from, ec)) {
    return Status::InvalidArgument("--template " + from +
                                   " is not a directory");
  }
  fs::create_directory(to, from, ec);  // with from's permission bits
  if (ec) return FsError("cannot create", to, ec);
  for (const fs::directory_entry& e : fs::directory_iterator(from, ec)) {
    if (e.path().filename() == WizardName()) continue;  // not the template's
    fs::copy(e.path(), fs::path(to) / e.path().filename(),
             fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
    if (ec) return FsError("cannot copy", e.path().string(), ec);
  }
  return ec ? FsError("cannot read", from, ec) : Status::OK();
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  return ec ? FsError("cannot remove", path, ec) : Status::OK();
}

Status MoveTree(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  return ec ? FsError("cannot rename", from + " to", ec) : Status::OK();
}

}  // namespace wizq::crashtest
