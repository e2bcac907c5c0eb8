//===- SM90KVAppend.cpp - the KV-cache kernels' append kernel -------------===//
//
// The kernel a KV-cache attention launches first when the call brings new
// keys and values (flash_attn_with_kvcache's k and v): it writes them into
// the cache after each sequence's keys and the lengths the attention then
// reads, in the module of the attention kernels that share it.
//
//===----------------------------------------------------------------------===//

#include "KernelLowerings.h"

#include "../Common/Launch.h"
#include "../Common/NVVMEmitter.h"
#include "fa/Dialect/FAGPU/IR/KernelABI.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::fa;

namespace {

/// The append kernel (fagpu::kvAppendParams). Thread (b, i, h, c), c
/// fastest, copies columns 8 c .. 8 c + 7 of new row i of sequence b's
/// head h, key and value, to cache position lengths[b] + i: one 16-byte
/// load each and one 16-byte (16-bit cache) or 8-byte (e4m3 cache) store,
/// a warp's lanes covering whole rows. The thread of (b, 0, 0, 0) writes
/// seen[b]. Positions and pages are checked as unsigned numbers, so that a
/// negative length or page lands past the bound and traps.
class KVAppendBuilder : public NVVMEmitter {
public:
  KVAppendBuilder(OpBuilder &b, Location loc, int64_t headDim, bool bf16,
                  bool e4m3Cache)
      : NVVMEmitter(b, loc, bf16), headDim(headDim), bf16(bf16),
        e4m3Cache(e4m3Cache) {}

  LLVM::LLVMFuncOp build(gpu::GPUModuleOp module, StringRef name) {
    OpBuilder::InsertionGuard guard(b);
    // After the attention kernels: their PTX stays as it was without it.
    b.setInsertionPointToEnd(module.getBody());
    SmallVector<fagpu::KernelParam> abi =
        fagpu::kvAppendParams(bf16 ? "bf16" : "f16", e4m3Cache);
    LLVM::LLVMFuncOp fn =
        declareKernel(b, loc, module, name, fagpu::kKVAppendThreads, 1, abi);
    fn->setAttr(fagpu::kGridAttrName, fagpu::kvAppendGrid(b.getContext()));
    auto arg = [&](StringRef param) { return kernelArgument(fn, abi, param); };
    constexpr int64_t columns = fagpu::kKVAppendColumnsPerThread;
    Value chunks = c64(headDim / columns);
    Value heads = ext64(arg("Hkv")), rows = ext64(arg("Nnew"));
    Value total = mul(mul(mul(ext64(arg("B")), rows), heads), chunks);
    Value thread = add(mul(ext64(NVVM::BlockIdXOp::create(b, loc, i32)),
                           c64(fagpu::kKVAppendThreads)),
                       ext64(NVVM::ThreadIdXOp::create(b, loc, i32)));
    auto inRange = scf::IfOp::create(b, loc, ult(thread, total), false);
    b.setInsertionPointToStart(inRange.thenBlock());
    Value chunk = remu(thread, chunks);
    Value rest = divu(thread, chunks);
    Value head = remu(rest, heads);
    rest = divu(rest, heads);
    Value row = remu(rest, rows);
    Value sequence = divu(rest, rows);

    Value length = LLVM::LoadOp::create(
        b, loc, i32, gep(globalPtr, i32, arg("cache_seqlens"), sequence));
    Value position = add(ext64(length), row);
    deviceAssert(ult(position, ext64(arg("capacity"))),
                 "flash_attn_with_kvcache: a sequence's length plus its new "
                 "keys exceeds the cache's capacity");
    // (slot, row within the slot): (b, position) in a contiguous cache,
    // (block_table[b, position / page_size], position mod page_size) in a
    // paged one.
    Value pageSize = ext64(arg("page_size"));
    auto paged = scf::IfOp::create(
        b, loc, TypeRange{i64, i64},
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, pageSize,
                              c64(0)),
        true);
    {
      OpBuilder::InsertionGuard inPaged(b);
      b.setInsertionPointToStart(paged.thenBlock());
      Value entry =
          add(mul(sequence, ext64(arg("max_pages"))), divu(position, pageSize));
      Value page = ext64(LLVM::LoadOp::create(
          b, loc, i32, gep(globalPtr, i32, arg("block_table"), entry)));
      deviceAssert(ult(page, ext64(arg("num_pages"))),
                   "flash_attn_with_kvcache: a block-table entry is not a "
                   "page of the cache");
      scf::YieldOp::create(b, loc, ValueRange{page, remu(position, pageSize)});
      b.setInsertionPointToStart(paged.elseBlock());
      scf::YieldOp::create(b, loc, ValueRange{sequence, position});
    }
    Value slot = paged.getResult(0), slotRow = paged.getResult(1);
    Value firstColumn = mul(chunk, c64(columns));
    for (StringRef tensor : {"k", "v"}) {
      auto stride = [&](StringRef of, StringRef dim) {
        return arg((of + "_stride_" + dim).str());
      };
      std::string fresh = (tensor + "_new").str(),
                  cache = (tensor + "_cache").str();
      Value from = add(add(add(mul(sequence, stride(fresh, "b")),
                               mul(row, stride(fresh, "n"))),
                           mul(head, stride(fresh, "h"))),
                       firstColumn);
      Value to = add(add(add(mul(slot, stride(cache, "b")),
                             mul(slotRow, stride(cache, "n"))),
                         mul(head, stride(cache, "h"))),
                     firstColumn);
      auto words4 = VectorType::get({4}, i32);
      Value words = LLVM::LoadOp::create(
          b, loc, words4, gep(globalPtr, half, arg(fresh), from),
          /*alignment=*/16, false, false, /*isInvariant=*/true);
      if (!e4m3Cache) {
        LLVM::StoreOp::create(b, loc, words,
                              gep(globalPtr, half, arg(cache), to),
                              /*alignment=*/16);
        continue;
      }
      Value descale = loadDescale(arg((tensor + "_descale").str()), sequence,
                                  head, heads, arg("descale_layout"));
      auto values = LLVM::BitcastOp::create(
          b, loc, VectorType::get({columns}, half), words);
      auto codes4 = VectorType::get({columns / 2}, b.getI16Type());
      Value codes = LLVM::PoisonOp::create(b, loc, codes4);
      for (int64_t pair = 0; pair < columns / 2; ++pair) {
        auto quotient = [&](int64_t column) {
          Value x = LLVM::ExtractElementOp::create(b, loc, values, c32(column));
          return arith::DivFOp::create(
              b, loc, arith::ExtFOp::create(b, loc, f32, x), descale);
        };
        codes = LLVM::InsertElementOp::create(
            b, loc, codes, e4m3Pair(quotient(2 * pair), quotient(2 * pair + 1)),
            c32(pair));
      }
      LLVM::StoreOp::create(
          b, loc,
          LLVM::BitcastOp::create(b, loc, VectorType::get({2}, i32), codes),
          gep(globalPtr, b.getI8Type(), arg(cache), to), /*alignment=*/8);
    }
    // One thread a sequence writes the lengths the attention reads.
    Value first =
        andi(eq(row, c64(0)), andi(eq(head, c64(0)), eq(chunk, c64(0))));
    auto writesSeen = scf::IfOp::create(b, loc, first, false);
    b.setInsertionPointToStart(writesSeen.thenBlock());
    LLVM::StoreOp::create(b, loc, add(length, arg("Nnew")),
                          gep(globalPtr, i32, arg("seen"), sequence));
    b.setInsertionPointAfter(inRange);
    LLVM::ReturnOp::create(b, loc, ValueRange{});
    return fn;
  }

private:
  /// The descale of (sequence, head): descale[0], or descale[b * Hkv + h]
  /// when `layout` is fagpu::DescaleLayout::Head.
  Value loadDescale(Value descales, Value sequence, Value head, Value heads,
                    Value layout) {
    Value index = select(eq(layout, c32(int64_t(fagpu::DescaleLayout::Head))),
                         add(mul(sequence, heads), head), c64(0));
    return LLVM::LoadOp::create(b, loc, f32,
                                gep(globalPtr, f32, descales, index));
  }

  /// Two f32 as e4m3 codes in an i16, `lo` in the low byte: round to
  /// nearest even, saturated at +-448 (the format's largest finite value;
  /// a plain conversion makes what lies beyond NaN). PTX puts its first
  /// operand in the high byte.
  Value e4m3Pair(Value lo, Value hi) {
    return LLVM::InlineAsmOp::create(
               b, loc, b.getI16Type(), ValueRange{hi, lo},
               "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f",
               /*has_side_effects=*/false, /*is_align_stack=*/false,
               LLVM::tailcallkind::TailCallKind::None,
               /*asm_dialect=*/LLVM::AsmDialectAttr(),
               /*operand_attrs=*/ArrayAttr())
        .getResult(0);
  }

  int64_t headDim;
  bool bf16, e4m3Cache;
};

} // namespace

std::string mlir::fa::sm90KVAppendKernelName(int64_t headDim, bool bf16,
                                             bool e4m3Cache) {
  return "fa_kv_append_d" + std::to_string(headDim) +
         (bf16 ? "_bf16" : "_f16") + (e4m3Cache ? "_to_e4m3" : "");
}

LLVM::LLVMFuncOp mlir::fa::buildSM90KVAppendKernel(OpBuilder &b, Location loc,
                                                   gpu::GPUModuleOp module,
                                                   int64_t headDim, bool bf16,
                                                   bool e4m3Cache,
                                                   StringRef name) {
  return KVAppendBuilder(b, loc, headDim, bf16, e4m3Cache).build(module, name);
}
