// Writing files that a crash, a neighbour or a planted link cannot spoil (common/file_io.h).
#include "common/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "cdt/error.h"
#include "common/file_system.h"

namespace cdt {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string FreshDir(const std::string& name) {
  std::string dir =
      fs::temp_directory_path() / ("cdt-file-io-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(FileIo, AtomicWriteReplacesALinkInsteadOfFollowingIt) {
  const std::string dir = FreshDir("link");
  const std::string victim = dir + "/victim", path = dir + "/report.json";
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, path);
  WriteFileAtomically(path, "{}", 0600);
  EXPECT_EQ(Slurp(victim), "precious");  // the link's target is untouched
  EXPECT_FALSE(fs::is_symlink(path));
  EXPECT_EQ(Slurp(path), "{}");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  fs::remove_all(dir);
}

TEST(FileIo, ConcurrentWritersNeverShareATemporaryAndLeaveNoneBehind) {
  const std::string dir = FreshDir("writers");
  const std::string path = dir + "/state";
  std::vector<std::thread> writers;
  for (int w = 0; w < 8; ++w)
    writers.emplace_back([&, w] {
      for (int i = 0; i < 50; ++i) WriteFileAtomically(path, std::string(1000, 'a' + w));
    });
  for (auto& t : writers) t.join();
  const std::string text = Slurp(path);
  ASSERT_EQ(text.size(), 1000u);
  EXPECT_EQ(text, std::string(1000, text[0]));  // one writer's whole file, never a mix
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST(FileIo, PrivateDirectoryAndFileRefuseWhatOthersCouldHavePrepared) {
  const std::string dir = FreshDir("private");
  const std::string mine = dir + "/mine";
  EnsurePrivateDirectory(mine);  // created 0700
  struct stat st {};
  ASSERT_EQ(::stat(mine.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EnsurePrivateDirectory(mine);  // and accepted again

  const std::string open_dir = dir + "/open";
  fs::create_directory(open_dir);
  ::chmod(open_dir.c_str(), 0777);
  EXPECT_THROW(EnsurePrivateDirectory(open_dir), Error);
  const std::string linked_dir = dir + "/linked";
  fs::create_directory_symlink(mine, linked_dir);
  EXPECT_THROW(EnsurePrivateDirectory(linked_dir), Error);

  const std::string job = mine + "/cdt.job";
  CheckPrivateFile(job);  // missing: fine
  std::ofstream(job) << "planted";
  ::chmod(job.c_str(), 0666);
  try {
    CheckPrivateFile(job);
    FAIL() << "a world-writable job file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(job), std::string::npos) << e.what();
  }
  fs::remove(job);
  fs::create_symlink(dir + "/elsewhere", job);
  EXPECT_THROW(CheckPrivateFile(job), Error);
  fs::remove(job);
  WriteFileAtomically(job, "ours", 0600);
  CheckPrivateFile(job);
  fs::remove_all(dir);
}

// A writer starting up clears what a crash left — temporaries of dead processes of this host —
// and never a live writer's.
TEST(FileIo, OnlyTheTemporariesOfDeadWritersAreCleared) {
  const std::string dir = FreshDir("stale");
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::string name = host;
  for (char& c : name)
    if (c == '.' || c == '/') c = '_';
  const pid_t dead = [] {
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    ::waitpid(child, nullptr, 0);
    return child;
  }();
  const std::string live_tmp =
      dir + "/ckpt-1.cdtc.tmp." + name + "." + std::to_string(::getpid()) + ".0";
  const std::string dead_tmp = dir + "/ckpt-2.cdtc.tmp." + name + "." + std::to_string(dead) + ".0";
  const std::string other_host = dir + "/ckpt-3.cdtc.tmp.elsewhere." + std::to_string(dead) + ".0";
  for (const auto& f : {live_tmp, dead_tmp, other_host}) std::ofstream(f) << "partial";
  EXPECT_EQ(RemoveStaleTemporaries(dir, "ckpt-"), 1u);
  EXPECT_TRUE(fs::exists(live_tmp));
  EXPECT_FALSE(fs::exists(dead_tmp));
  EXPECT_TRUE(fs::exists(other_host));
  fs::remove_all(dir);
}

TEST(FileIo, BoundedReadRefusesAnOversizedFileBeforeReadingIt) {
  const std::string dir = FreshDir("read");
  const std::string path = dir + "/big";
  std::ofstream(path) << std::string(5000, 'x');
  EXPECT_EQ(ReadFileBounded(path, 5000).size(), 5000u);
  try {
    ReadFileBounded(path, 4999);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_THROW(ReadFileBounded(dir + "/missing", 10), Error);
  fs::remove_all(dir);
}

// LocalFileSystem: every reader behaves the same way — missing is "not there", anything else an
// error naming the file and the reason.
TEST(LocalFileSystem, MissingIsNotThereAndEverythingElseNamesTheFile) {
  const FileSystem& files = LocalFileSystem();
  const std::string dir = fs::temp_directory_path() / ("cdt-lfs-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  EXPECT_EQ(files.ReadIfExists(dir + "/nothing", 100), std::nullopt);
  EXPECT_EQ(files.ReadIfExists(dir + "/no/such/dir/file", 100), std::nullopt);
  EXPECT_TRUE(files.List(dir).empty());
  files.WriteAtomically(dir + "/sub/a.json", "{}", 0600);  // creates the directories
  EXPECT_EQ(files.ReadIfExists(dir + "/sub/a.json", 100), "{}");
  EXPECT_EQ(files.List(dir + "/sub"), std::vector<std::string>{"a.json"});
  try {
    files.ReadIfExists(dir + "/sub", 100);
    FAIL() << "a directory was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find(dir + "/sub"), std::string::npos) << e.what();
  }
  try {
    files.ReadIfExists(dir + "/sub/a.json", 1);
    FAIL() << "a file over the bound was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than the 1"), std::string::npos) << e.what();
  }
  try {
    files.Read(dir + "/missing.json", 100, "hardware profiles", "give --profiles");
    FAIL() << "a missing file was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()), "cannot read hardware profiles '" + dir +
                                         "/missing.json': no such file; give --profiles");
  }
  EXPECT_TRUE(files.Remove(dir + "/sub/a.json"));
  EXPECT_FALSE(files.Exists(dir + "/sub/a.json"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cdt
