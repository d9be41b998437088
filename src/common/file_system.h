// The file-system seam (issue 30), LevelDB's Env in miniature: the engine's readers and durable
// writers go through a FileSystem, so that a test can hand them a fake (tests/common/
// fake_file_system.h: a full disk, a read error, a file that vanishes) while the program uses the
// process's files. Every reader behaves the same on errors: a missing file is "not there"
// (nullopt) where the caller may go on without it, and everything else — denied, a directory, too
// large, a read error — is cdt::Error(kIo) naming the file and the reason.
//
// LocalFileSystem() is the process's files through common/file_io.h. It keeps no state (a
// constant, not a global variable): components take a `const FileSystem*` in their options,
// null meaning this one.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cdt {

// What readers of configuration and traces accept; checkpoints have their own bound.
constexpr size_t kMaxTextFileBytes = size_t{64} << 20;

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // The whole file, at most max_bytes; nullopt when nothing is at `path` (or a directory on the
  // way is missing). Throws cdt::Error(kIo) naming the file for any other failure.
  virtual std::optional<std::string> ReadIfExists(const std::string& path,
                                                  size_t max_bytes) const = 0;
  // WriteFileAtomically's contract (common/file_io.h): the old file or the new one after a crash,
  // a unique temporary name, fsync of the file and the directory. Creates missing directories.
  // Throws cdt::Error(kIo) naming the file.
  virtual void WriteAtomically(const std::string& path, std::string_view bytes,
                               mode_t mode) const = 0;
  // The names of the regular files in `dir` (not their paths), in no order; empty when `dir` is
  // missing.
  virtual std::vector<std::string> List(const std::string& dir) const = 0;
  virtual bool Exists(const std::string& path) const = 0;
  // Creates `dir` and its parents if missing; throws cdt::Error(kIo) naming it.
  virtual void CreateDirectories(const std::string& dir) const = 0;
  // Removes a file; false if it could not (a file already gone counts as removed).
  virtual bool Remove(const std::string& path) const = 0;

  // A file that must be there: ReadIfExists, and a missing one is cdt::Error(kInvalidArgument)
  // "cannot read <what> '<path>': no such file" followed by `hint` (what to do).
  std::string Read(const std::string& path, size_t max_bytes, std::string_view what,
                   std::string_view hint = "") const;
};

const FileSystem& LocalFileSystem();

// `fs`, or LocalFileSystem() when null: for options that hold a `const FileSystem*`.
inline const FileSystem& Or(const FileSystem* fs) { return fs ? *fs : LocalFileSystem(); }

}  // namespace cdt
