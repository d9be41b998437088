#include "cdt/allreduce_rules.h"

#include <fstream>
#include <sstream>

#include "cdt/error.h"
#include "common/file_system.h"
#include "common/printable.h"
#include "common/units.h"

namespace cdt {

namespace {

std::optional<int> ParseCount(const std::string& word, const std::string& where) {
  if (word == "*") return std::nullopt;
  try {
    size_t used = 0;
    int v = std::stoi(word, &used);
    if (used == word.size() && v >= 1) return v;
  } catch (const std::exception&) {
  }
  throw Error(ErrorCode::kInvalidArgument,
              where + ": '" + Printable(word) + "' is not a count >= 1 or '*'");
}

}  // namespace

AllreduceRules AllreduceRules::Parse(const std::string& text, const std::string& source) {
  AllreduceRules out;
  out.source_ = source;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    for (char& c : line)
      if (c == ',' || c == '\t' || c == '\r') c = ' ';
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.empty()) continue;
    const std::string where = source + ":" + std::to_string(number);
    if (w[0] != "allreduce")
      throw Error(ErrorCode::kInvalidArgument, where + ": unknown collective '" + Printable(w[0]) +
                                                   "' (only 'allreduce' rules exist)");
    if (w.size() < 4 || w.size() > 6)
      throw Error(ErrorCode::kInvalidArgument,
                  where +
                      ": expected 'allreduce MIN_BYTES MAX_BYTES ALGORITHM [NODES] [RANKS]', got " +
                      std::to_string(w.size()) + " fields");
    AllreduceRule r;
    r.line = number;
    try {
      r.min_bytes = w[1] == "*" ? 0 : ParseBytes(w[1], where + " min_bytes");
      if (w[2] != "*") r.max_bytes = ParseBytes(w[2], where + " max_bytes");
      r.algorithm = ParseAllreduceAlgorithm(w[3]);
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidArgument, where + ": " + e.what());
    }
    if (r.algorithm == AllreduceAlgorithm::kAuto)
      throw Error(ErrorCode::kInvalidArgument,
                  where + ": 'auto' is what happens without a rule; name an algorithm");
    if (r.max_bytes && *r.max_bytes <= r.min_bytes)
      throw Error(ErrorCode::kInvalidArgument,
                  where + ": max_bytes must be greater than min_bytes (the range is [min, max))");
    if (w.size() > 4) r.nodes = ParseCount(w[4], where + " nodes");
    if (w.size() > 5) r.ranks = ParseCount(w[5], where + " ranks");
    out.rules_.push_back(r);
  }
  return out;
}

AllreduceRules AllreduceRules::Load(const std::string& path) {
  return Parse(LocalFileSystem().Read(path, kMaxTextFileBytes, "allreduce rules file",
                                      "fix CDT_ALLREDUCE_RULES"),
               path);
}

std::optional<AllreduceAlgorithm> AllreduceRules::Match(size_t bytes, int nodes,
                                                        int world_size) const {
  for (const AllreduceRule& r : rules_) {
    if (bytes < r.min_bytes || (r.max_bytes && bytes >= *r.max_bytes)) continue;
    if (r.nodes && *r.nodes != nodes) continue;
    if (r.ranks && *r.ranks != world_size) continue;
    return r.algorithm;
  }
  return std::nullopt;
}

}  // namespace cdt
