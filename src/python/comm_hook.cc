#include "python/comm_hook.h"

#include <c10/util/Exception.h>

#include "compress/registry.h"
#include "python/c10d_communicator.h"

namespace cdt::python {

CompressionHook::CompressionHook(c10::intrusive_ptr<::c10d::ProcessGroup> pg,
                                 compress::Method method, compress::CompressorOptions options)
    : pg_(std::move(pg)),
      method_(method),
      options_(options),
      queue_(std::make_unique<SerialQueue>()) {
  if (auto* cdt = dynamic_cast<ProcessGroupCDT*>(pg_.get())) {
    comm_ = &cdt->communicator();
  } else {
    adapted_ = std::make_unique<C10dCommunicator>(pg_);
    comm_ = adapted_.get();
  }
  // Made once here on a one-element bucket, so that bad options fail at registration, not in the
  // middle of a backward pass.
  compress::MakeCompressor(method_, options_, {{0, 1, 1}});
}

CompressionHook::~CompressionHook() { DrainWithoutGil(queue_); }

compress::Compressor& CompressionHook::CompressorOf(
    int64_t bucket, const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<compress::Compressor>& c = compressors_[bucket];
  if (!c) {
    std::vector<compress::TensorView> views;
    size_t offset = 0;
    for (const auto& [rows, cols] : shapes) {
      views.push_back({offset, static_cast<size_t>(rows), static_cast<size_t>(cols)});
      offset += static_cast<size_t>(rows * cols);
    }
    c = compress::MakeCompressor(method_, options_, views);
    if (auto it = restored_.find(bucket); it != restored_.end()) {
      c->SetState(it->second);
      restored_.erase(it);
    }
  }
  return *c;
}

void CompressionHook::Reduce(int64_t bucket, at::Tensor buffer,
                             const std::vector<std::pair<int64_t, int64_t>>& shapes,
                             std::function<void(std::exception_ptr)> done) {
  TORCH_CHECK(buffer.scalar_type() == at::kFloat && buffer.is_contiguous() &&
                  buffer.device().is_cpu(),
              "cann_dist.hooks.compress: the bucket must be a contiguous float32 CPU tensor "
              "(got ", buffer.scalar_type(), ")");
  int64_t total = 0;
  for (const auto& [rows, cols] : shapes) total += rows * cols;
  TORCH_CHECK(total == buffer.numel(), "cann_dist.hooks.compress: the shapes hold ", total,
              " elements, the bucket ", buffer.numel());
  compress::Compressor& c = CompressorOf(bucket, shapes);
  queue_->Post([this, &c, buffer, done = std::move(done)]() mutable {
    try {
      const size_t n = static_cast<size_t>(buffer.numel());
      local_.resize(n);
      c.Reduce(*comm_, buffer.data_ptr<float>(), local_.data(), n);
      buffer.div_(pg_->getSize());
      done(nullptr);
    } catch (...) {
      done(std::current_exception());
    }
  });
}

std::map<int64_t, std::vector<float>> CompressionHook::State() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int64_t, std::vector<float>> out = restored_;
  for (const auto& [b, c] : compressors_) out[b] = c->GetState();
  return out;
}

std::string CompressionHook::SetState(const std::map<int64_t, std::vector<float>>& state) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string left_out;
  for (const auto& [b, s] : state) {
    auto it = compressors_.find(b);
    if (it == compressors_.end()) {
      restored_[b] = s;  // the bucket's compressor takes it at its first use
      continue;
    }
    const std::string why = it->second->SetState(s);
    if (!why.empty()) left_out += (left_out.empty() ? "" : "; ") + ("bucket " + std::to_string(b) + ": " + why);
  }
  return left_out;
}

}  // namespace cdt::python
