//===- FAGPUAttrs.td - fagpu attributes --------------------*- tablegen -*-===//

#ifndef FA_DIALECT_FAGPU_IR_FAGPUATTRS_TD
#define FA_DIALECT_FAGPU_IR_FAGPUATTRS_TD

include "fa/Dialect/FAGPU/IR/FAGPUDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def FAGPU_Target : I32EnumAttr<"Target", "GPU generation of a kernel", [
    I32EnumAttrCase<"sm_80", 0>,
    I32EnumAttrCase<"sm_90a", 1>,
    I32EnumAttrCase<"sm_100a", 2>]> {
  let cppNamespace = "::mlir::fagpu";
  let genSpecializedAttr = 0;
}
def FAGPU_TargetAttr : EnumAttr<FAGPU_Dialect, FAGPU_Target, "target"> {
  let summary = "the GPU generation: sm_80 (mma.sync), sm_90a (wgmma, TMA), "
                "sm_100a (tcgen05, compile-verified only)";
  let assemblyFormat = "`<` $value `>`";
}

def FAGPU_TileScheduler : I32EnumAttr<"TileScheduler",
    "how the CTAs find their (query block, head) tiles", [
    I32EnumAttrCase<"Single", 0, "single">,
    I32EnumAttrCase<"Static", 1, "static">,
    I32EnumAttrCase<"Dynamic", 2, "dynamic">]> {
  let cppNamespace = "::mlir::fagpu";
}

def FAGPU_Epilogue : I32EnumAttr<"Epilogue", "how O leaves the kernel", [
    I32EnumAttrCase<"Registers", 0, "registers">,
    I32EnumAttrCase<"TmaStore", 1, "tma_store">,
    I32EnumAttrCase<"TmaStoreInQ", 2, "tma_store_in_q">,
    I32EnumAttrCase<"StagedCopy", 3, "staged_copy">,
    I32EnumAttrCase<"StagedCopyInQ", 4, "staged_copy_in_q">]> {
  let cppNamespace = "::mlir::fagpu";
}

def FAGPU_ScheduleAttr : AttrDef<FAGPU_Dialect, "Schedule"> {
  let mnemonic = "schedule";
  let summary = "the schedule of an attention kernel, one field per decision";
  let description = [{
    Every decision that shapes a kernel, typed. `fa-map-to-gpu` fills the
    tiles and the target's fixed structure and leaves every
    FlashAttention-3 idea off; each `fagpu-*` pass sets its own fields.

    | field | meaning | set by |
    |---|---|---|
    | `block_r`, `block_c` | query rows per tile, keys per K/V block | `fagpu-tile{target}` (read from the loop nest) |
    | `consumers` | consumer warpgroups of 64 rows (sm_90a: `block_r / 64`) | `fa-map-to-gpu` |
    | `ctas_per_sm` | resident CTAs the kernel is built for | `fa-map-to-gpu` |
    | `producer_registers`, `consumer_registers` | `setmaxnreg` budgets of the warp roles (0: no warp specialisation) | `fagpu-warp-specialize` |
    | `stages` | depth of the K/V ring in shared memory (0: not pipelined) | `fagpu-pipeline-kv` |
    | `ping_pong` | consumer warpgroups take turns on the tensor cores | `fagpu-ping-pong` |
    | `overlap_softmax` | softmax of block j under P V of block j - 1 | `fagpu-overlap-softmax` |
    | `scheduler`, `q_buffers` | tile scheduler; Q buffers (2: cross-tile pipeline) | `fagpu-persistent` (`q_buffers` may drop to 1 in `fagpu-pipeline-kv`) |
    | `epilogue` | O from registers, or through shared memory: a TMA store (of a staging tile or the dead Q buffer), or for a varlen batch a copy of whole rows by the consumer's threads | `fagpu-tma-store-epilogue` |
    | `q_in_registers` | sm_80: Q fragments kept in registers | `fa-map-to-gpu` |
    | `tmem_columns` | sm_100a: tensor-memory columns allocated for the accumulators, two S/P buffers of `block_c` columns then O (printed only when set) | `fagpu-tmem-accumulators` |
    | `row_sum_mma` | e4m3: P's row sums on the tensor cores, an m64n8 MMA of P against a ones column per k-step instead of an FADD per score (printed only when set) | `fagpu-row-sum-mma` |
    | `query_group` | pack-GQA beyond one query: 0, or G, the query heads that share a K/V head packed into the tile's rows query by query (row `r` of matrix `h` is query `r / G` of query head `h G + r mod G`; Q, O and the LSE are read and written packed, `[B, Hkv, Nq G, D]`); the masks and the K/V block range see the query `r / G` (printed only when set) | `fagpu-pack-query-heads` |
    | `max_rows` | 0, or 8: the launches give each tile at most 8 real rows (decode: at most 8 packed query rows), so each consumer thread steps only its first row's softmax, its row g + 8 being padding; launches with more rows are refused (printed only when set) | `fagpu-max-rows` |
    | `kv_splits` | split-KV: K/V chunks per tile of the IR launch, each CTA one chunk, the last to finish merging (printed only when set; the kernel takes the count as a parameter) | `fa-map-to-gpu` (from `fa-split-kv`'s nest) |

    ```mlir
    #fagpu.schedule<block_r = 128, block_c = 128, consumers = 2,
                    ctas_per_sm = 1, producer_registers = 24,
                    consumer_registers = 240, stages = 2, ping_pong = true,
                    overlap_softmax = true, scheduler = dynamic,
                    q_buffers = 2, epilogue = tma_store,
                    q_in_registers = false>
    ```
  }];
  let parameters = (ins
    "int64_t":$blockR, "int64_t":$blockC, "int64_t":$consumers,
    "int64_t":$ctasPerSm, "int64_t":$producerRegisters,
    "int64_t":$consumerRegisters, "int64_t":$stages, "bool":$pingPong,
    "bool":$overlapSoftmax, "TileScheduler":$scheduler, "int64_t":$qBuffers,
    "Epilogue":$epilogue, "bool":$qInRegisters, "int64_t":$kvSplits,
    "int64_t":$tmemColumns, "bool":$rowSumMma, "int64_t":$queryGroup,
    "int64_t":$maxRows);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    /// Whether the kernel has producer and consumer warp roles.
    bool isWarpSpecialized() const { return getProducerRegisters() > 0; }
    /// Whether each CTA attends its tile to one chunk of the keys.
    bool isSplitKV() const { return getKvSplits() > 0; }
    /// Whether CTAs loop over several tiles.
    bool isPersistent() const { return getScheduler() != TileScheduler::Single; }
    /// The tile rows per query: G with pack-GQA beyond one query, else 1.
    int64_t rowsPerQuery() const {
      return getQueryGroup() > 1 ? getQueryGroup() : 1;
    }
    /// A copy with `apply` run on its fields.
    ScheduleAttr with(llvm::function_ref<void(ScheduleFields &)> apply) const;
  }];
}

#endif // FA_DIALECT_FAGPU_IR_FAGPUATTRS_TD
