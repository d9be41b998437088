// Data-parallel training in a program of your own, against the installed library only
// (find_package): logistic regression on a synthetic dataset every rank draws alike (a fixed
// seed), each rank taking every world-th sample. Each step a rank computes its shard's gradient,
// the ranks average it with one allreduce, and every rank applies the same SGD step, so the
// parameters stay the same bits everywhere — which the program checks at the end with an
// allreduce of MIN and one of MAX, beside the loss before and after and the accuracy.
// Run it under `cann-dist-train launch` (or any launcher that sets torchrun's variables and
// CDT_STORE_ENDPOINT); it exits 1 if the loss did not fall or a rank's parameters differ.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cdt/error.h"
#include "cdt/tcp_communicator.h"
#include "cdt/tcp_store.h"
#include "launched_rank.h"

namespace {

constexpr int kFeatures = 16;
constexpr int kSamples = 4096;
constexpr int kSteps = 150;
constexpr double kLearningRate = 0.5;

struct Shard {
  std::vector<double> x;  // rows of kFeatures
  std::vector<double> y;  // 0 or 1
};

// The whole dataset from one seed (labels from a hidden hyperplane, 5% flipped); this rank keeps
// samples rank, rank + world, ...
Shard MakeShard(int rank, int world) {
  std::mt19937_64 gen(42);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> hidden(kFeatures);
  for (double& w : hidden) w = normal(gen);
  Shard s;
  for (int i = 0; i < kSamples; ++i) {
    std::vector<double> row(kFeatures);
    double dot = 0;
    for (int f = 0; f < kFeatures; ++f) {
      row[static_cast<size_t>(f)] = normal(gen);
      dot += row[static_cast<size_t>(f)] * hidden[static_cast<size_t>(f)];
    }
    const bool flip = uniform(gen) < 0.05;
    if (i % world != rank) continue;
    s.x.insert(s.x.end(), row.begin(), row.end());
    s.y.push_back((dot > 0) != flip ? 1.0 : 0.0);
  }
  return s;
}

// Over this rank's shard: gradient of the summed log loss into grad[0..kFeatures] (the last entry
// is the bias), and {summed loss, samples, correct} into stats.
void Gradient(const Shard& s, const std::vector<double>& w, std::vector<double>* grad,
              double stats[3]) {
  grad->assign(kFeatures + 1, 0.0);
  stats[0] = stats[1] = stats[2] = 0;
  for (size_t i = 0; i < s.y.size(); ++i) {
    double z = w[kFeatures];
    for (int f = 0; f < kFeatures; ++f) z += w[static_cast<size_t>(f)] * s.x[i * kFeatures + f];
    const double p = 1.0 / (1.0 + std::exp(-z));
    const double err = p - s.y[i];
    for (int f = 0; f < kFeatures; ++f)
      (*grad)[static_cast<size_t>(f)] += err * s.x[i * kFeatures + f];
    (*grad)[kFeatures] += err;
    stats[0] -= s.y[i] * std::log(p + 1e-12) + (1 - s.y[i]) * std::log(1 - p + 1e-12);
    stats[1] += 1;
    stats[2] += ((p > 0.5) == (s.y[i] > 0.5)) ? 1 : 0;
  }
}

}  // namespace

int main() {
  try {
    const launched::Rank joined = launched::Join("train_ranks", "train-example");
    const cdt::CommunicatorOptions& options = joined.options;
    cdt::Communicator* const comm = joined.comm.get();

    const Shard shard = MakeShard(options.rank, options.size);
    std::vector<double> w(kFeatures + 1, 0.0), grad;
    double first[3] = {0, 0, 0}, last[3] = {0, 0, 0};
    for (int step = 0; step <= kSteps; ++step) {
      double stats[3];
      Gradient(shard, w, &grad, stats);
      // One allreduce for the gradient and the loss statistics together.
      grad.insert(grad.end(), stats, stats + 3);
      comm->Allreduce(grad.data(), grad.size(), cdt::DataType::kFloat64, cdt::ReduceOp::kSum)
          ->Wait();
      const double samples = grad[kFeatures + 2];
      double* global = &grad[kFeatures + 1];
      if (step == 0) std::copy(global, global + 3, first);
      std::copy(global, global + 3, last);
      if (step == kSteps) break;  // the last pass only measures
      for (int f = 0; f <= kFeatures; ++f)
        w[static_cast<size_t>(f)] -= kLearningRate * grad[static_cast<size_t>(f)] / samples;
    }
    std::vector<double> lo = w, hi = w;
    comm->Allreduce(lo.data(), lo.size(), cdt::DataType::kFloat64, cdt::ReduceOp::kMin)->Wait();
    comm->Allreduce(hi.data(), hi.size(), cdt::DataType::kFloat64, cdt::ReduceOp::kMax)->Wait();
    const bool identical = lo == w && hi == w;
    const double loss0 = first[0] / first[1], loss1 = last[0] / last[1];
    const double accuracy = last[2] / last[1];
    std::printf("rank %d of %d: %d steps, loss %.4f -> %.4f, accuracy %.3f, parameters %s\n",
                options.rank, options.size, kSteps, loss0, loss1, accuracy,
                identical ? "identical on every rank" : "DIFFER between ranks");
    return identical && loss1 < 0.5 * loss0 && accuracy > 0.85 ? 0 : 1;
  } catch (const cdt::Error& e) {
    std::fprintf(stderr, "train_ranks: %s\n", e.what());
    return 1;
  }
}
