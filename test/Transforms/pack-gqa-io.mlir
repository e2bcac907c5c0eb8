// RUN: fa-opt %s --fa-tile="block-r=64 block-c=128 sram-budget=262144" --fa-io-report -o /dev/null | FileCheck %s --check-prefix=UNPACKED
// RUN: fa-opt %s --fa-pack-gqa --fa-tile="block-r=64 block-c=128 sram-budget=262144" --fa-io-report -o /dev/null | FileCheck %s --check-prefix=PACKED

// The IO report of a grouped-query decode (B 4, Hq 32, Hkv 8, Nk 4096,
// D 128) before and after fa-pack-gqa: K and V are read once per query
// head (32 x 2 MiB a batch) before, once per K/V head after -- a quarter
// of the bytes -- and the counted loops agree with the model either way.
// UNPACKED: shape: B=4 Hq=32 Hkv=8 Nq=1 Nk=4096 D=128
// UNPACKED: fa2 predicted: 134250624
// UNPACKED: fa2 match: yes
// PACKED: shape: B=4 Hq=8 Hkv=8 Nq=4 Nk=4096 D=128
// PACKED: fa2 predicted: 33587328
// PACKED: fa2 match: yes
func.func @decode(%q: memref<4x32x1x128xf16>, %k: memref<4x8x4096x128xf16>,
                  %v: memref<4x8x4096x128xf16>, %o: memref<4x32x1x128xf16>,
                  %lse: memref<4x32x1xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<4x32x1x128xf16>, memref<4x32x1xf32>)
      : memref<4x32x1x128xf16>, memref<4x8x4096x128xf16>, memref<4x8x4096x128xf16>
  return
}
