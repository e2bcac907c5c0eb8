// RUN: fa-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{expected 128 x N: a region spans all 128 TMEM lanes}}
func.func private @lanes(!fagpu.tmem<64x128xf32>)

// -----

// expected-error @+1 {{a region spans whole 32-bit columns, at most 512}}
func.func private @too_wide(!fagpu.tmem<128x1024xf32>)

// -----

// expected-error @+1 {{a lanes fragment is 128xNxf32 or 128xf32 (a row a thread)}}
func.func private @lanes_rows(!fagpu.fragment<64x128xf32, lanes>)

// -----

func.func @alloc(%warp: i32) {
  // expected-error @+1 {{tcgen05.alloc allocates f32 columns, a power of two from 32 to 512}}
  %t = fagpu.tmem_alloc warp %warp alloc_warp 5 slot 0 : !fagpu.tmem<128x384xf32>
  return
}

// -----

func.func @slice(%t: !fagpu.tmem<128x256xf32>) {
  %c200 = arith.constant 200 : i32
  // expected-error @+1 {{columns 200 .. 328 exceed the region's 256}}
  %s = fagpu.tmem_slice %t[%c200] : !fagpu.tmem<128x256xf32> -> !fagpu.tmem<128x128xf32>
  return
}

// -----

func.func @load(%t: !fagpu.tmem<128x64xf16>) {
  // expected-error @+1 {{tcgen05.ld reads f32 regions of whole 32-column chunks}}
  %s = fagpu.tmem_load %t : !fagpu.tmem<128x64xf16> -> !fagpu.fragment<128x64xf32, lanes>
  return
}

// -----

func.func @store(%p: !fagpu.fragment<128x64xf32, lanes>, %t: !fagpu.tmem<128x128xf16>) {
  // expected-error @+1 {{expected a lanes fragment of the region's shape}}
  fagpu.tmem_store %p, %t : !fagpu.fragment<128x64xf32, lanes>, !fagpu.tmem<128x128xf16>
  return
}

// -----

func.func @roles(%warp: i32) {
  // expected-error @+1 {{the load and MMA warps must be two different warps after the softmax warpgroup (warps 0-3), got 3 and 5}}
  fagpu.tcgen05_roles %warp load_warp 3 mma_warp 5 softmax {
    %a = arith.constant 0 : i32
  } load {
    %b = arith.constant 0 : i32
  } mma {
    %c = arith.constant 0 : i32
  }
  return
}

// -----

func.func @init(%b: !fagpu.barriers<2>) {
  // expected-error @+1 {{expected one arrival count per operand, got 2 for 1}}
  fagpu.init_barriers %b arrivals [1, 128] : !fagpu.barriers<2>
  return
}

// -----

func.func @mma_result(%q: !fagpu.smem_tile<128x64xf16>, %k: !fagpu.smem_tile<64x64xf16>,
                      %s: !fagpu.tmem<128x64xf32>) {
  // expected-error @+1 {{a TMEM accumulator is updated in place: no result}}
  %r = fagpu.mma %q, %k acc(%s) : !fagpu.smem_tile<128x64xf16>, !fagpu.smem_tile<64x64xf16>, !fagpu.tmem<128x64xf32> -> !fagpu.fragment<64x64xf32, accumulator>
  return
}

// -----

func.func @mma_tmem_a(%p: !fagpu.tmem<128x64xf32>, %v: !fagpu.smem_tile<64x64xf16>,
                      %o: !fagpu.tmem<128x64xf32>) {
  // expected-error @+1 {{a TMEM A holds f16/bf16 pairs (P of O += P V, with B mn_major)}}
  fagpu.mma %p, %v acc(%o) {mn_major} : !fagpu.tmem<128x64xf32>, !fagpu.smem_tile<64x64xf16>, !fagpu.tmem<128x64xf32>
  return
}

// -----

func.func @accumulate(%q: !fagpu.smem_tile<64x64xf16>, %k: !fagpu.smem_tile<64x64xf16>, %f: i1) {
  // expected-error @+1 {{accumulate(%flag) is for TMEM accumulators}}
  %s = fagpu.mma %q, %k accumulate(%f) : !fagpu.smem_tile<64x64xf16>, !fagpu.smem_tile<64x64xf16> -> !fagpu.fragment<64x64xf32, accumulator>
  return
}

// -----

func.func @release(%q: !fagpu.pipeline<stages = 1, buffers = 1, 128x64xf16, fill_once>, %s: i32) {
  // expected-error @+1 {{a fill_once pipeline has no empty barriers: its buffers are never given back}}
  fagpu.pipeline_release %q[%s] buffer 0 : !fagpu.pipeline<stages = 1, buffers = 1, 128x64xf16, fill_once>
  return
}

// -----

func.func @rescale(%o: !fagpu.tmem<128x64xf32>, %a: !fagpu.fragment<64xf32, rows>) {
  // expected-error @+1 {{expected an f32 TMEM region of whole 32-column chunks scaled by a lanes fragment}}
  fagpu.rescale %o, %a : !fagpu.tmem<128x64xf32>, !fagpu.fragment<64xf32, rows>
  return
}

// -----

// The e4m3 epilogue (V's descale, the probs scale) is the fragment one's.
func.func @totals_descale(%l: !fagpu.fragment<128xf32, lanes>, %vd: f32) {
  // expected-error @+1 {{descale belongs to the e4m3 kernels' rows fragments, not to O in TMEM}}
  %t, %f = fagpu.row_totals %l descale %vd : !fagpu.fragment<128xf32, lanes>
  return
}

// -----

func.func @lse_probs_scale(%m: !fagpu.fragment<128xf32, lanes>, %i: i32, %out: !llvm.ptr<1>) {
  %lse_rows1 = fagpu.lse_rows %out[%i] rows %i : !llvm.ptr<1>
  // expected-error @+1 {{probs_scale belongs to the e4m3 kernels' rows fragments, not to O in TMEM}}
  fagpu.store_lse %m, %m rows(%i, %i) to %lse_rows1 : !llvm.ptr<1> {probs_scale = 256.0 : f32} : !fagpu.fragment<128xf32, lanes>
  return
}

// -----

func.func @store_tmem_f32(%o: !fagpu.tmem<128x64xf32>, %f: !fagpu.fragment<128xf32, lanes>, %i: i32, %out: !llvm.ptr<1>) {
  // expected-error @+1 {{O in TMEM is stored as f16 or bf16}}
  fagpu.store_tmem_rows %o, %f rows(%i, %i, %i) to %out : !llvm.ptr<1> as f32 : !fagpu.tmem<128x64xf32>, !fagpu.fragment<128xf32, lanes>
  return
}

// -----

func.func @store_tmem_rows_factors(%o: !fagpu.tmem<128x64xf32>, %f: !fagpu.fragment<128xf32, rows>, %i: i32, %out: !llvm.ptr<1>) {
  // expected-error @+1 {{O in TMEM is stored with the lanes factors of its rows}}
  fagpu.store_tmem_rows %o, %f rows(%i, %i, %i) to %out : !llvm.ptr<1> as f16 : !fagpu.tmem<128x64xf32>, !fagpu.fragment<128xf32, rows>
  return
}

// -----

// 2^62 columns: the width check may not wrap around.
// expected-error @+1 {{a region spans whole 32-bit columns, at most 512}}
func.func private @wraps(!fagpu.tmem<128x4611686018427387904xf32>)
