#include "green/planner.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>

#include "cdt/error.h"

#include <cstdio>

namespace cdt::green {
namespace {

constexpr double kEps = 1e-9;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

const WorkerPoint& Base(const JobSpec& job) {
  for (const WorkerPoint& p : job.scaling)
    if (p.workers == job.base_workers) return p;
  throw Error(ErrorCode::kInvalidArgument, "the base worker count " +
                                               std::to_string(job.base_workers) +
                                               " is not in the job's scaling table");
}

void Validate(const JobSpec& job, const std::vector<double>& intensity) {
  if (!(job.work > 0)) throw Error(ErrorCode::kInvalidArgument, "the job has no work to plan");
  if (job.scaling.empty()) throw Error(ErrorCode::kInvalidArgument, "the job has no scaling table");
  for (size_t i = 0; i < job.scaling.size(); ++i) {
    const WorkerPoint& p = job.scaling[i];
    if (p.workers < 1 || !(p.work_per_hour > 0) || p.power_kw < 0 ||
        (i > 0 && p.workers <= job.scaling[i - 1].workers))
      throw Error(ErrorCode::kInvalidArgument,
                  "scaling table entry " + std::to_string(i) +
                      " must have ascending workers, positive throughput and power >= 0");
  }
  if (job.deadline_hours < 1)
    throw Error(ErrorCode::kInvalidArgument, "the deadline must be at least one hour");
  if (static_cast<int>(intensity.size()) < job.deadline_hours)
    throw Error(ErrorCode::kInvalidArgument,
                "the carbon series has " + std::to_string(intensity.size()) +
                    " hours, the deadline needs " + std::to_string(job.deadline_hours));
}

PlanSlot Slot(int hour, double offset, double fraction, const WorkerPoint& p, double gco2) {
  PlanSlot s;
  s.hour = hour;
  s.offset = offset;
  s.fraction = fraction;
  s.workers = p.workers;
  s.work = p.work_per_hour * fraction;
  s.energy_kwh = p.power_kw * fraction;
  s.carbon_kg = s.energy_kwh * gco2 / 1000.0;
  return s;
}

void Finish(Plan* plan, const JobSpec& job, const PlanOptions& o) {
  std::sort(plan->slots.begin(), plan->slots.end(), [](const PlanSlot& a, const PlanSlot& b) {
    return a.hour != b.hour ? a.hour < b.hour : a.offset < b.offset;
  });
  plan->work = plan->energy_kwh = plan->carbon_kg = plan->cost = plan->finish_hours = 0;
  for (const PlanSlot& s : plan->slots) {
    plan->work += s.work;
    plan->energy_kwh += s.energy_kwh;
    plan->carbon_kg += s.carbon_kg;
    if (static_cast<size_t>(s.hour) < o.price_per_kwh.size())
      plan->cost += s.energy_kwh * o.price_per_kwh[static_cast<size_t>(s.hour)];
    plan->finish_hours = std::max(plan->finish_hours, s.hour + s.offset + s.fraction);
  }
  if (plan->feasible && job.carbon_cap_kg > 0 &&
      plan->carbon_kg > job.carbon_cap_kg * (1 + 1e-12)) {
    plan->feasible = false;
    plan->reason = "carbon cap " + Num(job.carbon_cap_kg) + " kg cannot be met: the best " +
                   plan->strategy + " plan needs " + Num(plan->carbon_kg) + " kg";
  }
}

Plan Agnostic(const JobSpec& job, const std::vector<double>& I) {
  const WorkerPoint& b = Base(job);
  Plan plan;
  plan.strategy = "agnostic";
  double left = job.work;
  for (int h = 0; left > kEps; ++h) {
    if (h >= static_cast<int>(I.size()))
      throw Error(ErrorCode::kInvalidArgument,
                  "the carbon series ends before the carbon-agnostic run does (" +
                      std::to_string(I.size()) + " hours); give a longer one");
    const double f = std::min(1.0, left / b.work_per_hour);
    plan.slots.push_back(Slot(h, 0, f, b, I[static_cast<size_t>(h)]));
    left -= b.work_per_hour * f;
  }
  if (plan.slots.size() > static_cast<size_t>(job.deadline_hours) ||
      (!plan.slots.empty() &&
       plan.slots.back().hour + plan.slots.back().fraction > job.deadline_hours + kEps)) {
    plan.feasible = false;
    plan.reason = "running without pause from the start needs " + Num(job.work / b.work_per_hour) +
                  " h on " + std::to_string(b.workers) + " worker(s); the deadline is " +
                  std::to_string(job.deadline_hours) + " h";
  }
  return plan;
}

// suspend-resume with a known restart cost r (JobSpec::restart_work, in base hours): the job's
// first stretch is the caller's; each further stretch adds r to the work, and an hour that joins
// two stretches saves one. Cleanest hours first, whole, while more than an hour is left; the last
// partial goes next to a stretch, or alone into a cleaner hour when that emits less restart
// included (taken whole, and on, when the partial and its restart do not fit in it).
void PlaceWithRestarts(const JobSpec& job, const std::vector<double>& I,
                       const std::vector<int>& order, double* left, Plan* plan) {
  const WorkerPoint& b = Base(job);
  const int n = job.deadline_hours;
  const double r = job.restart_work / b.work_per_hour;
  std::vector<bool> chosen(static_cast<size_t>(n), false);
  auto is = [&](int h) { return h >= 0 && h < n && chosen[static_cast<size_t>(h)]; };
  auto take = [&](int h, double offset, double f) {
    plan->slots.push_back(Slot(h, offset, f, b, I[static_cast<size_t>(h)]));
    chosen[static_cast<size_t>(h)] = true;
  };
  // Work an hour adds when taken whole: a new stretch costs a restart; joining two saves one.
  auto gain = [&](int h) {
    if (plan->slots.empty()) return 1.0;
    const int neighbours = (is(h - 1) ? 1 : 0) + (is(h + 1) ? 1 : 0);
    return neighbours == 0 ? 1 - r : neighbours == 2 ? 1 + r : 1.0;
  };
  // The share of hour h the remaining work needs there (a new stretch carries its restart).
  auto need = [&](int h) { return *left + (gain(h) < 1 ? r : 0); };
  auto finish_in = [&](int h) {
    const bool at_end = !plan->slots.empty() && !is(h - 1) && is(h + 1);
    const double f = need(h);
    take(h, at_end ? 1 - f : 0, f);
    *left = 0;
  };
  while (*left > kEps) {
    int alone = -1, next_to = -1;
    for (int h : order) {
      if (is(h)) continue;
      if (alone < 0) alone = h;
      if (next_to < 0 && !plan->slots.empty() && (is(h - 1) || is(h + 1))) next_to = h;
    }
    if (alone < 0) return;  // no hour left before the deadline
    const bool fits = need(alone) <= 1;
    if (*left < 1 && next_to >= 0 && next_to != alone) {
      // The cleanest free hour starts a stretch of its own; the partial could join one instead.
      const double a = I[static_cast<size_t>(alone)], j = I[static_cast<size_t>(next_to)];
      if (!(fits ? need(alone) * a < *left * j : r < 1 && a / (1 - r) < j)) return finish_in(next_to);
    }
    if (fits) return finish_in(alone);
    const double g = gain(alone);
    if (!(g > 0)) return;  // a restart of an hour or more: a stretch of its own adds no work
    take(alone, 0, 1);
    *left -= g;
  }
}

// suspend-resume's cleanest hours first; with `contiguous_partial` the partial hour goes next to
// a running stretch (each costs a restart when the cost is unknown), not the cheapest anywhere.
void PlaceCheapestFirst(const JobSpec& job, const std::vector<double>& I,
                        const std::vector<int>& order, bool contiguous_partial, double* left,
                        Plan* plan) {
  const WorkerPoint& b = Base(job);
  std::vector<bool> chosen(order.size(), false);
  for (int h : order) {
    if (*left <= kEps) break;
    const double f = std::min(1.0, *left);
    if (f < 1.0 && contiguous_partial) break;
    plan->slots.push_back(Slot(h, 0, f, b, I[static_cast<size_t>(h)]));
    chosen[static_cast<size_t>(h)] = true;
    *left -= f;
  }
  if (*left > kEps && *left < 1.0 && contiguous_partial) {
    // The cheapest free hour next to a chosen one; the partial runs against that neighbour.
    const int n = job.deadline_hours;
    int best = -1;
    for (int h : order) {
      if (chosen[static_cast<size_t>(h)]) continue;
      const bool after = h > 0 && chosen[static_cast<size_t>(h) - 1];
      const bool before = h + 1 < n && chosen[static_cast<size_t>(h) + 1];
      if (after || before || plan->slots.empty()) {
        best = h;
        break;
      }
    }
    if (best >= 0) {
      const bool before_only = !(best > 0 && chosen[static_cast<size_t>(best) - 1]) &&
                               best + 1 < n && chosen[static_cast<size_t>(best) + 1];
      plan->slots.push_back(
          Slot(best, before_only ? 1 - *left : 0, *left, b, I[static_cast<size_t>(best)]));
      *left = 0;
    }
  }
}

Plan SuspendResume(const JobSpec& job, const std::vector<double>& I, bool contiguous_partial) {
  const WorkerPoint& b = Base(job);
  Plan plan;
  plan.strategy = "suspend-resume";
  const double hours = job.work / b.work_per_hour;
  std::vector<int> order(static_cast<size_t>(job.deadline_hours));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int c) {
    return I[static_cast<size_t>(a)] < I[static_cast<size_t>(c)];
  });
  double left = hours;
  if (contiguous_partial && job.restart_work >= 0)
    PlaceWithRestarts(job, I, order, &left, &plan);
  else
    PlaceCheapestFirst(job, I, order, contiguous_partial, &left, &plan);
  if (left > kEps) {
    plan.feasible = false;
    plan.reason = "the job needs " + Num(hours) + " h on " + std::to_string(b.workers) +
                  " worker(s); the deadline is " + std::to_string(job.deadline_hours) +
                  " h (best: " + Num(100 * (hours - left) / hours) + "% of the work by then)";
  }
  return plan;
}

// Marginal greedy over (hour, next increment) by `score`; each hour's increments in order.
template <typename Score>
Plan Greedy(const JobSpec& job, const std::vector<double>& I, const char* name, Score score) {
  const std::vector<WorkerPoint>& c = job.scaling;
  struct Inc {
    double score;
    int hour, level;
    bool operator>(const Inc& o) const {
      return score != o.score ? score > o.score
                              : (hour != o.hour ? hour > o.hour : level > o.level);
    }
  };
  auto delta = [&](int k) {
    const double dw = c[static_cast<size_t>(k)].work_per_hour -
                      (k > 0 ? c[static_cast<size_t>(k) - 1].work_per_hour : 0);
    const double dp =
        c[static_cast<size_t>(k)].power_kw - (k > 0 ? c[static_cast<size_t>(k) - 1].power_kw : 0);
    return std::make_pair(dw, dp);
  };
  std::priority_queue<Inc, std::vector<Inc>, std::greater<Inc>> q;
  for (int h = 0; h < job.deadline_hours; ++h) {
    auto [dw, dp] = delta(0);
    q.push({score(h, dw, dp), h, 0});
  }
  std::vector<int> level(static_cast<size_t>(job.deadline_hours), 0);
  std::vector<double> partial(static_cast<size_t>(job.deadline_hours), 0);
  double left = job.work;
  while (left > kEps && !q.empty()) {
    Inc inc = q.top();
    q.pop();
    auto [dw, dp] = delta(inc.level);
    if (dw <= 0) continue;  // an increment that adds no work is never worth its power
    if (dw <= left) {
      left -= dw;
      level[static_cast<size_t>(inc.hour)] = inc.level + 1;
      if (inc.level + 1 < static_cast<int>(c.size())) {
        auto [nw, np] = delta(inc.level + 1);
        q.push({score(inc.hour, nw, np), inc.hour, inc.level + 1});
      }
    } else {
      partial[static_cast<size_t>(inc.hour)] = left / dw;
      left = 0;
    }
  }
  Plan plan;
  plan.strategy = name;
  for (int h = 0; h < job.deadline_hours; ++h) {
    const int L = level[static_cast<size_t>(h)];
    const double f = partial[static_cast<size_t>(h)];
    const double g = I[static_cast<size_t>(h)];
    if (L == 0 && f > 0) plan.slots.push_back(Slot(h, 0, f, c[0], g));
    if (L > 0 && f > 0) {
      plan.slots.push_back(Slot(h, 0, f, c[static_cast<size_t>(L)], g));
      plan.slots.push_back(Slot(h, f, 1 - f, c[static_cast<size_t>(L) - 1], g));
    }
    if (L > 0 && f == 0) plan.slots.push_back(Slot(h, 0, 1, c[static_cast<size_t>(L) - 1], g));
  }
  if (left > kEps) {
    plan.feasible = false;
    plan.reason = "even " + std::to_string(c.back().workers) + " worker(s) in every hour do only " +
                  Num(100 * (job.work - left) / job.work) + "% of the work by the " +
                  std::to_string(job.deadline_hours) + " h deadline";
  }
  return plan;
}

}  // namespace

Strategy ParseStrategy(const std::string& name) {
  if (name == "agnostic") return Strategy::kAgnostic;
  if (name == "suspend-resume") return Strategy::kSuspendResume;
  if (name == "elastic") return Strategy::kElastic;
  if (name == "weighted") return Strategy::kWeighted;
  throw Error(
      ErrorCode::kInvalidArgument,
      "--strategy must be agnostic, suspend-resume, elastic or weighted, not '" + name + "'");
}

const char* StrategyName(Strategy s) {
  switch (s) {
    case Strategy::kAgnostic:
      return "agnostic";
    case Strategy::kSuspendResume:
      return "suspend-resume";
    case Strategy::kElastic:
      return "elastic";
    case Strategy::kWeighted:
      return "weighted";
  }
  return "?";
}

std::vector<WorkerPoint> ScalingCurve(int min_w, int max_w, int base, double base_work,
                                      double base_kw, double e) {
  if (min_w < 1 || max_w < min_w || base < min_w || base > max_w)
    throw Error(ErrorCode::kInvalidArgument,
                "worker range " + std::to_string(min_w) + ".." + std::to_string(max_w) +
                    " must be >= 1 and hold the base count " + std::to_string(base));
  if (!(e > 0 && e <= 1))
    throw Error(ErrorCode::kInvalidArgument, "scaling efficiency must be in (0, 1]");
  const double exponent = 1 + std::log2(e);
  const double unit = base_work / std::pow(base, exponent);
  std::vector<WorkerPoint> out;
  for (int w = min_w; w <= max_w; ++w)
    out.push_back({w, unit * std::pow(w, exponent), base_kw * w / base});
  return out;
}

Plan MakePlan(Strategy strategy, const JobSpec& job, const std::vector<double>& I,
              const PlanOptions& o) {
  Validate(job, I);
  Plan plan;
  switch (strategy) {
    case Strategy::kAgnostic:
      plan = Agnostic(job, I);
      break;
    case Strategy::kSuspendResume:
      plan = SuspendResume(job, I, o.contiguous_partial);
      break;
    case Strategy::kElastic: {
      plan = Greedy(job, I, "elastic", [&](int h, double dw, double dp) {
        return dp * I[static_cast<size_t>(h)] / dw;
      });
      Plan sr = SuspendResume(job, I, o.contiguous_partial);
      Finish(&sr, job, o);
      Finish(&plan, job, o);
      if (sr.feasible && (!plan.feasible || sr.carbon_kg < plan.carbon_kg)) {
        plan = sr;
        plan.strategy = "elastic";
        plan.note = "the base worker count in the cleanest hours beat every scaled plan";
      }
      break;
    }
    case Strategy::kWeighted: {
      const WorkerPoint& b = Base(job);
      const double base_epw = b.power_kw / b.work_per_hour;
      double mean_i = 0, mean_p = 0;
      for (int h = 0; h < job.deadline_hours; ++h)
        mean_i += I[static_cast<size_t>(h)] / job.deadline_hours;
      const bool priced = o.price_per_kwh.size() >= static_cast<size_t>(job.deadline_hours);
      for (int h = 0; priced && h < job.deadline_hours; ++h)
        mean_p += o.price_per_kwh[static_cast<size_t>(h)] / job.deadline_hours;
      const PlanWeights w = o.weights;
      plan = Greedy(job, I, "weighted", [&](int h, double dw, double dp) {
        const double epw = dp / dw / std::max(1e-12, base_epw);
        const double carbon = mean_i > 0 ? I[static_cast<size_t>(h)] / mean_i : 1;
        const double price =
            priced && mean_p > 0 ? o.price_per_kwh[static_cast<size_t>(h)] / mean_p : 1;
        return w.efficiency * epw + w.carbon * epw * carbon + w.cost * epw * price;
      });
      break;
    }
  }
  Finish(&plan, job, o);
  return plan;
}

Plan Reprice(const Plan& plan, const JobSpec& job, const std::vector<double>& I) {
  Plan out = plan;
  out.carbon_kg = 0;
  for (PlanSlot& s : out.slots) {
    if (static_cast<size_t>(s.hour) >= I.size())
      throw Error(ErrorCode::kInvalidArgument, "the carbon series is shorter than the plan");
    s.carbon_kg = s.energy_kwh * I[static_cast<size_t>(s.hour)] / 1000.0;
    out.carbon_kg += s.carbon_kg;
  }
  return out;
}

std::vector<Stretch> Stretches(const Plan& plan) {
  std::vector<Stretch> out;
  for (const PlanSlot& s : plan.slots) {
    const double a = s.hour + s.offset;
    if (!out.empty() && out.back().workers == s.workers &&
        std::abs(out.back().start_h + out.back().hours - a) < 1e-9) {
      out.back().hours += s.fraction;
      out.back().carbon_kg += s.carbon_kg;
      out.back().energy_kwh += s.energy_kwh;
    } else {
      out.push_back({a, s.fraction, s.workers, s.carbon_kg, s.energy_kwh});
    }
  }
  return out;
}

}  // namespace cdt::green
