//===- FAGPUWarpgroupOps.td - the ops of a kernel body -----*- tablegen -*-===//
//
// `fagpu-build-kernels` writes each attention's kernel in these ops: the
// warp roles, the pipelines between them, the TMA loads, the MMAs on
// fragments, the online softmax on the accumulator fragment and the
// epilogue. `convert-fagpu-to-nvvm` lowers each with one pattern.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_FAGPUWARPGROUPOPS_TD
#define FA_DIALECT_FAGPU_IR_FAGPUWARPGROUPOPS_TD

include "fa/Dialect/FAGPU/IR/FAGPUTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Dialect/LLVMIR/LLVMTypes.td"

def FAGPU_Fragment : Type<CPred<"::llvm::isa<::mlir::fagpu::FragmentType>($_self)">,
                          "fagpu fragment", "::mlir::fagpu::FragmentType">;
def FAGPU_SharedTile : Type<CPred<"::llvm::isa<::mlir::fagpu::SharedTileType>($_self)">,
                            "fagpu shared-memory tile",
                            "::mlir::fagpu::SharedTileType">;
def FAGPU_Pipeline : Type<CPred<"::llvm::isa<::mlir::fagpu::PipelineType>($_self)">,
                          "fagpu pipeline", "::mlir::fagpu::PipelineType">;
def FAGPU_Tmem : Type<CPred<"::llvm::isa<::mlir::fagpu::TmemType>($_self)">,
                      "fagpu tensor-memory region", "::mlir::fagpu::TmemType">;
def FAGPU_Barriers : Type<CPred<"::llvm::isa<::mlir::fagpu::BarriersType>($_self)">,
                          "fagpu barriers", "::mlir::fagpu::BarriersType">;

//===----------------------------------------------------------------------===//
// Warp roles
//===----------------------------------------------------------------------===//

def FAGPU_WarpSpecializeOp : FAGPU_Op<"warp_specialize",
    [RecursiveMemoryEffects, NoTerminator]> {
  let summary = "producer and consumer warpgroups with register budgets";
  let description = [{
    Warpgroup 0 of the CTA runs the `producer` region, warpgroups 1 ..
    `consumers` the `consumer` region with their consumer index (0-based)
    as the block argument. `%warpgroup` is the thread's warpgroup. The
    producer gives registers back (`setmaxnreg.dec` to
    `producer_registers`), the consumers take them (`setmaxnreg.inc` to
    `consumer_registers`): the register file holds
    128 * (producer + consumers * consumer) registers.

    ```mlir
    fagpu.warp_specialize %wg consumers 2
        registers(producer = 24, consumer = 240) producer {
      ...
    } consumer {
    ^bb0(%consumer: i32):
      ...
    }
    ```
  }];
  let arguments = (ins I32:$warpgroup, I64Attr:$consumers,
                       I64Attr:$producer_registers,
                       I64Attr:$consumer_registers);
  let regions = (region SizedRegion<1>:$producer, SizedRegion<1>:$consumer);
  let assemblyFormat = [{
    $warpgroup `consumers` $consumers `registers` `(` `producer` `=`
    $producer_registers `,` `consumer` `=` $consumer_registers `)`
    `producer` $producer `consumer` $consumer attr-dict
  }];
  let hasVerifier = 1;
}

def FAGPU_WaitTurnOp : FAGPU_Op<"wait_turn"> {
  let summary = "ping-pong: wait until the other consumer hands over the tensor cores";
  let description = [{
    Named barrier `%barrier`, `threads` threads: this warpgroup's 128 wait,
    the partner's 128 arrive with `fagpu.pass_turn`. `threads` is a
    positive multiple of 32 up to 1024 (bar.sync counts whole warps of a
    CTA).
  }];
  let arguments = (ins I32:$barrier, I64Attr:$threads);
  let assemblyFormat = "$barrier `threads` $threads attr-dict";
  let hasVerifier = 1;
}

def FAGPU_PassTurnOp : FAGPU_Op<"pass_turn"> {
  let summary = "ping-pong: hand the tensor cores to the partner consumer";
  let description = [{
    Arrives (without waiting) on the partner's named barrier `%barrier`,
    once this warpgroup's MMAs of the step are issued. `threads` as
    `fagpu.wait_turn`'s.
  }];
  let arguments = (ins I32:$barrier, I64Attr:$threads);
  let assemblyFormat = "$barrier `threads` $threads attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Pipelines
//===----------------------------------------------------------------------===//

def FAGPU_CreatePipelineOp : FAGPU_Op<"create_pipeline", [Pure]> {
  let summary = "a pipeline's place in shared memory";
  let description = [{
    The pipeline's mbarriers start at byte `barrier_offset` of the CTA's
    (1 KiB-aligned) shared memory: the full barrier of buffer b of stage s
    is number b * stages + s, its empty barrier buffers * stages later. Its
    tiles start at `tile_offset`: buffer b of stage s at
    (s * buffers + b) tile sizes.

    ```mlir
    %kv = fagpu.create_pipeline {barrier_offset = 229376 : i64,
        tile_offset = 32768 : i64}
        : !fagpu.pipeline<stages = 2, buffers = 2, 128x128xf16>
    ```
  }];
  let arguments = (ins I64Attr:$barrier_offset, I64Attr:$tile_offset);
  let results = (outs FAGPU_Pipeline:$pipeline);
  let assemblyFormat = "attr-dict `:` type($pipeline)";
  let hasVerifier = 1;
}

def FAGPU_InitPipelinesOp : FAGPU_Op<"init_pipelines"> {
  let hasVerifier = 1;
  let summary = "initialise the pipelines' barriers before any thread uses them";
  let description = [{
    One thread initialises every barrier of `pipelines` (full: one producer
    arrival plus the TMA bytes; empty: `consumer_arrivals`, one per consumer
    warp), fences the initialisation for the async proxy, and the CTA
    synchronises.
  }];
  let arguments = (ins Variadic<FAGPU_Pipeline>:$pipelines,
                       I64Attr:$consumer_arrivals);
  let assemblyFormat = [{
    $pipelines `consumer_arrivals` $consumer_arrivals attr-dict `:`
    type($pipelines)
  }];
}

class FAGPU_PipelineStageOp<string mnemonic, list<Trait> traits = []>
    : FAGPU_Op<mnemonic, traits> {
  code stageVerifier = [{
    auto type = ::llvm::cast<PipelineType>(getPipeline().getType());
    int64_t buffer = getBufferAttr().getInt();
    if (buffer < 0 || buffer >= type.getBuffers())
      return emitOpError("buffer ") << buffer << " is not one of the "
             << type.getBuffers() << " buffers of the pipeline";
    return ::mlir::success();
  }];
  code barrierVerifier = [{
    if (::llvm::cast<PipelineType>(getPipeline().getType()).isCpAsync())
      return emitOpError("a cp.async (row_major) pipeline has no barriers: "
                         "order its stages with fagpu.copy_commit and "
                         "fagpu.copy_wait");
  }];
  code emptyVerifier = [{
    if (::llvm::cast<PipelineType>(getPipeline().getType()).getFillOnce())
      return emitOpError("a fill_once pipeline has no empty barriers: its "
                         "buffers are never given back");
  }];
}

def FAGPU_PipelineAcquireOp : FAGPU_PipelineStageOp<"pipeline_acquire"> {
  let summary = "producer: wait until a stage's buffer is free";
  let description = [{
    Waits until every consumer released buffer `buffer` of stage `%stage`
    in its previous round: the empty barrier's phase `%parity` (a fresh
    barrier passes a wait on parity 1).
  }];
  let arguments = (ins FAGPU_Pipeline:$pipeline, I32:$stage, I32:$parity,
                       I64Attr:$buffer);
  let assemblyFormat = [{
    $pipeline `[` $stage `]` `buffer` $buffer `parity` $parity attr-dict
    `:` type($pipeline)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() { }] # barrierVerifier # emptyVerifier # stageVerifier # [{ }
  }];
}

def FAGPU_TmaLoadOp : FAGPU_PipelineStageOp<"tma_load",
    [AttrSizedOperandSegments]> {
  let summary = "producer: load a tile into a stage's buffer by TMA and commit it";
  let description = [{
    Arrives on the buffer's full barrier announcing the tile's bytes, then
    issues the TMA loads of rows `%row` .. of one [N, D] matrix of the
    tensor map `%map` (a `__grid_constant__` CUtensorMap) into it: one box
    of 64 columns per swizzled column block. The barrier completes when the
    bytes have landed. The matrix is given by the map's outer coordinates:
    * `[%row, %head, %batch]`: a rank-4 map over a strided [B, H, N, D]
      tensor (any batch, head and row strides, unit stride on D), so
      [B, N, H, D] views load without a copy;
    * `[%row, %matrix]`: a rank-3 map over contiguous [B * H, N, D].
    With `column %c` the boxes start at column `%c` instead of 0: an e4m3
    V^T tile ([Dv, keys], rows the head dim) starts at its block's first
    key.
  }];
  let arguments = (ins LLVM_AnyPointer:$map, I32:$row,
                       Variadic<I32>:$matrix_coords,
                       FAGPU_Pipeline:$pipeline, I32:$stage, I64Attr:$buffer,
                       Optional<I32>:$column);
  let assemblyFormat = [{
    $map `[` $row `,` $matrix_coords `]` (`column` $column^)? `into` $pipeline
    `[` $stage `]` `buffer` $buffer attr-dict `:` type($map) `,` type($pipeline)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      if (getMatrixCoords().empty() || getMatrixCoords().size() > 2)
        return emitOpError("expected the matrix (rank-3 map) or head and "
                           "batch (rank-4 map) after the row, got ")
               << getMatrixCoords().size() << " coordinates";
    }] # barrierVerifier # stageVerifier # [{ }
  }];
}

def FAGPU_TmaLoadPagesOp : FAGPU_PipelineStageOp<"tma_load_pages"> {
  let summary = "producer: gather a tile from the pages of a paged cache by TMA";
  let description = [{
    `fagpu.tma_load` for a K/V block that spans several pages of a paged
    cache `[pages, H, page_size, D]` (pages shorter than the block): page
    `%pages[i]` gives rows `i * page_rows` .. of the tile, each a box of
    `page_rows` rows (rows `%row` .. of the page) of head `%head`, one box
    per swizzled column block and page. One arrival announces the whole
    tile's bytes. `page_rows` is a multiple of 8, where the 128-byte
    swizzle's pattern repeats, so the gathered tile is the one a single
    box would have written.

    ```mlir
    fagpu.tma_load_pages %map[%row, %head, pages %p0, %p1, %p2, %p3]
        into %kv[%stage] buffer 0 {page_rows = 16 : i64}
        : !llvm.ptr, !fagpu.pipeline<...>
    ```
  }];
  let arguments = (ins LLVM_AnyPointer:$map, I32:$row, I32:$head,
                       Variadic<I32>:$pages, FAGPU_Pipeline:$pipeline,
                       I32:$stage, I64Attr:$buffer, I64Attr:$page_rows);
  let assemblyFormat = [{
    $map `[` $row `,` $head `,` `pages` $pages `]` `into` $pipeline `[`
    $stage `]` `buffer` $buffer attr-dict `:` type($map) `,` type($pipeline)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      int64_t rows = ::llvm::cast<PipelineType>(getPipeline().getType())
                         .getBufferTile(getBuffer()).getRows();
      int64_t pageRows = getPageRows();
      if (pageRows < 8 || pageRows % 8 != 0)
        return emitOpError("expected page_rows to be a positive multiple of "
                           "8 (the swizzle's period), got ")
               << pageRows;
      if (getPages().empty() ||
          static_cast<int64_t>(getPages().size()) * pageRows != rows)
        return emitOpError("expected ")
               << rows / pageRows << " pages of " << pageRows
               << " rows for a tile of " << rows << " rows, got "
               << getPages().size();
    }] # barrierVerifier # stageVerifier # [{ }
  }];
}

def FAGPU_PipelineCommitOp : FAGPU_PipelineStageOp<"pipeline_commit"> {
  let summary = "producer: mark a stage's buffer full without data";
  let description = [{
    Arrives on the full barrier without bytes: what the producer writes into
    the stage outside the TMA (the dynamic scheduler's end-of-work tile id)
    becomes visible to the consumers waiting on it.
  }];
  let arguments = (ins FAGPU_Pipeline:$pipeline, I32:$stage, I64Attr:$buffer);
  let assemblyFormat = [{
    $pipeline `[` $stage `]` `buffer` $buffer attr-dict `:` type($pipeline)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() { }] # barrierVerifier # stageVerifier # [{ }
  }];
}

def FAGPU_PipelineWaitOp : FAGPU_PipelineStageOp<"pipeline_wait"> {
  let summary = "consumer: wait until a stage's buffer is full";
  let arguments = (ins FAGPU_Pipeline:$pipeline, I32:$stage, I32:$parity,
                       I64Attr:$buffer);
  let assemblyFormat = [{
    $pipeline `[` $stage `]` `buffer` $buffer `parity` $parity attr-dict
    `:` type($pipeline)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() { }] # barrierVerifier # stageVerifier # [{ }
  }];
}

def FAGPU_PipelineReleaseOp : FAGPU_PipelineStageOp<"pipeline_release"> {
  let summary = "consumer: this warp is done reading a stage's buffer";
  let description = [{
    One arrival (lane 0) on the buffer's empty barrier, after the warp's
    MMAs that read it have retired (`fagpu.mma_wait`).

    With `commit` (sm_100a, the one thread that issues the tcgen05.mma) the
    arrival is a `tcgen05.commit`: the barrier arrives once every MMA the
    thread issued so far has completed, so the stage is given back as soon
    as the tensor cores are done reading it and the issuing thread never
    waits for its own MMAs.

    ```mlir
    fagpu.pipeline_release %kv[%stage] buffer 0 {commit}
        : !fagpu.pipeline<stages = 3, buffers = 2, 128x128xf16>
    ```
  }];
  let arguments = (ins FAGPU_Pipeline:$pipeline, I32:$stage, I64Attr:$buffer,
                       UnitAttr:$commit);
  let assemblyFormat = [{
    $pipeline `[` $stage `]` `buffer` $buffer attr-dict `:` type($pipeline)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() { }] # barrierVerifier # emptyVerifier # stageVerifier # [{ }
  }];
}

def FAGPU_PipelinePositionOp : FAGPU_Op<"pipeline_position", [Pure]> {
  let summary = "the stage and barrier parity of a role's use of a pipeline";
  let description = [{
    A role walks a pipeline's ring in order, stage 0, 1, ..., stages - 1,
    0, ...: its use `%use` (from 0) takes stage `%use mod stages`, and each
    round through the ring completes each of its barriers once, so the
    barrier of that stage is waited on in phase `(%use / stages) mod 2`.
    The pipeline's type gives the stage count; this op is the one place
    that turns a use into a ring position (CUTLASS's PipelineState).

    `phases` (a persistent CTA, whose tiles each start at stage 0 so that
    the stage depends on the loop counter alone): bit s is how many rounds
    stage s completed over the CTA's earlier tiles, mod 2; it flips that
    stage's parity (`fagpu.pipeline_advance_phases` carries it).

    `producer`: the parity a producer acquires the stage with, that of the
    empty barrier's previous round -- the consumers' release of the
    stage's last use (a fresh barrier passes a wait on parity 1).

    ```mlir
    %stage, %parity = fagpu.pipeline_position %kv[%use] phases %bits
        producer : !fagpu.pipeline<stages = 2, buffers = 2, 128x128xf16>
    ```
  }];
  let arguments = (ins FAGPU_Pipeline:$pipeline, I32:$use,
                       Optional<I32>:$phases, UnitAttr:$producer);
  let results = (outs I32:$stage, I32:$parity);
  let assemblyFormat = [{
    $pipeline `[` $use `]` (`phases` $phases^)? (`producer` $producer^)?
    attr-dict `:` type($pipeline)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$pipeline, "::mlir::Value":$use,
                   "::mlir::Value":$phases, "bool":$producer), [{
      ::mlir::Type i32 = $_builder.getI32Type();
      build($_builder, $_state, i32, i32, pipeline, use, phases, producer);
    }]>];
  let hasVerifier = 1;
}

def FAGPU_PipelineAdvancePhasesOp
    : FAGPU_Op<"pipeline_advance_phases", [Pure]> {
  let summary = "a persistent CTA's phase bits after a tile's uses of a pipeline";
  let description = [{
    The `phases` of `fagpu.pipeline_position` after a tile that used the
    ring `%uses` times from stage 0: stage s was used
    ceil((%uses - s) / stages) times, and each use flips its bit.

    ```mlir
    %next = fagpu.pipeline_advance_phases %kv phases %bits after %uses
        : !fagpu.pipeline<stages = 2, buffers = 2, 128x128xf16>
    ```
  }];
  let arguments = (ins FAGPU_Pipeline:$pipeline, I32:$phases, I32:$uses);
  let results = (outs I32:$result);
  let assemblyFormat = [{
    $pipeline `phases` $phases `after` $uses attr-dict `:` type($pipeline)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$pipeline, "::mlir::Value":$phases,
                   "::mlir::Value":$uses), [{
      build($_builder, $_state, $_builder.getI32Type(), pipeline, phases,
            uses);
    }]>];
  let hasVerifier = 1;
}

def FAGPU_PipelineTileOp : FAGPU_PipelineStageOp<"pipeline_tile", [Pure]> {
  let summary = "the shared-memory tile of a stage's buffer";
  let arguments = (ins FAGPU_Pipeline:$pipeline, I32:$stage, I64Attr:$buffer);
  let results = (outs FAGPU_SharedTile:$tile);
  let assemblyFormat = [{
    $pipeline `[` $stage `]` `buffer` $buffer attr-dict `:` type($pipeline)
    `->` type($tile)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      auto type = ::llvm::cast<PipelineType>(getPipeline().getType());
      int64_t buffer = getBufferAttr().getInt();
      if (buffer < 0 || buffer >= type.getBuffers())
        return emitOpError("buffer ") << buffer << " is not one of the "
               << type.getBuffers() << " buffers of the pipeline";
      if (getTile().getType() != type.getBufferTile(buffer))
        return emitOpError("result must be the tile type of the pipeline's "
                           "buffer ")
               << type.getBufferTile(buffer);
      return ::mlir::success();
    }
  }];
}

//===----------------------------------------------------------------------===//
// cp.async copies (sm_80)
//===----------------------------------------------------------------------===//

def FAGPU_CopyAsyncOp : FAGPU_Op<"copy_async"> {
  let summary = "every thread: cp.async rows of a global matrix into a row_major tile";
  let description = [{
    Copies rows `%row` .. `%row` + R - 1 (R the tile's rows) of the
    row-major [*, C] matrix at `%src` into `%tile`, 16 bytes per
    `cp.async.cg` (L2 only: each byte is read once per CTA), the CTA's
    threads taking consecutive chunks. Rows at or past `%bound` are
    zero-filled (source size 0, read from row 0, which always exists). The
    copies join the thread's open cp.async group: they are complete after a
    `fagpu.copy_commit` and a `fagpu.copy_wait` that retires that group.

    ```mlir
    fagpu.copy_async %k[%start] bound %nk into %tile
        : !llvm.ptr<1>, !fagpu.smem_tile<64x64xf16, row_major>
    ```
  }];
  let arguments = (ins LLVM_AnyPointer:$src, I32:$row, I32:$bound,
                       FAGPU_SharedTile:$tile, I64Attr:$threads);
  let assemblyFormat = [{
    $src `[` $row `]` `bound` $bound `into` $tile `threads` $threads attr-dict
    `:` type($src) `,` type($tile)
  }];
  let hasVerifier = 1;
}

def FAGPU_CopyCommitOp : FAGPU_Op<"copy_commit"> {
  let summary = "close the thread's cp.async group";
  let description = [{
    `cp.async.commit_group`: the copies issued since the last commit form
    one group, which `fagpu.copy_wait` counts.
  }];
  let assemblyFormat = "attr-dict";
}

def FAGPU_CopyWaitOp : FAGPU_Op<"copy_wait"> {
  let summary = "wait for the CTA's cp.async groups, then synchronise the CTA";
  let description = [{
    `cp.async.wait_group pending`: all but the newest `pending` groups of
    this thread have landed; then `bar.sync 0`, since a tile is written by
    every thread of the CTA and read by other threads' ldmatrix (and the
    stage the next copies overwrite must be done with by every warp).
  }];
  let arguments = (ins I64Attr:$pending);
  let assemblyFormat = "`pending` $pending attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shared-memory tiles
//===----------------------------------------------------------------------===//

def FAGPU_SharedTileOp : FAGPU_Op<"shared_tile", [Pure]> {
  let summary = "a tile at a fixed place in shared memory";
  let arguments = (ins I64Attr:$offset);
  let results = (outs FAGPU_SharedTile:$tile);
  let assemblyFormat = "`offset` $offset attr-dict `:` type($tile)";
  let hasVerifier = 1;
}

def FAGPU_TileRowsOp : FAGPU_Op<"tile_rows", [Pure]> {
  let summary = "rows index * R .. of a shared-memory tile";
  let description = [{
    The `%index`-th block of R rows (R the result's rows) of `%tile`: what
    one consumer warpgroup reads of a Q tile shared by several. The result
    keeps the source's column-block height.
  }];
  let arguments = (ins FAGPU_SharedTile:$tile, I32:$index);
  let results = (outs FAGPU_SharedTile:$rows);
  let assemblyFormat = [{
    $tile `[` $index `]` attr-dict `:` type($tile) `->` type($rows)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tensor cores
//===----------------------------------------------------------------------===//

def FAGPU_MmaOp : FAGPU_Op<"mma", [AttrSizedOperandSegments]> {
  let summary = "a warpgroup's asynchronous MMA on tiles and fragments";
  let description = [{
    `%acc + %a * %b` for one warpgroup, issued asynchronously (it completes
    at a `fagpu.mma_wait`): `%a` is a shared-memory tile (K-major) or an
    `operand_a` fragment, `%b` a shared-memory tile, K-major by default (the
    product is `a * b^T`, as S = Q K^T) or `mn_major` (`a * b`, as P V
    with V row-major). Without `%acc` the accumulator starts at zero.
    On sm_90a (`column_blocks` tiles) one `wgmma.mma_async` per 16-element
    k-step, fenced before and committed as one group after.

    With `row_major` tiles (sm_80) the MMA is `mma.sync.m16n8k16`, complete
    when the op returns (no `fagpu.mma_wait`): B is read with `ldmatrix.x4`
    (`.trans` when `mn_major`), one x4 load giving the B fragments of two
    n8 tiles, and each feeds every row tile of the warp (a 128-row result:
    two), so shared-memory reads per MMA halve with two row tiles. A from
    shared memory is read with `ldmatrix.x4` per k-step (as
    `fagpu.load_fragment` would).

    With a `!fagpu.tmem` accumulator (sm_100a) the MMA is `tcgen05.mma`
    (kind::f16, M = 128, f32 accumulation), one per 16-element k-step,
    issued by one thread for the whole CTA: the accumulator lives in tensor
    memory, so no warpgroup has to hold it in registers and the issuing
    thread does nothing else. There is no result: the region is updated in
    place, asynchronously, and a `fagpu.mma_commit` (or a `commit` release)
    signals completion on an mbarrier. `%a` is a shared-memory tile (S =
    Q K^T) or an f16/bf16 TMEM region (O += P V with P straight from
    tensor memory, never through registers or shared memory). The first
    k-step overwrites the accumulator unless `accumulate(%flag)` says it
    adds to it (O after the first block).

    ```mlir
    %s = fagpu.mma %q, %k : !fagpu.smem_tile<64x128xf16, block_rows = 128>,
        !fagpu.smem_tile<128x128xf16> -> !fagpu.fragment<64x128xf32, accumulator>
    %o1 = fagpu.mma %p, %v acc(%o) {mn_major} : ...
    fagpu.mma %p, %v acc(%o) accumulate(%not_first) {mn_major}
        : !fagpu.tmem<128x128xf16>, !fagpu.smem_tile<128x128xf16>,
          !fagpu.tmem<128x128xf32>
    ```
  }];
  let arguments = (ins AnyType:$a, FAGPU_SharedTile:$b,
                       Optional<AnyType>:$acc, Optional<I1>:$accumulate,
                       UnitAttr:$mn_major);
  let results = (outs Optional<FAGPU_Fragment>:$result);
  let assemblyFormat = [{
    $a `,` $b (`acc` `(` $acc^ `)`)? (`accumulate` `(` $accumulate^ `)`)?
    attr-dict `:` type($a) `,` type($b) (`,` type($acc)^)?
    (`->` type($result)^)?
  }];
  let hasVerifier = 1;
}

def FAGPU_LoadFragmentOp : FAGPU_Op<"load_fragment"> {
  let summary = "read a row_major tile into an operand_a fragment (ldmatrix)";
  let description = [{
    The A fragments of an MMA that keeps its A operand in registers across
    many MMAs (Q on sm_80): row tile r of warp w is rows 16 (R w + r) ..
    of `%tile`; one `ldmatrix.x4` per row tile and 16-column k-step reads
    its four 8 x 8 matrices (rows 0-7 / 8-15, columns 0-7 / 8-15), which
    are exactly a0 .. a3 of mma.sync.m16n8k16.

    ```mlir
    %qf = fagpu.load_fragment %q : !fagpu.smem_tile<128x64xf16, row_major>
        -> !fagpu.fragment<128x64xf16, operand_a>
    ```
  }];
  let arguments = (ins FAGPU_SharedTile:$tile);
  let results = (outs FAGPU_Fragment:$result);
  let assemblyFormat = "$tile attr-dict `:` type($tile) `->` type($result)";
  let hasVerifier = 1;
}

def FAGPU_MmaWaitOp : FAGPU_Op<"mma_wait"> {
  let summary = "wait until at most `pending` MMA groups are in flight";
  let description = [{
    The warpgroup's MMAs are committed in groups (one per `fagpu.mma`);
    this waits for all but the newest `pending`, in [0, 7]. The fragments
    of the retired groups may then be read (after `fagpu.pin`).
  }];
  let arguments = (ins I64Attr:$pending);
  let assemblyFormat = "`pending` $pending attr-dict";
  let hasVerifier = 1;
}

def FAGPU_PinOp : FAGPU_Op<"pin", [AllTypesMatch<["input", "result"]>]> {
  let summary = "pin a fragment at this point of the instruction stream";
  let description = [{
    The result is the input, but no use of it moves above this point and no
    write of it below: a fragment an asynchronous MMA writes may be read
    only after its `fagpu.mma_wait`, and one it reads must not be
    overwritten before its `fagpu.mma`. (Lowered to an empty asm that
    modifies each register.)
  }];
  let arguments = (ins FAGPU_Fragment:$input);
  let results = (outs FAGPU_Fragment:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def FAGPU_SplatOp : FAGPU_Op<"splat", [Pure]> {
  let summary = "a fragment with every element equal to a scalar";
  let arguments = (ins F32:$value);
  let results = (outs FAGPU_Fragment:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Online softmax on the accumulator fragment
//===----------------------------------------------------------------------===//

def FAGPU_ModifyScoresOp : FAGPU_Op<"modify_scores", [Pure,
    IsolatedFromAbove, AttrSizedOperandSegments,
    AllTypesMatch<["s", "result"]>]> {
  let summary = "a block's scores through score_mod and mask_mod";
  let description = [{
    For the scores `%s` (raw Q K^T, the accumulator layout) of keys
    `%key_start` .. of the thread's rows `%row0` and `%row0 + 8` (row tile r
    of a taller fragment adds 16 r) -- or, a `lanes` fragment (sm_100a's
    tcgen05.ld of S), of the thread's one row `%row0`, register c key
    `%key_start + c` --, of batch `%batch` and query head `%head`, returns
    each score as `fagpu.softmax_step` takes it:

      x = cap(s * scale_log2 * ln 2),   cap(x) = softcap * tanh(x / softcap)
      result = mask_mod(b, h, i, j) ? score_mod(x, b, h, i, j) : -inf

    in natural units, for the step's scale log2(e), with a softcap or a
    score_mod (`returnsNaturalUnits`); without either, `s` itself (or -inf)
    for the step's `%scale_log2`: the conversion to log2 units is the
    step's multiply-add, not one more multiply per score. (`softcap` only
    when set; without a region the identity, or no mask.)
    The regions are the attention's (`fagpu.attention`), evaluated once per
    score with its batch, head, row and key index. Without captures,
    positions past the sequence are evaluated too and left to the step's
    mask of keys past Nk (and rows past Nq are never stored). With
    `captures(...)` (global pointers to the attention's captured tensors,
    contiguous, in the order of the regions' trailing tensor arguments)
    and `within(%nq, %nk)`, the row and key the regions see are clamped to
    the sequence's last (their results there are masked or unstored), so
    that they read only where the host path reads, and each read is
    checked in bounds of its tensor (a trap, as the kernel's other device
    checks).
  }];
  let arguments = (ins FAGPU_Fragment:$s, I32:$key_start, I32:$row0,
                       I32:$batch, I32:$head, F32:$scale_log2,
                       Optional<I32>:$nq, Optional<I32>:$nk,
                       Variadic<LLVM_AnyPointer>:$captures,
                       OptionalAttr<F32Attr>:$softcap);
  let results = (outs FAGPU_Fragment:$result);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $s `keys` `(` $key_start `)` `rows` `(` $row0 `)` `batch` `(` $batch `)`
    `head` `(` $head `)` `scale` `(` $scale_log2 `)`
    (`within` `(` $nq^ `,` $nk `)`)?
    (`captures` `(` $captures^ `:` type($captures) `)`)? attr-dict `:` type($s)
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether the result is in natural units (a softcap or a score_mod
    /// acted on it), else the raw scores.
    bool returnsNaturalUnits() {
      return getSoftcap().has_value() || !getScoreMod().empty();
    }
  }];
}

def FAGPU_SoftmaxStepOp : FAGPU_Op<"softmax_step", [Pure,
    AttrSizedOperandSegments, AttrSizedResultSegments,
    AllTypesMatch<["m", "l", "new_m", "new_l", "alpha"]>]> {
  let summary = "the online-softmax step of a block of scores";
  let description = [{
    For the scores `%s` of keys `%key_start` .. of the thread's rows
    `%row0` and `%row0 + 8` (in the accumulator layout; row tile r of a
    128-row fragment adds 16 r), in log2 units
    (`%scale_log2` = scale * log2 e):
    softcap (`softcap`), the mask when `masked` (keys past `%nk`, and
    `causal` / `window`; with `shift %d` the diagonal is the bottom-right
    one: row i at key position i + %d, %d = Nk - Nq), then per row the new
    base m' = max(m, rowmax(s) *
    scale) -- or with FA4's conditional rescaling (`rescale_threshold`) the
    old base unless the block max exceeds it by more than the threshold --
    alpha = exp2(m - m'), P = exp2(s * scale - m') (with FA4's software
    exp2 for one register in `exp2_poly_period` when `exp2_poly_degree` is
    set), l' = alpha l + rowsum(P). Returns P as the `operand_a` fragment of
    the P V MMA, m', l', alpha and, with conditional rescaling, whether some
    row of the thread moved its base.

    With `lanes` fragments (sm_100a: a row per thread, read from TMEM) the
    same step runs on the thread's own row, with no shuffles, and P is
    returned as f32 `lanes` (`fagpu.tmem_store` packs it into TMEM).

    With `probs_scale = s` (a power of two) P is the e4m3 `operand_a`
    fragment of the k = 32 e4m3 MMA: P is computed as exp2(s * scale - m' +
    log2 s) = s P, so that small probabilities stay above e4m3's
    subnormals, and l' sums s P too -- O / l' is unchanged, and LSE = m' +
    log2(l') - log2(s) in log2 units. Thread t of a quad holds keys 2t,
    2t + 1, 8 + 2t, 9 + 2t of each 16 (the accumulator's columns) in the A
    slots 4t .. 4t + 3, so A's key order is sigma(k) = 8 ((k mod 4) / 2) +
    2 (k / 4) + k mod 2 within each 16 keys: the B operand of P V must hold
    V's keys in that order (a permutation, not a shuffle of P).

    With `rescale(%o)` (only without conditional rescaling) it also returns
    O * alpha, each row tile's multiplies issued as soon as its alpha is
    known, before its P is packed -- the mma.sync kernel's order, which
    ptxas schedules as it always has; `fagpu.rescale` is the same product
    as an op of its own.

    With `tree_row_max` each thread's part of a row max is a balanced tree
    of maxima rather than a chain (the same value; a shallower dependency
    and other live ranges for ptxas). The mma.sync kernel takes it: its
    D = 128 loop then fits in 255 registers without a spill.

    With `no_row_sum` the step leaves P's row sums to the caller: l' =
    alpha l. The e4m3 kernel sums P on the tensor cores instead
    (`fagpu.mma` of P against `fagpu.init_row_sum_tile`'s tile), which
    saves an FADD per score.

    With `query_group = G` (pack-GQA beyond one query) the rows are G a
    query: the mask sees row r as query r / G (and `%d` is Nk - Nq of the
    queries, not of the rows).

    With `first_row_only` (a tile of at most 8 real rows, the schedule's
    `max_rows`) only the thread's first row is stepped: its row `%row0 + 8`
    is padding, whose P is 0, m and l stay and alpha is 1, so the step
    costs half its exponentials, maxima and sums.
  }];
  let arguments = (ins FAGPU_Fragment:$s, FAGPU_Fragment:$m,
                       FAGPU_Fragment:$l, I32:$key_start, I32:$row0, I32:$nk,
                       F32:$scale_log2, Optional<I32>:$diagonal_shift,
                       Optional<FAGPU_Fragment>:$o,
                       UnitAttr:$masked, UnitAttr:$causal,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F32Attr>:$softcap,
                       OptionalAttr<F32Attr>:$rescale_threshold,
                       OptionalAttr<I64Attr>:$exp2_poly_degree,
                       OptionalAttr<I64Attr>:$exp2_poly_period,
                       OptionalAttr<F32Attr>:$probs_scale,
                       UnitAttr:$tree_row_max, UnitAttr:$no_row_sum,
                       OptionalAttr<I64Attr>:$query_group,
                       UnitAttr:$first_row_only);
  let results = (outs FAGPU_Fragment:$p, FAGPU_Fragment:$new_m,
                      FAGPU_Fragment:$new_l, FAGPU_Fragment:$alpha,
                      Optional<I1>:$moved, Optional<FAGPU_Fragment>:$new_o);
  let assemblyFormat = [{
    $s `,` $m `,` $l (`rescale` `(` $o^ `:` type($o) `->` type($new_o) `)`)?
    `keys` `(` $key_start `,` $nk `)` `row` $row0
    (`shift` $diagonal_shift^)? `scale` $scale_log2 attr-dict `:` type($s) `,` type($m) `->` type($p)
    (`,` type($moved)^)?
  }];
  let hasVerifier = 1;
}

def FAGPU_InitRowSumTileOp : FAGPU_Op<"init_row_sum_tile"> {
  let summary = "the B operand whose MMA with P gives P's row sums";
  let description = [{
    Writes `%tile` (N = 8 rows of K keys, K-major; a consumer's
    `fagpu.tile_rows` of a tile shared by several) as the operand that makes
    `fagpu.mma %p, %tile acc(%l)` add each row's sum of P to column 0 of
    `%l` (row 0 all ones, rows 1 .. 7 zero): column 0 of the result is
    sum_k P[r, k] * 1, the other columns 0. In the accumulator layout, the
    quad's thread 0 then holds the row's sum and threads 1 .. 3 hold 0, so
    `fagpu.row_partials` of it is a valid per-thread l: summed over the
    quad (as `fagpu.row_totals` does) it is the row's total.

    The tensor cores then sum P: an m64n8 MMA per k-step instead of an FADD
    per score (on the e4m3 D = 128 kernel, where each score's exp already
    takes a MUFU slot and the FADDs compete for the issue slots the
    exponentials leave). The sum is of P as the P V MMA reads it (e4m3,
    rounded), so O / l normalises exactly the weights O was built from.

    The warpgroup's threads write the tile, fence the writes for the
    async proxy (wgmma reads shared memory through it) and meet at named
    barrier `%barrier` (128 threads) before any of them issues an MMA on it.

    ```mlir
    %ones = fagpu.tile_rows %sums[%consumer]
        : !fagpu.smem_tile<16x224xf8E4M3FN, swizzle = 32>
       -> !fagpu.smem_tile<8x224xf8E4M3FN, block_rows = 16, swizzle = 32>
    fagpu.init_row_sum_tile %ones barrier %b
        : !fagpu.smem_tile<8x224xf8E4M3FN, block_rows = 16, swizzle = 32>
    ```
  }];
  let arguments = (ins FAGPU_SharedTile:$tile, I32:$barrier);
  let assemblyFormat = "$tile `barrier` $barrier attr-dict `:` type($tile)";
  let hasVerifier = 1;
}

def FAGPU_WidenTileOp : FAGPU_Op<"widen_tile"> {
  let summary = "a warpgroup widens an e4m3 tile into a 16-bit one";
  let description = [{
    The warpgroup's 128 threads convert `%src` (e4m3 codes, as a TMA
    wrote them) into `%dst` of the same rows and columns in f16 or bf16,
    exactly (every e4m3 value is an f16 and a bf16 value): thread t takes
    the 8-column pieces t, t + 128, ... of the tile, a piece's 8 bytes read
    from `%src`'s swizzled layout and its 16 bytes written into `%dst`'s
    (`cvt.rn.f16x2.e4m3x2`, through f32 for bf16). A quarter-warp's pieces
    are one 128-byte line of `%dst` (chunk k of row r at k XOR r mod 8), so
    the stores meet no bank conflict. The threads then fence their writes
    for the async proxy (wgmma reads shared memory through it) and meet at
    named barrier `%barrier` (128 threads): after it, one thread may hand
    `%dst` on (`fagpu.pipeline_commit`) and `%src` may be refilled.

    An e4m3 KV cache beside a 16-bit Q: the producer warpgroup widens each
    K/V block into the ring the consumers' f16/bf16 MMAs read, so only the
    cache's bytes halve (docs/fp8.md).

    ```mlir
    fagpu.widen_tile %k8 to %k barrier %b
        : !fagpu.smem_tile<64x128xf8E4M3FN> to !fagpu.smem_tile<64x128xf16>
    ```
  }];
  let arguments = (ins FAGPU_SharedTile:$src, FAGPU_SharedTile:$dst,
                       I32:$barrier);
  let assemblyFormat = [{
    $src `to` $dst `barrier` $barrier attr-dict `:` type($src) `to`
    type($dst)
  }];
  let hasVerifier = 1;
}

def FAGPU_RowPartialsOp : FAGPU_Op<"row_partials", [Pure]> {
  let summary = "each thread's part of its rows' sums, as a rows fragment";
  let description = [{
    For each of the thread's rows, the sum of the accumulator columns the
    thread holds: the per-thread partial that, summed over the quad, is the
    row's total (the form `l` takes in `fagpu.softmax_step` and
    `fagpu.row_totals`). Applied to the row-sum accumulator of
    `fagpu.init_row_sum_tile`, it is the running l.

    ```mlir
    %l = fagpu.row_partials %lsum
        : !fagpu.fragment<64x8xf32, accumulator>
       -> !fagpu.fragment<64xf32, rows>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$acc);
  let results = (outs FAGPU_Fragment:$result);
  let assemblyFormat = "$acc attr-dict `:` type($acc) `->` type($result)";
  let hasVerifier = 1;
}

def FAGPU_RescaleOp : FAGPU_Op<"rescale"> {
  let summary = "O *= alpha per row (FA4: only where a row of the warp moved)";
  let description = [{
    Scales each row of the accumulator `%o` by its `%alpha`. With `%moved`
    (FA4 conditional rescaling) the warp votes, and skips the multiplies
    when no thread's row moved its base.

    With O in tensor memory (sm_100a, `%o` a `!fagpu.tmem` region, `%alpha`
    a `lanes` fragment) the rescale is in place and has no result: each
    thread reads its row 32 columns at a time (`tcgen05.ld`, so O never
    takes more than 32 registers), multiplies and writes it back
    (`tcgen05.st`), then waits for the stores. tcgen05.ld/st are
    warp-collective, which is why FA4's skip is decided by a warp vote.

    ```mlir
    %o1 = fagpu.rescale %o, %alpha if %moved
        : !fagpu.fragment<64x128xf32, accumulator>, !fagpu.fragment<64xf32, rows>
    fagpu.rescale %o_tmem, %alpha if %moved
        : !fagpu.tmem<128x128xf32>, !fagpu.fragment<128xf32, lanes>
    ```
  }];
  let arguments = (ins AnyType:$o, FAGPU_Fragment:$alpha,
                       Optional<I1>:$moved);
  let results = (outs Optional<FAGPU_Fragment>:$result);
  let assemblyFormat = [{
    $o `,` $alpha (`if` $moved^)? attr-dict `:` type($o) `,` type($alpha)
    custom<InPlace>(ref(type($o)), type($result))
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Epilogue
//===----------------------------------------------------------------------===//

def FAGPU_RowTileOp : FAGPU_Op<"row_tile", [Pure]> {
  let summary = "one 64-row tile of a fragment";
  let description = [{
    Tile `index` of a fragment whose rows span several 64-row tiles (the
    mma.sync kernel's B_r = 128: each warp holds 16 rows of each): the same
    layout with 64 rows. It names a part of the thread's registers and
    emits no instruction; the epilogue stores a tile at a time.

    ```mlir
    %o1 = fagpu.row_tile %o[1] : !fagpu.fragment<128x64xf32, accumulator>
                              -> !fagpu.fragment<64x64xf32, accumulator>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$source, I64Attr:$index);
  let results = (outs FAGPU_Fragment:$result);
  let assemblyFormat = [{
    $source `[` $index `]` attr-dict `:` type($source) `->` type($result)
  }];
  let hasVerifier = 1;
}

def FAGPU_RowTotalsOp : FAGPU_Op<"row_totals",
    [Pure, AllTypesMatch<["l", "total", "factor"]>]> {
  let summary = "each row's l and the factor that normalises its O";
  let description = [{
    The normalisation of the epilogue. For each of the thread's rows:
    `%total`, the row's l (a `rows` fragment holds each thread's part of
    it, summed here over the quad by two butterfly shuffles; a `lanes`
    fragment holds it whole), and `%factor` = d / l, or 0 for a row that
    saw no key (l = 0: its O is 0), where d is `%descale` (V's, folded in
    by the e4m3 kernels) or 1. The stores multiply O by the factor; the LSE
    is taken from the total.

    ```mlir
    %total, %factor = fagpu.row_totals %l : !fagpu.fragment<64xf32, rows>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$l, Optional<F32>:$descale);
  let results = (outs FAGPU_Fragment:$total, FAGPU_Fragment:$factor);
  let assemblyFormat = [{
    $l (`descale` $descale^)? attr-dict `:` type($l)
  }];
  let hasVerifier = 1;
}

def FAGPU_LseRowsOp : FAGPU_Op<"lse_rows",
    [Pure, AllTypesMatch<["lse", "rows"]>]> {
  let summary = "where one matrix's LSE rows start";
  let description = [{
    Element `%matrix * %nq` of `%lse` (f32, contiguous [B * H, N]): row 0
    of matrix `%matrix`, which `fagpu.store_lse` writes relative to. The
    epilogue computes it first, before O's stores.

    ```mlir
    %rows = fagpu.lse_rows %lse[%matrix] rows %nq : !llvm.ptr<1>
    ```
  }];
  let arguments = (ins LLVM_AnyPointer:$lse, I32:$matrix, I32:$nq);
  let results = (outs LLVM_AnyPointer:$rows);
  let assemblyFormat = [{
    $lse `[` $matrix `]` `rows` $nq attr-dict `:` type($lse)
  }];
}

def FAGPU_StoreLseOp : FAGPU_Op<"store_lse",
    [AllTypesMatch<["m", "total"]>]> {
  let summary = "the log-sum-exp of the thread's rows";
  let description = [{
    LSE = (m + log2 l) ln 2 of each of the thread's rows below `%nq` (-inf
    for a row with l = 0), `%total` being `fagpu.row_totals`'s l and `%m`
    the row's running maximum (in log2 units), at element `row` of
    `%lse_rows` (`fagpu.lse_rows`: the matrix's row 0). Rows of a `rows`
    fragment are `%row0 + 16 t` and `%row0 + 16 t + 8` for each 64-row
    tile t, written by the quad's first lane; a `lanes` fragment's row is
    `%row0`. With `probs_scale = s` (e4m3: P was cast as s · P, so l
    carries s) the LSE is (m + log2 l - log2 s) ln 2.

    ```mlir
    fagpu.store_lse %m, %total rows(%row0, %nq) to %lse_rows
        : !llvm.ptr<1> : !fagpu.fragment<64xf32, rows>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$m, FAGPU_Fragment:$total, I32:$row0,
                       I32:$nq, LLVM_AnyPointer:$lse_rows,
                       OptionalAttr<F32Attr>:$probs_scale);
  let assemblyFormat = [{
    $m `,` $total `rows` `(` $row0 `,` $nq `)` `to` $lse_rows `:`
    type($lse_rows) attr-dict `:` type($m)
  }];
  let hasVerifier = 1;
}

def FAGPU_OutputRowsOp : FAGPU_Op<"output_rows", [Pure,
    AttrSizedOperandSegments, AllTypesMatch<["out", "base"]>]> {
  let summary = "where one matrix's rows of O start, and their stride";
  let description = [{
    Row 0 of matrix `%matrix` of O (elements `out_element`) as `%base`, and
    the elements from one row to the next as `%stride` (i64), which
    `fagpu.store_rows` writes relative to. Without `strided`, O is
    contiguous [B * H, N, columns]: `%base` is `%out` plus
    `%matrix * %nq * columns` elements, `%stride` is `columns`. With
    `strided(%heads, %stride_b, %stride_h, %stride_n)`, matrix `%matrix` is
    (batch, head) = (%matrix / %heads, %matrix % %heads) of a strided
    [B, H, N, D] O: `%base` is `%out` plus batch * stride_b + head *
    stride_h, `%stride` is stride_n. The epilogue computes it first.

    ```mlir
    %base, %stride = fagpu.output_rows %out[%matrix] rows %nq
        : !llvm.ptr<1> as f16 {columns = 128 : i64}
    ```
  }];
  let arguments = (ins LLVM_AnyPointer:$out, I32:$matrix, I32:$nq,
                       TypeAttr:$out_element, Optional<I32>:$heads,
                       Variadic<I64>:$strides, I64Attr:$columns);
  let results = (outs LLVM_AnyPointer:$base, I64:$stride);
  let assemblyFormat = [{
    $out `[` $matrix `]` `rows` $nq `:` type($out) `as` $out_element
    (`strided` `(` $heads^ `,` $strides `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

def FAGPU_StoreRowsOp : FAGPU_Op<"store_rows"> {
  let summary = "O times its rows' factors, from registers to O";
  let description = [{
    Writes each of the thread's rows of the accumulator `%o` below `%nq`
    (rows `%row0 + 16 t` and `%row0 + 16 t + 8` of each 64-row tile t),
    times the row's `%factor` (`fagpu.row_totals`), as elements
    `out_element` at `%base + row * %stride` (`fagpu.output_rows`), straight
    from registers: each run of 32 columns transposed within the quad
    (three butterfly shuffles), so that each lane stores 8 columns in one
    16-byte store and a quad 64 contiguous bytes of a row; `out_element`
    f32 (a split-KV chunk's partial O) stores 8 bytes a lane.
    `columns = c`: O has c columns, fewer than the fragment's (the tiles'
    head dim padded to whole 64-column blocks), and only those are stored.

    ```mlir
    fagpu.store_rows %o, %factor rows(%row0, %nq) to %base stride %stride
        : !llvm.ptr<1> as f16
        : !fagpu.fragment<64x128xf32, accumulator>, !fagpu.fragment<64xf32, rows>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$o, FAGPU_Fragment:$factor, I32:$row0,
                       I32:$nq, LLVM_AnyPointer:$base, I64:$stride,
                       TypeAttr:$out_element,
                       OptionalAttr<I64Attr>:$columns);
  let assemblyFormat = [{
    $o `,` $factor `rows` `(` $row0 `,` $nq `)` `to` $base `stride` $stride
    `:` type($base) `as` $out_element attr-dict `:` type($o) `,`
    type($factor)
  }];
  let hasVerifier = 1;
}

def FAGPU_StoreTmemRowsOp : FAGPU_Op<"store_tmem_rows"> {
  let summary = "O times its rows' factors, from tensor memory to O";
  let description = [{
    sm_100a, O in tensor memory (`%o` a `!fagpu.tmem` region, `%factor` a
    `lanes` fragment, `%row0` the thread's own row): the thread reads its
    row 32 columns at a time (`tcgen05.ld`, warp-collective: every lane
    loads, a row past `%nq` only skips the stores), multiplies them by its
    factor and writes them as 16-byte stores to row `%row0` of matrix
    `%matrix` of a contiguous [B * H, N, D] O (elements `out_element`, f16
    or bf16).

    ```mlir
    fagpu.store_tmem_rows %o, %factor rows(%row, %matrix, %nq) to %out
        : !llvm.ptr<1> as f16
        : !fagpu.tmem<128x128xf32>, !fagpu.fragment<128xf32, lanes>
    ```
  }];
  let arguments = (ins FAGPU_Tmem:$o, FAGPU_Fragment:$factor, I32:$row0,
                       I32:$matrix, I32:$nq, LLVM_AnyPointer:$out,
                       TypeAttr:$out_element);
  let assemblyFormat = [{
    $o `,` $factor `rows` `(` $row0 `,` $matrix `,` $nq `)` `to` $out `:`
    type($out) `as` $out_element attr-dict `:` type($o) `,` type($factor)
  }];
  let hasVerifier = 1;
}

def FAGPU_StageOutputOp : FAGPU_Op<"stage_output"> {
  let summary = "O times its rows' factors into a shared-memory tile";
  let description = [{
    The warpgroup's four warps meet at named barrier `%sync` (the staging
    tile's earlier readers in the warpgroup are done), then each thread
    writes its rows of `%o` times their `%factor`, converted to the tile's
    element type, into `%staging` (the warpgroup's 64 rows, 128-byte
    swizzle) with stmatrix: a store by TMA (`fagpu.tma_store_staged`) or
    by copied rows (`fagpu.copy_staged_rows`) reads it from there. A tile a
    TMA store read before needs `fagpu.store_wait` first.

    ```mlir
    fagpu.stage_output %o, %factor into %staging sync %barrier
        : !fagpu.fragment<64x128xf32, accumulator>,
          !fagpu.fragment<64xf32, rows>,
          !fagpu.smem_tile<64x128xf16, block_rows = 128>
    ```
  }];
  let arguments = (ins FAGPU_Fragment:$o, FAGPU_Fragment:$factor,
                       FAGPU_SharedTile:$staging, I32:$sync_barrier);
  let assemblyFormat = [{
    $o `,` $factor `into` $staging `sync` $sync_barrier attr-dict `:`
    type($o) `,` type($factor) `,` type($staging)
  }];
  let hasVerifier = 1;
}

def FAGPU_TmaStoreStagedOp : FAGPU_Op<"tma_store_staged"> {
  let summary = "the staged 64 rows to O by one TMA store";
  let description = [{
    Makes the warpgroup's stmatrix writes of `%staging` visible to the TMA
    (`fence.proxy.async.shared::cta`, the writes being generic-proxy),
    meets the warpgroup at named barrier `%sync`, and the warpgroup's first
    thread (whose `%row0` is the tile's first row) stores the 64 rows by
    one bulk tensor store through O's tensor map `%map` and commits it
    (`fagpu.store_wait` waits for its reads of the tile). The map's
    coordinates are (column, row, matrix), or with `strided(%heads)` a
    rank-4 map's (column, row, head, batch). The TMA clips the box to O's
    rows and columns.

    ```mlir
    fagpu.tma_store_staged %staging rows(%row0, %matrix) to %map
        : !llvm.ptr sync %barrier : !fagpu.smem_tile<64x128xf16, block_rows = 128>
    ```
  }];
  let arguments = (ins FAGPU_SharedTile:$staging, I32:$row0, I32:$matrix,
                       LLVM_AnyPointer:$map, Optional<I32>:$heads,
                       I32:$sync_barrier);
  let assemblyFormat = [{
    $staging `rows` `(` $row0 `,` $matrix `)` `to` $map `:` type($map)
    (`strided` `(` $heads^ `)`)? `sync` $sync_barrier attr-dict `:`
    type($staging)
  }];
  let hasVerifier = 1;
}

def FAGPU_CopyStagedRowsOp : FAGPU_Op<"copy_staged_rows",
    [AttrSizedOperandSegments]> {
  let summary = "the staged rows below Nq to O, whole sectors per warp";
  let description = [{
    The warpgroup meets at named barrier `%sync` (the copy reads what the
    other warps' stmatrix wrote), then its 128 threads copy the tile's rows
    below `%nq` to O in 16-byte pieces, a row's pieces from adjacent
    threads, so that every 32-byte sector of O is written whole by one
    warp's store: a varlen batch, where a TMA box would write into the next
    sequence's rows. `%row0` is the thread's first row (as in
    `fagpu.stage_output`), O's layout `fagpu.output_rows`' (`strided`,
    `columns`).

    With `tma_blocks(%map)`, `%map` O's tensor map: the staged tile is
    fenced for the TMA before the barrier, a warpgroup whose 64 rows all
    lie below `%nq` stores them by one TMA store through it (as
    `fagpu.tma_store_staged`), and only a warpgroup whose rows reach past
    `%nq` (a sequence's last query block) copies them. The choice is
    uniform over the warpgroup.

    ```mlir
    fagpu.copy_staged_rows %staging rows(%row0, %matrix, %nq) to %out
        : !llvm.ptr<1> sync %barrier
        : !fagpu.smem_tile<64x128xf16, block_rows = 128>
    ```
  }];
  let arguments = (ins FAGPU_SharedTile:$staging, I32:$row0, I32:$matrix,
                       I32:$nq, LLVM_AnyPointer:$out, Optional<I32>:$heads,
                       Variadic<I64>:$strides, I32:$sync_barrier,
                       Optional<LLVM_AnyPointer>:$block_map,
                       OptionalAttr<I64Attr>:$columns);
  let assemblyFormat = [{
    $staging `rows` `(` $row0 `,` $matrix `,` $nq `)` `to` $out `:`
    type($out) (`strided` `(` $heads^ `,` $strides `)`)?
    (`tma_blocks` `(` $block_map^ `:` type($block_map) `)`)?
    `sync` $sync_barrier attr-dict `:` type($staging)
  }];
  let hasVerifier = 1;
}

def FAGPU_MergeSplitsOp : FAGPU_Op<"merge_splits",
    [AttrSizedOperandSegments]> {
  let summary = "split-KV: the last chunk of a warp's rows merges them";
  let description = [{
    After a warpgroup stored its chunk's partial O and LSE of rows
    `[%rows_start, %rows_start + 64)` of matrix `%matrix` (partial row block
    `chunk * %matrices + %matrix` of `%o_partial` [S, B * Hq, Nq, head_dim]
    and `%lse_partial` [S, B * Hq, Nq], f32), each warp counts itself in on
    the arrival counter of its 16 rows (`%arrivals[%matrix * %nq + r0]`, r0
    its first row, u32): its lanes make their partial stores visible at GPU
    scope (membar.gl), meet at a warp barrier, then lane 0 adds 1
    (atom.add acq_rel, gpu scope).
    The warp that brings the count to `%splits` resets it to 0 (for the
    next launch) and merges the `%splits` partials of each of its rows
    below `%nq`, as fa.merge_partials does, into O (`out_element`) and,
    with `%lse`, LSE:

    ```
    m = max_s LSE_s,  w_s = exp(LSE_s - m)
    O = sum_s w_s O_s / sum_s w_s,  LSE = m + log(sum_s w_s)
    ```

    A chunk with LSE -inf weighs 0 and its O is not read; a row without any
    key gets O = 0, LSE = -inf. Each lane merges head_dim / 32 adjacent
    columns. O's layout is fagpu.output_rows': contiguous, or with
    `strided(%heads, %stride_b, %stride_h, %stride_n)` a strided
    [B, H, N, D] tensor. Warps count per warp, so no barrier joins the warpgroup; a
    warp whose rows all lie past `%nq` neither counts nor merges.

    ```mlir
    fagpu.merge_splits rows(%start, %matrix, %nq) of %splits x %bh
        arrivals %count partials(%op, %lp) to %o as f16 lse %lse
        {head_dim = 128 : i64}
        : !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>, !llvm.ptr<1>
    ```
  }];
  let arguments = (ins I32:$rows_start, I32:$matrix, I32:$nq, I32:$splits,
                       I32:$matrices, LLVM_AnyPointer:$arrivals,
                       LLVM_AnyPointer:$o_partial,
                       LLVM_AnyPointer:$lse_partial, LLVM_AnyPointer:$out,
                       TypeAttr:$out_element, I64Attr:$head_dim,
                       Optional<I32>:$heads, Variadic<I64>:$strides,
                       Optional<LLVM_AnyPointer>:$lse);
  let assemblyFormat = [{
    `rows` `(` $rows_start `,` $matrix `,` $nq `)` `of` $splits `x` $matrices
    `arrivals` $arrivals `partials` `(` $o_partial `,` $lse_partial `)`
    `to` $out `as` $out_element
    (`strided` `(` $heads^ `,` $strides `)`)? (`lse` $lse^)? attr-dict
    `:` type($arrivals) `,` type($o_partial) `,` type($lse_partial) `,`
    type($out) (`,` type($lse)^)?
  }];
  let hasVerifier = 1;
}

def FAGPU_StoreWaitOp : FAGPU_Op<"store_wait"> {
  let summary = "wait until the warpgroup's TMA stores have read shared memory";
  let description = [{
    The first thread of the warpgroup waits until its bulk stores have read
    their shared memory (`cp.async.bulk.wait_group.read 0`): the memory must
    outlive those reads, at the kernel's end or before a Q buffer that
    staged O is handed back to the producer.
  }];
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// Tile scheduler (persistent CTAs)
//===----------------------------------------------------------------------===//
//
// Persistent CTAs loop over the (query block, head) tiles. Equal tiles are
// dealt statically (CTA c runs c, c + gridDim.x, ...: an scf.for). Causal
// tiles, whose lengths differ, are dealt dynamically to whichever CTA is
// free next: CTA c's first tile is c; later ones come from a global counter
// (fagpu.fetch_tile), fetched by the producer once the tile before is
// loaded, and handed to the consumers through a shared-memory slot next to
// the Q buffer the tile's Q goes to (fagpu.publish_tile, fagpu.receive_tile).

def FAGPU_FetchTileOp : FAGPU_Op<"fetch_tile"> {
  let summary = "dynamic tile scheduler: the next tile id from a global counter";
  let description = [{
    The id of the calling CTA's next tile: `gridDim.x + n`, where `n` is the
    u32 `%counter`'s value before this fetch adds 1 to it (a relaxed
    atomic: an id only has to be unique, the tile's data arrives through
    the TMA and its barriers). First tiles (ids below gridDim.x) are never
    fetched.

    Every CTA with a tile fetches until it gets an id of at least `%tiles`,
    so a launch of T tiles fetches exactly T times, and the fetch that
    returns n = T - 1 is the last: it resets the counter to 0, which leaves
    it zero for the next launch on the stream (the runtime zeroes it once,
    when it allocates it).

    ```mlir
    %id = fagpu.fetch_tile %counter tiles %tiles : !llvm.ptr<1>
    ```
  }];
  let arguments = (ins LLVM_AnyPointer:$counter, I32:$tiles);
  let results = (outs I32:$id);
  let assemblyFormat = "$counter `tiles` $tiles attr-dict `:` qualified(type($counter))";
  let hasVerifier = 1;
}

def FAGPU_PublishTileOp : FAGPU_Op<"publish_tile"> {
  let summary = "dynamic tile scheduler: the producer hands a tile id on";
  let description = [{
    Stores `%id` in the shared-memory slot `%slot` of the Q buffer that the
    tile's Q is about to be loaded into. The producer publishes before its
    arrival on that buffer's full barrier, so a consumer that waited on the
    barrier reads the id with fagpu.receive_tile (the mbarrier's
    release/acquire orders the two). The id past the last tile is published
    the same way, with an arrival that carries no bytes, to end the
    consumers' loop.

    ```mlir
    fagpu.publish_tile %id to %slot : !llvm.ptr<3>
    ```
  }];
  let arguments = (ins I32:$id, LLVM_AnyPointer:$slot);
  let assemblyFormat = "$id `to` $slot attr-dict `:` qualified(type($slot))";
  let hasVerifier = 1;
}

def FAGPU_ReceiveTileOp : FAGPU_Op<"receive_tile"> {
  let summary = "dynamic tile scheduler: a consumer reads the tile id";
  let description = [{
    The tile id that fagpu.publish_tile left in the shared-memory slot
    `%slot`, read once the slot's Q buffer's full barrier has completed.

    ```mlir
    %id = fagpu.receive_tile %slot : !llvm.ptr<3>
    ```
  }];
  let arguments = (ins LLVM_AnyPointer:$slot);
  let results = (outs I32:$id);
  let assemblyFormat = "$slot attr-dict `:` qualified(type($slot))";
  let hasVerifier = 1;
}

#endif // FA_DIALECT_FAGPU_IR_FAGPUWARPGROUPOPS_TD
