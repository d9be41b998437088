// A c10d::Store (what torch.distributed hands a backend: torchrun's TCPStore behind a PrefixStore)
// as the engine's cdt::Store, so that the communicator forms its group through it. Keys and values
// are passed through unchanged; waits use the c10d store's own wait with our timeout.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "cdt/error.h"
#include "cdt/store.h"

namespace cdt::python {

class C10dStore : public Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<::c10d::Store> store) : store_(std::move(store)) {}

  void Set(const std::string& key, const std::string& value) override {
    Call("set " + key, [&] { store_->set(key, std::vector<uint8_t>(value.begin(), value.end())); });
  }
  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::string out;
    Call("get " + key, [&] {
      store_->wait({key}, timeout);
      const std::vector<uint8_t> v = store_->get(key);
      out.assign(v.begin(), v.end());
    });
    return out;
  }
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    Call("wait", [&] { store_->wait(keys, timeout); });
  }
  int64_t Add(const std::string& key, int64_t delta) override {
    int64_t out = 0;
    Call("add " + key, [&] { out = store_->add(key, delta); });
    return out;
  }
  std::string CompareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override {
    std::string out;
    Call("compare-set " + key, [&] {
      const std::vector<uint8_t> v = store_->compareSet(
          key, std::vector<uint8_t>(expected.begin(), expected.end()),
          std::vector<uint8_t>(desired.begin(), desired.end()));
      out.assign(v.begin(), v.end());
    });
    return out;
  }
  bool Delete(const std::string& key) override {
    bool out = false;
    Call("delete " + key, [&] { out = store_->deleteKey(key); });
    return out;
  }
  bool Check(const std::string& key) override {
    bool out = false;
    Call("check " + key, [&] { out = store_->check({key}); });
    return out;
  }

 private:
  // c10d stores throw c10::Error (a timeout among them); the engine expects cdt::Error(kStore).
  template <typename F>
  void Call(const std::string& what, F&& f) {
    try {
      f();
    } catch (const c10::Error& e) {
      throw Error(ErrorCode::kStore,
                  "torch.distributed store: " + what + ": " + e.what_without_backtrace());
    }
  }

  c10::intrusive_ptr<::c10d::Store> store_;
};

}  // namespace cdt::python
