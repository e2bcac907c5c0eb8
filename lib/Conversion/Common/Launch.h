//===- Launch.h - host side of the GPU kernels' launches --------*- C++ -*-===//
//
// What every GPU conversion does around its kernel: find or create the
// gpu.module that holds the kernels, build each kernel once, and pass
// memrefs to gpu.launch_func as raw pointers.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CONVERSION_COMMON_LAUNCH_H
#define FA_LIB_CONVERSION_COMMON_LAUNCH_H

#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "fa/Dialect/FAGPU/IR/KernelABI.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::fa {

/// The `fa_kernels` gpu.module of `module` (created at its end if needed);
/// marks `module` as a GPU container.
gpu::GPUModuleOp getOrCreateKernelModule(ModuleOp module);

/// The aligned base pointer of a memref as an LLVM pointer of `type`, for
/// the launch arguments.
Value alignedPointer(OpBuilder &b, Location loc, Value memref, Type type);

/// Declares kernel `name` in `module` with the parameters of `abi` (tensor
/// maps by value as __grid_constant__ parameters, tensors as noalias global
/// pointers, scalars, the tile counter) and an entry block to build into;
/// `threads` per CTA, `ctasPerSM` resident (ptxas caps the registers so
/// that they fit).
LLVM::LLVMFuncOp declareKernel(OpBuilder &b, Location loc,
                               gpu::GPUModuleOp module, StringRef name,
                               int64_t threads, int64_t ctasPerSM,
                               ArrayRef<fagpu::KernelParam> abi);

/// What every host launch of an attention kernel takes from its op: the
/// tensors by parameter name, their sizes by name, and the scale in log2
/// units.
/// The launch grid the lowering gave `kernel` (its fagpu.grid: per
/// dimension an integer or a formula of include/fa/Model/GridFormula.h's
/// grammar, fagpu::launchGrid's), emitted as index arithmetic at the
/// builder's insertion point, as the runtimes evaluate it from the metadata.
/// The names are bound to the attention's sizes (B, Hq, Nq from `sizeOf`),
/// the kernel's schedule fields (block_r, block_c, ctas_per_sm), `kvSplits`
/// (the IR launch's chunk count) and SMs: the host launch has no device to
/// ask, so SMs is unbounded (2^31 - 1, CUDA's largest grid x) and a
/// persistent kernel gets a CTA per tile, its tile loop running once in each.
gpu::KernelDim3 hostLaunchGrid(OpBuilder &b, Location loc,
                               LLVM::LLVMFuncOp kernel, int64_t kvSplits,
                               llvm::function_ref<Value(StringRef)> sizeOf);

/// gpu.launch_func of `kernel` (in the `fa_kernels` module) on `grid`, with
/// `threads` threads in x a CTA and `sharedBytes` of dynamic shared memory.
void launchKernel(OpBuilder &b, Location loc, LLVM::LLVMFuncOp kernel,
                  gpu::KernelDim3 grid, int64_t threads, int64_t sharedBytes,
                  ValueRange args);

class LaunchOperands {
public:
  LaunchOperands(OpBuilder &b, Location loc, fagpu::AttentionOp op)
      : b(b), loc(loc) {
    Value q = op.getQuery(), k = op.getKey();
    tensors = {{"q", q},
               {"k", k},
               {"v", op.getValue()},
               {"o", op.getOut()},
               {"lse", op.getLse()},
               {"kv_lengths", op.getKvLengths()},
               {"block_table", op.getBlockTable()},
               {"cu_seqlens_q", op.getCuSeqlensQ()},
               {"cu_seqlens_k", op.getCuSeqlensK()},
               {"q_descale", op.getQDescale()},
               {"k_descale", op.getKDescale()},
               {"v_descale", op.getVDescale()},
               {"sinks", op.getSinks()}};
    // score_mod / mask_mod captures: parameters capture0, ...
    for (auto [i, capture] : llvm::enumerate(op.getCaptures()))
      tensors["capture" + std::to_string(i)] = capture;
    sizes = {{"Nq", dim(q, 2)},
             {"Nk", dim(k, 2)},
             {"Hq", dim(q, 1)},
             {"Hkv", dim(k, 1)},
             {"B", dim(q, 0)}};
    if (Value sums = op.getCuSeqlensQ()) {
      // A varlen batch: B sequences; the grid's query blocks cover the
      // packed rows (an upper bound of the longest sequence's: tiles past
      // a sequence's end leave at once).
      sizes["B"] = arith::SubIOp::create(
          b, loc, dim(sums, 0), arith::ConstantIndexOp::create(b, loc, 1));
      sizes["total_q"] = dim(q, 2);
      sizes["total_k"] = dim(k, 2);
    }
    if (Value table = op.getBlockTable()) {
      // A paged cache: a sequence without kv_lengths has all its pages.
      Value maxPages = dim(table, 1);
      sizes["max_pages"] = maxPages;
      sizes["num_pages"] = dim(k, 0);
      sizes["Nk"] = arith::MulIOp::create(
          b, loc, maxPages,
          arith::ConstantIndexOp::create(b, loc, op.getPageSize()));
    }
    scaleLog2 = arith::ConstantOp::create(
        b, loc,
        b.getF32FloatAttr(
            float(op.getScale().convertToDouble() * llvm::numbers::log2e)));
  }

  /// The tensor of parameter `name` (null for an absent LSE).
  Value tensor(StringRef name) const { return tensors.lookup(name); }
  /// Its aligned base pointer as `type`; a null pointer when the op has no
  /// such tensor (no LSE destination: the kernel writes none).
  Value pointer(StringRef name, Type type);
  /// Size `name` (Nq, Nk, Hq, Hkv, B, max_pages) as an index.
  Value size(StringRef name) const { return sizes.lookup(name); }
  /// ... and as the kernel's i32.
  Value i32(StringRef name) {
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), size(name));
  }
  Value dim(Value memref, int64_t d) {
    return b.createOrFold<memref::DimOp>(loc, memref, d);
  }

  Value scaleLog2;

private:
  OpBuilder &b;
  Location loc;
  llvm::StringMap<Value> tensors, sizes;
};

/// The score_mod and mask_mod a kernel evaluates before each block's step
/// (fagpu.modify_scores): the attention's regions (null where it has none),
/// the number of its captured tensors (parameters capture0, ...) and the
/// kernel name's suffix, `_mod` and 16 hex digits of a hash of the regions'
/// printed ops (kernels of different regions never share a name).
struct KernelModifications {
  Region *scoreMod = nullptr, *maskMod = nullptr;
  int64_t captures = 0;
  std::string modificationsName;
  bool modifiesScores() const { return scoreMod || maskMod; }

  /// `op`'s regions; appends to `abi` one pointer parameter per captured
  /// tensor (its element type and static shape say what the runtimes pass).
  static KernelModifications of(fagpu::AttentionOp op,
                                SmallVectorImpl<fagpu::KernelParam> &abi);

  /// fagpu.modify_scores of a block's scores `s` (keys from `keyStart`, rows
  /// from `row0`, of `batch` and query `head`, at `scaleLog2`), with the
  /// softcap (> 0), score_mod and `mask` -- this kernel's mask_mod, or null
  /// for a block that needs none -- copied in. Where the regions read
  /// `captures`, they read them within the sequence's `nq` queries and `nk`
  /// keys.
  fagpu::ModifyScoresOp modifyScores(OpBuilder &b, Location loc, Value s,
                                     Value keyStart, Value row0, Value batch,
                                     Value head, Value scaleLog2, Value nq,
                                     Value nk, ValueRange captures,
                                     double softcap, Region *mask) const;
};

/// The entry-block argument of parameter `name` of `fn`, or null when the
/// kernel has no such parameter.
Value kernelArgument(LLVM::LLVMFuncOp fn, ArrayRef<fagpu::KernelParam> abi,
                     StringRef name);

/// The launch's arguments, one per parameter of `abi` in its order.
SmallVector<Value>
launchArguments(ArrayRef<fagpu::KernelParam> abi,
                function_ref<Value(const fagpu::KernelParam &)> valueOf);

/// The driver of every target's kernel lowering: for each fagpu.attention
/// of `module` for `target`, `specOf(op)` reads its schedule (emitting the
/// diagnostic when the kernel cannot run it), the kernel named
/// `spec.kernelName()` is built once into the `fa_kernels` module by
/// `build(builder, loc, spec, kernels)`, and `launch(op, kernel, spec)`
/// replaces the op by the host side of the launch.
template <typename Spec, typename SpecFn, typename BuildFn, typename LaunchFn>
LogicalResult lowerEachKernel(ModuleOp module, fagpu::Target target,
                              SpecFn specOf, BuildFn build, LaunchFn launch) {
  SmallVector<fagpu::AttentionOp> ops;
  module.walk([&](fagpu::AttentionOp op) {
    if (op.getTarget() == target)
      ops.push_back(op);
  });
  if (ops.empty())
    return success();
  OpBuilder b(module.getContext());
  gpu::GPUModuleOp kernels = getOrCreateKernelModule(module);
  for (fagpu::AttentionOp op : ops) {
    FailureOr<Spec> spec = specOf(op);
    if (failed(spec))
      return failure();
    auto kernel = kernels.lookupSymbol<LLVM::LLVMFuncOp>(spec->kernelName());
    // A kernel is reused only for the schedule it was built for: a name
    // that does not tell two schedules apart would launch one attention
    // with the other's kernel (and its parameter list).
    if (kernel &&
        (kernel->getAttr("fagpu.schedule") != op.getSchedule() ||
         kernel->getAttr("fagpu.writes_lse") != b.getBoolAttr(spec->writesLse)))
      return op.emitOpError("two attentions of different schedules need "
                            "kernels of one name, ")
             << spec->kernelName()
             << ": the kernel's name must tell them apart";
    if (!kernel) {
      kernel = build(b, op.getLoc(), *spec, kernels);
      // What the kernel is, typed, for the launch metadata.
      kernel->setAttr("fagpu.target", op.getTargetAttr());
      kernel->setAttr("fagpu.schedule", op.getSchedule());
      kernel->setAttr("fagpu.threads", b.getI64IntegerAttr(spec->threads()));
      kernel->setAttr("fagpu.shared_memory_bytes",
                      b.getI64IntegerAttr(spec->sharedBytes()));
      kernel->setAttr("fagpu.writes_lse", b.getBoolAttr(spec->writesLse));
      kernel->setAttr(
          fagpu::kGridAttrName,
          fagpu::launchGrid(b.getContext(), target, op.getSchedule()));
    }
    launch(op, kernel, *spec);
  }
  return success();
}

} // namespace mlir::fa

#endif // FA_LIB_CONVERSION_COMMON_LAUNCH_H
