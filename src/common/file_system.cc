#include "common/file_system.h"

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "cdt/error.h"
#include "common/file_io.h"

namespace cdt {

namespace {

namespace fs = std::filesystem;

class Local final : public FileSystem {
 public:
  std::optional<std::string> ReadIfExists(const std::string& path,
                                          size_t max_bytes) const override {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory)
      throw Error(ErrorCode::kIo, "cannot inspect '" + path + "': " + ec.message());
    if (!fs::exists(st)) return std::nullopt;
    if (fs::is_directory(st))
      throw Error(ErrorCode::kIo, "cannot read '" + path + "': it is a directory");
    return ReadFileBounded(path, max_bytes);
  }

  void WriteAtomically(const std::string& path, std::string_view bytes,
                       mode_t mode) const override {
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) CreateDirectories(parent.string());
    WriteFileAtomically(path, bytes, mode);
  }

  std::vector<std::string> List(const std::string& dir) const override {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      std::error_code type_ec;
      if (e.is_regular_file(type_ec)) names.push_back(e.path().filename().string());
    }
    return names;
  }

  bool Exists(const std::string& path) const override {
    std::error_code ec;
    return fs::exists(path, ec);
  }

  void CreateDirectories(const std::string& dir) const override {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error(ErrorCode::kIo, "cannot create directory '" + dir + "': " + ec.message());
  }

  bool Remove(const std::string& path) const override {
    std::error_code ec;
    fs::remove(path, ec);
    return !ec;
  }
};

}  // namespace

std::string FileSystem::Read(const std::string& path, size_t max_bytes, std::string_view what,
                             std::string_view hint) const {
  std::optional<std::string> bytes = ReadIfExists(path, max_bytes);
  if (!bytes)
    throw Error(ErrorCode::kInvalidArgument, "cannot read " + std::string(what) + " '" + path +
                                                 "': no such file" +
                                                 (hint.empty() ? "" : "; " + std::string(hint)));
  return std::move(*bytes);
}

const FileSystem& LocalFileSystem() {
  static const Local local;
  return local;
}

}  // namespace cdt
