// RUN: fa-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{a warpgroup fragment has 64 rows (128: two row tiles per warp)}}
func.func private @rows32(!fagpu.fragment<32x64xf32, accumulator>)

// -----

// expected-error @+1 {{an accumulator fragment holds f32}}
func.func private @acc_f16(!fagpu.fragment<64x64xf16, accumulator>)

// -----

// expected-error @+1 {{expected accumulator, operand_a, rows or lanes, got columns}}
func.func private @layout(!fagpu.fragment<64x64xf32, columns>)

// -----

// expected-error @+1 {{C of 64 (a 128-byte column block)}}
func.func private @ragged(!fagpu.smem_tile<64x48xf16>)

// -----

// expected-error @+1 {{block_rows (96) must be a multiple of the rows (64)}}
func.func private @block_rows(!fagpu.smem_tile<64x64xf16, block_rows = 96>)

// -----

// expected-error @+1 {{expected 1 or 2 buffers per stage, got 3}}
func.func private @buffers(!fagpu.pipeline<stages = 2, buffers = 3, 64x64xf16>)

// -----

// Buffer 1's own tile type holds as many bytes as buffer 0's.
// expected-error @+1 {{buffer 1's tile must be whole, of buffer 0's element type and bytes, got '!fagpu.smem_tile<128x128xf8E4M3FN>' beside '!fagpu.smem_tile<256x128xf8E4M3FN>'}}
func.func private @second_tile_bytes(!fagpu.pipeline<stages = 2, buffers = 2, 256x128xf8E4M3FN, 128x128xf8E4M3FN>)

// -----

// expected-error @+1 {{a second tile type is buffer 1's, of a pipeline of 2 buffers, and differs from buffer 0's}}
func.func private @second_tile_one_buffer(!fagpu.pipeline<stages = 2, buffers = 1, 256x128xf8E4M3FN, 128x256xf8E4M3FN>)

// -----

func.func @second_tile_view(%s: i32) {
  %kv = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 0 : i64} : !fagpu.pipeline<stages = 2, buffers = 2, 256x128xf8E4M3FN, 128x256xf8E4M3FN>
  // expected-error @+1 {{result must be the tile type of the pipeline's buffer '!fagpu.smem_tile<128x256xf8E4M3FN>'}}
  %t = fagpu.pipeline_tile %kv[%s] buffer 1 : !fagpu.pipeline<stages = 2, buffers = 2, 256x128xf8E4M3FN, 128x256xf8E4M3FN> -> !fagpu.smem_tile<256x128xf8E4M3FN>
  return
}

// -----

func.func @buffer_out_of_range(%s: i32) {
  %kv = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 0 : i64} : !fagpu.pipeline<stages = 2, buffers = 1, 64x64xf16>
  // expected-error @+1 {{buffer 1 is not one of the 1 buffers of the pipeline}}
  fagpu.pipeline_wait %kv[%s] buffer 1 parity %s : !fagpu.pipeline<stages = 2, buffers = 1, 64x64xf16>
  return
}

// -----

func.func @tile_offset() {
  // expected-error @+1 {{tile_offset must be a multiple of the 1 KiB swizzle atom}}
  %kv = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 100 : i64} : !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
  return
}

// -----

func.func @registers(%wg: i32) {
  // expected-error @+1 {{the budgets need 98304 registers, more than the 65536 of the register file}}
  fagpu.warp_specialize %wg consumers 3 registers(producer = 24, consumer = 248) producer {
    %x = arith.constant 0 : i32
  } consumer {
  ^bb0(%c: i32):
  }
  return
}

// -----

func.func @consumer_index(%wg: i32) {
  // expected-error @+1 {{the consumer region takes its consumer index (i32)}}
  fagpu.warp_specialize %wg consumers 2 registers(producer = 24, consumer = 240) producer {
    %x = arith.constant 0 : i32
  } consumer {
    %y = arith.constant 0 : i32
  }
  return
}

// -----

func.func @mma_shapes(%a: !fagpu.smem_tile<64x64xf16>, %b: !fagpu.smem_tile<128x128xf16>) {
  // expected-error @+1 {{shapes do not multiply: A is 64 x 64, B gives 128 x 128, result 64 x 128}}
  %s = fagpu.mma %a, %b : !fagpu.smem_tile<64x64xf16>, !fagpu.smem_tile<128x128xf16> -> !fagpu.fragment<64x128xf32, accumulator>
  return
}

// -----

func.func @mma_types(%a: !fagpu.smem_tile<64x64xf16>, %b: !fagpu.smem_tile<64x64xbf16>) {
  // expected-error @+1 {{A and B element types differ}}
  %s = fagpu.mma %a, %b : !fagpu.smem_tile<64x64xf16>, !fagpu.smem_tile<64x64xbf16> -> !fagpu.fragment<64x64xf32, accumulator>
  return
}

// -----

func.func @moved_without_threshold(%s: !fagpu.fragment<64x64xf32, accumulator>, %m: !fagpu.fragment<64xf32, rows>, %i: i32, %f: f32) {
  // expected-error @+1 {{the moved flag is the result of conditional rescaling: present iff rescale_threshold is}}
  %p, %m1, %l1, %a, %moved = fagpu.softmax_step %s, %m, %m keys(%i, %i) row %i scale %f : !fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<64xf32, rows> -> !fagpu.fragment<64x64xf16, operand_a>, i1
  return
}

// -----

// The e4m3 epilogue's probs scale is an exact power of two (l carries it,
// the LSE takes its log2 off).
func.func @store_probs_scale(%m: !fagpu.fragment<64xf32, rows>, %i: i32, %ptr: !llvm.ptr<1>) {
  %lse_rows1 = fagpu.lse_rows %ptr[%i] rows %i : !llvm.ptr<1>
  // expected-error @+1 {{probs_scale must be a positive power of two, got 3.000000e+00}}
  fagpu.store_lse %m, %m rows(%i, %i) to %lse_rows1 : !llvm.ptr<1> {probs_scale = 3.0 : f32} : !fagpu.fragment<64xf32, rows>
  return
}

// -----

func.func @store_element(%o: !fagpu.fragment<64x64xf32, accumulator>, %f: !fagpu.fragment<64xf32, rows>, %i: i32, %ptr: !llvm.ptr) {
  %orows1, %ostride1 = fagpu.output_rows %ptr[%i] rows %i : !llvm.ptr as f16 {columns = 64 : i64}
  // expected-error @+1 {{O holds f16, bf16 or (split-KV partials) f32, got 'i32'}}
  fagpu.store_rows %o, %f rows(%i, %i) to %orows1 stride %ostride1 : !llvm.ptr as i32 : !fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<64xf32, rows>
  return
}

// -----

// f32 partials are stored from registers, e4m3 O not at all: a staging tile
// holds 16-bit O.
func.func @stage_e4m3(%o: !fagpu.fragment<64x128xf32, accumulator>, %f: !fagpu.fragment<64xf32, rows>, %i: i32, %t: !fagpu.smem_tile<64x128xf8E4M3FN>) {
  // expected-error @+1 {{O is staged as f16 or bf16, got 'f8E4M3FN'}}
  fagpu.stage_output %o, %f into %t sync %i : !fagpu.fragment<64x128xf32, accumulator>, !fagpu.fragment<64xf32, rows>, !fagpu.smem_tile<64x128xf8E4M3FN>
  return
}

// -----

// Copied rows move whole pairs of 16-byte pieces.
func.func @copy_rows_odd_pieces(%i: i32, %ptr: !llvm.ptr<1>, %t: !fagpu.smem_tile<64x64xf16>) {
  // expected-error @+1 {{columns must be a multiple of 16 in [16, 64] (O's columns, at most the tile's), got 40}}
  fagpu.copy_staged_rows %t rows(%i, %i, %i) to %ptr : !llvm.ptr<1> sync %i {columns = 40 : i64} : !fagpu.smem_tile<64x64xf16>
  return
}

// -----

// O's columns (a padded head dim): whole 8-column groups of the fragment,
// stored from registers.
func.func @store_columns(%o: !fagpu.fragment<64x64xf32, accumulator>, %f: !fagpu.fragment<64xf32, rows>, %i: i32, %ptr: !llvm.ptr<1>) {
  %orows2, %ostride2 = fagpu.output_rows %ptr[%i] rows %i : !llvm.ptr<1> as f16 {columns = 72 : i64}
  // expected-error @+1 {{columns must be a multiple of 8 in [8, 64] (O's columns, at most the tile's), got 72}}
  fagpu.store_rows %o, %f rows(%i, %i) to %orows2 stride %ostride2 : !llvm.ptr<1> as f16 {columns = 72 : i64} : !fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<64xf32, rows>
  return
}

// -----

func.func @strided_store_two_strides(%i: i32, %s: i64, %ptr: !llvm.ptr<1>) {
  // expected-error @+1 {{a strided O stored through a pointer needs its batch, head and row strides, got 2}}
  %rows, %stride = fagpu.output_rows %ptr[%i] rows %i : !llvm.ptr<1> as f16 strided(%i, %s, %s) {columns = 64 : i64}
  return
}

// -----

func.func @output_rows_element(%i: i32, %ptr: !llvm.ptr<1>) {
  // expected-error @+1 {{O holds f16, bf16 or (split-KV partials) f32, got 'i32'}}
  %rows, %stride = fagpu.output_rows %ptr[%i] rows %i : !llvm.ptr<1> as i32 {columns = 64 : i64}
  return
}

// -----

func.func @output_rows_columns(%i: i32, %ptr: !llvm.ptr<1>) {
  // expected-error @+1 {{columns must be a positive multiple of 8, got 12}}
  %rows, %stride = fagpu.output_rows %ptr[%i] rows %i : !llvm.ptr<1> as f16 {columns = 12 : i64}
  return
}

// -----

func.func @strided_copy_two_strides(%i: i32, %s: i64, %ptr: !llvm.ptr<1>, %t: !fagpu.smem_tile<64x64xf16>) {
  // expected-error @+1 {{a strided O stored through a pointer needs its batch, head and row strides, got 2}}
  fagpu.copy_staged_rows %t rows(%i, %i, %i) to %ptr : !llvm.ptr<1> strided(%i, %s, %s) sync %i : !fagpu.smem_tile<64x64xf16>
  return
}

// -----

func.func @store_rows_of_other_rows(%o: !fagpu.fragment<64x64xf32, accumulator>, %f: !fagpu.fragment<128xf32, rows>, %i: i32, %ptr: !llvm.ptr<1>) {
  %orows4, %ostride4 = fagpu.output_rows %ptr[%i] rows %i : !llvm.ptr<1> as f16 {columns = 64 : i64}
  // expected-error @+1 {{the factors must be those of O's rows}}
  fagpu.store_rows %o, %f rows(%i, %i) to %orows4 stride %ostride4 : !llvm.ptr<1> as f16 : !fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<128xf32, rows>
  return
}

// -----

func.func @store_rows_of_scores(%o: !fagpu.fragment<64x64xf32, accumulator>, %i: i32, %ptr: !llvm.ptr<1>) {
  %orows5, %ostride5 = fagpu.output_rows %ptr[%i] rows %i : !llvm.ptr<1> as f16 {columns = 64 : i64}
  // expected-error @+1 {{expected the O accumulator and its rows' factors}}
  fagpu.store_rows %o, %o rows(%i, %i) to %orows5 stride %ostride5 : !llvm.ptr<1> as f16 : !fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<64x64xf32, accumulator>
  return
}

// -----

// A staging tile holds one warpgroup's rows: the mma.sync kernel's
// 128-row fragments are stored from registers.
func.func @stage_two_tiles(%o: !fagpu.fragment<128x64xf32, accumulator>, %f: !fagpu.fragment<128xf32, rows>, %i: i32, %t: !fagpu.smem_tile<64x64xf16>) {
  // expected-error @+1 {{a staging tile holds one warpgroup's 64 rows}}
  fagpu.stage_output %o, %f into %t sync %i : !fagpu.fragment<128x64xf32, accumulator>, !fagpu.fragment<128xf32, rows>, !fagpu.smem_tile<64x64xf16>
  return
}

// -----

func.func @stage_other_columns(%o: !fagpu.fragment<64x64xf32, accumulator>, %f: !fagpu.fragment<64xf32, rows>, %i: i32, %t: !fagpu.smem_tile<64x128xf16>) {
  // expected-error @+1 {{the staging tile must hold the warpgroup's 64 rows of O}}
  fagpu.stage_output %o, %f into %t sync %i : !fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<64xf32, rows>, !fagpu.smem_tile<64x128xf16>
  return
}

// -----

func.func @tma_store_two_tiles(%i: i32, %map: !llvm.ptr, %t: !fagpu.smem_tile<128x64xf16>) {
  // expected-error @+1 {{a staging tile holds one warpgroup's 64 rows, got 128}}
  fagpu.tma_store_staged %t rows(%i, %i) to %map : !llvm.ptr sync %i : !fagpu.smem_tile<128x64xf16>
  return
}

// -----

func.func @row_totals_of_scores(%s: !fagpu.fragment<64x64xf32, accumulator>) {
  // expected-error @+1 {{expected the rows' l as a rows or lanes fragment}}
  %t, %f = fagpu.row_totals %s : !fagpu.fragment<64x64xf32, accumulator>
  return
}

// -----

func.func @store_lse_of_scores(%s: !fagpu.fragment<64x64xf32, accumulator>, %i: i32, %ptr: !llvm.ptr<1>) {
  %lse_rows2 = fagpu.lse_rows %ptr[%i] rows %i : !llvm.ptr<1>
  // expected-error @+1 {{expected the rows' m and l as rows or lanes fragments}}
  fagpu.store_lse %s, %s rows(%i, %i) to %lse_rows2 : !llvm.ptr<1> : !fagpu.fragment<64x64xf32, accumulator>
  return
}

// -----

// A row tile is one of the source's 64-row tiles.
func.func @row_tile_index(%o: !fagpu.fragment<128x64xf32, accumulator>) {
  // expected-error @+1 {{tile index 2 is not one of the source's 2 64-row tiles}}
  %t = fagpu.row_tile %o[2] : !fagpu.fragment<128x64xf32, accumulator> -> !fagpu.fragment<64x64xf32, accumulator>
  return
}

// -----

func.func @row_tile_columns(%o: !fagpu.fragment<128x64xf32, accumulator>) {
  // expected-error @+1 {{expected a 64-row tile of the source fragment, of its layout, element type and columns}}
  %t = fagpu.row_tile %o[0] : !fagpu.fragment<128x64xf32, accumulator> -> !fagpu.fragment<64x32xf32, accumulator>
  return
}

// -----

func.func @merge_head_dim(%i: i32, %p: !llvm.ptr<1>) {
  // expected-error @+1 {{head_dim must be a multiple of 32 in [32, 256] (each lane merges head_dim / 32 columns), got 48}}
  fagpu.merge_splits rows(%i, %i, %i) of %i x %i arrivals %p partials(%p, %p) to %p as f16 {head_dim = 48 : i64} : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  return
}

// -----

func.func @merge_element(%i: i32, %p: !llvm.ptr<1>) {
  // expected-error @+1 {{O holds f16 or bf16, got 'f32'}}
  fagpu.merge_splits rows(%i, %i, %i) of %i x %i arrivals %p partials(%p, %p) to %p as f32 {head_dim = 64 : i64} : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  return
}

// -----

// expected-error @+1 {{a row_major tile has no column blocks: block_rows must equal the rows}}
func.func private @row_major_block_rows(!fagpu.smem_tile<64x64xf16, block_rows = 128, row_major>)

// -----

func.func @cp_async_pipeline_barrier(%s: i32) {
  %kv = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 16 : i64} : !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16, row_major>
  // expected-error @+1 {{a cp.async (row_major) pipeline has no barriers: order its stages with fagpu.copy_commit and fagpu.copy_wait}}
  fagpu.pipeline_wait %kv[%s] buffer 0 parity %s : !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16, row_major>
  return
}

// -----

func.func @cp_async_init() {
  %kv = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 0 : i64} : !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16, row_major>
  // expected-error @+1 {{a cp.async (row_major) pipeline has no barriers to initialise}}
  fagpu.init_pipelines %kv consumer_arrivals 4 : !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16, row_major>
  return
}

// -----

func.func @row_major_offset() {
  // expected-error @+1 {{offset of a row_major tile must be a multiple of 16 bytes}}
  %t = fagpu.shared_tile offset 8 : !fagpu.smem_tile<64x64xf16, row_major>
  return
}

// -----

func.func @copy_into_column_blocks(%p: !llvm.ptr<1>, %r: i32) {
  %t = fagpu.shared_tile offset 0 : !fagpu.smem_tile<64x64xf16>
  // expected-error @+1 {{cp.async fills row_major tiles (a column_blocks tile is the TMA's)}}
  fagpu.copy_async %p[%r] bound %r into %t threads 128 : !llvm.ptr<1>, !fagpu.smem_tile<64x64xf16>
  return
}

// -----

func.func @copy_threads(%p: !llvm.ptr<1>, %r: i32) {
  %t = fagpu.shared_tile offset 0 : !fagpu.smem_tile<8x64xf16, row_major>
  // expected-error @+1 {{the tile's 64 16-byte chunks must split evenly over 128 threads (whole warps)}}
  fagpu.copy_async %p[%r] bound %r into %t threads 128 : !llvm.ptr<1>, !fagpu.smem_tile<8x64xf16, row_major>
  return
}

// -----

func.func @load_fragment_shape() {
  %t = fagpu.shared_tile offset 0 : !fagpu.smem_tile<128x64xf16, row_major>
  // expected-error @+1 {{result must have the tile's shape and element type}}
  %f = fagpu.load_fragment %t : !fagpu.smem_tile<128x64xf16, row_major> -> !fagpu.fragment<64x64xf16, operand_a>
  return
}

// -----

func.func @load_fragment_column_blocks() {
  %t = fagpu.shared_tile offset 0 : !fagpu.smem_tile<64x64xf16>
  // expected-error @+1 {{ldmatrix reads row_major tiles}}
  %f = fagpu.load_fragment %t : !fagpu.smem_tile<64x64xf16> -> !fagpu.fragment<64x64xf16, operand_a>
  return
}

// -----

func.func @wgmma_128_rows(%s: i32) {
  %q = fagpu.shared_tile offset 0 : !fagpu.smem_tile<128x64xf16>
  %k = fagpu.shared_tile offset 16384 : !fagpu.smem_tile<64x64xf16>
  // expected-error @+1 {{a 128-row result needs mma.sync (row_major tiles); wgmma is 64 rows}}
  %r = fagpu.mma %q, %k : !fagpu.smem_tile<128x64xf16>, !fagpu.smem_tile<64x64xf16> -> !fagpu.fragment<128x64xf32, accumulator>
  return
}

// -----

func.func @mixed_layouts(%s: i32) {
  %q = fagpu.shared_tile offset 0 : !fagpu.smem_tile<64x64xf16>
  %k = fagpu.shared_tile offset 16384 : !fagpu.smem_tile<64x64xf16, row_major>
  // expected-error @+1 {{A and B tiles must have the same layout (wgmma: column_blocks, mma.sync: row_major)}}
  %r = fagpu.mma %q, %k : !fagpu.smem_tile<64x64xf16>, !fagpu.smem_tile<64x64xf16, row_major> -> !fagpu.fragment<64x64xf32, accumulator>
  return
}

// -----

func.func @softmax_rows(%s: !fagpu.fragment<128x64xf32, accumulator>, %m: !fagpu.fragment<64xf32, rows>, %i: i32, %f: f32) {
  // expected-error @+1 {{m, l and alpha must be rows fragments of the scores' rows}}
  %p, %m1, %l1, %a = fagpu.softmax_step %s, %m, %m keys(%i, %i) row %i scale %f : !fagpu.fragment<128x64xf32, accumulator>, !fagpu.fragment<64xf32, rows> -> !fagpu.fragment<128x64xf16, operand_a>
  return
}

// -----

func.func @copy_wait_negative() {
  // expected-error @+1 {{pending must be non-negative}}
  fagpu.copy_wait pending -1
  return
}

// -----

func.func @rescale_in_step_conditional(%s: !fagpu.fragment<64x64xf32, accumulator>, %m: !fagpu.fragment<64xf32, rows>, %i: i32, %f: f32) {
  // expected-error @+1 {{rescale(%o) scales O unconditionally: with conditional rescaling use fagpu.rescale .. if}}
  %p, %m1, %l1, %a, %mv, %o = fagpu.softmax_step %s, %m, %m rescale(%s : !fagpu.fragment<64x64xf32, accumulator> -> !fagpu.fragment<64x64xf32, accumulator>) keys(%i, %i) row %i scale %f {rescale_threshold = 8.0 : f32} : !fagpu.fragment<64x64xf32, accumulator>, !fagpu.fragment<64xf32, rows> -> !fagpu.fragment<64x64xf16, operand_a>, i1
  return
}

// -----

!kvp = !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
func.func @tma_load_coordinates(%map: !llvm.ptr, %i: i32, %kv: !kvp) {
  // expected-error @+1 {{expected the matrix (rank-3 map) or head and batch (rank-4 map) after the row, got 3 coordinates}}
  fagpu.tma_load %map[%i, %i, %i, %i] into %kv[%i] buffer 0 : !llvm.ptr, !kvp
  return
}

// -----

!kvp = !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
func.func @tma_load_pages_count(%map: !llvm.ptr, %i: i32, %kv: !kvp) {
  // expected-error @+1 {{expected 4 pages of 16 rows for a tile of 64 rows, got 3}}
  fagpu.tma_load_pages %map[%i, %i, pages %i, %i, %i] into %kv[%i] buffer 0 {page_rows = 16 : i64} : !llvm.ptr, !kvp
  return
}

// -----

!kvp = !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16>
func.func @tma_load_pages_rows(%map: !llvm.ptr, %i: i32, %kv: !kvp) {
  // expected-error @+1 {{expected page_rows to be a positive multiple of 8 (the swizzle's period), got 12}}
  fagpu.tma_load_pages %map[%i, %i, pages %i] into %kv[%i] buffer 0 {page_rows = 12 : i64} : !llvm.ptr, !kvp
  return
}

// -----

func.func @merge_strided_two_strides(%i: i32, %s: i64, %p: !llvm.ptr<1>) {
  // expected-error @+1 {{a strided O needs its batch, head and row strides, got 2}}
  fagpu.merge_splits rows(%i, %i, %i) of %i x %i arrivals %p partials(%p, %p) to %p as f16 strided(%i, %s, %s) {head_dim = 64 : i64} : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
  return
}

// -----

func.func @fetch_tile_shared_counter(%c: !llvm.ptr<3>, %n: i32) {
  // expected-error @+1 {{expected the tile counter in address space 1 (global memory), got 3}}
  %id = fagpu.fetch_tile %c tiles %n : !llvm.ptr<3>
  return
}

// -----

func.func @publish_tile_global_slot(%s: !llvm.ptr<1>, %id: i32) {
  // expected-error @+1 {{expected the tile slot in address space 3 (shared memory), got 1}}
  fagpu.publish_tile %id to %s : !llvm.ptr<1>
  return
}

// -----

func.func @receive_tile_generic_slot(%s: !llvm.ptr) {
  // expected-error @+1 {{expected the tile slot in address space 3 (shared memory), got 0}}
  %id = fagpu.receive_tile %s : !llvm.ptr
  return
}

// -----

func.func @e4m3_mn_major(%p: !fagpu.fragment<64x128xf8E4M3FN, operand_a>, %o: !fagpu.fragment<64x128xf32, accumulator>, %v: !fagpu.smem_tile<128x128xf8E4M3FN>) {
  // expected-error @+1 {{an e4m3 MMA reads B K-major (wgmma has no transpose for 8-bit types): give V^T, not mn_major V}}
  %r = fagpu.mma %p, %v acc(%o) {mn_major} : !fagpu.fragment<64x128xf8E4M3FN, operand_a>, !fagpu.smem_tile<128x128xf8E4M3FN>, !fagpu.fragment<64x128xf32, accumulator> -> !fagpu.fragment<64x128xf32, accumulator>
  return
}

// -----

func.func @e4m3_p_without_scale(%s: !fagpu.fragment<64x128xf32, accumulator>, %m: !fagpu.fragment<64xf32, rows>, %i: i32, %f: f32) {
  // expected-error @+1 {{an e4m3 P is scaled before its cast: probs_scale present iff P is e4m3}}
  %p, %m2, %l2, %a = fagpu.softmax_step %s, %m, %m keys(%i, %i) row %i scale %f : !fagpu.fragment<64x128xf32, accumulator>, !fagpu.fragment<64xf32, rows> -> !fagpu.fragment<64x128xf8E4M3FN, operand_a>
  return
}

// -----

func.func @e4m3_scale_not_power_of_two(%s: !fagpu.fragment<64x128xf32, accumulator>, %m: !fagpu.fragment<64xf32, rows>, %i: i32, %f: f32) {
  // expected-error @+1 {{expected probs scale to be a power of two in [1, 256], got 100 (P is scaled before its e4m3 cast and unscaled after: a power of two keeps both exact)}}
  %p, %m2, %l2, %a = fagpu.softmax_step %s, %m, %m keys(%i, %i) row %i scale %f {probs_scale = 100.0 : f32} : !fagpu.fragment<64x128xf32, accumulator>, !fagpu.fragment<64xf32, rows> -> !fagpu.fragment<64x128xf8E4M3FN, operand_a>
  return
}

// -----

// expected-error @+1 {{an e4m3 operand_a fragment is 64 x N with N a multiple of 32 (the e4m3 wgmma's k)}}
func.func @e4m3_fragment_k16(%p: !fagpu.fragment<64x48xf8E4M3FN, operand_a>) {
  return
}

// -----

// expected-error @+1 {{expected R x C with R a multiple of 8 (the swizzle atom) and C of 128 (a 128-byte column block)}}
func.func @e4m3_tile_64_columns(%t: !fagpu.smem_tile<64x64xf8E4M3FN>) {
  return
}

// -----

// expected-error @+1 {{swizzle must be 128, 64 or 32 (bytes), got 16}}
func.func private @swizzle_16(!fagpu.smem_tile<128x64xf8E4M3FN, swizzle = 16>)

// -----

// A 64-byte swizzle cuts rows into 64-byte column blocks: 224 e4m3 columns
// are not whole blocks (224 takes the 32-byte swizzle).
// expected-error @+1 {{expected R x C with R a multiple of 8 (the swizzle atom) and C of 64 (a 64-byte column block)}}
func.func private @swizzle_64_ragged(!fagpu.smem_tile<128x224xf8E4M3FN, swizzle = 64>)

// -----

// expected-error @+1 {{a row_major tile swizzles 16-byte chunks within 128 bytes: no swizzle width}}
func.func private @row_major_swizzle(!fagpu.smem_tile<64x64xf16, row_major, swizzle = 64>)

// -----

// wgmma's transposed (MN-major) B steps whole 128-byte rows of keys.
func.func @mn_major_narrow(%p: !fagpu.fragment<64x64xf16, operand_a>, %v: !fagpu.smem_tile<64x64xf16, swizzle = 64>, %o: !fagpu.fragment<64x64xf32, accumulator>) {
  // expected-error @+1 {{an mn_major B is 128-byte swizzled}}
  %r = fagpu.mma %p, %v acc(%o) {mn_major} : !fagpu.fragment<64x64xf16, operand_a>, !fagpu.smem_tile<64x64xf16, swizzle = 64>, !fagpu.fragment<64x64xf32, accumulator> -> !fagpu.fragment<64x64xf32, accumulator>
  return
}

// -----

func.func @tile_rows_swizzle(%t: !fagpu.smem_tile<128x64xf8E4M3FN, swizzle = 64>, %i: i32) {
  // expected-error @+1 {{expected a block of rows of '!fagpu.smem_tile<128x64xf8E4M3FN, swizzle = 64>' keeping its columns, block_rows and swizzle}}
  %r = fagpu.tile_rows %t[%i] : !fagpu.smem_tile<128x64xf8E4M3FN, swizzle = 64> -> !fagpu.smem_tile<64x64xf8E4M3FN, block_rows = 128, swizzle = 32>
  return
}

// -----

func.func @row_sum_tile_rows(%t: !fagpu.smem_tile<16x224xf8E4M3FN, swizzle = 32>, %b: i32) {
  // expected-error @+1 {{expected an 8-row column_blocks tile (N = 8)}}
  fagpu.init_row_sum_tile %t barrier %b : !fagpu.smem_tile<16x224xf8E4M3FN, swizzle = 32>
  return
}

// -----

func.func @row_partials_rows(%a: !fagpu.fragment<64x8xf32, accumulator>) {
  // expected-error @+1 {{expected an accumulator and the rows fragment of its rows}}
  %l = fagpu.row_partials %a : !fagpu.fragment<64x8xf32, accumulator> -> !fagpu.fragment<128xf32, rows>
  return
}

// -----

// expected-error @+1 {{expected 64 x N with N a positive multiple of 8}}
func.func private @acc_n12(!fagpu.fragment<64x12xf32, accumulator>)

// -----

// expected-error @+1 {{expected 64 x N with N a positive multiple of 16}}
func.func private @operand_a_n8(!fagpu.fragment<64x8xf16, operand_a>)

// -----

// expected-error @+1 {{a warpgroup fragment has at most 512 columns, got 1099511627776}}
func.func private @huge(!fagpu.fragment<64x1099511627776xf32, accumulator>)

// -----

func.func @wait_negative() {
  // expected-error @+1 {{expected pending in [0, 7], got -1}}
  fagpu.mma_wait pending -1
  return
}

// -----

func.func @turn_threads(%b: i32) {
  // expected-error @+1 {{expected threads to be a positive multiple of 32 up to 1024 (whole warps), got 100}}
  fagpu.wait_turn %b threads 100
  return
}

// -----

func.func @pass_threads(%b: i32) {
  // expected-error @+1 {{expected threads to be a positive multiple of 32 up to 1024 (whole warps), got -128}}
  fagpu.pass_turn %b threads -128
  return
}

// -----

func.func @widen_from_f16(%a: !fagpu.smem_tile<64x128xf16>, %b: i32) {
  // expected-error @+1 {{expected an e4m3 source tile, got 'f16'}}
  fagpu.widen_tile %a to %a barrier %b : !fagpu.smem_tile<64x128xf16> to !fagpu.smem_tile<64x128xf16>
  return
}

// -----

func.func @widen_to_e4m3(%a: !fagpu.smem_tile<64x128xf8E4M3FN>, %b: i32) {
  // expected-error @+1 {{expected an f16 or bf16 destination tile, got 'f8E4M3FN'}}
  fagpu.widen_tile %a to %a barrier %b : !fagpu.smem_tile<64x128xf8E4M3FN> to !fagpu.smem_tile<64x128xf8E4M3FN>
  return
}

// -----

func.func @widen_shapes(%a: !fagpu.smem_tile<64x128xf8E4M3FN>, %c: !fagpu.smem_tile<128x128xf16>, %b: i32) {
  // expected-error @+1 {{expected tiles of one shape, got 64x128 and 128x128}}
  fagpu.widen_tile %a to %c barrier %b : !fagpu.smem_tile<64x128xf8E4M3FN> to !fagpu.smem_tile<128x128xf16>
  return
}

// -----

func.func @widen_half_line(%a: !fagpu.smem_tile<64x64xf8E4M3FN, swizzle = 64>, %c: !fagpu.smem_tile<64x64xf16>, %b: i32) {
  // expected-error @+1 {{expected whole column_blocks tiles of the 128-byte swizzle}}
  fagpu.widen_tile %a to %c barrier %b : !fagpu.smem_tile<64x64xf8E4M3FN, swizzle = 64> to !fagpu.smem_tile<64x64xf16>
  return
}

// -----

// A producer acquires a stage through its empty barrier; a fill_once
// pipeline has none.
gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @fill_once_producer(%use: i32) {
    %q = fagpu.create_pipeline {barrier_offset = 65536 : i64, tile_offset = 0 : i64} : !fagpu.pipeline<stages = 1, buffers = 1, 128x64xf16, fill_once>
    // expected-error @+1 {{a fill_once pipeline has no empty barriers to acquire a stage by}}
    %s, %p = fagpu.pipeline_position %q[%use] producer : !fagpu.pipeline<stages = 1, buffers = 1, 128x64xf16, fill_once>
    llvm.return
  }
}

// -----

gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @cp_async_phases(%use: i32, %bits: i32) {
    %kv = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 0 : i64} : !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16, row_major>
    // expected-error @+1 {{a cp.async (row_major) pipeline has no barriers: its position is a stage alone}}
    %s, %p = fagpu.pipeline_position %kv[%use] phases %bits : !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16, row_major>
    llvm.return
  }
}

// -----

gpu.module @fa_kernels {
  llvm.mlir.global external @fa_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
  llvm.func @cp_async_advance(%uses: i32, %bits: i32) -> i32 {
    %kv = fagpu.create_pipeline {barrier_offset = 0 : i64, tile_offset = 0 : i64} : !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16, row_major>
    // expected-error @+1 {{a cp.async (row_major) pipeline has no barriers and no phases}}
    %next = fagpu.pipeline_advance_phases %kv phases %bits after %uses : !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16, row_major>
    llvm.return %next : i32
  }
}

