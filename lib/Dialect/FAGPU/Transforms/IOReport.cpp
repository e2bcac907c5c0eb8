//===- IOReport.cpp - global-memory traffic of the attention kernels ------===//
//
// Prints, per static-shape attention, the traffic
// mlir::fa::model::kernelTraffic (Traffic.h) counts for the kernel its schedule
// describes.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FAGPU/Transforms/Passes.h"

#include "fa/Dialect/FAGPU/IR/Heuristics.h"
#include "fa/Model/Traffic.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::fagpu {
#define GEN_PASS_DEF_FAGPUIOREPORT
#include "fa/Dialect/FAGPU/Transforms/Passes.h.inc"
} // namespace mlir::fagpu

using namespace mlir;
using namespace mlir::fagpu;
using namespace mlir::fa::model;

namespace {

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
    // The bytes a KV cache's kernel reads depend on the lengths and pages
    // at run time.
    if (op.getKvLengths() || op.getBlockTable())
      return op.emitOpError()
             << "fagpu-io-report: a KV cache's traffic (per-sequence lengths, "
                "pages) is not modelled yet";
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
    TrafficKernel kernel;
    kernel.blockR = br;
    kernel.blockC = bc;
    kernel.headDim = d;
    kernel.valueHeadDim = dv;
    kernel.elementBytes = elt;
    kernel.outputBytes =
        op.getOut().getType().getElementTypeBitWidth() / 8;
    kernel.causal = causal;
    kernel.bottomRight = op.getBottomRight();
    kernel.window = window;
    kernel.diagonalOffset = op.getDiagonalOffset().value_or(0);
    kernel.wholeBoxes = op.getTarget() != Target::sm_80;
    kernel.dynamicScheduler = s.getScheduler() == TileScheduler::Dynamic;
    kernel.staticPersistent = s.getScheduler() == TileScheduler::Static;
    kernel.writesLse = bool(op.getLse());
    kernel.kvSplits = s.getKvSplits();
    kernel.queryGroup = s.getQueryGroup();
    if (std::optional<std::string> why =
            checkTrafficShape(kernel, {b, hq, hkv, nq, nk}))
      return op.emitOpError("fagpu-io-report: ") << *why;
    Traffic total = kernelTraffic(kernel, {b, hq, hkv, nq, nk});
    int64_t tiles = total.tilesPerHead, blocksVisited =
                                            total.blocksVisitedPerHead;
    int64_t scheduler = total.scheduler;
    int64_t fa2Model = total.fa2Model;

    os << "fagpu-io-report: " << op.getLoc() << "\n";
    os << "  kernel: target=" << targetName(op.getTarget()) << " B_r=" << br
       << " B_c=" << bc << (causal ? " causal" : "") << " window=" << window;
    if (kernel.diagonalOffset)
      os << " diagonal_offset=" << kernel.diagonalOffset;
    if (kernel.kvSplits)
      os << " kv_splits=" << kernel.kvSplits;
    os << "\n";
    os << "  shape: B=" << b << " Hq=" << hq << " Hkv=" << hkv
       << " Nq=" << nq << " Nk=" << nk << " D=" << d << " Dv=" << dv
       << " element_bytes=" << elt << "\n";
    os << "  query tiles per head: " << tiles
       << ", K/V blocks visited per head: " << blocksVisited << "\n";
    os << "  l2_to_sm_read_bytes: " << total.reads() << " (q "
       << total.q << ", k " << total.k << ", v " << total.v
       << ", tile counter " << scheduler;
    if (kernel.kvSplits)
      os << ", merge " << total.mergeReads << ", arrivals " << total.arrivals;
    os << ")\n";
    // O as payload, the LSE in whole sectors (Traffic::writes).
    os << "  sm_to_l2_write_bytes: " << total.writes() << " (o "
       << total.o << ", lse " << total.lse << ", tile counter " << scheduler;
    if (kernel.kvSplits)
      os << ", partials " << total.partialWrites << ", arrivals "
         << total.arrivals;
    os << ")\n";
    os << "  fa2_model_read_bytes: " << fa2Model
       << " (Q + (K + V) * T_r, every block of every tile)\n";

    MachineDefaults defaults = machineDefaults(op.getTarget());
    TrafficMachine machine{sms > 0 ? int64_t(sms) : defaults.sms,
                           s.getCtasPerSm(),
                           l2Bytes > 0 ? int64_t(l2Bytes) : defaults.l2Bytes};
    if (codeBytes < 0)
      return op.emitOpError("fagpu-io-report: code-bytes must not be "
                            "negative");
    kernel.codeBytes = codeBytes;
    if (machine.sms <= 0 || machine.l2Bytes <= 0)
      return op.emitOpError("fagpu-io-report: sms and l2-bytes must be "
                            "positive");
    DramTraffic dram =
        dramTraffic(kernel, {b, hq, hkv, nq, nk}, machine);
    if (!dram.modelled) {
      os << "  dram model: not replayed: " << dram.workItems
         << " work items reading up to " << (nk + bc - 1) / bc
         << " K/V blocks each are past the replay's "
         << kMaxReplayedBlockReads << " block reads\n";
      return success();
    }
    os << "  dram model: " << machine.sms << " SMs x " << machine.ctasPerSM
       << " CTAs = " << dram.residentCTAs << " of " << dram.workItems
       << " work items at a time"
       << (kernel.staticPersistent
               ? " (CTA r takes items r, r + " +
                     std::to_string(dram.residentCTAs) + ", ...)"
               : " (the next item to the CTA that frees)")
       << ", LRU over " << dram.capacity << " of the L2's "
       << machine.l2Bytes << " bytes; K/V distinct " << dram.kvOnce
       << ", from DRAM " << dram.kv << " over " << dram.blockReads
       << " block reads\n";
    os << "  dram_read_bytes: " << dram.reads << " (q " << dram.q
       << ", k+v " << dram.kv << ", split-KV partials " << dram.partials
       << ", code " << dram.code
       << (dram.code ? "" : ": not given, see code-bytes") << ")\n";
    os << "  dram_write_bytes: " << dram.writes << " (o and lse, split-KV "
       << "partials " << dram.partials << ")\n";
    return success();
  }
};

} // namespace
