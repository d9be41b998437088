// A real etcd server (Debian etcd-server) for tests that need one: started on free loopback
// ports in a temporary directory, killed and removed when the object goes. available() is false
// when etcd is not installed (the test then skips).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "comm/transport/socket.h"
#include "common/die_with_parent.h"

namespace cdt::testing {

class EtcdServer {
 public:
  EtcdServer() {
    if (!available()) return;
    dir_ = std::filesystem::temp_directory_path() /
           ("cdt-etcd-" + std::to_string(::getpid()) + "-" +
            std::to_string(reinterpret_cast<uintptr_t>(this) % 100000));
    std::filesystem::remove_all(dir_);
    port_ = FreePort();
    const std::string client = "http://127.0.0.1:" + std::to_string(port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(FreePort());
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      DieWithParent(parent);
      FILE* f = std::freopen((dir_.string() + ".log").c_str(), "w", stderr);
      (void)f;
      ::execl("/usr/bin/etcd", "etcd", "--data-dir", dir_.c_str(), "--listen-client-urls",
              client.c_str(), "--advertise-client-urls", client.c_str(), "--listen-peer-urls",
              peer.c_str(), "--initial-advertise-peer-urls", peer.c_str(), "--initial-cluster",
              ("default=" + peer).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~EtcdServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    std::filesystem::remove(dir_.string() + ".log", ec);
  }
  static bool available() { return std::filesystem::exists("/usr/bin/etcd"); }
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }  // the etcd process (-1 when not available)
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

  static uint16_t FreePort() {  // bound and released: free for the moment after
    net::HostPort bound;
    net::Socket s = net::Listen("127.0.0.1", 0, &bound);
    return bound.port;
  }

 private:
  std::filesystem::path dir_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace cdt::testing
