// The engine's store (an elastic job's: the agent's authenticated TCP store, or etcd) as a
// c10d::Store, so that torch.distributed.init_process_group can run in each generation of an
// elastic group (python/elastic_run.h) — the reverse of python/c10d_store.h. Keys and values pass
// through unchanged; the cdt::Store's errors come out as c10::Error (what torch's stores throw).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cdt/error.h"
#include "cdt/store.h"

namespace cdt::python {

class EngineStore : public ::c10d::Store {
 public:
  EngineStore(std::shared_ptr<cdt::Store> store, std::chrono::milliseconds timeout)
      : ::c10d::Store(timeout), store_(std::move(store)) {}

#if TORCH_VERSION_MAJOR >= 2
  // Another handle on the same store (torch 2.x clones a group's store for its own threads).
  c10::intrusive_ptr<::c10d::Store> clone() override {
    return c10::make_intrusive<EngineStore>(store_, timeout_);
  }
#endif
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    Call([&] { store_->Set(key, std::string(value.begin(), value.end())); });
  }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    std::string out;
    Call([&] {
      out = store_->CompareSet(key, std::string(expected.begin(), expected.end()),
                               std::string(desired.begin(), desired.end()));
    });
    return {out.begin(), out.end()};
  }
  std::vector<uint8_t> get(const std::string& key) override {
    std::string out;
    Call([&] { out = store_->Get(key, timeout_); });
    return {out.begin(), out.end()};
  }
  int64_t add(const std::string& key, int64_t value) override {
    int64_t out = 0;
    Call([&] { out = store_->Add(key, value); });
    return out;
  }
  bool deleteKey(const std::string& key) override {
    bool out = false;
    Call([&] { out = store_->Delete(key); });
    return out;
  }
  bool check(const std::vector<std::string>& keys) override {
    bool all = true;
    Call([&] {
      for (const std::string& k : keys) all = all && store_->Check(k);
    });
    return all;
  }
  int64_t getNumKeys() override {
    TORCH_CHECK(false, "cdt: the engine's store does not count its keys (getNumKeys)");
    return 0;
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    Call([&] { store_->Wait(keys, timeout); });
  }

 private:
  template <typename F>
  void Call(F&& f) {
    try {
      f();
    } catch (const Error& e) {
      TORCH_CHECK(false, "cdt: the job's store: ", e.what());
    }
  }

  std::shared_ptr<cdt::Store> store_;
};

}  // namespace cdt::python
