#include "comm/transport/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "cdt/error.h"

namespace cdt::shm {
namespace {

std::string Errno() { return std::strerror(errno); }

}  // namespace

Segment Segment::Create(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(ErrorCode::kIo, "shared memory " + name + ": cannot create: " + Errno());
  // posix_fallocate returns the error instead of setting errno.
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    const std::string why = std::strerror(err);
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw Error(ErrorCode::kIo, "shared memory " + name + ": cannot size to " +
                                    std::to_string(bytes) + " bytes: " + why +
                                    " (is /dev/shm full?)");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string why = Errno();
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    throw Error(ErrorCode::kIo, "shared memory " + name + ": cannot map: " + why);
  }
  Segment s;
  s.name_ = name;
  s.data_ = p;
  s.size_ = bytes;
  return s;
}

Segment Segment::Open(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) throw Error(ErrorCode::kIo, "shared memory " + name + ": cannot open: " + Errno());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    throw Error(ErrorCode::kIo, "shared memory " + name + ": empty or unreadable");
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string why = Errno();
  ::close(fd);
  if (p == MAP_FAILED) throw Error(ErrorCode::kIo, "shared memory " + name + ": cannot map: " + why);
  Segment s;
  s.name_ = name;
  s.data_ = p;
  s.size_ = bytes;
  return s;
}

Segment::Segment(Segment&& o) noexcept
    : name_(std::move(o.name_)), data_(std::exchange(o.data_, nullptr)), size_(o.size_) {}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(data_, size_);
    name_ = std::move(o.name_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = o.size_;
  }
  return *this;
}

Segment::~Segment() {
  if (data_) ::munmap(data_, size_);
}

bool Segment::Unlink() { return !name_.empty() && ::shm_unlink(name_.c_str()) == 0; }

}  // namespace cdt::shm
