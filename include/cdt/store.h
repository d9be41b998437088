// Key-value store used for rendezvous (c10d's Store, Gloo's rendezvous store).
//
// Values are arbitrary bytes held in std::string. Every call that can block takes a timeout and
// throws cdt::Error(kTimeout) when it passes; a broken connection throws cdt::Error(kStore).
// Implementations are thread-safe: several threads may share one Store.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace cdt {

class Store {
 public:
  virtual ~Store() = default;

  // Sets key to value, waking every waiter on key.
  virtual void Set(const std::string& key, const std::string& value) = 0;

  // Waits up to timeout for key to exist, then returns its value.
  virtual std::string Get(const std::string& key, std::chrono::milliseconds timeout) = 0;

  // Waits up to timeout until every key exists.
  virtual void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;

  // Atomically adds delta to the integer stored at key (missing = 0) and returns the new value.
  virtual int64_t Add(const std::string& key, int64_t delta) = 0;

  // Atomically: if key's current value equals expected (a missing key equals ""), sets it to
  // desired. Returns the value after the call (desired on success, the current value otherwise).
  virtual std::string CompareSet(const std::string& key, const std::string& expected,
                                 const std::string& desired) = 0;

  // Removes key; returns whether it existed.
  virtual bool Delete(const std::string& key) = 0;

  // Returns whether key exists, without waiting.
  virtual bool Check(const std::string& key) = 0;
};

}  // namespace cdt
