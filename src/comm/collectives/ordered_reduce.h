// OrderedReduce: adds copies that land in any order (one per peer, each into a landing slot of its
// own) into a target in one fixed order, each as soon as it and every copy before it have landed.
// Float addition is not associative: added in landing order, the tree's and the hierarchical
// allreduce's sums rounded differently from one call to the next whenever two peers raced, so the
// same inputs did not give the same bits (test Allreduce.SameInputsSameBitsEveryCall). In the
// fixed order the first copy is still added while the others stream in whenever it lands first.
#pragma once

#include <cstddef>
#include <vector>

namespace cdt {

class OrderedReduce {
 public:
  // `n` copies of up to `stride` bytes, copy i at first + i * stride, added in order of i.
  void Reset(const char* first, size_t stride, int n) {
    first_ = first;
    stride_ = stride;
    next_ = 0;
    landed_.assign(static_cast<size_t>(n), false);
  }
  // The copy at `data` (one of the slots) has landed: calls add(copy) for each copy whose turn it
  // now is, in order.
  template <typename Add>
  void Landed(const void* data, Add add) {
    const size_t i = stride_ == 0
                         ? next_
                         : static_cast<size_t>(static_cast<const char*>(data) - first_) / stride_;
    landed_.at(i) = true;
    while (next_ < landed_.size() && landed_[next_]) add(first_ + next_++ * stride_);
  }

 private:
  const char* first_ = nullptr;
  size_t stride_ = 0;
  size_t next_ = 0;
  std::vector<bool> landed_;
};

}  // namespace cdt
