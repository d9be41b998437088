#include "common/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cdt/error.h"

namespace cdt {

namespace {

std::string Why() { return std::strerror(errno); }

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string HostName() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::string name = host;
  for (char& c : name)
    if (c == '.' || c == '/') c = '_';
  return name.empty() ? "host" : name;
}

// A name no other writer picks: host, pid and a per-process counter. "<path>.tmp.<host>.<pid>.<n>"
std::string TemporaryName(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp." + HostName() + "." + std::to_string(::getpid()) + "." +
         std::to_string(counter++);
}

void SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void WriteFileAtomically(const std::string& path, std::string_view bytes, mode_t mode) {
  const std::string tmp = TemporaryName(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) throw Error(ErrorCode::kIo, "cannot create '" + tmp + "': " + Why());
  auto fail = [&](const std::string& what) {
    const std::string why = Why();
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(ErrorCode::kIo, "cannot " + what + " '" + tmp + "' (for '" + path + "'): " + why);
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write");
    done += static_cast<size_t>(n);
  }
  // The umask may have narrowed `mode`; a wider one must not survive either.
  if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0) fail("sync");
  if (::close(fd) != 0) {
    const std::string why = Why();
    ::unlink(tmp.c_str());
    throw Error(ErrorCode::kIo, "cannot close '" + tmp + "': " + why);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = Why();
    ::unlink(tmp.c_str());
    throw Error(ErrorCode::kIo, "cannot rename '" + tmp + "' to '" + path + "': " + why);
  }
  SyncDirectory(Parent(path));
}

size_t RemoveStaleTemporaries(const std::string& dir, const std::string& prefix) {
  const std::string host = HostName();
  size_t removed = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  for (dirent* e; (e = ::readdir(d)) != nullptr;) {
    const std::string name = e->d_name;
    const size_t tmp = name.find(".tmp." + host + ".");
    if (name.rfind(prefix, 0) != 0 || tmp == std::string::npos) continue;
    const std::string rest = name.substr(tmp + 6 + host.size());  // "<pid>.<n>"
    const long pid = std::strtol(rest.c_str(), nullptr, 10);
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH))
      removed += ::unlink((dir + "/" + name).c_str()) == 0;
  }
  ::closedir(d);
  return removed;
}

void EnsurePrivateDirectory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw Error(ErrorCode::kIo, "cannot create directory '" + dir + "': " + Why());
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    throw Error(ErrorCode::kIo, "cannot inspect directory '" + dir + "': " + Why());
  std::string wrong;
  if (S_ISLNK(st.st_mode))
    wrong = "is a symbolic link";
  else if (!S_ISDIR(st.st_mode))
    wrong = "is not a directory";
  else if (st.st_uid != ::geteuid())
    wrong = "belongs to uid " + std::to_string(st.st_uid) + ", not to you (uid " +
            std::to_string(::geteuid()) + ")";
  else if (st.st_mode & (S_IWGRP | S_IWOTH))
    wrong = "is writable by other users";
  if (!wrong.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "'" + dir + "' " + wrong +
                    ": refusing to keep a job's secret there; someone may have prepared it. "
                    "Remove it, or set XDG_RUNTIME_DIR to a directory of your own");
}

void CheckPrivateFile(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw Error(ErrorCode::kIo, "cannot inspect '" + path + "': " + Why());
  }
  std::string wrong;
  if (S_ISLNK(st.st_mode))
    wrong = "is a symbolic link";
  else if (!S_ISREG(st.st_mode))
    wrong = "is not a regular file";
  else if (st.st_uid != ::geteuid())
    wrong = "belongs to uid " + std::to_string(st.st_uid) + ", not to you";
  else if (st.st_mode & (S_IRWXG | S_IRWXO))
    wrong = "may be read or written by other users (mode " + std::to_string((st.st_mode >> 6) & 7) +
            std::to_string((st.st_mode >> 3) & 7) + std::to_string(st.st_mode & 7) + ")";
  if (!wrong.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "'" + path + "' " + wrong +
                    ": refusing to use it for a job's secret; someone may have planted it. "
                    "Remove it and start again");
}

std::string ReadFileBounded(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorCode::kIo, "cannot open '" + path + "': " + Why());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = Why();
    ::close(fd);
    throw Error(ErrorCode::kIo, "cannot inspect '" + path + "': " + why);
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw Error(ErrorCode::kIo, "'" + path + "' has " + std::to_string(st.st_size) +
                                    " bytes, more than the " + std::to_string(max_bytes) +
                                    " this reader takes");
  }
  std::string out;
  out.reserve(S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) : 0);
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = Why();
      ::close(fd);
      throw Error(ErrorCode::kIo, "cannot read '" + path + "': " + why);
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      throw Error(ErrorCode::kIo, "'" + path + "' is longer than the " + std::to_string(max_bytes) +
                                      " bytes this reader takes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace cdt
