//===- Launch.cpp - kernel declaration and host launch
//----------------------===//
//
// Out-of-line definitions of Launch.h (see there).
//
//===----------------------------------------------------------------------===//

#include "Launch.h"

#include "fa/Model/GridFormula.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/xxhash.h"

using namespace mlir;

namespace mlir::fa {

gpu::GPUModuleOp getOrCreateKernelModule(ModuleOp module) {
  OpBuilder b(module.getContext());
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  b.getUnitAttr());
  if (auto kernels = module.lookupSymbol<gpu::GPUModuleOp>("fa_kernels"))
    return kernels;
  b.setInsertionPointToEnd(module.getBody());
  return gpu::GPUModuleOp::create(b, module.getLoc(), "fa_kernels");
}

Value alignedPointer(OpBuilder &b, Location loc, Value memref, Type type) {
  Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
  return LLVM::IntToPtrOp::create(b, loc, type, i64);
}

LLVM::LLVMFuncOp declareKernel(OpBuilder &b, Location loc,
                               gpu::GPUModuleOp module, StringRef name,
                               int64_t threads, int64_t ctasPerSM,
                               ArrayRef<fagpu::KernelParam> abi) {
  MLIRContext *ctx = b.getContext();
  auto genericPtr = LLVM::LLVMPointerType::get(ctx);
  auto globalPtr = LLVM::LLVMPointerType::get(ctx, 1);
  auto mapType = LLVM::LLVMArrayType::get(b.getI64Type(), 16);
  SmallVector<Type> types;
  for (const fagpu::KernelParam &p : abi) {
    switch (p.kind) {
    case fagpu::ParamKind::TensorMap:
      types.push_back(genericPtr);
      break;
    case fagpu::ParamKind::Pointer:
    case fagpu::ParamKind::Counter:
    case fagpu::ParamKind::Workspace:
      types.push_back(globalPtr);
      break;
    case fagpu::ParamKind::I32:
      types.push_back(b.getI32Type());
      break;
    case fagpu::ParamKind::I64:
      types.push_back(b.getI64Type());
      break;
    case fagpu::ParamKind::F32:
      types.push_back(b.getF32Type());
      break;
    }
  }
  auto fn = LLVM::LLVMFuncOp::create(
      b, loc, name,
      LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), types));
  fn->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), b.getUnitAttr());
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  fn->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
              b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  fn->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
              b.getI32IntegerAttr(ctasPerSM));
  // The parameter list the signature is built from, for the launch
  // metadata (lib/Target serialises it).
  fn->setAttr(fagpu::kParamsAttrName, fagpu::paramsAttr(ctx, abi));
  for (auto [i, p] : llvm::enumerate(abi)) {
    if (p.kind == fagpu::ParamKind::TensorMap) {
      fn.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                    TypeAttr::get(mapType));
      fn.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                    b.getI64IntegerAttr(64));
      fn.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                    b.getUnitAttr());
    } else if (p.kind == fagpu::ParamKind::Pointer) {
      fn.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(),
                    b.getUnitAttr());
    }
  }
  b.setInsertionPointToStart(fn.addEntryBlock(b));
  return fn;
}

/// The launch metadata's name of a capture's element type (checkCaptureType
/// admits these).
static std::string captureDtype(Type element) {
  if (element.isF32())
    return "f32";
  if (element.isF16())
    return "f16";
  if (element.isBF16())
    return "bf16";
  return "i" + std::to_string(element.getIntOrFloatBitWidth());
}

KernelModifications
KernelModifications::of(fagpu::AttentionOp op,
                        SmallVectorImpl<fagpu::KernelParam> &abi) {
  KernelModifications mods;
  if (!op.hasModifications())
    return mods;
  if (!op.getScoreMod().empty())
    mods.scoreMod = &op.getScoreMod();
  if (!op.getMaskMod().empty())
    mods.maskMod = &op.getMaskMod();
  mods.captures = op.getCaptures().size();
  for (auto [i, capture] : llvm::enumerate(op.getCaptures())) {
    auto type = cast<MemRefType>(capture.getType());
    fagpu::KernelParam param;
    param.name = "capture" + std::to_string(i);
    param.kind = fagpu::ParamKind::Pointer;
    param.dtype = captureDtype(type.getElementType());
    for (int64_t size : type.getShape())
      param.shape.push_back(std::to_string(size));
    abi.push_back(param);
  }
  // Block arguments print by position, so the text is the same wherever the
  // attention sits.
  std::string text;
  llvm::raw_string_ostream os(text);
  OpPrintingFlags flags;
  flags.useLocalScope();
  for (Region *region : {&op.getScoreMod(), &op.getMaskMod()}) {
    os << "region\n";
    for (Block &block : *region)
      for (Operation &inner : block) {
        inner.print(os, flags);
        os << "\n";
      }
  }
  mods.modificationsName =
      "_mod" + llvm::utohexstr(llvm::xxh3_64bits(text), /*LowerCase=*/true,
                               /*Width=*/16);
  return mods;
}

Value kernelArgument(LLVM::LLVMFuncOp fn, ArrayRef<fagpu::KernelParam> abi,
                     StringRef name) {
  for (auto [i, p] : llvm::enumerate(abi))
    if (p.name == name)
      return fn.getBody().front().getArgument(i);
  return Value();
}

SmallVector<Value>
launchArguments(ArrayRef<fagpu::KernelParam> abi,
                function_ref<Value(const fagpu::KernelParam &)> valueOf) {
  SmallVector<Value> args;
  for (const fagpu::KernelParam &p : abi)
    args.push_back(valueOf(p));
  return args;
}

fagpu::ModifyScoresOp KernelModifications::modifyScores(
    OpBuilder &b, Location loc, Value s, Value keyStart, Value row0,
    Value batch, Value head, Value scaleLog2, Value nq, Value nk,
    ValueRange captures, double softcap, Region *mask) const {
  // With captures the regions read memory: their indices are clamped to the
  // sequence. Every region takes every capture, so a block without
  // score_mod and mask reads none.
  bool reads = !captures.empty() && (scoreMod || mask);
  auto modify = fagpu::ModifyScoresOp::create(
      b, loc, s.getType(), s, keyStart, row0, batch, head, scaleLog2,
      reads ? nq : Value(), reads ? nk : Value(),
      reads ? captures : ValueRange(),
      softcap > 0 ? b.getF32FloatAttr(softcap) : FloatAttr());
  IRMapping mapping;
  if (scoreMod)
    scoreMod->cloneInto(&modify.getScoreMod(), mapping);
  if (mask)
    mask->cloneInto(&modify.getMaskMod(), mapping);
  return modify;
}

Value LaunchOperands::pointer(StringRef name, Type type) {
  Value memref = tensor(name);
  if (!memref)
    return LLVM::ZeroOp::create(b, loc, type);
  return alignedPointer(b, loc, memref, type);
}

namespace {

/// GridFormulaParser's domain for the host launch: index arithmetic. A value
/// is num / den with num an index value and den a positive integer known
/// when the kernel is built (a formula divides only by its constants, such
/// as block_r).
struct IndexArithmetic {
  struct Value {
    mlir::Value num;
    int64_t den = 1;
  };
  OpBuilder &b;
  Location loc;
  llvm::function_ref<mlir::Value(StringRef)> valueOf;
  std::string why;

  std::optional<Value> failure(std::string reason) {
    why = std::move(reason);
    return std::nullopt;
  }
  mlir::Value constant(int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }
  /// x.num * k: x over a denominator k times its own.
  mlir::Value scaled(const Value &x, int64_t k) {
    return k == 1 ? x.num
                  : b.createOrFold<arith::MulIOp>(loc, x.num, constant(k));
  }

  std::optional<Value> number(int64_t value) {
    return Value{constant(value), 1};
  }
  std::optional<Value> name(std::string_view name) {
    mlir::Value value = valueOf(StringRef(name.data(), name.size()));
    if (!value)
      return failure("no value for '" + std::string(name) + "'");
    return Value{value, 1};
  }
  /// Op applied to x and y over their common denominator: a sum, a
  /// difference, a minimum or a maximum.
  template <typename Op>
  std::optional<Value> overCommonDenominator(const Value &x, const Value &y) {
    return Value{b.createOrFold<Op>(loc, scaled(x, y.den), scaled(y, x.den)),
                 x.den * y.den};
  }
  std::optional<Value> add(const Value &x, const Value &y) {
    return overCommonDenominator<arith::AddIOp>(x, y);
  }
  std::optional<Value> sub(const Value &x, const Value &y) {
    return overCommonDenominator<arith::SubIOp>(x, y);
  }
  std::optional<Value> mul(const Value &x, const Value &y) {
    return Value{b.createOrFold<arith::MulIOp>(loc, x.num, y.num),
                 x.den * y.den};
  }
  std::optional<Value> div(const Value &x, const Value &y) {
    std::optional<int64_t> divisor = getConstantIntValue(y.num);
    if (!divisor)
      return failure("a division by a value known only at run time");
    if (*divisor <= 0)
      return failure("a division by " + std::to_string(*divisor));
    return Value{scaled(x, y.den), x.den * *divisor};
  }
  std::optional<Value> ceil(const Value &x) {
    if (x.den == 1)
      return x;
    return Value{
        b.createOrFold<arith::CeilDivUIOp>(loc, x.num, constant(x.den)), 1};
  }
  std::optional<Value> min(const Value &x, const Value &y) {
    return overCommonDenominator<arith::MinUIOp>(x, y);
  }
  std::optional<Value> max(const Value &x, const Value &y) {
    return overCommonDenominator<arith::MaxUIOp>(x, y);
  }
};

} // namespace

/// `grid`'s dimensions as index arithmetic, each name bound by `valueOf`
/// (null for a name it has none for); fails, with `error`, where a formula
/// divides by a value not known when the kernel is built or does not come
/// out whole.
static FailureOr<gpu::KernelDim3>
emitLaunchGrid(OpBuilder &b, Location loc, DictionaryAttr grid,
               llvm::function_ref<Value(StringRef)> valueOf,
               std::string &error) {
  std::array<Value, 3> dims;
  static constexpr const char *kAxes[] = {"x", "y", "z"};
  for (auto [i, axis] : llvm::enumerate(kAxes)) {
    Attribute dim = grid ? grid.get(axis) : Attribute();
    if (auto number = dyn_cast_or_null<IntegerAttr>(dim)) {
      dims[i] = arith::ConstantIndexOp::create(b, loc, number.getInt());
      continue;
    }
    auto formula = dyn_cast_or_null<StringAttr>(dim);
    if (!formula) {
      error = std::string("the kernel's grid has no ") + axis;
      return failure();
    }
    IndexArithmetic domain{b, loc, valueOf, {}};
    std::optional<IndexArithmetic::Value> value =
        model::GridFormulaParser<IndexArithmetic>(formula.getValue(), domain,
                                                  error)
            .parse();
    if (!value)
      return failure();
    if (value->den != 1) {
      error = "the grid formula '" + formula.getValue().str() +
              "' is not a whole number";
      return failure();
    }
    dims[i] = value->num;
  }
  return gpu::KernelDim3{dims[0], dims[1], dims[2]};
}

void launchKernel(OpBuilder &b, Location loc, LLVM::LLVMFuncOp kernel,
                  gpu::KernelDim3 grid, int64_t threads, int64_t sharedBytes,
                  ValueRange args) {
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value x = arith::ConstantIndexOp::create(b, loc, threads);
  Value smemBytes = arith::ConstantIntOp::create(b, loc, sharedBytes, 32);
  auto kernelSym =
      SymbolRefAttr::get(b.getStringAttr("fa_kernels"),
                         {FlatSymbolRefAttr::get(kernel.getSymNameAttr())});
  gpu::LaunchFuncOp::create(b, loc, kernelSym, grid,
                            gpu::KernelDim3{x, one, one}, smemBytes, args,
                            /*asyncObject=*/Value());
}

gpu::KernelDim3 hostLaunchGrid(OpBuilder &b, Location loc,
                               LLVM::LLVMFuncOp kernel, int64_t kvSplits,
                               llvm::function_ref<Value(StringRef)> sizeOf) {
  fagpu::ScheduleFields fields = fagpu::fieldsOf(
      kernel->getAttrOfType<fagpu::ScheduleAttr>("fagpu.schedule"));
  auto valueOf = [&](StringRef name) -> Value {
    std::optional<int64_t> constant =
        llvm::StringSwitch<std::optional<int64_t>>(name)
            .Case("block_r", fields.blockR)
            .Case("block_c", fields.blockC)
            .Case("ctas_per_sm", fields.ctasPerSm)
            .Case("kv_splits", kvSplits)
            .Case("SMs", std::numeric_limits<int32_t>::max())
            .Default(std::nullopt);
    if (constant)
      return arith::ConstantIndexOp::create(b, loc, *constant);
    // The launch's sizes (B, Hq, Nq; Hkv and Nk for the backward's grid).
    return sizeOf(name);
  };
  // The formulas are fagpu::launchGrid's, over these names: a failure is
  // the lowering's own error, not the input's.
  std::string error;
  FailureOr<gpu::KernelDim3> grid = emitLaunchGrid(
      b, loc, kernel->getAttrOfType<DictionaryAttr>(fagpu::kGridAttrName),
      valueOf, error);
  if (failed(grid))
    llvm::report_fatal_error(llvm::Twine("the host launch of ") +
                             kernel.getSymName() + ": " + error);
  return *grid;
}

} // namespace mlir::fa
