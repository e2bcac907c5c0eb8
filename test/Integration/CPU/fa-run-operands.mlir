// The reference is computed from the op's own operands, not from the
// function's arguments. Here the op reads a [64, 8] Q that the function
// builds by tiling its [4, 8] argument 16 times: fa-run captures the op's
// q, k, v and o and checks o against them. (Issue 16: the reference read
// the 4-row argument as if it held 64 rows, a heap overflow; the fix then
// refused such functions. Issue 15: fa-run runs and checks them.)
// RUN: fa-run %s | FileCheck %s
// CHECK: fa-run: fa2 f32 B=1 Hq=1 Hkv=1 Nq=64 Nk=16 D=8 Dv=8 inputs=normal
// CHECK-NEXT: unwritten=0
// CHECK-NEXT: fa-run: PASS

func.func @attention(%q: memref<1x1x4x8xf32>, %k: memref<1x1x16x8xf32>,
                     %v: memref<1x1x16x8xf32>, %o: memref<1x1x4x8xf32>) {
  %big = memref.alloc() : memref<1x1x64x8xf32>
  linalg.generic {indexing_maps = [affine_map<(b, h, i, d) -> (b, h, i mod 4, d)>,
                                   affine_map<(b, h, i, d) -> (b, h, i, d)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%q : memref<1x1x4x8xf32>) outs(%big : memref<1x1x64x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  %obig = memref.alloc() : memref<1x1x64x8xf32>
  fa.attention %big, %k, %v outs(%obig : memref<1x1x64x8xf32>)
      : memref<1x1x64x8xf32>, memref<1x1x16x8xf32>, memref<1x1x16x8xf32>
  return
}
