#include "elastic/fault_injector.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <utility>

namespace cdt::elastic {

namespace {

// cut: every interface of this node's network namespace but lo goes down for `seconds`, then
// up again, by a detached shell (the outside world: ip(8) from iproute2; needs CAP_NET_ADMIN, as
// inside tools/emulate-cluster's namespaces).
void CutLinks(double seconds) {
  const std::string script =
      "ifs=$(ls /sys/class/net | grep -v '^lo$'); for i in $ifs; do ip link set dev $i down; done; "
      "sleep " +
      std::to_string(seconds) + "; for i in $ifs; do ip link set dev $i up; done";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    if (::fork() == 0) {
      ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::_exit(0);
  }
  if (pid > 0) ::waitpid(pid, nullptr, 0);
}

}  // namespace

FaultActions SystemFaultActions(Log log,
                                std::function<void(int, const std::string&)> report) {
  FaultActions a;
  a.signal_self = [](int signal) { ::kill(::getpid(), signal); };
  a.cut_links = CutLinks;
  a.sleep = [](double seconds) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  };
  a.report = std::move(report);
  a.log = std::move(log);
  return a;
}

FaultInjector::FaultInjector(std::vector<Fault> faults, FaultTarget me, FaultActions actions,
                             Clock::time_point start)
    : faults_(std::move(faults)),
      fired_(faults_.size(), false),
      me_(me),
      act_(std::move(actions)),
      last_call_(start) {}

void FaultInjector::Add(const std::string& spec) {
  for (Fault f : ParseFaults(spec)) {
    faults_.push_back(f);
    fired_.push_back(false);
  }
}

bool FaultInjector::Slow(int64_t step, Clock::time_point now) {
  const double dt = std::chrono::duration<double>(now - last_call_).count();
  last_call_ = now;
  for (size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    if (f.kind != "slow" || f.worker != me_.worker_id || step < f.step || normal_steps_ == 0)
      continue;
    if (!fired_[i])
      act_.log.Warning("\ncann-dist-train: worker {}: injected fault: slow x{:.1f} from step {}",
                       f.worker, f.factor, step);
    fired_[i] = true;
    act_.sleep((f.factor - 1) * normal_step_s_ / static_cast<double>(normal_steps_));
    return true;
  }
  if (step > 0) normal_step_s_ += dt, ++normal_steps_;
  return false;
}

void FaultInjector::Fire(int64_t step) {
  for (size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    if (f.kind != "cut" || f.worker != me_.node_rank || me_.local_rank != 0 || step < f.step ||
        fired_[i])
      continue;
    fired_[i] = true;
    act_.log.Warning(
        "\ncann-dist-train: node {}: injected fault: its links down for {:.1f} s at step {}",
        f.worker, f.factor, step);
    act_.report(me_.worker_id, "cut");
    act_.cut_links(f.factor);
  }
  for (size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    if (f.kind == "slow" || f.kind == "cut" || f.worker != me_.worker_id || step < f.step ||
        fired_[i])
      continue;
    fired_[i] = true;
    act_.log.Warning("\ncann-dist-train: worker {} (pid {}): injected fault: {} at step {}",
                     f.worker, ::getpid(), f.kind, step);
    act_.report(f.worker, f.kind);
    act_.signal_self(f.kind == "kill" ? SIGKILL : SIGSTOP);
  }
}

}  // namespace cdt::elastic
