// Joining the job a launcher started — `cann-dist-train launch`, or any launcher that sets
// torchrun's RANK and WORLD_SIZE and the engine's CDT_STORE_ENDPOINT (with CDT_JOB_SECRET and
// CDT_JOB_ID when it has them): this rank's options, the launcher's store and a communicator over
// it, from the environment. The programs here (and bench/peers/cdt_collectives.cc) share it; a
// program of your own can copy it whole. MASTER_ADDR:MASTER_PORT is left to torch's own TCPStore.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "cdt/communicator.h"
#include "cdt/store.h"
#include "cdt/tcp_communicator.h"
#include "cdt/tcp_store.h"

namespace launched {

// The variable's value, else `fallback`; with no fallback, exits 2 telling how to run `program`.
inline std::string Env(const char* program, const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  if (v != nullptr) return v;
  if (fallback != nullptr) return fallback;
  std::fprintf(stderr, "%s: %s is not set; run me under cann-dist-train launch\n", program, name);
  std::exit(2);
}

struct Rank {
  cdt::CommunicatorOptions options;
  std::unique_ptr<cdt::Store> store;  // outlives the communicator (declared first)
  std::unique_ptr<cdt::Communicator> comm;
};

// Meets the other ranks under "<CDT_JOB_ID>/<job_suffix>" in the launcher's store; `tune`, if
// given, sets further options before the communicator connects. Throws cdt::Error (unreachable
// store, wrong secret, a rank that does not come).
inline Rank Join(const char* program, const std::string& job_suffix,
                 const std::function<void(cdt::CommunicatorOptions&)>& tune = {}) {
  Rank r;
  r.options.rank = std::stoi(Env(program, "RANK", nullptr));
  r.options.size = std::stoi(Env(program, "WORLD_SIZE", nullptr));
  r.options.secret = Env(program, "CDT_JOB_SECRET", "");
  r.options.job_id = Env(program, "CDT_JOB_ID", "cdt") + "/" + job_suffix;
  const std::string endpoint = Env(program, "CDT_STORE_ENDPOINT", nullptr);
  const size_t colon = endpoint.rfind(':');
  r.store = cdt::ConnectTcpStore(endpoint.substr(0, colon),
                                 static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1))),
                                 r.options.secret, std::chrono::seconds(30));
  if (tune) tune(r.options);
  r.comm = cdt::ConnectTcpCommunicator(*r.store, r.options);
  return r;
}

}  // namespace launched
