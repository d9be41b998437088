// Runs N ranks as threads over a MemoryStore and real TCP loopback connections (Gloo's test
// pattern).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cdt/tcp_communicator.h"
#include "comm/store/memory_store.h"

namespace cdt::testing {

struct RankSetup {
  std::vector<std::string> host_ids;  // per rank; empty = all on this machine
  CommunicatorOptions base;           // rank/size/host_id filled in per rank
};

// Calls body(comm) on `size` threads, each with its own connected communicator; rethrows the first
// exception after all threads finished.
inline void RunRanks(int size, const std::function<void(Communicator&)>& body, RankSetup setup = {},
                     Store* shared_store = nullptr) {
  MemoryStore own_store;
  Store& store = shared_store ? *shared_store : own_store;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        CommunicatorOptions o = setup.base;
        o.rank = r;
        o.size = size;
        if (!setup.host_ids.empty()) o.host_id = setup.host_ids[static_cast<size_t>(r)];
        auto comm = ConnectTcpCommunicator(store, o);
        body(*comm);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace cdt::testing
