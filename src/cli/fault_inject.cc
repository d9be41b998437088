#include "cli/fault_inject.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>

#include "cdt/error.h"
#include "comm/store/etcd_store.h"
#include "comm/store/tcp_store_client.h"
#include "common/file_io.h"
#include "elastic/fault_spec.h"
#include "elastic/rendezvous.h"

namespace cdt::cli {

std::string JobFilePath(const Environment& env, const std::string& job_id) {
  std::string name = job_id;
  for (char& c : name)
    if (c == '/') c = '_';
  return env.runtime_dir + "/" + name + ".job";
}

void AddFaultInjectOptions(CLI::App* cmd, FaultInjectOptions* o, const Environment& env) {
  o->job_id = env.job_id.value_or("cdt");
  cmd->add_option("--job-id", o->job_id, "the running job (CDT_JOB_ID)")->capture_default_str();
  cmd->add_option("--rdzv-backend", o->rdzv_backend, "tcp | etcd (default: from the job's agent)");
  cmd->add_option("--rdzv-endpoint", o->rdzv_endpoint,
                  "the job's store (default: from the job's agent)");
  o->job_secret = env.job_secret.value_or("");
  cmd->add_option("--job-secret", o->job_secret,
                  "the job's secret, with a TCP store given by hand (prefer CDT_JOB_SECRET: a "
                  "command line is visible in ps)");
  cmd->add_option("--kill", o->kill, "SIGKILL the worker that started as this rank");
  cmd->add_option("--hang", o->hang, "SIGSTOP the worker that started as this rank");
  cmd->add_option("--slow", o->slow, "RANK=FACTOR: slow that worker's steps FACTOR times");
  cmd->add_option("--cut-link", o->cut_link,
                  "take this node's links down (needs CAP_NET_ADMIN there)");
  cmd->add_option("--for", o->for_s, "--cut-link: seconds")->capture_default_str();
  cmd->add_option("--at-step", o->at_step,
                  "at this step or the first after it the workers see (0 = now)");
}

std::string FaultSpec(const FaultInjectOptions& o) {
  const int chosen = (o.kill >= 0) + (o.hang >= 0) + (o.cut_link >= 0) + !o.slow.empty();
  if (chosen != 1)
    throw Error(ErrorCode::kInvalidArgument,
                "fault-inject: give exactly one of --kill, --hang, --slow, --cut-link");
  const std::string at = "@" + std::to_string(o.at_step);
  std::string spec;
  if (o.kill >= 0) spec = "kill:" + std::to_string(o.kill) + at;
  if (o.hang >= 0) spec = "hang:" + std::to_string(o.hang) + at;
  if (!o.slow.empty()) spec = "slow:" + o.slow + at;
  if (o.cut_link >= 0)
    spec = "cut:" + std::to_string(o.cut_link) + at + "+" + std::to_string(o.for_s);
  elastic::ParseFaults(spec);  // the workers' parser: refuse here what they would refuse
  return spec;
}

JobFile ReadJobFile(const Environment& env, const std::string& job_id, const std::string& verb) {
  JobFile j;
  j.path = JobFilePath(env, job_id);
  if (::access(j.path.c_str(), F_OK) != 0)
    throw Error(ErrorCode::kInvalidArgument,
                verb + ": no running job '" + job_id + "' on this machine (no " + j.path +
                    "); give --rdzv-endpoint (and --rdzv-backend, CDT_JOB_SECRET) of its store");
  // Only a job file of ours, in a directory of ours, points us at a store: a planted one
  // would send the request (and our proof of its secret) wherever its author likes.
  EnsurePrivateDirectory(std::filesystem::path(j.path).parent_path().string());
  CheckPrivateFile(j.path);
  std::istringstream f(ReadFileBounded(j.path, 64 << 10));
  if (!(std::getline(f, j.backend) && std::getline(f, j.endpoint) && std::getline(f, j.job_id) &&
        std::getline(f, j.secret)))
    throw Error(ErrorCode::kInvalidArgument,
                verb + ": " + j.path + " is not a job file (four lines expected)");
  if (j.backend.empty()) j.backend = "tcp";
  return j;
}

std::unique_ptr<Store> ConnectJobStore(const JobFile& job, std::chrono::milliseconds timeout) {
  const net::HostPort hp = net::ParseHostPort(job.endpoint, "--rdzv-endpoint");
  if (job.backend == "etcd") return std::make_unique<EtcdStore>(hp, timeout);
  return std::make_unique<TcpStoreClient>(hp, job.secret, timeout);
}

int RunFaultInject(const FaultInjectOptions& o, const Environment& env) {
  const std::string spec = FaultSpec(o);
  JobFile job{o.rdzv_backend.empty() ? "tcp" : o.rdzv_backend, o.rdzv_endpoint, o.job_id,
              o.job_secret, ""};
  if (o.rdzv_endpoint.empty()) job = ReadJobFile(env, o.job_id, "fault-inject");
  std::unique_ptr<Store> store = ConnectJobStore(job, std::chrono::seconds(10));
  elastic::QueueFault(*store, job.job_id, spec);
  std::printf(
      "fault-inject: queued %s for job %s (%s store at %s); its workers look every ten steps\n",
      spec.c_str(), job.job_id.c_str(), job.backend.c_str(), job.endpoint.c_str());
  return 0;
}

}  // namespace cdt::cli
