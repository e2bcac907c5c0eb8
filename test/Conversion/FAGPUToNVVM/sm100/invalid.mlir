// RUN: fa-opt %s --split-input-file --fa-sm100-kernel-pipeline --verify-diagnostics

func.func @f32(%q: memref<1x1x64x64xf32>, %o: memref<1x1x64x64xf32>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fa-map-to-gpu: cannot be mapped to sm_100a: element type must be f16 or bf16, got f32}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x64xf32>, memref<1x1x64xf32>)
      : memref<1x1x64x64xf32>, memref<1x1x64x64xf32>, memref<1x1x64x64xf32>
  return
}

// -----

func.func @d96(%q: memref<1x1x64x96xf16>, %o: memref<1x1x64x96xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fagpu-tile: no sm_100a kernel for head dim 96 (the table has 64, 128 and 256); give block-r and block-c to tile it anyway}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x96xf16>, memref<1x1x64xf32>)
      : memref<1x1x64x96xf16>, memref<1x1x64x96xf16>, memref<1x1x64x96xf16>
  return
}

// -----

func.func @blockr(%q: memref<1x1x64x64xf16>, %o: memref<1x1x64x64xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{cannot be lowered to sm_100a tcgen05: block_r must be 128 (tcgen05.mma M, one TMEM lane per row), got 64}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x64xf16>, memref<1x1x64xf32>)
      {block_r = 64 : i64} : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

func.func @blockc(%q: memref<1x1x64x64xf16>, %o: memref<1x1x64x64xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{cannot be lowered to sm_100a tcgen05: block_c must be 64, 128, 192 or 256 (whole tcgen05.ld chunks of P pairs), got 96}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x64xf16>, memref<1x1x64xf32>)
      {block_c = 96 : i64} : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

func.func @tmem(%q: memref<1x1x64x256xf16>, %o: memref<1x1x64x256xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fagpu-pipeline-kv: the tiles need 459896 bytes of shared memory, more than 227 KiB}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x256xf16>, memref<1x1x64xf32>)
      {block_c = 192 : i64} : memref<1x1x64x256xf16>, memref<1x1x64x256xf16>, memref<1x1x64x256xf16>
  return
}

// -----

func.func @smem(%q: memref<1x1x64x256xf16>, %o: memref<1x1x64x256xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fagpu-pipeline-kv: the tiles need 328824 bytes of shared memory, more than 227 KiB}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x256xf16>, memref<1x1x64xf32>)
      {block_c = 128 : i64} : memref<1x1x64x256xf16>, memref<1x1x64x256xf16>, memref<1x1x64x256xf16>
  return
}
