//===- SM90ValueLayout.cpp - the e4m3 kernels' V^T layout kernel ----------===//
//
// The kernel an sm_90a e4m3 attention launches first: V^T for the P V
// product (wgmma reads e4m3 B operands K-major only), in the module of the
// attention kernels that share it.
//
//===----------------------------------------------------------------------===//

#include "KernelLowerings.h"

#include "../Common/Launch.h"
#include "../Common/NVVMEmitter.h"
#include "fa/Dialect/FAGPU/IR/KernelABI.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

using namespace mlir;
using namespace mlir::fa;

namespace {

/// The e4m3 kernels' V layout kernel (fagpu::valueLayoutParams): V^T
/// [B, Hkv, D, Nk_128], keys permuted by σ in each 16, from a strided V.
/// Thread (b, h, g, c), c fastest: a 16 x 16 byte block, the group g's 16
/// key rows by columns 16 c .. 16 c + 15 (kValueLayoutColumnsPerThread).
/// It loads 16 bytes of each key row (a warp's 8 column chunks of 4 groups
/// read whole 128-byte rows), transposes the block in registers (byte
/// permutes), and stores 16 bytes of each of its 16 V^T rows (a warp's 4
/// groups write 64 contiguous bytes of 8 rows). Keys past Nk are zero.
/// Byte-wide loads with one column a thread kept the L2 at 82% of its
/// request rate and DRAM at 27% (ncu, bench/results/2026-12-03-fp8-block-c.md).
class ValueLayoutBuilder : public NVVMEmitter {
public:
  ValueLayoutBuilder(OpBuilder &b, Location loc, int64_t headDim)
      : NVVMEmitter(b, loc, /*bf16=*/false), headDim(headDim) {}

  LLVM::LLVMFuncOp build(gpu::GPUModuleOp module, StringRef name) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    SmallVector<fagpu::KernelParam> abi = fagpu::valueLayoutParams();
    LLVM::LLVMFuncOp fn = declareKernel(b, loc, module, name,
                                        fagpu::kValueLayoutThreads, 1, abi);
    fn->setAttr(fagpu::kGridAttrName, fagpu::valueLayoutGrid(b.getContext()));
    auto arg = [&](StringRef param) { return kernelArgument(fn, abi, param); };
    Value v = arg("v"), vt = arg("v_t"), nk = ext64(arg("Nk"));
    constexpr int64_t block = fagpu::kValueLayoutColumnsPerThread;
    Value d64 = c64(headDim), chunks = c64(headDim / block);
    // 16-key groups of a V^T row: Nk rounded up to whole key alignments.
    constexpr int64_t align = fagpu::kValueLayoutKeyAlign;
    Value groups =
        mul(divu(add(nk, c64(align - 1)), c64(align)), c64(align / 16));
    Value matrices = mul(ext64(arg("B")), ext64(arg("Hkv")));
    Value total = mul(mul(matrices, groups), chunks);
    Value thread =
        add(mul(ext64(NVVM::BlockIdXOp::create(b, loc, i32)),
                c64(fagpu::kValueLayoutThreads)),
            ext64(NVVM::ThreadIdXOp::create(b, loc, i32)));
    auto inRange = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, thread,
                              total),
        false);
    b.setInsertionPointToStart(inRange.thenBlock());
    Value firstColumn = mul(remu(thread, chunks), c64(block));
    Value rest = divu(thread, chunks);
    Value g = remu(rest, groups);
    Value matrix = divu(rest, groups);
    Value heads = ext64(arg("Hkv"));
    Value column =
        add(add(mul(divu(matrix, heads), arg("v_stride_b")),
                mul(remu(matrix, heads), arg("v_stride_h"))),
            firstColumn);
    Type i8 = b.getI8Type();
    auto words4 = VectorType::get({4}, i32);
    auto bytes4 = VectorType::get({4}, i8);
    Value lastKey = arith::SubIOp::create(b, loc, nk, c64(1));
    Value zero4 = arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(words4, b.getI32IntegerAttr(0)));
    // in[κ][w]: slot κ's key row, columns 4w .. 4w + 3 (little-endian
    // bytes of one word).
    SmallVector<SmallVector<Value>> in(16);
    for (int64_t kappa = 0; kappa < 16; ++kappa) {
      Value key = add(mul(g, c64(16)), c64(fagpu::valueLayoutKey(kappa)));
      Value inKeys =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, key, nk);
      Value row = arith::MinUIOp::create(b, loc, key, lastKey);
      Value words = LLVM::LoadOp::create(
          b, loc, words4,
          gep(globalPtr, i8, v, add(column, mul(row, arg("v_stride_n")))),
          /*alignment=*/16, false, false, /*isInvariant=*/true);
      words = select(inKeys, words, zero4);
      for (int64_t w = 0; w < 4; ++w)
        in[kappa].push_back(LLVM::BitcastOp::create(
            b, loc, bytes4,
            LLVM::ExtractElementOp::create(b, loc, words, c32(w))));
    }
    // out[j][u]: column j's slots 4u .. 4u + 3, the 4 x 4 byte transpose
    // of in[4u .. 4u + 3][j / 4]: two rounds of byte shuffles (prmt).
    auto shuffle = [&](Value x, Value y, ArrayRef<int32_t> mask) {
      return LLVM::ShuffleVectorOp::create(b, loc, x, y, mask).getResult();
    };
    SmallVector<SmallVector<Value>> out(block, SmallVector<Value>(4));
    for (int64_t u = 0; u < 4; ++u)
      for (int64_t w = 0; w < 4; ++w) {
        Value r0 = in[4 * u][w], r1 = in[4 * u + 1][w],
              r2 = in[4 * u + 2][w], r3 = in[4 * u + 3][w];
        Value lo01 = shuffle(r0, r1, {0, 4, 1, 5}),
              hi01 = shuffle(r0, r1, {2, 6, 3, 7}),
              lo23 = shuffle(r2, r3, {0, 4, 1, 5}),
              hi23 = shuffle(r2, r3, {2, 6, 3, 7});
        out[4 * w][u] = shuffle(lo01, lo23, {0, 1, 4, 5});
        out[4 * w + 1][u] = shuffle(lo01, lo23, {2, 3, 6, 7});
        out[4 * w + 2][u] = shuffle(hi01, hi23, {0, 1, 4, 5});
        out[4 * w + 3][u] = shuffle(hi01, hi23, {2, 3, 6, 7});
      }
    // V^T row (matrix, d) has Nk_128 = 16 groups bytes.
    Value rowBytes = mul(groups, c64(16));
    Value firstRow = add(mul(matrix, d64), firstColumn);
    for (int64_t j = 0; j < block; ++j) {
      Value packed = LLVM::PoisonOp::create(b, loc, words4);
      for (int64_t u = 0; u < 4; ++u)
        packed = LLVM::InsertElementOp::create(
            b, loc, packed,
            LLVM::BitcastOp::create(b, loc, i32, out[j][u]), c32(u));
      Value dst = add(mul(add(firstRow, c64(j)), rowBytes), mul(g, c64(16)));
      LLVM::StoreOp::create(b, loc, packed, gep(globalPtr, i8, vt, dst),
                            /*alignment=*/16);
    }
    b.setInsertionPointAfter(inRange);
    LLVM::ReturnOp::create(b, loc, ValueRange{});
    return fn;
  }

private:
  int64_t headDim;
};

} // namespace

std::string mlir::fa::sm90ValueLayoutKernelName(int64_t headDim) {
  return "fa_e4m3_v_layout_d" + std::to_string(headDim);
}

LLVM::LLVMFuncOp mlir::fa::buildSM90ValueLayoutKernel(OpBuilder &b,
                                                      Location loc,
                                                      gpu::GPUModuleOp module,
                                                      int64_t headDim,
                                                      StringRef name) {
  return ValueLayoutBuilder(b, loc, headDim).build(module, name);
}
