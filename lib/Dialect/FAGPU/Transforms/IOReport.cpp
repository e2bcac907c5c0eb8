//===- IOReport.cpp - global-memory traffic of the attention kernels ------===//
//
// The seed's IO argument, for the kernels we ship: a query tile reads its
// Q rows once and the K and V rows of every block it visits; nothing else
// crosses from L2 (S and P never leave the SM). So the L2 -> SM bytes are a
// sum over (batch, head, query tile) of Q_i + sum_j (K_j + V_j), which for
// full tiles without a mask is FlashAttention-2's Q + (K + V) T_r.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "fa/Dialect/FAGPU/IR/TileRange.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUIOREPORT
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;

namespace {

struct Traffic {
  int64_t q = 0, k = 0, v = 0, o = 0, lse = 0;
  int64_t reads() const { return q + k + v; }
  int64_t writes() const { return o + lse; }
};

struct IOReportPass : fagpu::impl::FAGPUIOReportBase<IOReportPass> {
  using FAGPUIOReportBase::FAGPUIOReportBase;

  void runOnOperation() override {
    std::string error;
    auto out = openOutputFile(outputFile, &error);
    if (!out) {
      emitError(getOperation().getLoc()) << "fagpu-io-report: " << error;
      return signalPassFailure();
    }
    WalkResult result = getOperation().walk([&](AttentionOp op) {
      if (failed(report(op, out->os())))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    out->keep();
  }

  LogicalResult report(AttentionOp op, raw_ostream &os) {
    MemRefType q = op.getQuery().getType(), k = op.getKey().getType();
    for (MemRefType type : {q, k})
      if (!type.hasStaticShape())
        return op.emitOpError()
               << "fagpu-io-report: needs static shapes to count bytes, got "
               << type;
    int64_t b = q.getDimSize(0), hq = q.getDimSize(1), nq = q.getDimSize(2);
    int64_t hkv = k.getDimSize(1), nk = k.getDimSize(2);
    int64_t d = op.getHeadDim(), dv = op.getValueHeadDim();
    ScheduleAttr s = op.getSchedule();
    int64_t br = s.getBlockR(), bc = s.getBlockC();
    int64_t elt = q.getElementTypeBitWidth() / 8;
    bool causal = op.getCausal();
    int64_t window = op.getWindow().value_or(0);

    // One (batch, query head): every query tile and the blocks it visits.
    // TMA moves whole boxes: a ragged tail's rows past N cross from L2 too
    // (measured on the H200: N = 1000 moves the bytes of N = 1024). The
    // sm_80 kernel's cp.async zero-fills them instead (not measured).
    bool wholeBoxes = op.getTarget() != Target::sm_80;
    Traffic head;
    int64_t tiles = (nq + br - 1) / br, blocksVisited = 0;
    for (int64_t i = 0; i < tiles; ++i) {
      int64_t qStart = i * br;
      int64_t rows = wholeBoxes ? br : std::min(br, nq - qStart);
      head.q += rows * d * elt;
      IntegerArithmetic ints;
      KVRange<IntegerArithmetic> range = kvBlockRange(
          ints, qStart, nq, nk, br, bc, causal, window, op.getBottomRight());
      for (int64_t j = range.first; j < range.end; ++j) {
        int64_t cols = wholeBoxes ? bc : std::min(bc, nk - j * bc);
        head.k += cols * d * elt;
        head.v += cols * dv * elt;
        ++blocksVisited;
      }
    }
    head.o = nq * dv * elt;
    head.lse = op.getLse() ? nq * 4 : 0;
    int64_t heads = b * hq;
    Traffic total{head.q * heads, head.k * heads, head.v * heads,
                  head.o * heads, head.lse * heads};
    // The dynamic tile scheduler: one 32-byte atomic on its counter per
    // tile taken, and one more that resets it (read and written).
    int64_t scheduler = s.getScheduler() == TileScheduler::Dynamic
                            ? (tiles * heads + 1) * 32
                            : 0;
    int64_t fa2Model = heads * (nq * d + (nk * d + nk * dv) * tiles) * elt;

    os << "fagpu-io-report: " << op.getLoc() << "\n";
    os << "  kernel: target=" << targetName(op.getTarget()) << " B_r=" << br
       << " B_c=" << bc << (causal ? " causal" : "") << " window=" << window
       << "\n";
    os << "  shape: B=" << b << " Hq=" << hq << " Hkv=" << hkv
       << " Nq=" << nq << " Nk=" << nk << " D=" << d << " Dv=" << dv
       << " element_bytes=" << elt << "\n";
    os << "  query tiles per head: " << tiles
       << ", K/V blocks visited per head: " << blocksVisited << "\n";
    os << "  l2_to_sm_read_bytes: " << total.reads() + scheduler << " (q "
       << total.q << ", k " << total.k << ", v " << total.v
       << ", tile counter " << scheduler << ")\n";
    // Payload bytes; the register epilogue's 4-byte stores write partial
    // sectors, which the hardware counts whole (D = 64 kernels).
    os << "  sm_to_l2_write_bytes: " << total.writes() + scheduler << " (o "
       << total.o << ", lse " << total.lse << ", tile counter " << scheduler
       << ")\n";
    os << "  fa2_model_read_bytes: " << fa2Model
       << " (Q + (K + V) * T_r, every block of every tile)\n";
    return success();
  }
};

} // namespace
