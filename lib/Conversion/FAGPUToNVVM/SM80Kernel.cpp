//===- FAToSM80.cpp - FlashAttention-2 on mma.sync tensor cores -----------===//
//
// Builds the forward kernel of FlashAttention-2 for sm_80 and later from a
// tiled fa.attention. The kernel is written directly in the LLVM and NVVM
// dialects (plus scf/arith/math for the loop and the softmax arithmetic), so
// every hardware step is an op that prints: cp.async fills the shared-memory
// ring, ldmatrix reads the swizzled tiles into mma fragments, mma.sync does
// both matrix products, shfl.sync reduces across the quad of threads that
// shares a row.
//
// Fragment layouts of mma.sync.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16x16, row): a0 = A[g][2t..2t+1]   a1 = A[g+8][2t..]
//                   a2 = A[g][2t+8..]     a3 = A[g+8][2t+8..]
//   B (16x8, col):  b0 = B[2t..2t+1][g]   b1 = B[2t+8..][g]
//   C (16x8, f32):  c0, c1 = C[g][2t], C[g][2t+1]; c2, c3 = row g+8
// Two adjacent C tiles of S (keys 16k..16k+15) hold exactly the elements of
// one A tile of P, so P never leaves registers.
//
//===----------------------------------------------------------------------===//

#include "KernelLowerings.h"
#include "fa/Dialect/FAGPU/IR/SharedMemory.h"
#include "fa/Dialect/FAGPU/IR/TileRange.h"
#include "../Common/Launch.h"
#include "../Common/OnlineSoftmax.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fa;

namespace {

constexpr int64_t kWarps = 4;
constexpr int64_t kThreads = kWarps * 32;
constexpr int64_t kStages = 2;

/// What the generated kernel is specialised for (the mask and FA4 choices
/// in the SoftmaxConfig base).
struct KernelSpec : SoftmaxConfig {
  int64_t headDim = 0;
  int64_t blockR = 0; // 64 or 128: 16 or 32 rows per warp
  int64_t blockC = 0; // 32 or 64 keys per K/V block
  bool bf16 = false;
  bool queryInRegisters = true;
  /// The kernel's parameters, in launch order.
  SmallVector<fagpu::KernelParam> abi;

  int64_t rowTiles() const { return blockR / (16 * kWarps); }
  /// Keeping Q costs rowTiles * D / 16 * 4 registers per thread for the
  /// whole loop. With two row tiles (O alone is 2 * D / 2 registers) more
  /// than 32 spill, so Q is re-read from shared memory in every block
  /// instead; with one row tile up to 64 fit (D = 256).
  bool keepsQueryInRegisters() const {
    int64_t qRegisters = rowTiles() * headDim / 16 * 4;
    return queryInRegisters && qRegisters <= (rowTiles() == 1 ? 64 : 32);
  }
  int64_t chunksPerRow() const { return headDim / 8; } // 16-byte chunks
  int64_t rowBytes() const { return headDim * 2; }
  int64_t qBytes() const { return blockR * rowBytes(); }
  int64_t kvTileBytes() const { return blockC * rowBytes(); }
  int64_t sharedBytes() const {
    return qBytes() + kStages * 2 * kvTileBytes();
  }
  int64_t threads() const { return kThreads; }
  std::string kernelName() const {
    return "fa2_sm80_d" + std::to_string(headDim) + "_br" +
           std::to_string(blockR) + "_bc" + std::to_string(blockC) + (bf16 ? "_bf16" : "_f16") +
           (causal ? "_causal" : "") + suffix();
  }
};

/// Emits the kernel body. Values named like the math: `s` scores, `p`
/// probabilities, `o` accumulator, `m` running max, `l` running sum.
class KernelBuilder : public SoftmaxEmitter {
public:
  KernelBuilder(OpBuilder &b, Location loc, const KernelSpec &spec)
      : SoftmaxEmitter(b, loc, spec.bf16, spec), spec(spec) {}

  LLVM::LLVMFuncOp build(gpu::GPUModuleOp module);

private:
  // Memory.
  Value sharedAt(Value byteOffset) {
    return gep(sharedPtr, b.getI8Type(), smemBase, byteOffset);
  }
  /// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile:
  /// the chunk index is XORed with row mod 8, so the 8 rows an ldmatrix
  /// reads at one logical column fall in 8 different bank groups.
  Value swizzled(Value row, Value chunk) {
    Value phys =
        arith::XOrIOp::create(b, loc, chunk, arith::AndIOp::create(b, loc, row, c32(7)));
    return add(mul(row, c32(spec.rowBytes())), mul(phys, c32(16)));
  }

  /// Issues cp.async copies of rows [rowStart, rowStart + rows) of a
  /// [N, D] matrix into a swizzled shared tile; rows at or past `n` are
  /// zero-filled (source size 0) and read from a valid address.
  void copyTile(Value globalBase, Value rowStart, Value n, Value tileOffset,
                int64_t rows);
  /// ldmatrix.x4 (optionally .trans) at a shared byte offset.
  std::array<Value, 4> ldmatrix4(Value byteOffset, bool transpose);
  /// mma.sync.m16n8k16 D = A B + C.
  std::array<Value, 4> mma(ArrayRef<Value> a, ArrayRef<Value> bFrag,
                           ArrayRef<Value> c);
  /// Loads the A fragments of this warp's Q rows for all D / 16 k-steps.
  SmallVector<std::array<Value, 4>> loadQueryFragments(int64_t rowTile);
  std::array<Value, 4> loadQueryFragment(int64_t rowTile, int64_t k);
  /// One K/V block: wait for its tiles, prefetch the next, S = Q K^T,
  /// (mask,) online softmax, O = alpha O + P V. Returns the new state.
  SmallVector<Value>
  emitBlock(Value j, ValueRange state, bool masked, Value numBlocks,
            Value qStart, Value nk, Value kBase, Value vBase, Value scaleLog2,
            ArrayRef<SmallVector<std::array<Value, 4>>> qFrags, bool keepQ);

  const KernelSpec &spec;
  Value smemBase, tid, lane, warp, g, t;
  Value diagonalShift; // bottom-right masks: Nk - Nq
  // Per-thread parts of the ldmatrix addresses, computed once. In a
  // swizzled tile the physical chunk of logical chunk C + c (C even and
  // known at compile time, c in {0, 1} per thread) is
  //   (C & ~7) + (((C & 7) + c) ^ (row & 7)),
  // and row & 7 = lane & 7 for every ldmatrix row this kernel reads, so
  // only 4 per-thread chunk offsets exist per pattern; the rest of each
  // address is a compile-time constant the backend folds into the load.
  SmallVector<Value> chunkLo; // c = (lane / 8) % 2, for C & 7 = 0, 2, 4, 6
  SmallVector<Value> chunkHi; // c = (lane / 8) / 2
  Value keyRowBytes;   // K: rows (lane / 8) / 2 * 8 + lane % 8
  Value valueRowBytes; // V and Q: rows (lane / 8) % 2 * 8 + lane % 8
  Value queryRowBytes; // plus the warp's first query row

  /// Byte offset of logical chunk `chunk` (even) + the thread's part.
  Value chunkOffset(ArrayRef<Value> table, int64_t chunk) {
    return add(table[(chunk & 7) / 2], c32((chunk & ~int64_t(7)) * 16));
  }
};

void KernelBuilder::copyTile(Value globalBase, Value rowStart, Value n,
                             Value tileOffset, int64_t rows) {
  int64_t chunks = rows * spec.chunksPerRow();
  for (int64_t it = 0; it < chunks / kThreads; ++it) {
    Value idx = add(tid, c32(it * kThreads));
    Value row = divu(idx, c32(spec.chunksPerRow()));
    Value chunk = remu(idx, c32(spec.chunksPerRow()));
    Value globalRow = add(rowStart, row);
    Value inBounds = ult(globalRow, n);
    // Rows past the end read nothing (source size 0) from row 0, which
    // always exists.
    Value srcRow = select(inBounds, globalRow, c32(0));
    Value elem = add(mul(ext64(srcRow), c64(spec.headDim)),
                     ext64(mul(chunk, c32(8))));
    Value src = gep(globalPtr, half, globalBase, elem);
    Value dst = sharedAt(add(tileOffset, swizzled(row, chunk)));
    Value size = select(inBounds, c32(16), c32(0));
    NVVM::CpAsyncOp::create(
        b, loc, dst, src, b.getI32IntegerAttr(16),
        NVVM::LoadCacheModifierKindAttr::get(b.getContext(),
                                             NVVM::LoadCacheModifierKind::CG),
        size);
  }
}

std::array<Value, 4> KernelBuilder::ldmatrix4(Value byteOffset,
                                              bool transpose) {
  MLIRContext *ctx = b.getContext();
  auto resultType = LLVM::LLVMStructType::getLiteral(ctx, {i32, i32, i32, i32});
  auto op = NVVM::LdMatrixOp::create(
      b, loc, resultType, sharedAt(byteOffset), b.getI32IntegerAttr(4),
      NVVM::MMALayoutAttr::get(ctx, transpose ? NVVM::MMALayout::col
                                              : NVVM::MMALayout::row),
      NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8),
      NVVM::LdStMatrixEltTypeAttr::get(ctx, NVVM::LdStMatrixEltType::B16));
  std::array<Value, 4> r;
  for (int64_t i = 0; i < 4; ++i)
    r[i] = LLVM::ExtractValueOp::create(b, loc, op, ArrayRef<int64_t>{i});
  return r;
}

std::array<Value, 4> KernelBuilder::mma(ArrayRef<Value> a,
                                        ArrayRef<Value> bFrag,
                                        ArrayRef<Value> c) {
  MLIRContext *ctx = b.getContext();
  auto resultType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  // f16 operands are typed as pairs of halves; bf16 ones as packed i32.
  auto operand = [&](Value v) -> Value {
    return spec.bf16 ? v : LLVM::BitcastOp::create(b, loc, halfPair, v);
  };
  SmallVector<Value> aOps, bOps;
  for (Value v : a)
    aOps.push_back(operand(v));
  for (Value v : bFrag)
    bOps.push_back(operand(v));
  NVVM::MMATypes type = spec.bf16 ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  auto op = NVVM::MmaOp::create(
      b, loc, resultType, aOps, bOps, c, ArrayRef<int64_t>{16, 8, 16},
      std::nullopt, std::nullopt,
      std::array<NVVM::MMATypes, 2>{type, type},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  std::array<Value, 4> r;
  for (int64_t i = 0; i < 4; ++i)
    r[i] = LLVM::ExtractValueOp::create(b, loc, op, ArrayRef<int64_t>{i});
  return r;
}

std::array<Value, 4> KernelBuilder::loadQueryFragment(int64_t rowTile,
                                                      int64_t k) {
  // Matrices of one x4 load: rows 0-7 / 8-15 of the tile's 16 rows, chunks
  // 2k / 2k+1: exactly a0, a1, a2, a3.
  Value offset = add(add(queryRowBytes, chunkOffset(chunkHi, 2 * k)),
                     c32(16 * rowTile * spec.rowBytes()));
  return ldmatrix4(offset, /*transpose=*/false);
}

SmallVector<std::array<Value, 4>>
KernelBuilder::loadQueryFragments(int64_t rowTile) {
  SmallVector<std::array<Value, 4>> frags;
  for (int64_t k = 0; k < spec.headDim / 16; ++k)
    frags.push_back(loadQueryFragment(rowTile, k));
  return frags;
}

LLVM::LLVMFuncOp KernelBuilder::build(gpu::GPUModuleOp module) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());

  // Dynamic shared memory: `extern __shared__ char fa_smem[]`.
  auto smemType = LLVM::LLVMArrayType::get(b.getI8Type(), 0);
  LLVM::GlobalOp smem;
  if (!(smem = module.lookupSymbol<LLVM::GlobalOp>("fa_smem")))
    smem = LLVM::GlobalOp::create(b, loc, smemType, /*isConstant=*/false,
                                  LLVM::Linkage::External, "fa_smem",
                                  Attribute(), /*alignment=*/16,
                                  /*addrSpace=*/3);

  LLVM::LLVMFuncOp fn = declareKernel(b, loc, module, spec.kernelName(),
                                      kThreads, /*ctasPerSM=*/1, spec.abi);
  auto arg = [&](StringRef name) {
    return kernelArgument(fn, spec.abi, name);
  };
  Value qPtr = arg("q"), kPtr = arg("k"), vPtr = arg("v"), oPtr = arg("o"),
        lsePtr = arg("lse"), nq = arg("Nq"), nk = arg("Nk"), hq = arg("Hq"),
        hkv = arg("Hkv"), scaleLog2 = arg("scale_log2");

  smemBase = LLVM::AddressOfOp::create(b, loc, smem);
  tid = NVVM::ThreadIdXOp::create(b, loc, i32);
  Value qBlock = NVVM::BlockIdXOp::create(b, loc, i32);
  Value head = NVVM::BlockIdYOp::create(b, loc, i32);
  Value batch = NVVM::BlockIdZOp::create(b, loc, i32);
  warp = divu(tid, c32(32));
  lane = remu(tid, c32(32));
  g = divu(lane, c32(4));
  t = remu(lane, c32(4));
  {
    Value mi = divu(lane, c32(8));
    Value miLo = remu(mi, c32(2)), miHi = divu(mi, c32(2));
    Value row7 = remu(lane, c32(8));
    for (int64_t j = 0; j < 8; j += 2) {
      chunkLo.push_back(mul(
          arith::XOrIOp::create(b, loc, add(c32(j), miLo), row7), c32(16)));
      chunkHi.push_back(mul(
          arith::XOrIOp::create(b, loc, add(c32(j), miHi), row7), c32(16)));
    }
    keyRowBytes =
        mul(add(mul(miHi, c32(8)), row7), c32(spec.rowBytes()));
    valueRowBytes =
        mul(add(mul(miLo, c32(8)), row7), c32(spec.rowBytes()));
    queryRowBytes = add(valueRowBytes,
                        mul(warp, c32(16 * spec.rowTiles() * spec.rowBytes())));
  }

  Value kvHead = divu(head, divu(hq, hkv));
  Value qStart = mul(qBlock, c32(spec.blockR));
  auto matrixBase = [&](Value ptr, Value h, Value heads, Value n) {
    Value rows = mul(ext64(add(mul(batch, heads), h)), ext64(n));
    return gep(globalPtr, half, ptr, mul(rows, c64(spec.headDim)));
  };
  Value qBase = matrixBase(qPtr, head, hq, nq);
  Value kBase = matrixBase(kPtr, kvHead, hkv, nk);
  Value vBase = matrixBase(vPtr, kvHead, hkv, nk);
  Value oBase = matrixBase(oPtr, head, hq, nq);
  Value lseBase = gep(globalPtr, f32, lsePtr,
                      mul(ext64(add(mul(batch, hq), head)), ext64(nq)));

  // Shared memory: Q tile, then kStages x (K tile, V tile).
  auto kOffset = [&](Value stage) {
    return add(c32(spec.qBytes()), mul(stage, c32(2 * spec.kvTileBytes())));
  };
  auto vOffset = [&](Value stage) {
    return add(kOffset(stage), c32(spec.kvTileBytes()));
  };

  // The K/V blocks visited (fagpu::kvBlockRange: causal stops at the block
  // holding the last query row's diagonal, a window bounds both sides;
  // bottom-right masks move the diagonal by Nk - Nq).
  diagonalShift = spec.bottomRight ? sub(nk, nq) : Value();
  IRArithmetic ir{b, loc};
  fagpu::KVRange<IRArithmetic> range =
      fagpu::kvBlockRange(ir, qStart, nq, nk, spec.blockR, spec.blockC,
                          spec.causal, spec.window, spec.bottomRight);
  Value firstBlock = range.first, numBlocks = range.end;

  // Prologue: Q and the first K/V block in flight.
  copyTile(qBase, qStart, nq, c32(0), spec.blockR);
  {
    Value stage0 = arith::AndIOp::create(b, loc, firstBlock, c32(1));
    Value kStart0 = mul(firstBlock, c32(spec.blockC));
    copyTile(kBase, kStart0, nk, kOffset(stage0), spec.blockC);
    copyTile(vBase, kStart0, nk, vOffset(stage0), spec.blockC);
  }
  NVVM::CpAsyncCommitGroupOp::create(b, loc);

  bool keepQ = spec.keepsQueryInRegisters();
  int64_t rowTiles = spec.rowTiles();
  int64_t dTiles = spec.headDim / 8; // n8 tiles of O

  // Loop-carried state per row tile: O fragments (dTiles x 4), m and l for
  // rows g and g + 8.
  SmallVector<Value> init;
  Value negInf = cf(-std::numeric_limits<double>::infinity());
  for (int64_t r = 0; r < rowTiles; ++r) {
    for (int64_t i = 0; i < dTiles * 4; ++i)
      init.push_back(cf(0.0));
    init.append({negInf, negInf, cf(0.0), cf(0.0)});
  }
  int64_t stateSize = dTiles * 4 + 4;

  // Q fragments held in registers across the loop (D <= 128), loaded once
  // the prologue's copies have landed.
  SmallVector<SmallVector<std::array<Value, 4>>> qFrags;
  if (keepQ) {
    NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
    NVVM::Barrier0Op::create(b, loc);
    for (int64_t r = 0; r < rowTiles; ++r)
      qFrags.push_back(loadQueryFragments(r));
  }
  // Blocks that no mask touches (full, and for causal wholly below the
  // diagonal of the CTA's first row) run without the compare-and-select;
  // the rest (the ragged last block, the diagonal, every windowed block)
  // run masked. Computed here, after the prologue: computed before it, the
  // bound stayed live across the Q loads and cost D = 256 causal 8% (H200).
  Value unmaskedEnd = fagpu::unmaskedBlocksEnd(
      ir, range, qStart, nq, nk, spec.blockC, spec.causal, spec.window,
      spec.bottomRight);

  auto emitLoop = [&](Value begin, Value end, ValueRange initState,
                      bool masked) -> ValueRange {
    auto loop = scf::ForOp::create(b, loc, begin, end, c32(1), initState);
    loop->setAttr("fa.kv_loop", b.getStringAttr(masked ? "masked"
                                                        : "unmasked"));
    OpBuilder::InsertionGuard loopGuard(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> yields = emitBlock(
        loop.getInductionVar(), loop.getRegionIterArgs(), masked, numBlocks,
        qStart, nk, kBase, vBase, scaleLog2, qFrags, keepQ);
    scf::YieldOp::create(b, loc, yields);
    return loop.getResults();
  };
  ValueRange afterUnmasked = emitLoop(firstBlock, unmaskedEnd, init, false);
  ValueRange finalState =
      emitLoop(unmaskedEnd, numBlocks, afterUnmasked, true);

  // Epilogue: O / l and LSE.
  for (int64_t r = 0; r < rowTiles; ++r) {
    ValueRange state = finalState.slice(r * stateSize, stateSize);
    Value row0 = add(add(qStart, mul(warp, c32(16 * rowTiles))),
                     add(c32(16 * r), g));
    storeRows(SmallVector<Value>(state.take_front(dTiles * 4)),
              {state[dTiles * 4], state[dTiles * 4 + 1]},
              {state[dTiles * 4 + 2], state[dTiles * 4 + 3]}, row0, nq, oBase,
              lseBase, spec.headDim, t);
  }
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  return fn;
}

SmallVector<Value> KernelBuilder::emitBlock(
    Value j, ValueRange state, bool masked, Value numBlocks, Value qStart,
    Value nk, Value kBase, Value vBase, Value scaleLog2,
    ArrayRef<SmallVector<std::array<Value, 4>>> qFrags, bool keepQ) {
  int64_t rowTiles = spec.rowTiles();
  int64_t dTiles = spec.headDim / 8;  // n8 tiles of O
  int64_t sTiles = spec.blockC / 8;   // n8 tiles of S
  int64_t stateSize = dTiles * 4 + 4; // O, m (2 rows), l (2 rows)
  auto kOffset = [&](Value stage) {
    return add(c32(spec.qBytes()), mul(stage, c32(2 * spec.kvTileBytes())));
  };
  auto vOffset = [&](Value stage) {
    return add(kOffset(stage), c32(spec.kvTileBytes()));
  };

  Value stage = arith::AndIOp::create(b, loc, j, c32(1));
  // Tile j has landed; every warp is done with the stage about to be
  // overwritten.
  NVVM::CpAsyncWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0));
  NVVM::Barrier0Op::create(b, loc);
  {
    // Prefetch block j + 1 into the other stage while computing block j.
    Value next = add(j, c32(1));
    auto ifOp = scf::IfOp::create(b, loc, ult(next, numBlocks),
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value nextStage = arith::XOrIOp::create(b, loc, stage, c32(1));
    Value kStartNext = mul(next, c32(spec.blockC));
    copyTile(kBase, kStartNext, nk, kOffset(nextStage), spec.blockC);
    copyTile(vBase, kStartNext, nk, vOffset(nextStage), spec.blockC);
  }
  NVVM::CpAsyncCommitGroupOp::create(b, loc);

  Value kStart = mul(j, c32(spec.blockC));
  Value kRowBase = add(kOffset(stage), keyRowBytes);
  Value vRowBase = add(vOffset(stage), valueRowBytes);

  // S = Q K^T for every row tile of the warp: each K fragment pair read by
  // one x4 ldmatrix feeds all row tiles (shared-memory reads per MMA halve
  // with two row tiles).
  SmallVector<SmallVector<std::array<Value, 4>>> s(
      rowTiles, SmallVector<std::array<Value, 4>>(sTiles));
  for (int64_t r = 0; r < rowTiles; ++r)
    for (int64_t n = 0; n < sTiles; ++n)
      s[r][n] = {cf(0.0), cf(0.0), cf(0.0), cf(0.0)};
  for (int64_t k = 0; k < spec.headDim / 16; ++k) {
    SmallVector<std::array<Value, 4>> qf;
    for (int64_t r = 0; r < rowTiles; ++r)
      qf.push_back(keepQ ? qFrags[r][k] : loadQueryFragment(r, k));
    for (int64_t n = 0; n < sTiles; n += 2) {
      // Matrices: keys n*8.. / (n+1)*8.. at d-chunks 2k, 2k+1.
      Value offset = add(add(kRowBase, chunkOffset(chunkLo, 2 * k)),
                         c32(n * 8 * spec.rowBytes()));
      std::array<Value, 4> kf = ldmatrix4(offset, false);
      for (int64_t r = 0; r < rowTiles; ++r) {
        s[r][n] = mma(qf[r], {kf[0], kf[1]}, s[r][n]);
        s[r][n + 1] = mma(qf[r], {kf[2], kf[3]}, s[r][n + 1]);
      }
    }
  }

  // Scores of row tile r as the flat register list 4 n + e.
  SmallVector<SmallVector<Value>> flat(rowTiles);
  for (int64_t r = 0; r < rowTiles; ++r)
    for (int64_t n = 0; n < sTiles; ++n)
      flat[r].append(s[r][n].begin(), s[r][n].end());
  SmallVector<Value> all;
  for (int64_t r = 0; r < rowTiles; ++r)
    all.append(flat[r]);
  Value effScale = applySoftcap(all, scaleLog2);
  for (int64_t r = 0; r < rowTiles; ++r)
    std::copy_n(all.begin() + r * sTiles * 4, sTiles * 4, flat[r].begin());

  SmallVector<Value> newState(state.begin(), state.end());
  SmallVector<std::array<Value, 4>> pf; // [r * (Bc/16) + k]
  SmallVector<std::array<Value, 2>> alphaOf(rowTiles);
  Value moved; // conditional rescaling: some row of this thread moved
  for (int64_t r = 0; r < rowTiles; ++r) {
    ValueRange st = state.slice(r * stateSize, stateSize);
    if (masked) {
      Value row0 = add(add(mul(warp, c32(16 * rowTiles)), c32(16 * r)), g);
      applyMask(flat[r], kStart, add(qStart, row0), nk, t, diagonalShift);
    }
    std::array<Value, 2> m = {st[dTiles * 4], st[dTiles * 4 + 1]};
    std::array<Value, 2> l = {st[dTiles * 4 + 2], st[dTiles * 4 + 3]};
    SoftmaxStep step = onlineSoftmax(flat[r], m, l, effScale, moved);
    alphaOf[r] = step.alpha;
    moved = step.moved;
    for (int64_t h = 0; h < 2; ++h) {
      newState[r * stateSize + dTiles * 4 + h] = m[h];
      newState[r * stateSize + dTiles * 4 + 2 + h] = l[h];
    }
    if (spec.rescaleThreshold < 0) {
      for (int64_t d = 0; d < dTiles; ++d)
        for (int64_t e = 0; e < 4; ++e)
          newState[r * stateSize + d * 4 + e] =
              fmul(st[d * 4 + e], alphaOf[r][e / 2]);
    }
    SmallVector<Value> frags = packProbabilities(flat[r]);
    for (size_t k = 0; k < frags.size(); k += 4)
      pf.push_back({frags[k], frags[k + 1], frags[k + 2], frags[k + 3]});
  }

  if (spec.rescaleThreshold >= 0) {
    // Rescale O only if some row of the warp moved its base: a warp-uniform
    // branch (vote.any), skipped in most blocks after the first few.
    Value anyMoved = NVVM::VoteSyncOp::create(
        b, loc, b.getI1Type(), c32(-1), moved,
        NVVM::VoteSyncKindAttr::get(b.getContext(), NVVM::VoteSyncKind::any));
    SmallVector<Type> types;
    SmallVector<Value> current;
    for (int64_t r = 0; r < rowTiles; ++r)
      for (int64_t i = 0; i < dTiles * 4; ++i) {
        types.push_back(f32);
        current.push_back(state[r * stateSize + i]);
      }
    auto ifOp = scf::IfOp::create(b, loc, types, anyMoved,
                                  /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      SmallVector<Value> scaled;
      for (int64_t r = 0; r < rowTiles; ++r)
        for (int64_t i = 0; i < dTiles * 4; ++i)
          scaled.push_back(
              fmul(current[r * dTiles * 4 + i], alphaOf[r][(i % 4) / 2]));
      scf::YieldOp::create(b, loc, scaled);
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, loc, current);
    }
    for (int64_t r = 0; r < rowTiles; ++r)
      for (int64_t i = 0; i < dTiles * 4; ++i)
        newState[r * stateSize + i] = ifOp.getResult(r * dTiles * 4 + i);
  }

  // O += P V: each V fragment pair (one x4 ldmatrix.trans) feeds all row
  // tiles.
  for (int64_t k = 0; k < spec.blockC / 16; ++k)
    for (int64_t d = 0; d < dTiles; d += 2) {
      Value offset = add(add(vRowBase, chunkOffset(chunkHi, d)),
                         c32(16 * k * spec.rowBytes()));
      std::array<Value, 4> vf = ldmatrix4(offset, true);
      for (int64_t r = 0; r < rowTiles; ++r) {
        int64_t o0 = r * stateSize + d * 4, o1 = o0 + 4;
        const std::array<Value, 4> &p = pf[r * (spec.blockC / 16) + k];
        std::array<Value, 4> acc0 =
            mma(p, {vf[0], vf[1]}, ArrayRef<Value>(newState).slice(o0, 4));
        std::array<Value, 4> acc1 =
            mma(p, {vf[2], vf[3]}, ArrayRef<Value>(newState).slice(o1, 4));
        for (int64_t e = 0; e < 4; ++e) {
          newState[o0 + e] = acc0[e];
          newState[o1 + e] = acc1[e];
        }
      }
    }
  return newState;
}

/// The kernel `op`'s schedule describes, or a diagnostic naming what the
/// mma.sync kernel cannot do.
FailureOr<KernelSpec> specOf(fagpu::AttentionOp op) {
  SpecReader<KernelSpec> reader{op, "sm_80 mma.sync"};
  if (failed(reader.begin()))
    return failure();
  auto fail = [&](const Twine &why) { return reader.fail(why); };
  KernelSpec &spec = reader.spec;
  fagpu::ScheduleAttr s = op.getSchedule();
  if (s.getBlockR() != 64 && s.getBlockR() != 128)
    return fail("block_r must be 64 or 128, got " + Twine(s.getBlockR()));
  if (s.getBlockC() != 32 && s.getBlockC() != 64)
    return fail("block_c must be 32 or 64, got " + Twine(s.getBlockC()));
  if (s.getStages() != kStages)
    return fail("the cp.async ring has " + Twine(kStages) + " stages, got " +
                Twine(s.getStages()));
  spec.headDim = op.getHeadDim();
  spec.blockR = s.getBlockR();
  spec.blockC = s.getBlockC();
  spec.bf16 = op.isBF16();
  spec.queryInRegisters = s.getQInRegisters();
  spec.abi = fagpu::kernelParams(fagpu::Target::sm_80, fagpu::fieldsOf(s),
                                 spec.bf16 ? "bf16" : "f16");
  if (spec.sharedBytes() > fagpu::maxSharedBytes())
    return fail("the tiles need " + Twine(spec.sharedBytes()) +
                " bytes of shared memory, more than " +
                Twine(fagpu::maxSharedBytes() / 1024) + " KiB");
  return spec;
}

/// fagpu.attention -> gpu.launch_func of the kernel on the buffers' aligned
/// pointers, with the grid (ceil(Nq / B_r), Hq, B) and the dynamic shared
/// memory of the schedule.
void replaceWithLaunch(fagpu::AttentionOp op, LLVM::LLVMFuncOp kernel,
                       const KernelSpec &spec) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto globalPtr = LLVM::LLVMPointerType::get(b.getContext(), 1);
  LaunchOperands operands(b, loc, op);
  SmallVector<Value> args =
      launchArguments(spec.abi, [&](const fagpu::KernelParam &p) -> Value {
        if (p.kind == fagpu::ParamKind::Pointer)
          return operands.pointer(p.name, globalPtr);
        if (p.kind == fagpu::ParamKind::F32)
          return operands.scaleLog2;
        return operands.i32(p.name);
      });
  Value brC = arith::ConstantIndexOp::create(b, loc, spec.blockR);
  Value gridX =
      b.createOrFold<arith::CeilDivUIOp>(loc, operands.size("Nq"), brC);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value threads = arith::ConstantIndexOp::create(b, loc, kThreads);
  Value smemBytes =
      arith::ConstantIntOp::create(b, loc, spec.sharedBytes(), 32);
  auto kernelSym = SymbolRefAttr::get(
      b.getStringAttr("fa_kernels"),
      {FlatSymbolRefAttr::get(kernel.getSymNameAttr())});
  gpu::LaunchFuncOp::create(b, loc, kernelSym,
                            gpu::KernelDim3{gridX, operands.size("Hq"),
                                            operands.size("B")},
                            gpu::KernelDim3{threads, one, one}, smemBytes,
                            args, /*asyncObject=*/Value());
  op.erase();
}

} // namespace

LogicalResult mlir::fa::lowerSM80Kernels(ModuleOp module) {
  auto build = [](OpBuilder &b, Location loc, const KernelSpec &spec,
                  gpu::GPUModuleOp kernels) {
    return KernelBuilder(b, loc, spec).build(kernels);
  };
  return lowerEachKernel<KernelSpec>(module, fagpu::Target::sm_80, specOf,
                                     build, replaceWithLaunch);
}
