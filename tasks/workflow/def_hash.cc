#include "tasks/workflow/def_hash.h"

#include <fnmatch.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "fs/env.h"
#include "tasks/workflow/workflow.h"
#include "util/canonical_json.h"
#include "util/hash.h"

namespace wizq {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxTokenBytes = 4096;

// Splits shell text at blanks, quotes and punctuation. Over-splitting is
// harmless: a token that names no file is ignored. A token right after a
// `>` (a file the script writes, `>> log`) is left out: it is output.
std::vector<std::string> Tokens(std::string_view text) {
  static const std::string_view kSeparators = " \t\r\n;|&()<>`'\"=$,{}:";
  std::vector<std::string> out;
  std::string cur;
  bool output = false;  // the next token follows a '>'
  for (char c : text) {
    if (kSeparators.find(c) == std::string_view::npos) {
      cur.push_back(c);
      continue;
    }
    if (!cur.empty()) {
      if (!output && cur.size() <= kMaxTokenBytes) out.push_back(cur);
      output = false;
      cur.clear();
    }
    if (c == '>') output = true;
  }
  if (!cur.empty() && !output && cur.size() <= kMaxTokenBytes) {
    out.push_back(cur);
  }
  return out;
}

// The first word of shell text `script` that lists or globs a directory:
// `ls` or `find`, or a word with an unquoted glob (`*.c`, `dir/*`, `f?`,
// `[ab].c`); "" if none. A heuristic that reads the text as sh does where
// it matters: quoted text ('*', "a*"), comments, `${...}`, `$((...))` and
// special parameters (`$*`, `$?`) are no globs, nor a case pattern (a word
// right before a `)` that closes no `(`: `*)`), nor the `[` command.
std::string DirectoryListing(std::string_view script) {
  static const std::string_view kOperators = " \t\r\n;|&()<>`";
  std::string word;
  bool glob = false, quoted = false;
  size_t bracket = 0;  // 1 + where an unquoted '[' of the word is
  int depth = 0;       // open '(' of subshells and $(...)
  // Ends the current word at script[i] (an operator or the end).
  auto end_word = [&](size_t i) {
    const bool case_pattern =
        i < script.size() && script[i] == ')' && depth == 0;
    const bool test = word == "[" || word == "[[";
    const bool lists = !quoted && (word == "ls" || word == "find");
    const bool found = lists || (glob && !case_pattern && !test);
    glob = quoted = false;
    bracket = 0;
    return found;
  };
  for (size_t i = 0; i < script.size(); i++) {
    const char c = script[i];
    if (kOperators.find(c) != std::string_view::npos) {
      if (end_word(i)) return word;
      word.clear();
      if (c == '(') depth++;
      if (c == ')' && depth > 0) depth--;
      continue;
    }
    if (c == '#' && word.empty()) {  // a comment, to the end of the line
      while (i + 1 < script.size() && script[i + 1] != '\n') i++;
      continue;
    }
    size_t end = i + 1;  // one past what this character starts
    if (c == '\\') {
      end = std::min(i + 2, script.size());
    } else if (c == '\'' || c == '"') {
      end = script.find(c, i + 1);  // (a '\"' inside is rare enough)
      end = end == std::string_view::npos ? script.size() : end + 1;
      quoted = true;
    } else if (c == '$' && i + 1 < script.size()) {
      const char n = script[i + 1];
      const bool arith = script.compare(i + 1, 2, "((") == 0;
      if (arith || n == '{') {
        const std::string_view close = arith ? "))" : "}";
        end = script.find(close, i + 2);
        end =
            end == std::string_view::npos ? script.size() : end + close.size();
      } else if (std::string_view("*?@#!$-0123456789").find(n) !=
                 std::string_view::npos) {
        end = i + 2;
      }
    } else if (c == '*' || c == '?') {
      glob = true;
    } else if (c == '[') {
      bracket = word.size() + 1;  // `[]` matches nothing: no glob
    } else if (c == ']' && bracket > 0 && word.size() > bracket) {
      glob = true;
    }
    word.append(script.substr(i, end - i));
    i = end - 1;
  }
  return end_word(script.size()) ? word : "";
}

// `rel` resolved lexically against the workflow's directory; "" if it
// leaves it.
std::string Relative(const std::string& base, const std::string& token) {
  namespace fs = std::filesystem;
  fs::path p = token[0] == '/' ? fs::path(token) : fs::path(base) / token;
  fs::path rel = p.lexically_normal().lexically_relative(base);
  const std::string r = rel.generic_string();
  if (r.empty() || r == "." || r.rfind("..", 0) == 0) return "";
  return r;
}

bool HasGlob(std::string_view s) {
  return s.find_first_of("*?[") != std::string_view::npos;
}

// Collects the files of one step: path -> hash of content.
class Collector {
 public:
  Collector(Env* env, std::string base) : env_(env), base_(std::move(base)) {}

  // A token of a script: hashed if it names a regular file under base.
  Status Token(const std::string& token) {
    if (token.empty() || token[0] == '-') return Status::OK();
    const std::string rel = Relative(base_, token);
    if (rel.empty() || files_.count(rel)) return Status::OK();
    FileInfo info;
    if (!env_->GetFileInfo(base_ + "/" + rel, &info).ok()) return Status::OK();
    if (info.type == FileInfo::kDir) return Status::OK();
    return AddFile(rel, info);
  }

  // A reuse_files entry: files, directories, globs; must match something.
  Status Listed(const std::string& pattern) {
    std::vector<std::string> parts;
    for (const auto& part : std::filesystem::path(pattern)) {
      const std::string p = part.generic_string();
      if (p == "..") {
        return Status::InvalidArgument("reuse_files entry '" + pattern +
                                       "' leaves the workflow's directory");
      }
      if (!p.empty() && p != "." && p != "/") parts.push_back(p);
    }
    size_t before = files_.size();
    WIZQ_RETURN_IF_ERROR(Expand("", parts, 0));
    if (files_.size() == before && !matched_any_) {
      return Status::NotFound("reuse_files entry '" + pattern +
                              "' matches no file");
    }
    matched_any_ = false;
    return Status::OK();
  }

  std::map<std::string, std::string>* files() { return &files_; }

 private:
  Status Expand(const std::string& rel, const std::vector<std::string>& parts,
                size_t i) {
    const std::string path = rel.empty() ? base_ : base_ + "/" + rel;
    if (i == parts.size()) {
      FileInfo info;
      if (!env_->GetFileInfo(path, &info).ok()) return Status::OK();
      matched_any_ = true;
      return info.type == FileInfo::kDir ? AddTree(rel) : AddFile(rel, info);
    }
    const std::string join = rel.empty() ? "" : rel + "/";
    if (!HasGlob(parts[i])) return Expand(join + parts[i], parts, i + 1);
    std::vector<std::string> names;
    if (!env_->ListDir(path, &names).ok()) return Status::OK();
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      if (n == "." || n == "..") continue;
      if (fnmatch(parts[i].c_str(), n.c_str(), FNM_PERIOD) != 0) continue;
      WIZQ_RETURN_IF_ERROR(Expand(join + n, parts, i + 1));
    }
    return Status::OK();
  }

  Status AddTree(const std::string& rel) {
    const std::string path = rel.empty() ? base_ : base_ + "/" + rel;
    std::vector<std::string> names;
    WIZQ_RETURN_IF_ERROR(env_->ListDir(path, &names));
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) {
      if (n == "." || n == "..") continue;
      const std::string child = rel.empty() ? n : rel + "/" + n;
      FileInfo info;
      WIZQ_RETURN_IF_ERROR(env_->GetFileInfo(base_ + "/" + child, &info));
      WIZQ_RETURN_IF_ERROR(info.type == FileInfo::kDir ? AddTree(child)
                                                       : AddFile(child, info));
    }
    return Status::OK();
  }

  Status AddFile(const std::string& rel, const FileInfo& info) {
    if (files_.count(rel)) return Status::OK();
    if (info.type != FileInfo::kFile) {
      return Status::NotSupported(rel + " is not a regular file");
    }
    if (static_cast<int>(files_.size()) >= DefHasher::kMaxFiles) {
      return Status::NotSupported("more than " +
                                  std::to_string(DefHasher::kMaxFiles) +
                                  " files to hash");
    }
    std::string data;
    Status s = env_->ReadFile(base_ + "/" + rel, &data);
    if (!s.ok()) return s.Annotate("reading " + rel);
    bytes_ += data.size();
    if (bytes_ > DefHasher::kMaxBytes) {
      return Status::NotSupported("more than " +
                                  std::to_string(DefHasher::kMaxBytes) +
                                  " bytes of files to hash");
    }
    files_[rel] = Hash128Hex(data);
    return Status::OK();
  }

  Env* env_;
  std::string base_;
  std::map<std::string, std::string> files_;
  uint64_t bytes_ = 0;
  bool matched_any_ = false;
};

Json EffectiveOptions(const Json& top, const Json& step, const StepOptions& o) {
  Json merged = top.is_object() ? top : Json::object();
  if (step.is_object()) {
    for (auto& [k, v] : step.items()) merged[k] = v;
  }
  merged["max_retries"] = o.max_retries;
  merged["timeout"] = o.timeout_seconds ? Json(*o.timeout_seconds) : Json();
  merged["max_concurrency"] = o.max_concurrency == StepOptions::kUnlimited
                                  ? Json()
                                  : Json(o.max_concurrency);
  merged["retry_on_timeout"] = o.retry_on_timeout;
  merged["retry_on_invalid_response"] = o.retry_on_invalid_response;
  return merged;
}

}  // namespace

DefHasher::DefHasher(const Workflow& wf, Env* env)
    : wf_(wf), env_(env ? env : Env::Posix()) {
  const Json root = Json::parse(wf.frozen_json(), nullptr, false);
  const Json top =
      root.is_object() && root.contains("options") ? root["options"] : Json();
  if (!root.is_object() || !root.contains("steps")) return;
  for (const Json& js : root["steps"]) {
    const Step* step = wf.FindStep(js.value("name", std::string()));
    if (step == nullptr) continue;
    Json def = js;
    def.erase("name");
    def["options"] = EffectiveOptions(
        top, js.contains("options") ? js["options"] : Json(), step->options);
    StepDef d;
    std::string text = def.dump();
    if (!CanonicalizeJson(text, &d.canonical).ok()) continue;
    d.scripts = step->action.script;
    if (step->finally_hook) d.scripts += "\n" + step->finally_hook->script;
    const Json& opts = def["options"];
    d.reuse_files_json = opts.contains("reuse_files")
                             ? opts["reuse_files"].dump()
                             : std::string("[]");
    steps_[step->name] = std::move(d);
  }
}

DefHasher::~DefHasher() = default;

Status DefHasher::CollectFiles(const StepDef& def,
                               std::map<std::string, std::string>* out) const {
  Collector c(env_, wf_.base_dir());
  for (const std::string& t : Tokens(def.scripts)) {
    WIZQ_RETURN_IF_ERROR(c.Token(t));
  }
  const Json listed = Json::parse(def.reuse_files_json, nullptr, false);
  for (const Json& p : listed) {
    if (!p.is_string()) continue;
    WIZQ_RETURN_IF_ERROR(c.Listed(p.get<std::string>()));
  }
  *out = std::move(*c.files());
  return Status::OK();
}

std::string DefHasher::DirectoryListing(const std::string& step) const {
  auto it = steps_.find(step);
  if (it == steps_.end() || it->second.reuse_files_json != "[]") return "";
  return wizq::DirectoryListing(it->second.scripts);
}

std::map<std::string, std::string> DefHasher::Files() const {
  std::map<std::string, std::string> all;
  for (const auto& [name, def] : steps_) {
    std::map<std::string, std::string> files;
    if (Defined(name, nullptr) && CollectFiles(def, &files).ok()) {
      all.insert(files.begin(), files.end());
    }
  }
  return all;
}

// Whether `step` can have a def_hash at all (its files aside).
bool DefHasher::Defined(const std::string& step, std::string* why) const {
  if (steps_.count(step) == 0 || wf_.base_dir().empty()) {
    if (why) *why = "step '" + step + "' cannot be hashed";
    return false;
  }
  // A Function's code is the embedding program's, not the workflow's:
  // nothing here can tell whether it changed, so its tasks run live.
  const Step* def = wf_.FindStep(step);
  if (def && (def->action.kind == Action::Kind::kFunction ||
              (def->finally_hook &&
               def->finally_hook->kind == Action::Kind::kFunction))) {
    if (why) *why = "a Function's code is not part of the workflow";
    return false;
  }
  return true;
}

std::string DefHasher::Hash(const std::string& step, std::string* why) const {
  if (!Defined(step, why)) return "";
  const StepDef& def = steps_.at(step);
  std::map<std::string, std::string> files;
  Status s = CollectFiles(def, &files);
  if (!s.ok()) {
    if (why) *why = s.message();
    return "";
  }
  std::string text = "wizq-def-1\n" + def.canonical + "\n";
  for (const auto& [rel, h] : files) text += "file " + rel + "\n" + h + "\n";
  return Hash128Hex(text);
}

}  // namespace wizq
