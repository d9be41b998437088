// WorkerGroup: the per-node agent's process supervisor (torchrun's LocalElasticAgent, minus the
// restarts for now). It hosts the rendezvous store on node 0, agrees with the other nodes' agents
// on global rank offsets (nodes may run different numbers of workers), starts K workers with
// torchrun-compatible variables, forwards SIGINT/SIGTERM to them, and on the first worker failure
// stops the rest and reports that worker's status. Its workers do not outlive it: the kernel kills
// them when it goes, even by SIGKILL (PR_SET_PDEATHSIG, common/die_with_parent.h), as the job
// ends at its first failure anyway.
//
// Elastic mode (`elastic`): a failed worker is reported gone in the store (elastic/rendezvous.h)
// and the others keep running — they re-form the group without it. The job succeeds when its last
// generation reports it finished; workers still running then (hung, or left out of the group) get
// `stop_grace` to exit and are killed after it. Workers outlive a killed agent here: they need it
// only to re-form a group (docs/elastic.md, "Limits").
//
// Rendezvous keys (under "<job_id>/agent/"): node/<r>/nproc, node/<r>/done.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "cdt/log.h"

namespace cdt {

struct AgentConfig {
  int nproc_per_node = 1;
  int nnodes = 1;
  // Elastic: the first generation is nodes 0..min_nodes-1; nodes from min_nodes on join it as they
  // come (their workers ask for a regroup), up to nnodes. Every node then runs nproc_per_node
  // workers; worker ids are node_rank * nproc_per_node + local rank. = nnodes: all start together.
  int min_nodes = 0;  // 0 = nnodes
  int node_rank = 0;
  std::string rdzv_endpoint;  // HOST:PORT; empty on a single node = 127.0.0.1 on a free port
  std::string rdzv_backend =
      "tcp";  // tcp (node 0's agent hosts the store) | etcd (at rdzv_endpoint)
  std::string job_id = "cdt";
  std::string job_secret;       // empty on a single node = a random one
  std::string node_addr;        // CDT_NODE_ADDR handed to workers (what they bind and advertise)
  bool encrypt = false;         // CDT_ENCRYPT=1 handed to workers (sealed frames)
  bool allow_insecure = false;  // CDT_ALLOW_INSECURE=1 handed to workers
  std::chrono::milliseconds rdzv_timeout{60000};
  std::chrono::milliseconds stop_grace{3000};  // SIGTERM -> SIGKILL delay when stopping workers
  bool elastic = false;
  // Node 0's agent writes the rendezvous backend, address and secret here (mode 0600) for
  // `fault-inject`, and removes it at the end; empty = not written.
  std::string job_file;
  // Elastic: hot spares started beside the workers of this node (CDT_SPARE=1; worker ids after
  // every node's workers: target world + node_rank * spares + s).
  int spares = 0;
  Log log;  // the agent's lines ("cann-dist-train agent (node N): ...")
};

struct WorkerExit {
  int local_rank = -1;
  int global_rank = -1;
  int pid = -1;
  int exit_code = 0;  // exit status, or 128 + signal number
  std::string how;    // "exited with status 3" / "killed by signal 9 (Killed)"
};

struct GroupResult {
  int exit_code = 0;              // 0, or the first failing worker's exit_code
  std::vector<WorkerExit> exits;  // in order of exit
  std::string summary;            // one line per failure for the user
};

// Runs `argv` K times (argv[0] is looked up in PATH if it has no '/'), each with the environment of
// this process plus `extra_env` plus the per-worker variables. Blocks until every worker exited.
// Throws cdt::Error for set-up failures (bad endpoint, missing secret on multi-node, rendezvous
// timeout, fork/exec failure).
GroupResult RunWorkerGroup(const AgentConfig& config, const std::vector<std::string>& argv,
                           const std::map<std::string, std::string>& extra_env);

}  // namespace cdt
