// RUN: fa-opt %s --split-input-file --fa-sm80-kernel-pipeline --verify-diagnostics

func.func @f32(%q: memref<1x1x64x64xf32>, %o: memref<1x1x64x64xf32>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fa-map-to-gpu: cannot be mapped to sm_80: element type must be f16 or bf16, got f32}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x64xf32>, memref<1x1x64xf32>)
      : memref<1x1x64x64xf32>, memref<1x1x64x64xf32>, memref<1x1x64x64xf32>
  return
}

// -----

func.func @d96(%q: memref<1x1x64x96xf16>, %o: memref<1x1x64x96xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fagpu-tile: no sm_80 kernel for head dim 96 (the table has 64, 128 and 256); give block-r and block-c to tile it anyway}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x96xf16>, memref<1x1x64xf32>)
      : memref<1x1x64x96xf16>, memref<1x1x64x96xf16>, memref<1x1x64x96xf16>
  return
}

// -----

func.func @dv(%q: memref<1x1x64x64xf16>, %v: memref<1x1x64x128xf16>, %o: memref<1x1x64x128xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{value head dim must equal the head dim (64) on sm_80 (sm_90a's wgmma kernel also takes a multiple of 32 below it), got 128}}
  fa.attention %q, %q, %v outs(%o, %l : memref<1x1x64x128xf16>, memref<1x1x64xf32>)
      : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x128xf16>
  return
}

// -----

func.func @tiles(%q: memref<1x1x64x64xf16>, %o: memref<1x1x64x64xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{block_r must be 64 or 128, got 32}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x64xf16>, memref<1x1x64xf32>) {block_r = 32 : i64}
      : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}
