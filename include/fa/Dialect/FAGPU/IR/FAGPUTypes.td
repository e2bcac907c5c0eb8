//===- FAGPUTypes.td - fagpu types -------------------------*- tablegen -*-===//
//
// The values a warpgroup-level kernel computes with: register fragments of
// a warpgroup's tiles, shared-memory tiles, and the pipelines (rings of
// shared-memory stages guarded by mbarriers) between the warp roles.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FAGPU_IR_FAGPUTYPES_TD
#define FA_DIALECT_FAGPU_IR_FAGPUTYPES_TD

include "fa/Dialect/FAGPU/IR/FAGPUAttrs.td"
include "mlir/IR/AttrTypeBase.td"

def FAGPU_FragmentLayout : I32EnumAttr<"FragmentLayout",
    "how a warpgroup's tile is spread over its threads' registers", [
    I32EnumAttrCase<"Accumulator", 0, "accumulator">,
    I32EnumAttrCase<"OperandA", 1, "operand_a">,
    I32EnumAttrCase<"Rows", 2, "rows">,
    I32EnumAttrCase<"Lanes", 3, "lanes">]> {
  let cppNamespace = "::mlir::fagpu";
}

def FAGPU_TileLayout : I32EnumAttr<"TileLayout",
    "how a shared-memory tile's rows and 16-byte chunks are placed", [
    I32EnumAttrCase<"ColumnBlocks", 0, "column_blocks">,
    I32EnumAttrCase<"RowMajor", 1, "row_major">]> {
  let cppNamespace = "::mlir::fagpu";
}

class FAGPU_Type<string name, string typeMnemonic>
    : TypeDef<FAGPU_Dialect, name> {
  let mnemonic = typeMnemonic;
}

def FAGPU_FragmentType : FAGPU_Type<"Fragment", "fragment"> {
  let summary = "a warpgroup's tile held in its 128 threads' registers";
  let description = [{
    A `rows x cols` tile of one warpgroup (four warps, 128 threads), spread
    over its threads as the tensor cores want it. rows = 64 is the wgmma M
    and one m16 row tile per warp of mma.sync; rows = 128 (mma.sync only)
    gives each warp two row tiles of 16 rows, so that one B fragment read
    from shared memory feeds two MMAs. With R = rows / 64 row tiles per
    warp, thread t, w = t / 32, g = (t % 32) / 4, q = t % 4, row tile r
    holds the registers from r * (registers / R) on:

    | layout | registers per thread | register 4 i + e of row tile r holds |
    |---|---|---|
    | `accumulator` (f32) | rows * cols / 128 f32 | row 16 (R w + r) + g + 8 (e / 2), column 8 i + 2 q + (e % 2) |
    | `operand_a` (f16, bf16) | rows * cols / 256 i32 | the pairs of the accumulator layout, packed: the A fragment of the next MMA |
    | `rows` (f32) | rows / 32 f32 | a value per row: register 2 r + h holds row 16 (R w + r) + g + 8 h |
    | `lanes` (f32, 128 rows) | cols f32 (1 for a 1-D fragment) | row t, column i: thread t owns a whole row |

    The accumulator layout is the mma.sync C fragment repeated over the
    columns (and row tiles), so the softmax arithmetic on it is the same
    for every target.

    `lanes` is sm_100a's: a tcgen05.mma with M = 128 writes row i of its
    accumulator to tensor-memory lane i, and warp w of a warpgroup may only
    read lanes 32 w .. 32 w + 31 (`tcgen05.ld` shape 32x32b), so thread t
    holds row t and its row max and sum need no shuffles.

    ```mlir
    !fagpu.fragment<64x128xf32, accumulator>
    !fagpu.fragment<64x128xf16, operand_a>
    !fagpu.fragment<64xf32, rows>
    !fagpu.fragment<128x64xf32, accumulator>  // mma.sync: two row tiles
    !fagpu.fragment<128x128xf32, lanes>       // tcgen05.ld: a row a thread
    !fagpu.fragment<128xf32, lanes>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape,
                        "Type":$elementType,
                        "FragmentLayout":$layout);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Registers a thread holds.
    int64_t getRegisters() const;
    /// The type of each register (f32, or i32 for packed 16-bit pairs).
    Type getRegisterType() const;
    /// m16 row tiles per warp: rows / 64.
    int64_t getRowTiles() const { return getShape()[0] / 64; }
    /// Columns of a 2-D fragment (1 for a value per row).
    int64_t getCols() const {
      return getShape().size() == 2 ? getShape()[1] : 1;
    }
  }];
}

def FAGPU_SharedTileType : FAGPU_Type<"SharedTile", "smem_tile"> {
  let summary = "a tile in shared memory, swizzled";
  let description = [{
    A `rows x cols` tile in one of two layouts, both with 16-byte chunks
    XORed with the row mod 8 so that the 8 rows one ldmatrix or wgmma
    reads at a logical column fall in 8 different bank groups:

    * `column_blocks` (the default): column blocks of `block_rows` rows
      of `swizzle` bytes (128 unless given: 64 16-bit or 128 e4m3
      columns), each 8-row group an atom of 8 * `swizzle` bytes -- what a
      TMA writes with that swizzle and what wgmma reads. A narrower swizzle
      (64 or 32 bytes) lets a tile's rows be 64 or 32 bytes long: the e4m3
      V^T tile [D, B_c] of B_c = 192 or 224 keys. A tile of the rows of a
      larger one (`fagpu.tile_rows`) keeps the larger tile's `block_rows`;
      it is printed only when it differs from `rows`.
    * `row_major`: each row's cols * 2 bytes contiguous, chunk c of row r
      at chunk (c & ~7) | ((c ^ r) & 7) -- what cp.async writes 16 bytes
      per thread and ldmatrix reads on sm_80 (no 1 KiB atom, so the tile
      needs only 16-byte alignment).

    ```mlir
    !fagpu.smem_tile<128x128xf16>
    !fagpu.smem_tile<64x128xf16, block_rows = 128>
    !fagpu.smem_tile<64x128xf16, row_major>
    !fagpu.smem_tile<128x224xf8E4M3FN, swizzle = 32>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape,
                        "Type":$elementType, "int64_t":$blockRows,
                        "TileLayout":$layout, "int64_t":$swizzle);
  let builders = [
    TypeBuilder<(ins "ArrayRef<int64_t>":$shape, "Type":$elementType,
                     "int64_t":$blockRows,
                     CArg<"int64_t", "kMaxSwizzleBytes">:$swizzle), [{
      return $_get($_ctxt, shape, elementType, blockRows,
                   TileLayout::ColumnBlocks, swizzle);
    }]>,
    TypeBuilder<(ins "ArrayRef<int64_t>":$shape, "Type":$elementType,
                     "int64_t":$blockRows, "TileLayout":$layout), [{
      return $_get($_ctxt, shape, elementType, blockRows, layout,
                   kMaxSwizzleBytes);
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getRows() const { return getShape()[0]; }
    int64_t getCols() const { return getShape()[1]; }
    bool isRowMajor() const { return getLayout() == TileLayout::RowMajor; }
    /// Bytes of the tile in shared memory.
    int64_t getBytes() const {
      return getBlockRows() * getCols() * getElementType().getIntOrFloatBitWidth() / 8;
    }
  }];
}

def FAGPU_PipelineType : FAGPU_Type<"Pipeline", "pipeline"> {
  let summary = "a ring of shared-memory stages between producer and consumers";
  let description = [{
    `stages` stages of `buffers` tiles each (K and V: 2; Q: 1). With
    `column_blocks` tiles (TMA-filled), every tile is guarded by a "full"
    mbarrier (the producer's arrival with the bytes its TMA will deliver)
    and an "empty" one (one arrival per consumer warp once it has read the
    tile); stage s is used in rounds, round r waits on parity r mod 2.
    With `row_major` tiles (sm_80) the pipeline has no barriers: every
    thread fills stages with `fagpu.copy_async`, and cp.async groups
    (`fagpu.copy_commit`, `fagpu.copy_wait`) order them.
    A `fill_once` pipeline has full barriers only: its buffers are loaded
    once per CTA and never given back (sm_100a's Q, one tile per CTA), so
    `fagpu.pipeline_acquire` and `fagpu.pipeline_release` do not apply.
    A second tile type gives buffer 1 its own (of the same element type and
    bytes): the e4m3 kernel's V^T tile [D, B_c] beside its K tile [B_c, D].

    ```mlir
    !fagpu.pipeline<stages = 2, buffers = 2, 128x128xf16>
    !fagpu.pipeline<stages = 2, buffers = 2, 64x64xf16, row_major>
    !fagpu.pipeline<stages = 1, buffers = 1, 128x128xf16, fill_once>
    !fagpu.pipeline<stages = 3, buffers = 2, 256x128xf8E4M3FN, 128x256xf8E4M3FN>
    ```
  }];
  let parameters = (ins "int64_t":$stages, "int64_t":$buffers,
                        FAGPU_SharedTileType:$tile, "bool":$fillOnce,
                        OptionalParameter<"SharedTileType">:$secondTile);
  let builders = [
    TypeBuilder<(ins "int64_t":$stages, "int64_t":$buffers,
                     "SharedTileType":$tile), [{
      return $_get($_ctxt, stages, buffers, tile, false, SharedTileType());
    }]>,
    TypeBuilder<(ins "int64_t":$stages, "int64_t":$buffers,
                     "SharedTileType":$tile, "bool":$fillOnce), [{
      return $_get($_ctxt, stages, buffers, tile, fillOnce, SharedTileType());
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Filled by cp.async groups (sm_80): no mbarriers.
    bool isCpAsync() const { return getTile().isRowMajor(); }
    /// The tile type of buffer `buffer` of every stage.
    SharedTileType getBufferTile(int64_t buffer) const {
      return buffer == 1 && getSecondTile() ? getSecondTile() : getTile();
    }
  }];
}

def FAGPU_TmemType : FAGPU_Type<"Tmem", "tmem"> {
  let summary = "a region of tensor memory (sm_100a)";
  let description = [{
    `lanes x cols` elements of the SM's tensor memory (TMEM): 128 lanes of
    512 32-bit columns, where tcgen05.mma keeps its accumulator (lane i is
    row i of an M = 128 result) and may read its A operand. An f32 region
    takes one column per element; an f16/bf16 one packs two elements per
    column, as the A operand of a kind::f16 MMA wants them (P written over
    the first half of the columns of its S).

    The whole allocation (`fagpu.tmem_alloc`) spans a power of two of at
    least 32 columns; `fagpu.tmem_slice` names the columns of one buffer
    in it (S_j, P_j, O).

    ```mlir
    !fagpu.tmem<128x512xf32>   // the allocation
    !fagpu.tmem<128x128xf16>   // P: 64 columns of f16 pairs
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape,
                        "Type":$elementType);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getLanes() const { return getShape()[0]; }
    int64_t getCols() const { return getShape()[1]; }
    /// 32-bit TMEM columns the region spans.
    int64_t getColumns() const {
      return getCols() * getElementType().getIntOrFloatBitWidth() / 32;
    }
  }];
}

def FAGPU_BarriersType : FAGPU_Type<"Barriers", "barriers"> {
  let summary = "mbarriers that hand tensor memory between warp roles (sm_100a)";
  let description = [{
    `count` consecutive mbarriers in shared memory. On sm_100a they signal
    the hand-offs of tensor memory: S_j written (a `fagpu.mma_commit` of the
    MMA thread), P_j written (every softmax thread's `fagpu.barrier_arrive`),
    O updated. TMEM is touched by the asynchronous tcgen05 proxy, so the ops
    on these barriers carry the tcgen05 fences that order TMEM accesses
    across the thread synchronisation (see each op).

    ```mlir
    !fagpu.barriers<2>
    ```
  }];
  let parameters = (ins "int64_t":$count);
  let assemblyFormat = "`<` $count `>`";
  let genVerifyDecl = 1;
}

#endif // FA_DIALECT_FAGPU_IR_FAGPUTYPES_TD
