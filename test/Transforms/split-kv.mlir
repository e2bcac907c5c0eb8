// fa-split-kv chooses the chunk count; fa-lower-fa2 builds the split nest
// (one more parallel dimension, partial O and LSE in f32 scratch) and the
// merge nest (fa.merge_partials per query block).
// RUN: fa-opt %s --split-input-file --fa-split-kv | FileCheck %s --check-prefix=AUTO
// RUN: fa-opt %s --split-input-file --fa-split-kv="splits=3" | FileCheck %s --check-prefix=FIXED
// RUN: fa-opt %s --split-input-file --fa-split-kv="splits=4" --fa-tile --fa-lower-fa2 | FileCheck %s --check-prefix=NEST
// RUN: not fa-opt %s --split-input-file --fa-split-kv="splits=4" --fa-tile --fa-lower-fa1 2>&1 | FileCheck %s --check-prefix=FA1
// RUN: fa-opt %s --split-input-file --fa-split-kv="splits=4" --fagpu-tile=target=sm_90a --fa-lower-fa2 --fa-map-to-gpu=target=sm_90a 2>&1 | FileCheck %s --check-prefix=GPU
// RUN: not fa-opt %s --split-input-file --fa-split-kv="splits=4" --fagpu-tile=target=sm_80 --fa-lower-fa2 --fa-map-to-gpu=target=sm_80 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: not fa-opt %s --fa-split-kv="splits=0" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not fa-opt %s --fa-split-kv="splits=some" 2>&1 | FileCheck %s --check-prefix=WORD
// RUN: fa-opt %s --split-input-file --fa-split-kv="dram-gbps=3352" | FileCheck %s --check-prefix=H100
// RUN: fa-opt %s --split-input-file --fa-split-kv="dram-gbps=0" | FileCheck %s --check-prefix=H100
// RUN: not fa-opt %s --fa-split-kv="dram-gbps=-1" 2>&1 | FileCheck %s --check-prefix=GBPS
// RUN: not fa-opt %s --fa-split-kv="sms=0" 2>&1 | FileCheck %s --check-prefix=SMS
// GBPS: fa-split-kv: dram-gbps must be 0 (unknown) or positive, got -1
// SMS: fa-split-kv: sms must be positive, got 0

// Decode: B = 1, Hq = 8, one query, 32k keys: 8 work items for 132 SMs;
// 16 chunks make 128 CTAs, within 5% of a full wave (15 would be 91%).
// AUTO-LABEL: func.func @decode
// AUTO: fa.attention {{.*}}kv_splits = 16 : i64
// FIXED-LABEL: func.func @decode
// FIXED: fa.attention {{.*}}kv_splits = 3 : i64
// NEST-LABEL: func.func @decode
// NEST: %[[PO:.*]] = memref.alloc({{.*}}) : memref<?x?x?x128xf32>
// NEST: %[[PL:.*]] = memref.alloc({{.*}}) : memref<?x?x?xf32>
// NEST: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}, %[[S:.*]]) in (1, 8, 1, 4)
// NEST: fa.score_tile
// NEST: fa.normalize
// NEST: linalg.copy {{.*}} outs(%{{.*}} : memref<?x128xf32
// NEST: fa.logsumexp
// NEST: {fa.loop_order = "fa2-split-kv"}
// NEST: scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (1, 8, 1)
// NEST: fa.merge_partials %{{.*}}, %{{.*}} -> %{{.*}}, %{{.*}} : memref<4x?x128xf32, {{.*}}>, memref<4x?xf32, {{.*}}> -> memref<?x128xf16, {{.*}}>, memref<?xf32, {{.*}}>
// NEST: {fa.loop_order = "fa2-merge"}
// NEST: memref.dealloc %[[PO]]
// NEST: memref.dealloc %[[PL]]
// FA1: split-KV is a FlashAttention-2 loop order (fa-lower-fa2)
// On sm_90a the split nest and its merge become one kernel: the schedule
// carries the chunk count, the scratch and the merge nest are gone.
// GPU-LABEL: func.func @decode
// GPU-NOT: memref.alloc
// GPU-NOT: scf.forall
// GPU: fagpu.attention {{.*}}schedule = #fagpu.schedule<{{.*}}, kv_splits = 4>
// GPU-NOT: fa.merge_partials
// SM80: fa-map-to-gpu: split-KV has a GPU kernel on sm_90a only, not sm_80
// BAD: fa-split-kv: expected kv_splits in [1, 1024], got 0
// WORD: fa-split-kv: splits must be auto or a count, got 'some'
func.func @decode(%q: memref<1x8x1x128xf16>, %k: memref<1x8x32768x128xf16>,
                  %v: memref<1x8x32768x128xf16>, %o: memref<1x8x1x128xf16>,
                  %lse: memref<1x8x1xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<1x8x1x128xf16>, memref<1x8x1xf32>)
      : memref<1x8x1x128xf16>, memref<1x8x32768x128xf16>, memref<1x8x32768x128xf16>
  return
}

// -----

// Prefill already fills the SMs (4 x 32 heads x 8 query blocks): no split.
// Dynamic shapes: auto cannot count the work, no split either.
// AUTO-LABEL: func.func @prefill
// AUTO-NOT: kv_splits
// AUTO-LABEL: func.func @dynamic
// AUTO-NOT: kv_splits
func.func @prefill(%q: memref<4x32x1024x128xf16>, %o: memref<4x32x1024x128xf16>) {
  fa.attention %q, %q, %q outs(%o : memref<4x32x1024x128xf16>)
      : memref<4x32x1024x128xf16>, memref<4x32x1024x128xf16>, memref<4x32x1024x128xf16>
  return
}
func.func @dynamic(%q: memref<?x?x?x128xf16>, %o: memref<?x?x?x128xf16>) {
  fa.attention %q, %q, %q outs(%o : memref<?x?x?x128xf16>)
      : memref<?x?x?x128xf16>, memref<?x?x?x128xf16>, memref<?x?x?x128xf16>
  return
}

// -----

// Decode that fills the SMs: 32 sequences x 8 heads = 256 tiles of one query
// block (under four waves of 132). On a GPU of 30 GB/s of DRAM bandwidth per
// SM or more (the default models the H200: 4,800 GB/s) a second CTA per SM
// streams beside the first: two chunks. On the H100's 3,352 GB/s (25 per SM),
// or with the bandwidth unknown, one.
// AUTO-LABEL: func.func @filled_decode
// AUTO: fa.attention {{.*}}kv_splits = 2 : i64
// H100-LABEL: func.func @filled_decode
// H100-NOT: kv_splits
func.func @filled_decode(%q: memref<32x8x1x128xf16>, %k: memref<32x8x8192x128xf16>,
                         %o: memref<32x8x1x128xf16>) {
  fa.attention %q, %k, %k outs(%o : memref<32x8x1x128xf16>)
      : memref<32x8x1x128xf16>, memref<32x8x8192x128xf16>, memref<32x8x8192x128xf16>
  return
}
