// MemoryStore: cdt::Store inside one process (threads as ranks), as Gloo's HashStore. Used by the
// in-process tests and by single-process tools; same semantics as the TCP store.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "cdt/store.h"

namespace cdt {

class MemoryStore : public Store {
 public:
  void Set(const std::string& key, const std::string& value) override;
  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override;
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t Add(const std::string& key, int64_t delta) override;
  std::string CompareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  bool Delete(const std::string& key) override;
  bool Check(const std::string& key) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;  // guarded by mu_
};

}  // namespace cdt
