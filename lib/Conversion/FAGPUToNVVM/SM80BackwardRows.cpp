//===- SM80BackwardRows.cpp - the backward's preprocess and dQ conversion -===//
//
// The two kernels a backward launch runs around its main kernel
// (SM80Backward.cpp), in the same cubin, on rows of the query side: a CTA
// of kBackwardRowsThreads threads per (kBackwardRows query rows, query
// head, batch), two threads a row.
//
//  * preprocess: row_dots = rowsum(dO o O) in f32 (the D_i of dS = P o
//    (dP - D_i)), dq_accum = 0, and the block's turn counter = 0 for a
//    deterministic kernel;
//  * convert: dQ = dq_accum in Q's element type (the main kernel has
//    folded the scale in).
//
// Both move 16 bytes a thread a step. The tile level has the same two
// steps as nests (fa-lower-fa2-backward); these are their kernels for the
// runtimes, which launch what the metadata lists.
//
//===----------------------------------------------------------------------===//

#include "KernelLowerings.h"

#include "../Common/Launch.h"
#include "../Common/NVVMEmitter.h"
#include "fa/Dialect/FAGPU/IR/KernelABI.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::fa;

namespace {

constexpr int64_t kRows = fagpu::kBackwardRows;
constexpr int64_t kThreads = fagpu::kBackwardRowsThreads;

class BackwardRowsBuilder : public NVVMEmitter {
public:
  BackwardRowsBuilder(OpBuilder &b, Location loc, int64_t headDim, bool bf16)
      : NVVMEmitter(b, loc, bf16), headDim(headDim) {}

  LLVM::LLVMFuncOp buildPreprocess(gpu::GPUModuleOp module, StringRef name,
                                   bool deterministic);
  LLVM::LLVMFuncOp buildConvert(gpu::GPUModuleOp module, StringRef name);

private:
  /// Declares kernel `name` of `abi` and binds the CTA's rows: `matrix`
  /// (batch * Hq + head), `row0` and Nq.
  LLVM::LLVMFuncOp begin(gpu::GPUModuleOp module, StringRef name,
                         ArrayRef<fagpu::KernelParam> abi) {
    b.setInsertionPointToStart(module.getBody());
    LLVM::LLVMFuncOp fn = declareKernel(b, loc, module, name, kThreads,
                                        /*ctasPerSM=*/1, abi);
    fn->setAttr(fagpu::kGridAttrName, fagpu::backwardRowsGrid(b.getContext()));
    nq = kernelArgument(fn, abi, "Nq");
    Value hq = kernelArgument(fn, abi, "Hq");
    tid = NVVM::ThreadIdXOp::create(b, loc, i32);
    block = NVVM::BlockIdXOp::create(b, loc, i32);
    matrix = add(mul(NVVM::BlockIdZOp::create(b, loc, i32), hq),
                 NVVM::BlockIdYOp::create(b, loc, i32));
    row0 = mul(block, c32(kRows));
    return fn;
  }
  /// Element (row, col) of the CTA's matrix in a [.., Nq, D] tensor of
  /// `elt` at `ptr`.
  Value at(Value ptr, Type elt, Value row, Value col) {
    Value index =
        add(mul(add(mul(ext64(matrix), ext64(nq)), ext64(row)), c64(headDim)),
            ext64(col));
    return gep(globalPtr, elt, ptr, index);
  }
  /// Emits `body(row, col)` for each 4-column f32 chunk of the CTA's rows
  /// below Nq: chunk c = tid + threads i, row c / (D / 4) (a warp covers
  /// whole rows: 512 contiguous bytes at D 128).
  void forEachChunk(llvm::function_ref<void(Value, Value)> body) {
    int64_t perRow = headDim / 4;
    for (int64_t i = 0; i < kRows * perRow / kThreads; ++i) {
      Value chunk = add(tid, c32(kThreads * i));
      Value row = add(row0, divu(chunk, c32(perRow)));
      Value col = mul(remu(chunk, c32(perRow)), c32(4));
      auto ifRow = scf::IfOp::create(b, loc, ult(row, nq),
                                     /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifRow.thenBlock());
      body(row, col);
    }
  }

  int64_t headDim;
  Value tid, block, matrix, row0, nq;
};

LLVM::LLVMFuncOp BackwardRowsBuilder::buildPreprocess(gpu::GPUModuleOp module,
                                                      StringRef name,
                                                      bool deterministic) {
  OpBuilder::InsertionGuard guard(b);
  SmallVector<fagpu::KernelParam> abi = fagpu::backwardPreprocessParams(
      half.isBF16() ? "bf16" : "f16", deterministic);
  LLVM::LLVMFuncOp fn = begin(module, name, abi);
  auto arg = [&](StringRef param) { return kernelArgument(fn, abi, param); };

  // Thread t sums columns [D/2 (t % 2), D/2 (t % 2 + 1)) of row t / 2; the
  // pair adds across lane xor 1. Rows past Nq read row Nq - 1 (every lane
  // takes part in the shuffle) and store nothing.
  Value row = add(row0, divu(tid, c32(2)));
  Value readRow = minu(row, sub(nq, c32(1)));
  Value firstCol = mul(remu(tid, c32(2)), c32(headDim / 2));
  auto vec8 = VectorType::get({8}, half);
  Value sum = cf(0.0);
  for (int64_t step = 0; step < headDim / 2; step += 8) {
    Value col = add(firstCol, c32(step));
    auto load = [&](StringRef param) {
      return LLVM::LoadOp::create(b, loc, vec8,
                                  at(arg(param), half, readRow, col),
                                  /*alignment=*/16);
    };
    Value o = load("o"), dO = load("do");
    for (int64_t e = 0; e < 8; ++e) {
      auto element = [&](Value v) -> Value {
        Value x = LLVM::ExtractElementOp::create(b, loc, v, c32(e));
        return arith::ExtFOp::create(b, loc, f32, x);
      };
      sum = fadd(sum, fmul(element(o), element(dO)));
    }
  }
  sum = fadd(sum, shflXor(sum, 1));
  {
    Value first = eq(remu(tid, c32(2)), c32(0));
    auto ifStore = scf::IfOp::create(
        b, loc, arith::AndIOp::create(b, loc, first, ult(row, nq)),
        /*withElseRegion=*/false);
    OpBuilder::InsertionGuard storeGuard(b);
    b.setInsertionPointToStart(ifStore.thenBlock());
    Value index = add(mul(ext64(matrix), ext64(nq)), ext64(row));
    LLVM::StoreOp::create(b, loc, sum,
                          gep(globalPtr, f32, arg("row_dots"), index), 4);
  }

  // dq_accum = 0 over the CTA's rows.
  auto vec4 = VectorType::get({4}, f32);
  Value zeros = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(vec4, b.getF32FloatAttr(0.0f)));
  Value dqAccum = arg("dq_accum");
  forEachChunk([&](Value r, Value col) {
    LLVM::StoreOp::create(b, loc, zeros, at(dqAccum, f32, r, col), 16);
  });

  if (deterministic) {
    // The main kernel's turn counter of this query block
    // (matrix * ceil(Nq / 64) + block).
    Value blocks = divu(add(nq, c32(kRows - 1)), c32(kRows));
    Value index = add(mul(ext64(matrix), ext64(blocks)), ext64(block));
    auto ifFirst = scf::IfOp::create(b, loc, eq(tid, c32(0)),
                                     /*withElseRegion=*/false);
    OpBuilder::InsertionGuard semaphoreGuard(b);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    LLVM::StoreOp::create(b, loc, c32(0),
                          gep(globalPtr, i32, arg("dq_semaphores"), index), 4);
  }
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  return fn;
}

LLVM::LLVMFuncOp BackwardRowsBuilder::buildConvert(gpu::GPUModuleOp module,
                                                   StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  SmallVector<fagpu::KernelParam> abi =
      fagpu::backwardConvertParams(half.isBF16() ? "bf16" : "f16");
  LLVM::LLVMFuncOp fn = begin(module, name, abi);
  Value dqAccum = kernelArgument(fn, abi, "dq_accum");
  Value dq = kernelArgument(fn, abi, "dq");
  auto vec4 = VectorType::get({4}, f32);
  auto halves4 = VectorType::get({4}, half);
  forEachChunk([&](Value row, Value col) {
    Value sums = LLVM::LoadOp::create(b, loc, vec4, at(dqAccum, f32, row, col),
                                      /*alignment=*/16);
    Value out = arith::TruncFOp::create(b, loc, halves4, sums);
    LLVM::StoreOp::create(b, loc, out, at(dq, half, row, col), 8);
  });
  LLVM::ReturnOp::create(b, loc, ValueRange{});
  return fn;
}

} // namespace

LLVM::LLVMFuncOp mlir::fa::buildSM80BackwardPreprocessKernel(
    OpBuilder &b, Location loc, gpu::GPUModuleOp module, StringRef name,
    int64_t headDim, bool bf16, bool deterministic) {
  return BackwardRowsBuilder(b, loc, headDim, bf16)
      .buildPreprocess(module, name, deterministic);
}

LLVM::LLVMFuncOp mlir::fa::buildSM80BackwardConvertKernel(
    OpBuilder &b, Location loc, gpu::GPUModuleOp module, StringRef name,
    int64_t headDim, bool bf16) {
  return BackwardRowsBuilder(b, loc, headDim, bf16).buildConvert(module, name);
}
