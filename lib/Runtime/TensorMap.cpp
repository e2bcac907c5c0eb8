//===- TensorMap.cpp - TMA tensor maps of q, k, v and o ---------------------===//
//
// cuTensorMapEncodeTiled for the sm_90a kernels' tensor maps: contiguous
// [B * H, N, D] and strided [B, H, N, D] tensors, the strides' one rule.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include <cstdint>

namespace flashmlir::runtime {
/// A swizzled tiled map (dtype 0 f16, 1 bf16, 2 e4m3) with boxes of
/// `boxBytes` (128, 64 or 32: the swizzle span) by `boxRows` rows of one
/// matrix; rows past the last read as zeros. `dims` innermost first,
/// `byteStrides` of the outer dimensions.
int encodeTiledMap(void *map, const void *base, unsigned rank,
                   const unsigned long long *dims,
                   const unsigned long long *byteStrides, int boxRows,
                   int dtype, int l2PromotionBytes, int boxBytes) {
  // A box row is the swizzle span: at 128 bytes 64 16-bit or 128 e4m3
  // elements (e4m3 is encoded as bytes: the TMA only moves them).
  const unsigned elementBytes = dtype == 2 ? 1 : 2;
  unsigned boxDims[4] = {(unsigned)boxBytes / elementBytes, (unsigned)boxRows,
                         1, 1};
  unsigned unit[4] = {1, 1, 1, 1};
  const int u8 = 0, f16 = 6, bf16 = 9;
  // CU_TENSOR_MAP_SWIZZLE_{32B, 64B, 128B}.
  const int swizzle = boxBytes == 32 ? 1 : boxBytes == 64 ? 2 : 3;
  const int type = dtype == 2 ? u8 : dtype == 1 ? bf16 : f16;
  // CU_TENSOR_MAP_L2_PROMOTION_{NONE, L2_64B, L2_128B, L2_256B}.
  const int l2Promotion = l2PromotionBytes == 64    ? 1
                          : l2PromotionBytes == 128 ? 2
                          : l2PromotionBytes == 256 ? 3
                                                    : 0;
  return check(driver.cuTensorMapEncodeTiled(
                   map, type, rank, const_cast<void *>(base),
                   const_cast<unsigned long long *>(dims),
                   const_cast<unsigned long long *>(byteStrides), boxDims,
                   unit, /*interleave=*/0, swizzle, l2Promotion,
                   /*oobFill=*/0),
               "cuTensorMapEncodeTiled");
}

/// The one rule for a strided [B, H, N, D] tensor's strides (elements; D's
/// is 1): a dimension longer than 1 needs a positive multiple of 8 (16
/// bytes: the TMA's stride unit, and the register epilogue's 16-byte
/// stores) below 2^39 (2^40 bytes, the TMA's limit). A dimension of length
/// 1 is never stepped: its stride becomes the contiguous one, so callers
/// may pass whatever their framework reports for it. Writes the strides to
/// use to `out`.
int checkStrides(const char *where, const char *name, const FaStrides &given,
                 long long batch, long long heads, long long rows,
                 long long headDim, FaStrides &out,
                 long long elementBytes) {
  // 16 bytes: 8 16-bit or 16 e4m3 elements.
  const long long unit = 16 / elementBytes;
  const long long sizes[3] = {batch, heads, rows};
  const long long strides[3] = {given.batch, given.head, given.row};
  const long long contiguous[3] = {heads * rows * headDim, rows * headDim,
                                   headDim};
  const char *dims[3] = {"batch", "head", "row"};
  long long used[3];
  for (int i = 0; i < 3; ++i) {
    used[i] = strides[i];
    if (sizes[i] == 1) {
      used[i] = contiguous[i];
      continue;
    }
    if (strides[i] <= 0 || strides[i] % unit != 0 ||
        strides[i] * elementBytes >= (1LL << 40))
      return fail(std::string(where) + ": " + name + "'s " + dims[i] +
                  " stride must be a positive multiple of " +
                  std::to_string(unit) +
                  " elements (16 bytes) below 2^40 bytes, got " +
                  std::to_string(strides[i]));
  }
  out = {used[0], used[1], used[2]};
  return 0;
}
} // namespace flashmlir::runtime

using namespace flashmlir::runtime;

extern "C" {

int faEncodeTensorMap(void *map, const void *base, long long matrices,
                      long long rows, long long headDim, long long elemBits,
                      int boxRows, int dtype) {
  if (loadDriver())
    return 1;
  if (!map || reinterpret_cast<uintptr_t>(map) % 64 != 0)
    return fail("faEncodeTensorMap: the map must be 64-byte aligned");
  if (!base || reinterpret_cast<uintptr_t>(base) % 16 != 0)
    return fail("faEncodeTensorMap: the tensor must be 16-byte aligned");
  if (elemBits != 16 || (dtype != 0 && dtype != 1))
    return fail("faEncodeTensorMap: only f16 (dtype 0) and bf16 (1) tensors");
  // cuTensorMapEncodeTiled: every dimension at most 2^32, strides below
  // 2^40 bytes.
  // D: whole 16-byte rows (the TMA's stride unit); the boxes of 64
  // columns may run past it (a padded head dim), the TMA fills zeros.
  if (matrices <= 0 || rows <= 0 || headDim <= 0 || headDim % 8 != 0 ||
      boxRows <= 0 || boxRows > 256 || matrices > (1LL << 32) ||
      rows > (1LL << 32) || headDim > (1LL << 16) ||
      rows * headDim * 2 >= (1LL << 40))
    return fail("faEncodeTensorMap: bad shape (matrices " +
                std::to_string(matrices) + ", rows " + std::to_string(rows) +
                ", head dim " + std::to_string(headDim) + ", box rows " +
                std::to_string(boxRows) + ")");
  // [B * H, N, D], D innermost.
  unsigned long long dims[3] = {(unsigned long long)headDim,
                                (unsigned long long)rows,
                                (unsigned long long)matrices};
  unsigned long long strides[2] = {(unsigned long long)headDim * 2,
                                   (unsigned long long)(rows * headDim * 2)};
  return encodeTiledMap(map, base, 3, dims, strides, boxRows, dtype,
                        /*l2PromotionBytes=*/256);
}


int faEncodeStridedTensorMap(void *map, const void *base, long long batch,
                             long long heads, long long rows,
                             long long headDim, long long strideB,
                             long long strideH, long long strideN,
                             int boxRows, int dtype) {
  return faEncodeStridedTensorMapL2(map, base, batch, heads, rows, headDim,
                                    strideB, strideH, strideN, boxRows, dtype,
                                    256);
}

} // extern "C"

namespace flashmlir::runtime {
/// faEncodeStridedTensorMapL2 with boxes of `boxBytes` (the swizzle span).
int encodeStridedMap(void *map, const void *base, long long batch,
                     long long heads, long long rows, long long headDim,
                     long long strideB, long long strideH, long long strideN,
                     int boxRows, int dtype, int l2PromotionBytes,
                     int boxBytes) {
  if (l2PromotionBytes != 0 && l2PromotionBytes != 64 &&
      l2PromotionBytes != 128 && l2PromotionBytes != 256)
    return fail("faEncodeStridedTensorMap: the L2 promotion must be 0, 64, "
                "128 or 256 bytes, got " + std::to_string(l2PromotionBytes));
  if (!map || reinterpret_cast<uintptr_t>(map) % 64 != 0)
    return fail("faEncodeStridedTensorMap: the map must be 64-byte aligned");
  if (!base || reinterpret_cast<uintptr_t>(base) % 16 != 0)
    return fail("faEncodeStridedTensorMap: the tensor must be 16-byte "
                "aligned");
  if (dtype != 0 && dtype != 1 && dtype != 2)
    return fail("faEncodeStridedTensorMap: only f16 (dtype 0), bf16 (1) and "
                "e4m3 (2) tensors");
  // The innermost dimension (D, or the keys of an e4m3 V^T) in whole
  // 16-byte chunks; boxes past it (a padded head dim) read zeros.
  const long long elementBytes = dtype == 2 ? 1 : 2;
  if (batch <= 0 || heads <= 0 || rows <= 0 || headDim <= 0 ||
      headDim % (16 / elementBytes) != 0 || headDim > (1LL << 16) ||
      boxRows <= 0 ||
      boxRows > 256 || batch > (1LL << 32) || heads > (1LL << 32) ||
      rows > (1LL << 32))
    return fail("faEncodeStridedTensorMap: bad shape (batch " +
                std::to_string(batch) + ", heads " + std::to_string(heads) +
                ", rows " + std::to_string(rows) + ", head dim " +
                std::to_string(headDim) + ", box rows " +
                std::to_string(boxRows) + ")");
  FaStrides strides;
  if (checkStrides("faEncodeStridedTensorMap", "the tensor",
                   {strideB, strideH, strideN}, batch, heads, rows, headDim,
                   strides, elementBytes))
    return 1;
  // Innermost first: D, N, H, B.
  unsigned long long dims[4] = {
      (unsigned long long)headDim, (unsigned long long)rows,
      (unsigned long long)heads, (unsigned long long)batch};
  unsigned long long byteStrides[3] = {
      (unsigned long long)(strides.row * elementBytes),
      (unsigned long long)(strides.head * elementBytes),
      (unsigned long long)(strides.batch * elementBytes)};
  if (loadDriver())
    return 1;
  return encodeTiledMap(map, base, 4, dims, byteStrides, boxRows, dtype,
                        l2PromotionBytes, boxBytes);
}
} // namespace flashmlir::runtime

extern "C" {

int faEncodeStridedTensorMapL2(void *map, const void *base, long long batch,
                               long long heads, long long rows,
                               long long headDim, long long strideB,
                               long long strideH, long long strideN,
                               int boxRows, int dtype, int l2PromotionBytes) {
  return encodeStridedMap(map, base, batch, heads, rows, headDim, strideB,
                          strideH, strideN, boxRows, dtype, l2PromotionBytes,
                          /*boxBytes=*/128);
}

} // extern "C"
