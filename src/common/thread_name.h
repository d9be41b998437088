// Names the calling thread (Linux: at most 15 characters, longer names are cut), so that top -H,
// perf, gdb and bench/cpu_account.py tell our background threads apart — NCCL and Gloo do the same.
#pragma once

#include <pthread.h>

#include <string>

namespace cdt {

inline void NameThisThread(const std::string& name) {
  ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace cdt
