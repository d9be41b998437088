// A FileSystem in memory, for tests (a fake of the outside world: the disk). Files are a map of
// path to bytes; a test can make the disk full (writes throw, as ENOSPC would, and leave the old
// file, as WriteFileAtomically does), make one path unreadable (EIO), and count writes.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "cdt/error.h"
#include "common/file_system.h"

namespace cdt::testing {

class FakeFileSystem : public FileSystem {
 public:
  std::optional<std::string> ReadIfExists(const std::string& path,
                                          size_t max_bytes) const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (unreadable_.count(path))
      throw Error(ErrorCode::kIo, "cannot read '" + path + "': Input/output error");
    auto it = files_.find(path);
    if (it == files_.end()) return std::nullopt;
    if (it->second.size() > max_bytes)
      throw Error(ErrorCode::kIo, "'" + path + "' has " + std::to_string(it->second.size()) +
                                      " bytes, more than the " + std::to_string(max_bytes) +
                                      " this reader takes");
    return it->second;
  }
  void WriteAtomically(const std::string& path, std::string_view bytes, mode_t) const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (full_)
      throw Error(ErrorCode::kIo, "cannot write '" + path + "': No space left on device");
    files_[path] = std::string(bytes);
    ++writes_;
  }
  std::vector<std::string> List(const std::string& dir) const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> names;
    const std::string prefix = dir + "/";
    for (const auto& [path, bytes] : files_)
      if (path.compare(0, prefix.size(), prefix) == 0 &&
          path.find('/', prefix.size()) == std::string::npos)
        names.push_back(path.substr(prefix.size()));
    return names;
  }
  bool Exists(const std::string& path) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return files_.count(path) > 0;
  }
  void CreateDirectories(const std::string&) const override {}
  bool Remove(const std::string& path) const override {
    std::lock_guard<std::mutex> lock(mu_);
    files_.erase(path);
    return true;
  }

  void Put(const std::string& path, std::string bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    files_[path] = std::move(bytes);
  }
  void SetFull(bool full) {
    std::lock_guard<std::mutex> lock(mu_);
    full_ = full;
  }
  void SetUnreadable(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    unreadable_.insert(path);
  }
  int writes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return writes_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, std::string> files_;
  mutable int writes_ = 0;
  bool full_ = false;
  std::set<std::string> unreadable_;
};

}  // namespace cdt::testing
