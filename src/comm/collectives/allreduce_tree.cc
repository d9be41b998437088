// Pipelined double binary tree allreduce (NCCL's "tree" algorithm; Sanders, Speck & Träff 2009).
//
// Two binary trees over the group, heap-shaped: in tree A the node at heap position q is group
// index q; in tree B it is index p-1-q. Heap leaves are the upper half of positions, so ranks that
// are leaves in A are interior in B and the other way round: every rank does useful work in one
// tree. Tree A reduces and broadcasts the first half of the buffer, tree B the second half,
// concurrently.
//
// Each half is cut into segments (ctx.segment_bytes) and processed in windows of kWindow segments,
// one Exchange per window and phase:
//   reduce:    receive segment j from each child into a landing slot of its own and add it into
//              ours in child order, each as soon as it and the one before have landed (added in
//              landing order, one call's sum rounded differently from the next whenever the two
//              children raced), counting down gate[j]; send segment j to the parent once gate[j]
//              reaches 0.
//   broadcast: receive segment j from the parent (gate[j]); forward it to each child once received.
// Inside a window, segments flow up (or down) the tree pipelined: segment j+1 leaves the leaves
// while segment j is still climbing. On every connection transfers are listed in (segment, tree)
// order on both ends, which is the byte-stream order TcpMesh requires. Time ≈ windows·(kWindow +
// depth) segment-steps: log(p) latency with pipelined bandwidth.
#include <algorithm>
#include <vector>

#include "comm/collectives/algorithms.h"
#include "comm/collectives/ordered_reduce.h"
#include "comm/reduce.h"

namespace cdt {

namespace {

constexpr size_t kWindow = 8;

struct TreeView {
  size_t first = 0;  // first element of this tree's half
  size_t count = 0;  // elements in this half
  size_t nseg = 0;
  int parent = -1;  // global rank, -1 at the root
  int children[2] = {-1, -1};
  int nchildren = 0;
};

TreeView MakeTree(const Group& g, bool mirrored, size_t first, size_t count, size_t seg_elems) {
  const int p = g.size();
  auto index_of = [&](int pos) { return mirrored ? p - 1 - pos : pos; };
  const int pos = mirrored ? p - 1 - g.me : g.me;
  TreeView t;
  t.first = first;
  t.count = count;
  t.nseg = (count + seg_elems - 1) / seg_elems;
  if (pos > 0) t.parent = g.peer(index_of((pos - 1) / 2));
  for (int c = 0; c < 2; ++c) {
    int child = 2 * pos + 1 + c;
    if (child < p) t.children[t.nchildren++] = g.peer(index_of(child));
  }
  return t;
}

// One pending segment: where children's copies land, where they are reduced, and its gate.
struct SegmentSlot {
  char* target = nullptr;
  DataType dtype;
  ReduceOp op;
  size_t elem = 0;
  int gate = 0;
  OrderedReduce order;  // the children's landing slots, in child order
};

void ReduceChildSegment(void* arg, const Transfer& t) {
  auto* s = static_cast<SegmentSlot*>(arg);
  s->order.Landed(t.data, [&](const char* copy) {
    ReduceInto(s->target, copy, t.bytes / s->elem, s->dtype, s->op);
    --s->gate;
  });
}

void SegmentArrived(void* arg, const Transfer&) { --static_cast<SegmentSlot*>(arg)->gate; }

}  // namespace

void AllreduceTree(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf) {
  if (group.size() == 1 || buf.count == 0) return;
  const size_t elem = buf.elem();
  const size_t seg_elems = std::max<size_t>(1, ctx.segment_bytes / elem);
  const size_t seg_bytes_max = seg_elems * elem;
  const size_t half = buf.count / 2;
  const TreeView trees[2] = {MakeTree(group, false, 0, half, seg_elems),
                             MakeTree(group, true, half, buf.count - half, seg_elems)};
  const size_t nseg = std::max(trees[0].nseg, trees[1].nseg);
  // Scratch: one landing slot per (window position, tree, child).
  char* scratch = static_cast<char*>(ctx.scratch.Get(kWindow * 4 * seg_bytes_max));
  SegmentSlot slots[kWindow][2];
  std::vector<Transfer> x;
  x.reserve(kWindow * 2 * 4);

  auto seg_ptr = [&](const TreeView& t, size_t k) { return buf.at(t.first + k * seg_elems); };
  auto seg_bytes = [&](const TreeView& t, size_t k) {
    return std::min(seg_elems, t.count - k * seg_elems) * elem;
  };

  for (int phase = 0; phase < 2; ++phase) {  // 0 = reduce up, 1 = broadcast down
    for (size_t w0 = 0; w0 < nseg; w0 += kWindow) {
      x.clear();
      for (size_t j = 0; j < kWindow && w0 + j < nseg; ++j) {
        const size_t k = w0 + j;
        for (int ti = 0; ti < 2; ++ti) {
          const TreeView& t = trees[ti];
          if (k >= t.nseg) continue;
          SegmentSlot& slot = slots[j][ti];
          // Field by field: the slot's OrderedReduce keeps its storage from window to window.
          slot.target = seg_ptr(t, k);
          slot.dtype = buf.dtype;
          slot.op = buf.op;
          slot.elem = elem;
          slot.gate = 0;
          if (phase == 0) {
            slot.gate = t.nchildren;
            slot.order.Reset(scratch + (j * 2 + ti) * 2 * seg_bytes_max, seg_bytes_max,
                             t.nchildren);
            for (int c = 0; c < t.nchildren; ++c) {
              char* landing = scratch + ((j * 2 + ti) * 2 + c) * seg_bytes_max;
              Transfer r = Transfer::Recv(t.children[c], landing, seg_bytes(t, k));
              r.on_complete = &ReduceChildSegment;
              r.arg = &slot;
              x.push_back(r);
            }
            if (t.parent >= 0) {
              Transfer s = Transfer::Send(t.parent, seg_ptr(t, k), seg_bytes(t, k));
              s.gate = &slot.gate;
              x.push_back(s);
            }
          } else {
            if (t.parent >= 0) {
              slot.gate = 1;
              Transfer r = Transfer::Recv(t.parent, seg_ptr(t, k), seg_bytes(t, k));
              r.on_complete = &SegmentArrived;
              r.arg = &slot;
              x.push_back(r);
            }
            for (int c = 0; c < t.nchildren; ++c) {
              Transfer s = Transfer::Send(t.children[c], seg_ptr(t, k), seg_bytes(t, k));
              s.gate = &slot.gate;
              x.push_back(s);
            }
          }
        }
      }
      Run(ctx, x);
    }
  }
}

}  // namespace cdt
