// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a},fagpu-io-report))" -o /dev/null | FileCheck %s
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a},fagpu-persistent,fagpu-io-report))" -o /dev/null | FileCheck %s --check-prefix=DYN
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a},fagpu-io-report{sms=2 l2-bytes=1048576}))" -o /dev/null | FileCheck %s --check-prefix=FITS
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a},fagpu-io-report{sms=2 l2-bytes=65536}))" -o /dev/null | FileCheck %s --check-prefix=SPILL
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a},fagpu-io-report{code-bytes=79488}))" -o /dev/null | FileCheck %s --check-prefix=CODE
// RUN: not fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a},fagpu-io-report{code-bytes=-1}))" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADCODE
// BADCODE: error: 'fagpu.attention' op fagpu-io-report: code-bytes must not be negative
// The static persistent order (fagpu-persistent on a non-causal tile).
// RUN: fa-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(fa-attention-to-buffers,fagpu-tile{target=sm_90a},fa-lower-fa2,fa-map-to-gpu{target=sm_90a},fagpu-persistent,fagpu-io-report))" -o /dev/null | FileCheck %s --check-prefix=STATIC
// STATIC: dram model: 132 SMs x 1 CTAs = 132 of 512 work items at a time (CTA r takes items r, r + 132, ...)

// With the dynamic scheduler (causal, persistent), the counter's atomics:
// 32 bytes per tile taken plus one reset, (2 + 1) * 32 at N = 256 (matches
// ncu's count on the H200 at every causal persistent grid point).
// DYN: kernel: target=sm_90a B_r=128 B_c=128 causal
// DYN: l2_to_sm_read_bytes: 131168 (q 32768, k 49152, v 49152, tile counter 96)

// The L2 -> SM bytes of the kernels, counted from their tiles. Without a
// mask every tile visits every block: FlashAttention-2's Q + (K + V) T_r.
// At D = 128, N = 4096, B = 1, H = 16 this is the 1,090,519,040 bytes
// ncu measured for the sm_90a kernel (l1tex__m_xbar2l1tex_read_bytes.sum,
// shared/GPU.md).
// CHECK-LABEL: fagpu-io-report:
// CHECK: kernel: target=sm_90a B_r=128 B_c=128 window=0
// CHECK: query tiles per head: 32, K/V blocks visited per head: 1024
// CHECK: l2_to_sm_read_bytes: 1090519040 (q 16777216, k 536870912, v 536870912, tile counter 0)
// CHECK: sm_to_l2_write_bytes: 17039360 (o 16777216, lse 262144, tile counter 0)
// CHECK: fa2_model_read_bytes: 1090519040
// The H200's DRAM reads at this size (ncu, shared/GPU.md: 50.4 MB) are the
// compulsory Q + K + V: 512 tiles, 132 at a time; a wave's tiles read
// each block together, and a head's 2 MiB of K/V is read again by its next
// wave long before 33 MiB of other data evicts it: read once.
// CHECK: dram model: 132 SMs x 1 CTAs = 132 of 512 work items at a time (the next item to the CTA that frees), LRU over 34603008 of the L2's 62914560 bytes; K/V distinct 33554432, from DRAM 33554432 over 16384 block reads
// CHECK: dram_read_bytes: 50331648 (q 16777216, k+v 33554432, split-KV partials 0, code 0: not given, see code-bytes)
// The kernel's code (fa-compile's code_bytes) is read once per launch.
// CODE: dram_read_bytes: 50411136 (q 16777216, k+v 33554432, split-KV partials 0, code 79488)
func.func @full(%q: memref<1x16x4096x128xf16>, %o: memref<1x16x4096x128xf16>, %l: memref<1x16x4096xf32>) {
  fa.attention %q, %q, %q outs(%o, %l : memref<1x16x4096x128xf16>, memref<1x16x4096xf32>)
      : memref<1x16x4096x128xf16>, memref<1x16x4096x128xf16>, memref<1x16x4096x128xf16>
  return
}

// -----

// Causal: a tile stops at its last row's diagonal. N = 256 in tiles of
// 128: tile 0 visits block 0, tile 1 blocks 0 and 1 (3 of the model's 4).
// CHECK-LABEL: fagpu-io-report:
// CHECK: B_r=128 B_c=128 causal
// CHECK: query tiles per head: 2, K/V blocks visited per head: 3
// CHECK: l2_to_sm_read_bytes: 131072 (q 32768, k 49152, v 49152, tile counter 0)
// CHECK: fa2_model_read_bytes: 163840
func.func @causal(%q: memref<1x1x256x64xf16>, %o: memref<1x1x256x64xf16>, %l: memref<1x1x256xf32>) {
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x256x64xf16>, memref<1x1x256xf32>) {causal}
      : memref<1x1x256x64xf16>, memref<1x1x256x64xf16>, memref<1x1x256x64xf16>
  return
}

// -----

// Ragged tails: TMA moves whole boxes (measured on the H200: N = 1000
// moves the bytes of N = 1024), so Nq = 300 in tiles of 192 reads 384 Q
// rows and Nk = 200 in blocks of 128 reads 256 K and V rows per tile; the
// writes are O's 300 rows; no LSE.
// CHECK-LABEL: fagpu-io-report:
// CHECK: B_r=192 B_c=128 window=0
// CHECK: query tiles per head: 2, K/V blocks visited per head: 4
// CHECK: l2_to_sm_read_bytes: 180224 (q 49152, k 65536, v 65536, tile counter 0)
// CHECK: sm_to_l2_write_bytes: 38400 (o 38400, lse 0, tile counter 0)
func.func @ragged(%q: memref<1x1x300x64xf16>, %k: memref<1x1x200x64xf16>, %o: memref<1x1x300x64xf16>) {
  fa.attention %q, %k, %k outs(%o : memref<1x1x300x64xf16>)
      : memref<1x1x300x64xf16>, memref<1x1x200x64xf16>, memref<1x1x200x64xf16>
  return
}

// -----

// Grouped-query heads each read their K/V head's blocks (no sharing
// between CTAs): 8 query heads x (Q + K + V) of 32 KiB each.
// CHECK-LABEL: fagpu-io-report:
// CHECK: shape: B=2 Hq=4 Hkv=2 Nq=128 Nk=128 D=128
// CHECK: l2_to_sm_read_bytes: 786432 (q 262144, k 262144, v 262144, tile counter 0)
func.func @gqa(%q: memref<2x4x128x128xf16>, %k: memref<2x2x128x128xf16>, %o: memref<2x4x128x128xf16>, %l: memref<2x4x128xf32>) {
  fa.attention %q, %k, %k outs(%o, %l : memref<2x4x128x128xf16>, memref<2x4x128xf32>)
      : memref<2x4x128x128xf16>, memref<2x2x128x128xf16>, memref<2x2x128x128xf16>
  return
}

// -----

// A window |i - j| < 100 bounds both sides: tiles of 192 rows at 0, 192,
// 384 visit blocks [0, 3), [0, 4), [2, 4) of 128 keys (the last tile's Q
// box is whole: 576 rows).
// CHECK-LABEL: fagpu-io-report:
// CHECK: B_r=192 B_c=128 window=100
// CHECK: query tiles per head: 3, K/V blocks visited per head: 9
// CHECK: l2_to_sm_read_bytes: 368640 (q 73728, k 147456, v 147456, tile counter 0)
func.func @window(%q: memref<1x1x512x64xf16>, %o: memref<1x1x512x64xf16>, %l: memref<1x1x512xf32>) {
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x512x64xf16>, memref<1x1x512xf32>) {window = 100 : i64}
      : memref<1x1x512x64xf16>, memref<1x1x512x64xf16>, memref<1x1x512x64xf16>
  return
}

// -----

// Separate left and right reaches (flash-attention's window_size (29, 70):
// causal, window 100, diagonal offset 70): row i sees keys [i - 29, i + 70].
// Tiles of 128 rows at 0, 128, 256, 384 visit blocks [0, 2), [0, 3),
// [1, 4), [2, 4) of 128 keys: 10, where without the offset ([i - 99, i])
// they visit [0, 1), [0, 2), [1, 3), [2, 4): 7.
// CHECK-LABEL: fagpu-io-report:
// CHECK: B_r=128 B_c=128 causal window=100 diagonal_offset=70
// CHECK: query tiles per head: 4, K/V blocks visited per head: 10
// CHECK: l2_to_sm_read_bytes: 393216 (q 65536, k 163840, v 163840, tile counter 0)
func.func @band(%q: memref<1x1x512x64xf16>, %o: memref<1x1x512x64xf16>, %l: memref<1x1x512xf32>) {
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x512x64xf16>, memref<1x1x512xf32>) {causal, window = 100 : i64, diagonal_offset = 70 : i64}
      : memref<1x1x512x64xf16>, memref<1x1x512x64xf16>, memref<1x1x512x64xf16>
  return
}

// -----

// Split-KV (S = 4), decode: each of the 4 chunks reloads the tile's Q box
// (64 rows) and reads its 16 of the 64 blocks once (K and V as unsplit);
// every chunk writes its row's partial O in f32 (4 x 512 B) and its LSE
// (4 bytes, a whole 32-byte sector: 4 x 32 B), as the merge writes O and
// the LSE (another sector), the merge reads the 4 LSE twice (a 32-byte sector per warp-wide load)
// and the 4 O rows back (4 x (64 + 512) B),
// one warp counts in 4 times and resets its counter (5 x 32 B).
// CHECK-LABEL: fagpu-io-report:
// CHECK: kernel: target=sm_90a B_r=64 B_c=64 window=0 kv_splits=4
// CHECK: l2_to_sm_read_bytes: 17321216 (q 524288, k 8388608, v 8388608, tile counter 0, merge 18432, arrivals 1280)
// CHECK: sm_to_l2_write_bytes: 20992 (o 2048, lse 256, tile counter 0, partials 17408, arrivals 1280)
func.func @split_decode(%q: memref<1x8x1x128xf16>, %k: memref<1x8x4096x128xf16>, %o: memref<1x8x1x128xf16>, %l: memref<1x8x1xf32>) {
  fa.attention %q, %k, %k outs(%o, %l : memref<1x8x1x128xf16>, memref<1x8x1xf32>) {kv_splits = 4 : i64}
      : memref<1x8x1x128xf16>, memref<1x8x4096x128xf16>, memref<1x8x4096x128xf16>
  return
}

// -----

// Split-KV with empty chunks and masked rows: bottom-right causal, Nq = 70
// after 230 cached keys, B_c = 128: each tile visits 3 blocks, so chunks
// 3..7 of 8 are empty (no Q, no K/V; they still write their rows' partials
// and count in). Tile 0's rows 0..25 (key positions 230..255) see nothing
// in chunk 2 (keys 256..299): the merge reads O of 64 + 64 + 38 rows there,
// and all 3 chunks of tile 1's 6 rows: 184 x 256 B, plus 8 x 70 x 64 B of
// LSE sectors. 4 + 1 warps count in 8 times and reset (9 x 32 B each).
// The chunks write their 70 rows' partial LSE a warp's 16 rows at a time in
// whole sectors, chunk c's first at element 70 c (8 x 400 B); the merge
// writes the final LSE a row at a time, a sector each (70 x 32 B).
// CHECK-LABEL: fagpu-io-report:
// CHECK: kernel: target=sm_90a B_r=64 B_c=128 causal window=0 kv_splits=8
// CHECK: query tiles per head: 2, K/V blocks visited per head: 6
// CHECK: l2_to_sm_read_bytes: 330144 (q 49152, k 98304, v 98304, tile counter 0, merge 82944, arrivals 1440)
// CHECK: sm_to_l2_write_bytes: 159200 (o 8960, lse 2240, tile counter 0, partials 146560, arrivals 1440)
func.func @split_ragged(%q: memref<1x1x70x64xf16>, %k: memref<1x1x300x64xf16>, %o: memref<1x1x70x64xf16>, %l: memref<1x1x70xf32>) {
  fa.attention %q, %k, %k outs(%o, %l : memref<1x1x70x64xf16>, memref<1x1x70xf32>) {causal, bottom_right, kv_splits = 8 : i64}
      : memref<1x1x70x64xf16>, memref<1x1x300x64xf16>, memref<1x1x300x64xf16>
  return
}

// -----

// The DRAM model (fagpu::dramTraffic). Q 512 x 64 f16 = 65,536 bytes; a
// K/V block 128 x (64 + 64) x 2 = 32,768 bytes, 4 of them; 4 query tiles
// of 128 rows, two at a time on 2 SMs (one CTA each at B_r = 128), each
// reading blocks 0-3 in step with the other. With 1 MiB of L2 (an LRU of
// 55%, 576,716 bytes) every block stays: each from DRAM once. With 64 KiB
// (36,044 bytes) one block fits: tiles 0-1 bring blocks 0-3, tiles 2-3
// bring them again.
// FITS: dram model: 2 SMs x 1 CTAs = 2 of 4 work items at a time (the next item to the CTA that frees), LRU over 576716 of the L2's 1048576 bytes; K/V distinct 131072, from DRAM 131072 over 16 block reads
// FITS: dram_read_bytes: 196608 (q 65536, k+v 131072, split-KV partials 0, code 0: not given, see code-bytes)
// FITS: dram_write_bytes: 67584 (o and lse, split-KV partials 0)
// SPILL: LRU over 36044 of the L2's 65536 bytes; K/V distinct 131072, from DRAM 262144 over 16 block reads
// SPILL: dram_read_bytes: 327680 (q 65536, k+v 262144, split-KV partials 0, code 0: not given, see code-bytes)
// Causal, spilled: the longest query block runs first, so tiles 3 and 2
// visit blocks 0-3 and 0-2, then tiles 1 and 0 blocks 0-1 and 0: blocks 0
// and 1 come back once more (10 block reads, 6 from DRAM).
// SPILL: K/V distinct 131072, from DRAM 196608 over 10 block reads
// SPILL: dram_read_bytes: 262144 (q 65536, k+v 196608, split-KV partials 0, code 0: not given, see code-bytes)
func.func @dram(%q: memref<1x1x512x64xf16>, %o: memref<1x1x512x64xf16>, %l: memref<1x1x512xf32>) {
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x512x64xf16>, memref<1x1x512xf32>)
      {block_r = 128 : i64, block_c = 128 : i64}
      : memref<1x1x512x64xf16>, memref<1x1x512x64xf16>, memref<1x1x512x64xf16>
  fa.attention %q, %q, %q outs(%o, %l : memref<1x1x512x64xf16>, memref<1x1x512xf32>)
      {block_r = 128 : i64, block_c = 128 : i64, causal}
      : memref<1x1x512x64xf16>, memref<1x1x512x64xf16>, memref<1x1x512x64xf16>
  return
}
