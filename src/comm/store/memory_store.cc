#include "comm/store/memory_store.h"

#include "cdt/error.h"

namespace cdt {

void MemoryStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = value;
  }
  cv_.notify_all();
}

void MemoryStore::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto all_present = [&] {
    for (const auto& k : keys)
      if (!data_.count(k)) return false;
    return true;
  };
  if (!cv_.wait_for(lock, timeout, all_present))
    throw Error(ErrorCode::kTimeout, "waited " + std::to_string(timeout.count()) +
                                         " ms on the in-memory store for " +
                                         std::to_string(keys.size()) + " key(s), first '" +
                                         (keys.empty() ? "" : keys[0]) + "'");
}

std::string MemoryStore::Get(const std::string& key, std::chrono::milliseconds timeout) {
  Wait({key}, timeout);
  std::lock_guard<std::mutex> lock(mu_);
  return data_.at(key);
}

int64_t MemoryStore::Add(const std::string& key, int64_t delta) {
  int64_t v;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    v = (it == data_.end() ? 0 : std::stoll(it->second)) + delta;
    data_[key] = std::to_string(v);
  }
  cv_.notify_all();
  return v;
}

std::string MemoryStore::CompareSet(const std::string& key, const std::string& expected,
                                    const std::string& desired) {
  std::string result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    std::string current = it == data_.end() ? std::string() : it->second;
    if (current == expected) {
      data_[key] = desired;
      current = desired;
    }
    result = current;
  }
  cv_.notify_all();
  return result;
}

bool MemoryStore::Delete(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.erase(key) != 0;
}

bool MemoryStore::Check(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.count(key) != 0;
}

}  // namespace cdt
