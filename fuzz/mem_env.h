// MemEnv: an Env (fs/env.h) that keeps every file in memory, for the
// whole-Queue fuzz target: no disk I/O per input and nothing left behind.
//
// Single-threaded. Directories are explicit (CreateDir); a file may be
// created in any directory. Locks are exclusive per path and released when
// their FileLock is destroyed; waiting on a held lock cannot succeed in one
// thread, so it fails (Busy) instead of blocking. The clock starts at a
// fixed time and advances 1 ms per call. Every path is owned by the
// process's effective uid. There are no symlinks (ReadUserFile is ReadFile)
// and no descriptors (OpenDescriptor is NotSupported).
#ifndef WIZQ_FUZZ_MEM_ENV_H_
#define WIZQ_FUZZ_MEM_ENV_H_

#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fs/env.h"

namespace wizq::fuzz {

class MemEnv : public Env {
 public:
  std::map<std::string, std::string>& files() { return files_; }
  void AddDir(const std::string& path) { dirs_.insert(path); }

  Status NewAppendableFile(const std::string& path,
                           std::unique_ptr<WritableFile>* result) override {
    WIZQ_RETURN_IF_ERROR(CheckParent(path));
    files_[path];  // created if missing
    result->reset(new File(this, path));
    return Status::OK();
  }
  Status NewRandomRWFile(const std::string& path,
                         std::unique_ptr<RandomRWFile>* result) override {
    WIZQ_RETURN_IF_ERROR(CheckParent(path));
    files_[path];  // created if missing
    result->reset(new RWFile(this, path));
    return Status::OK();
  }
  Status NewWritableFile(const std::string& path,
                         std::unique_ptr<WritableFile>* result) override {
    WIZQ_RETURN_IF_ERROR(CheckParent(path));
    files_[path].clear();
    result->reset(new File(this, path));
    return Status::OK();
  }
  Status ReadFile(const std::string& path, std::string* data) override {
    return ReadFileFrom(path, 0, data);
  }
  Status ReadFileFrom(const std::string& path, uint64_t offset,
                      std::string* data) override {
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound(path + ": no such file");
    data->assign(offset < it->second.size() ? it->second.substr(offset) : "");
    return Status::OK();
  }
  Status ReadFilePrefix(const std::string& path, size_t limit,
                        std::string* data) override {
    WIZQ_RETURN_IF_ERROR(ReadFileFrom(path, 0, data));
    data->resize(std::min(limit, data->size()));
    return Status::OK();
  }
  Status ReadUserFile(const std::string& path, std::string* data) override {
    return ReadFileFrom(path, 0, data);
  }
  bool FileExists(const std::string& path) override {
    return files_.count(path) > 0 || dirs_.count(path) > 0;
  }
  Status GetFileInfo(const std::string& path, FileInfo* info) override {
    auto it = files_.find(path);
    if (it == files_.end() && dirs_.count(path) == 0) {
      return Status::NotFound(path + ": no such file");
    }
    *info = FileInfo();
    info->type = it == files_.end() ? FileInfo::kDir : FileInfo::kFile;
    info->size = it == files_.end() ? 0 : it->second.size();
    info->uid = static_cast<uint32_t>(geteuid());
    return Status::OK();
  }
  Status GetFileSize(const std::string& path, uint64_t* size) override {
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound(path + ": no such file");
    *size = it->second.size();
    return Status::OK();
  }
  Status TruncateFile(const std::string& path, uint64_t size) override {
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound(path + ": no such file");
    if (size < it->second.size()) it->second.resize(size);
    return Status::OK();
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    WIZQ_RETURN_IF_ERROR(CheckParent(to));
    auto it = files_.find(from);
    if (it != files_.end()) {
      std::string data = std::move(it->second);
      files_.erase(it);
      files_[to] = std::move(data);
      return Status::OK();
    }
    if (dirs_.count(from) == 0)
      return Status::NotFound(from + ": no such file");
    // A directory: move it and everything below it.
    const std::string prefix = from + "/";
    std::map<std::string, std::string> moved_files;
    for (auto f = files_.begin(); f != files_.end();) {
      if (f->first.compare(0, prefix.size(), prefix) == 0) {
        moved_files[to + "/" + f->first.substr(prefix.size())] =
            std::move(f->second);
        f = files_.erase(f);
      } else {
        ++f;
      }
    }
    files_.insert(moved_files.begin(), moved_files.end());
    std::set<std::string> moved_dirs;
    for (auto d = dirs_.begin(); d != dirs_.end();) {
      if (*d == from || d->compare(0, prefix.size(), prefix) == 0) {
        moved_dirs.insert(to + d->substr(from.size()));
        d = dirs_.erase(d);
      } else {
        ++d;
      }
    }
    dirs_.insert(moved_dirs.begin(), moved_dirs.end());
    return Status::OK();
  }
  Status RemoveFile(const std::string& path) override {
    if (files_.erase(path) == 0)
      return Status::NotFound(path + ": no such file");
    return Status::OK();
  }
  Status CreateDir(const std::string& path, int) override {
    if (files_.count(path)) return Status::IOError(path + ": not a directory");
    dirs_.insert(path);
    return Status::OK();
  }
  Status CreateDirs(const std::string& path, int mode) override {
    if (dirs_.count(path) || DirName(path) == path) return Status::OK();
    if (files_.count(path)) return Status::OK();  // the caller checks it
    WIZQ_RETURN_IF_ERROR(CreateDirs(DirName(path), mode));
    return CreateDir(path, mode);
  }
  Status SyncDir(const std::string& path) override {
    if (dirs_.count(path) == 0) return Status::NotFound(path + ": no such dir");
    return Status::OK();
  }
  Status ListDir(const std::string& path,
                 std::vector<std::string>* names) override {
    if (dirs_.count(path) == 0) return Status::NotFound(path + ": no such dir");
    names->clear();
    const std::string prefix = path + "/";
    std::set<std::string> out;
    for (const auto& [name, unused] : files_) AddChild(prefix, name, &out);
    for (const std::string& name : dirs_) AddChild(prefix, name, &out);
    names->assign(out.begin(), out.end());
    return Status::OK();
  }
  Status LockFile(const std::string& path, bool /*wait*/,
                  std::unique_ptr<FileLock>* lock) override {
    if (held_.count(path)) return Status::Busy(path + " is locked");
    WIZQ_RETURN_IF_ERROR(CheckParent(path));
    files_[path];
    held_.insert(path);
    lock->reset(new Lock(this, path));
    return Status::OK();
  }
  Status OpenDescriptor(const std::string& path, int, int*) override {
    return Status::NotSupported("open " + path +
                                ": an in-memory env has no descriptors");
  }
  uint64_t NowMicros() override { return now_us_ += 1000; }

 private:
  class File : public WritableFile {
   public:
    File(MemEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
    Status Append(std::string_view data) override {
      auto it = env_->files_.find(path_);
      if (it == env_->files_.end()) return Status::IOError(path_ + ": gone");
      it->second.append(data);
      return Status::OK();
    }
    Status Sync() override { return Status::OK(); }
    Status Truncate(uint64_t size) override {
      return env_->TruncateFile(path_, size);
    }
    Status Close() override { return Status::OK(); }
    const std::string& path() const override { return path_; }

   private:
    MemEnv* env_;
    std::string path_;
  };

  // Reads and writes at offsets; a write past the end zero-fills the gap,
  // and Truncate can grow the file with zeros, like ftruncate.
  class RWFile : public RandomRWFile {
   public:
    RWFile(MemEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
    Status Read(uint64_t offset, size_t n, std::string* data) override {
      std::string* f = Get();
      if (f == nullptr) return Gone();
      data->assign(offset < f->size() ? f->substr(offset, n) : "");
      return Status::OK();
    }
    Status Write(uint64_t offset, std::string_view data) override {
      std::string* f = Get();
      if (f == nullptr) return Gone();
      if (f->size() < offset + data.size()) f->resize(offset + data.size());
      f->replace(offset, data.size(), data);
      return Status::OK();
    }
    Status Sync() override { return Status::OK(); }
    Status Size(uint64_t* size) override {
      std::string* f = Get();
      if (f == nullptr) return Gone();
      *size = f->size();
      return Status::OK();
    }
    Status Truncate(uint64_t size) override {
      std::string* f = Get();
      if (f == nullptr) return Gone();
      f->resize(size);
      return Status::OK();
    }
    Status Close() override { return Status::OK(); }
    const std::string& path() const override { return path_; }

   private:
    // The file's content, or null if it was removed.
    std::string* Get() {
      auto it = env_->files_.find(path_);
      return it == env_->files_.end() ? nullptr : &it->second;
    }
    Status Gone() const { return Status::IOError(path_ + ": gone"); }

    MemEnv* env_;
    std::string path_;
  };

  class Lock : public FileLock {
   public:
    Lock(MemEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
    ~Lock() override { env_->held_.erase(path_); }
    const std::string& path() const override { return path_; }
    int fd() const override { return -1; }

   private:
    MemEnv* env_;
    std::string path_;
  };

  Status CheckParent(const std::string& path) const {
    if (dirs_.count(DirName(path)) == 0) {
      return Status::IOError(path + ": parent directory missing");
    }
    return Status::OK();
  }

  static void AddChild(const std::string& prefix, const std::string& name,
                       std::set<std::string>* out) {
    if (name.compare(0, prefix.size(), prefix) != 0) return;
    std::string rest = name.substr(prefix.size());
    if (!rest.empty() && rest.find('/') == std::string::npos) out->insert(rest);
  }

  std::map<std::string, std::string> files_;
  std::set<std::string> dirs_;
  std::set<std::string> held_;
  uint64_t now_us_ = 1700000000000000ull;
};

}  // namespace wizq::fuzz

#endif  // WIZQ_FUZZ_MEM_ENV_H_
