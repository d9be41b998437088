// shm::Segment: a named shared mapping (POSIX shm_open under /dev/shm, mode 0600), the memory the
// same-node transport lives in (the NodeArena). The creator picks the name (the
// communicator's set-up: job, generation, creator pid and random bytes, sent to the others over the
// authenticated connection) and unlinks it as soon as everyone has mapped it, so nothing is left
// in /dev/shm once a group runs, whatever happens to it later.
#pragma once

#include <cstddef>
#include <string>

namespace cdt::shm {

// A shared mapping by name (POSIX shm_open, mode 0600). The creator names it after the job and
// generation; Unlink() removes the name (the mapping lives on while mapped).
class Segment {
 public:
  // Creates `name` ("/cdt-…") of `bytes`, zeroed, its pages reserved (posix_fallocate: a full
  // /dev/shm fails here, not later as SIGBUS on first touch). Throws cdt::Error(kIo) naming it.
  static Segment Create(const std::string& name, size_t bytes);
  // Maps an existing one. Throws cdt::Error(kIo) naming it.
  static Segment Open(const std::string& name);
  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();  // unmaps (does not unlink)

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // Removes the name; false if it was gone already.
  bool Unlink();

 private:
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace cdt::shm
