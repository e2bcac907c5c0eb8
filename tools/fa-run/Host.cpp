//===- Host.cpp - fa-run's host buffers and JIT ---------------------------===//

#include "Host.h"

#include "llvm/ExecutionEngine/Orc/Mangling.h"

using namespace mlir;

namespace mlir::fa::run {

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = ((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff)
    return sign | 0x7c00 | (mant ? 0x200 : 0);
  if (exp >= 31)
    return sign | 0x7c00;
  if (exp <= 0) {
    if (exp < -10)
      return sign;
    mant |= 0x800000;
    uint32_t shift = 14 - exp;
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1)))
      ++half;
    return sign | half;
  }
  uint32_t half = sign | (exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
    ++half;
  return half;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ff, x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      x = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000 | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t floatToBF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000)
    return (x >> 16) | 0x40;
  x += 0x7fff + ((x >> 16) & 1); // round to nearest even
  return x >> 16;
}

float bf16ToFloat(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

} // namespace mlir::fa::run

using namespace mlir::fa::run;

// Soft-float entry points LLVM may call for half conversions on targets
// without F16C; the JIT resolves them to these.
extern "C" float fa_extendhfsf2(uint16_t h) { return halfToFloat(h); }
extern "C" uint16_t fa_truncsfhf2(float f) { return floatToHalf(f); }
extern "C" uint16_t fa_truncsfbf2(float f) { return floatToBF16(f); }

namespace mlir::fa::run {

llvm::Expected<std::unique_ptr<ExecutionEngine>>
createEngine(ModuleOp module,
             std::function<llvm::Error(llvm::Module *)> &optimize) {
  ExecutionEngineOptions engineOptions;
  engineOptions.transformer = optimize;
  auto maybeEngine = ExecutionEngine::create(module, engineOptions);
  if (!maybeEngine)
    return maybeEngine.takeError();
  (*maybeEngine)->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap map;
    auto add = [&](const char *name, void *fn) {
      map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(fn),
                             llvm::JITSymbolFlags::Exported};
    };
    add("__extendhfsf2", reinterpret_cast<void *>(&fa_extendhfsf2));
    add("__gnu_h2f_ieee", reinterpret_cast<void *>(&fa_extendhfsf2));
    add("__truncsfhf2", reinterpret_cast<void *>(&fa_truncsfhf2));
    add("__gnu_f2h_ieee", reinterpret_cast<void *>(&fa_truncsfhf2));
    add("__truncsfbf2", reinterpret_cast<void *>(&fa_truncsfbf2));
    return map;
  });
  return std::move(*maybeEngine);
}

llvm::Error callEntry(ExecutionEngine &engine, StringRef name,
                      std::vector<Buffer> &buffers) {
  std::vector<void *> descriptors(buffers.size()), packed(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    descriptors[i] = buffers[i].descriptor();
    packed[i] = &descriptors[i];
  }
  return engine.invokePacked(("_mlir_ciface_" + name).str(), packed);
}

} // namespace mlir::fa::run
