// Files the engine writes and reads, written so that a crash, a careless neighbour on the same
// host or a planted link never costs data or leaks a secret (docs/security.md, "Disk").
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace cdt {

// Writes `bytes` to `path` atomically and durably: a temporary file with a unique name beside
// `path` (created with O_CREAT | O_EXCL | O_NOFOLLOW and `mode`, so it is never anyone else's file
// or a link), fsync, rename over `path`, fsync of the directory. A crash leaves the old file or
// the new one, never a torn one; two writers never touch each other's temporaries; a symlink at
// `path` is replaced, never followed. Throws cdt::Error(kIo) naming the file.
void WriteFileAtomically(const std::string& path, std::string_view bytes, mode_t mode = 0644);

// Removes from `dir` the temporaries of WriteFileAtomically for files named `prefix`... that a
// crash left: those of this host whose writing process no longer runs. A live writer's
// temporaries, and other hosts' (a shared file system), are left alone. Returns how many.
size_t RemoveStaleTemporaries(const std::string& dir, const std::string& prefix);

// Creates `dir` (mode 0700) if missing, and refuses it (cdt::Error(kInvalidArgument) saying what
// to do) unless it is a real directory owned by this user that nobody else may write into. For
// files that carry a secret, in places such as /tmp where others could have prepared the name.
void EnsurePrivateDirectory(const std::string& dir);

// Refuses (as above) an existing `path` that is not a regular file of this user that only this
// user may read and write: a planted file, a symlink, a file writable by others. Missing is fine.
void CheckPrivateFile(const std::string& path);

// The whole file, at most max_bytes (else cdt::Error(kIo) saying so, before reading it).
// Throws cdt::Error(kIo) naming the file and the reason if it cannot be opened or read.
std::string ReadFileBounded(const std::string& path, size_t max_bytes);

}  // namespace cdt
