#include "train/timeline.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>

#include "cdt/error.h"
#include "common/file_system.h"

namespace cdt::train {

void Timeline::Start(int64_t first_step) {
  t0_ = Clock::now();
  first_ = first_step;
  SetStep(first_step);
}

void Timeline::Span(Lane lane, const std::string& name, Clock::time_point start,
                    Clock::time_point end, Args args) {
  if (!recording_ || end < start || start < t0_) return;
  auto us = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  };
  events_.push_back({lane, name, std::move(args), us(start - t0_), us(end - start)});
}

std::string Timeline::Events(int rank) const {
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"ph", "M"},
                 {"pid", rank},
                 {"name", "process_name"},
                 {"args", {{"name", "rank " + std::to_string(rank)}}}});
  out.push_back({{"ph", "M"},
                 {"pid", rank},
                 {"name", "process_sort_index"},
                 {"args", {{"sort_index", rank}}}});
  const char* lanes[] = {"training thread", "bulk channel", "priority channel"};
  for (int lane = 0; lane < 3; ++lane)
    out.push_back({{"ph", "M"},
                   {"pid", rank},
                   {"tid", lane},
                   {"name", "thread_name"},
                   {"args", {{"name", lanes[lane]}}}});
  for (const Event& e : events_) {
    nlohmann::json args = nlohmann::json::object();
    for (const auto& [key, value] : e.args) args[key] = value;
    out.push_back({{"ph", "X"},
                   {"pid", rank},
                   {"tid", static_cast<int>(e.lane)},
                   {"name", e.name},
                   {"ts", e.start_us},
                   {"dur", e.dur_us},
                   {"args", args}});
  }
  return out.dump();
}

void WriteTimeline(Communicator& comm, const Timeline& timeline, const std::string& path) {
  const std::string mine = timeline.Events(comm.rank());
  const auto W = static_cast<size_t>(comm.size());
  std::vector<int64_t> sizes(W, 0);
  sizes[static_cast<size_t>(comm.rank())] = static_cast<int64_t>(mine.size());
  comm.Allreduce(sizes.data(), W, DataType::kInt64, ReduceOp::kSum)->Wait();
  // Bytes travel as int8 elements: an allgather moves them without arithmetic.
  std::vector<size_t> counts(sizes.begin(), sizes.end());
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::string all(total, '\0');
  comm.Allgatherv(mine.data(), all.data(), counts, DataType::kInt8)->Wait();
  if (comm.rank() != 0) return;
  nlohmann::json events = nlohmann::json::array();
  size_t at = 0;
  for (size_t c : counts) {
    for (auto& e : nlohmann::json::parse(all.substr(at, c))) events.push_back(std::move(e));
    at += c;
  }
  const nlohmann::json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  LocalFileSystem().WriteAtomically(path, trace.dump(), 0644);
}

}  // namespace cdt::train
