// RUN: fa-opt %s --split-input-file --fa-sm90-kernel-pipeline --verify-diagnostics

func.func @f32(%q: memref<1x1x64x64xf32>, %o: memref<1x1x64x64xf32>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fa-map-to-gpu: cannot be mapped to sm_90a: element type must be f16, bf16 or e4m3, got f32}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x64xf32>, memref<1x1x64xf32>)
      : memref<1x1x64x64xf32>, memref<1x1x64x64xf32>, memref<1x1x64x64xf32>
  return
}

// -----

// D = 96 runs on D = 128's tiles (sm90/build-kernels.mlir); D = 80 is not
// a multiple of 32, and D = 320 has no tiles at all.
func.func @d80(%q: memref<1x1x64x80xf16>, %o: memref<1x1x64x80xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fa-map-to-gpu: cannot be mapped to sm_90a: head dim must be a multiple of 32 up to 256 on sm_90a (wgmma), got 80}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x80xf16>, memref<1x1x64xf32>)
      : memref<1x1x64x80xf16>, memref<1x1x64x80xf16>, memref<1x1x64x80xf16>
  return
}

// -----

func.func @d320(%q: memref<1x1x64x320xf16>, %o: memref<1x1x64x320xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fagpu-tile: no sm_90a kernel for head dim 320 (the table has 64, 128, 192 and 256, and multiples of 32 up to 256 on their tiles); give block-r and block-c to tile it anyway}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x320xf16>, memref<1x1x64xf32>)
      : memref<1x1x64x320xf16>, memref<1x1x64x320xf16>, memref<1x1x64x320xf16>
  return
}

// -----

func.func @blockr(%q: memref<1x1x64x64xf16>, %o: memref<1x1x64x64xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fa-map-to-gpu: cannot be mapped to sm_90a: block_r must be 64, 128 or 192 (one, two or three consumer warpgroups of 64 rows), got 96}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x64xf16>, memref<1x1x64xf32>)
      {block_r = 96 : i64} : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

func.func @blockc(%q: memref<1x1x64x64xf16>, %o: memref<1x1x64x64xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{cannot be lowered to sm_90a wgmma: block_c must be a multiple of 16 in [16, 256], got 40}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x64xf16>, memref<1x1x64xf32>)
      {block_c = 40 : i64} : memref<1x1x64x64xf16>, memref<1x1x64x64xf16>, memref<1x1x64x64xf16>
  return
}

// -----

func.func @smem(%q: memref<1x1x64x256xf16>, %o: memref<1x1x64x256xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fagpu-pipeline-kv: the tiles need 328784 bytes of shared memory, more than 227 KiB}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x256xf16>, memref<1x1x64xf32>)
      {block_c = 128 : i64} : memref<1x1x64x256xf16>, memref<1x1x64x256xf16>, memref<1x1x64x256xf16>
  return
}

// -----

func.func @blockr192(%q: memref<1x1x64x128xf16>, %o: memref<1x1x64x128xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{cannot be lowered to sm_90a wgmma: block_r = 192 needs D = 64 (three consumers get 160 registers each; at D = 128 their S, O and P spill)}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x128xf16>, memref<1x1x64xf32>)
      {block_r = 192 : i64} : memref<1x1x64x128xf16>, memref<1x1x64x128xf16>, memref<1x1x64x128xf16>
  return
}

// -----

func.func @blockr64_d256(%q: memref<1x1x64x256xf16>, %o: memref<1x1x64x256xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{cannot be lowered to sm_90a wgmma: block_r = 64 needs D <= 128 (with two CTAs per SM the kernel launches with 128 registers per thread, and ptxas cannot fit D = 256's 128 accumulators of P V)}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x256xf16>, memref<1x1x64xf32>)
      {block_r = 64 : i64} : memref<1x1x64x256xf16>, memref<1x1x64x256xf16>, memref<1x1x64x256xf16>
  return
}

// -----

func.func @blockr64_smem(%q: memref<1x1x64x128xf16>, %o: memref<1x1x64x128xf16>, %l: memref<1x1x64xf32>) {
  // expected-error @+1 {{fagpu-pipeline-kv: the tiles need 148560 bytes of shared memory, more than 113 KiB (2 CTAs per SM)}}
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x64x128xf16>, memref<1x1x64xf32>)
      {block_r = 64 : i64, block_c = 128 : i64} : memref<1x1x64x128xf16>, memref<1x1x64x128xf16>, memref<1x1x64x128xf16>
  return
}

// -----

// Attention sinks on an e4m3 Q (whose P carries probs_scale) have no
// kernel: refused rather than dropped.
func.func @sinks(%q: memref<1x4x128x128xf8E4M3FN>, %s: memref<4xf32>, %d: memref<f32>, %o: memref<1x4x128x128xf16>) {
  // expected-error @+1 {{fa-map-to-gpu: attention sinks have a GPU kernel on sm_90a with a 16-bit Q only, not sm_90a with e4m3 Q (the CPU pipeline runs them: fa-cpu-pipeline)}}
  fa.attention %q, %q, %q descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) sinks(%s : memref<4xf32>) outs(%o : memref<1x4x128x128xf16>) {causal}
      : memref<1x4x128x128xf8E4M3FN>, memref<1x4x128x128xf8E4M3FN>, memref<1x4x128x128xf8E4M3FN>
  return
}

// -----

// A score_mod the kernel has no lowering for (math.sin) is refused by name;
// arith ops and the SFU's math ops compile (build-kernels-modifications.mlir).
func.func @score_mod(%q: memref<1x4x128x128xf16>, %o: memref<1x4x128x128xf16>) {
  // expected-error @+1 {{fa-map-to-gpu: the GPU kernel has no lowering for math.sin in a score_mod or mask_mod}}
  fa.attention %q, %q, %q outs(%o : memref<1x4x128x128xf16>) {causal}
      : memref<1x4x128x128xf16>, memref<1x4x128x128xf16>, memref<1x4x128x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %r = math.sin %s : f32
      fa.yield %r : f32
    }
  return
}
