//===- KernelABI.cpp - the launch interface of the attention kernels ------===//

#include "fa/Dialect/FAGPU/IR/KernelABI.h"
#include "fa/Dialect/FAGPU/IR/Heuristics.h"
#include "fa/Dialect/FAGPU/IR/SharedMemory.h"

using namespace mlir;
using namespace mlir::fagpu;

SmallVector<KernelParam> mlir::fagpu::kernelParams(Target target,
                                                   const ScheduleFields &s,
                                                   StringRef dtype,
                                                   const KernelInputs &in) {
  // The wgmma and tcgen05 kernels read q, k, v (and o when a TMA store
  // writes it) through tensor maps and find their tiles from one grid
  // dimension; the mma.sync kernel takes pointers and a 3-D grid.
  bool tma = target != Target::sm_80;
  auto tensor = [&](StringRef name, StringRef elt, ArrayRef<StringRef> dims,
                    int64_t boxRows) {
    KernelParam p;
    p.name = name.str();
    p.kind = boxRows ? ParamKind::TensorMap : ParamKind::Pointer;
    p.dtype = elt.str();
    for (StringRef dim : dims)
      p.shape.push_back(dim.str());
    p.boxRows = boxRows;
    if (boxRows)
      p.rank = stridedTensors(target) ? 4 : 3;
    return p;
  };
  auto scalar = [](StringRef name, ParamKind kind, StringRef meaning) {
    KernelParam p;
    p.name = name.str();
    p.kind = kind;
    p.meaning = meaning.str();
    return p;
  };
  int64_t oBoxRows = takesOutputMap(s.epilogue) ? kRowsPerConsumer : 0;
  // StagedCopy: O's map for whole blocks, and its data and strides for the
  // rows of a partial block the threads copy.
  bool copiesPartialBlocks = s.epilogue == Epilogue::StagedCopy;
  // A paged cache's K and V are [pages, Hkv, page_size, D]: their tensor
  // maps' outer coordinate is a page, found in the block table.
  // Pages shorter than a block are loaded one box (page) at a time.
  SmallVector<StringRef> kvShape = {"B", "Hkv", "Nk", "D"};
  int64_t kvBoxRows = s.blockC;
  if (in.pageSize) {
    kvShape = {"pages", "Hkv", "page_size", "D"};
    kvBoxRows = std::min(s.blockC, in.pageSize);
  }
  // A varlen batch: the sequences packed along N in one batch row.
  SmallVector<StringRef> qShape = {"B", "Hq", "Nq", "D"};
  SmallVector<StringRef> lseShape = {"B", "Hq", "Nq"};
  if (in.varlen) {
    qShape = {"1", "Hq", "total_q", "D"};
    lseShape = {"1", "Hq", "total_q"};
    kvShape = {"1", "Hkv", "total_k", "D"};
  }
  // V and O of Dv columns where they are narrower than Q and K.
  SmallVector<StringRef> vShape = kvShape, oShape = qShape;
  if (in.narrowValues)
    vShape.back() = oShape.back() = "Dv";
  bool fp8 = dtype == "e4m3";
  StringRef outDtype =
      in.outputDtype.empty() ? dtype : StringRef(in.outputDtype);
  // e4m3: V^T [B, Hkv, D, Nk_128], boxes of D rows by the V^T tile's
  // swizzle span of keys.
  KernelParam valueTransposed =
      tensor("v_t", dtype, {"B", "Hkv", "D", "Nk_128"}, in.headDim);
  valueTransposed.swizzleBytes = valueTileSwizzle(s.blockC);
  // An e4m3 KV cache beside a 16-bit Q: K's and V's maps read its codes.
  StringRef kvDtype =
      in.keyValueDtype.empty() ? dtype : StringRef(in.keyValueDtype);
  SmallVector<KernelParam> params = {
      tensor("q", dtype, qShape, tma ? s.blockR : 0),
      tensor("k", kvDtype, kvShape, tma ? kvBoxRows : 0),
      fp8 ? valueTransposed : tensor("v", kvDtype, vShape, tma ? kvBoxRows : 0),
      tensor("o", outDtype, oShape, oBoxRows),
      tensor("lse", "f32", lseShape, 0),
      scalar("Nq", ParamKind::I32,
             in.varlen ? "the longest sequence's queries (max_seqlen_q): "
                         "the grid's query blocks"
                       : "query length"),
      scalar("Nk", ParamKind::I32,
             in.pageSize ? "keys of a sequence without kv_lengths: max_pages "
                           "* page_size"
                         : "key length"),
      scalar("Hq", ParamKind::I32, "query heads"),
      scalar("Hkv", ParamKind::I32, "key/value heads (divides Hq)"),
      scalar("scale_log2", ParamKind::F32, "softmax scale times log2(e)")};
  if (tma)
    params.push_back(scalar("B", ParamKind::I32,
                            in.varlen ? "sequences" : "batch"));
  // A strided o written from registers or copied rows: its strides in
  // elements (the tensor maps carry q's, k's and v's, and o's when TMA
  // stores write it).
  if (stridedTensors(target) && copiesPartialBlocks) {
    KernelParam rows = tensor("o_rows", outDtype, oShape, 0);
    rows.meaning = "o's data (its tensor map's): the threads copy a "
                   "sequence's last, partial block of rows there";
    params.push_back(rows);
  }
  if (stridedTensors(target) && (!oBoxRows || copiesPartialBlocks)) {
    params.push_back(scalar("o_stride_b", ParamKind::I64,
                            "elements between o's batches"));
    params.push_back(scalar("o_stride_h", ParamKind::I64,
                            "elements between o's heads"));
    params.push_back(scalar("o_stride_n", ParamKind::I64,
                            "elements between o's rows"));
  }
  if (in.varlen) {
    params.push_back(tensor("cu_seqlens_q", "i32", {"B + 1"}, 0));
    params.push_back(tensor("cu_seqlens_k", "i32", {"B + 1"}, 0));
    params.push_back(scalar("total_q", ParamKind::I32,
                            "rows of the packed Q, O and LSE (their N)"));
    params.push_back(scalar("total_k", ParamKind::I32,
                            "rows of the packed K and V (their N): the "
                            "kernel asserts that cu_seqlens_k ends within "
                            "them"));
  }
  if (in.keyLengths)
    params.push_back(tensor("kv_lengths", "i32", {"B"}, 0));
  if (in.pageSize) {
    params.push_back(tensor("block_table", "i32", {"B", "max_pages"}, 0));
    params.push_back(scalar("max_pages", ParamKind::I32,
                            "pages per sequence: the block table's row "
                            "length"));
    params.push_back(scalar("num_pages", ParamKind::I32,
                            "pages in the cache (K's and V's outer "
                            "dimension): the kernel asserts that the pages a "
                            "sequence reads are below it"));
  }
  if (fp8) {
    for (StringRef name : {"q_descale", "k_descale", "v_descale"}) {
      KernelParam descale = tensor(name, "f32", {}, 0);
      descale.meaning = "descales (f32 on the device): the tensor's values "
                        "are its e4m3 codes times them; laid out as "
                        "descale_layout says";
      params.push_back(descale);
    }
    params.push_back(scalar(
        "descale_layout", ParamKind::I32,
        "0: one descale per tensor; 1: [B, Hkv] each (FA3's), (batch, K/V "
        "head)'s at b * Hkv + h; 2: per block, q [B, Hq, ceil(Nq / "
        "block_r)], k [B, Hkv, ceil(Nk / block_c)], v one"));
  }
  if (!fp8 && kvDtype == "e4m3") {
    for (StringRef name : {"k_descale", "v_descale"}) {
      KernelParam descale = tensor(name, "f32", {}, 0);
      descale.meaning = "descales (f32 on the device): the cache's values "
                        "are its e4m3 codes times them; laid out as "
                        "descale_layout says";
      params.push_back(descale);
    }
    params.push_back(scalar("descale_layout", ParamKind::I32,
                            "0: one descale per tensor; 1: [B, Hkv] each "
                            "(vLLM's per-head k_scale / v_scale), (batch, "
                            "K/V head)'s at b * Hkv + h"));
  }
  if (s.kvSplits) {
    // Split-KV: CTA (tile, chunk) writes its chunk's normalised O and LSE
    // as row block chunk * B * Hq + matrix of the scratch; the last CTA of
    // a consumer's rows to count itself in merges them into o and lse.
    params.push_back(scalar("kv_splits", ParamKind::I32,
                            "K/V chunks per (query block, head): the grid's "
                            "y dimension, in [1, 1024]"));
    params.push_back(tensor("o_partial", "f32",
                            {"S", "B", "Hq", "Nq", in.narrowValues ? "Dv" : "D"},
                            0));
    params.back().kind = ParamKind::Workspace;
    params.push_back(tensor("lse_partial", "f32", {"S", "B", "Hq", "Nq"}, 0));
    params.back().kind = ParamKind::Workspace;
    KernelParam arrivals = tensor("split_arrivals", "u32", {"B", "Hq", "Nq"}, 0);
    arrivals.kind = ParamKind::Counter;
    arrivals.meaning = "chunks of a consumer's rows done so far, counted at "
                       "the rows' first query: zero before a launch, left "
                       "zero by it";
    params.push_back(arrivals);
  }
  // The K and V maps' L2 promotion (the heuristics table's).
  for (KernelParam &p : MutableArrayRef<KernelParam>(params).slice(1, 2))
    if (p.kind == ParamKind::TensorMap && p.name != "v_t")
      p.l2Promotion = kvL2Promotion(target, s.kvSplits != 0).bytes;
  if (s.scheduler == TileScheduler::Dynamic) {
    KernelParam counter =
        scalar("tile_counter", ParamKind::Counter,
               "the dynamic tile scheduler's counter in global memory: zero "
               "before a launch, left zero by it (one per stream)");
    counter.dtype = "u32";
    params.push_back(counter);
  }
  return params;
}

/// A parameter of an auxiliary kernel (the V layout, the KV append): its
/// name, kind, element type, dims by name and what it is.
static KernelParam param(StringRef name, ParamKind kind, StringRef dtype,
                         ArrayRef<StringRef> dims, StringRef meaning) {
  KernelParam p;
  p.name = name.str();
  p.kind = kind;
  p.dtype = dtype.str();
  for (StringRef dim : dims)
    p.shape.push_back(dim.str());
  p.meaning = meaning.str();
  return p;
}

SmallVector<KernelParam> mlir::fagpu::backwardParams(StringRef dtype,
                                                     bool deterministic) {
  SmallVector<KernelParam> params = {
      param("q", ParamKind::Pointer, dtype, {"B", "Hq", "Nq", "D"}, "Q"),
      param("k", ParamKind::Pointer, dtype, {"B", "Hkv", "Nk", "D"}, "K"),
      param("v", ParamKind::Pointer, dtype, {"B", "Hkv", "Nk", "D"}, "V"),
      param("lse", ParamKind::Pointer, "f32", {"B", "Hq", "Nq"},
            "the forward's log-sum-exp (natural log)"),
      param("do", ParamKind::Pointer, dtype, {"B", "Hq", "Nq", "D"},
            "the gradient of the loss with respect to O"),
      param("row_dots", ParamKind::Pointer, "f32", {"B", "Hq", "Nq"},
            "rowsum(dO o O), computed before the launch"),
      param("dq_accum", ParamKind::Pointer, "f32", {"B", "Hq", "Nq", "D"},
            "dQ in f32: zero before the launch, added to atomically")};
  if (deterministic)
    params.push_back(param("dq_semaphores", ParamKind::Pointer, "i32",
                           {"B", "Hq", "ceil(Nq / 64)"},
                           "zero before the launch: whose turn it is to add "
                           "into each query block of dq_accum"));
  params.append(
      {param("dk", ParamKind::Pointer, dtype, {"B", "Hkv", "Nk", "D"},
             "written: dK"),
       param("dv", ParamKind::Pointer, dtype, {"B", "Hkv", "Nk", "D"},
             "written: dV"),
       param("Hq", ParamKind::I32, "", {}, "query heads"),
       param("Hkv", ParamKind::I32, "", {}, "key/value heads"),
       param("Nq", ParamKind::I32, "", {}, "query length"),
       param("Nk", ParamKind::I32, "", {}, "key length"),
       param("scale", ParamKind::F32, "", {}, "scores are scale Q K^T")});
  return params;
}

SmallVector<KernelParam> mlir::fagpu::valueLayoutParams() {
  return {
      param("v", ParamKind::Pointer, "e4m3", {"B", "Hkv", "Nk", "D"},
            "V, strided as its strides say"),
      param("v_t", ParamKind::Workspace, "e4m3", {"B", "Hkv", "D", "Nk_128"},
            "V^T with keys permuted in 16s, the attention kernel's v_t"),
      param("B", ParamKind::I32, "", {}, "batch"),
      param("Hkv", ParamKind::I32, "", {}, "key/value heads"),
      param("Nk", ParamKind::I32, "", {}, "key length"),
      param("v_stride_b", ParamKind::I64, "", {}, "elements between V's batches"),
      param("v_stride_h", ParamKind::I64, "", {}, "elements between V's heads"),
      param("v_stride_n", ParamKind::I64, "", {}, "elements between V's rows")};
}

SmallVector<KernelParam> mlir::fagpu::kvAppendParams(StringRef dtype,
                                                     bool e4m3Cache) {
  StringRef cacheType = e4m3Cache ? "e4m3" : dtype;
  SmallVector<KernelParam> params = {
      param("k_new", ParamKind::Pointer, dtype, {"B", "Nnew", "Hkv", "D"},
            "the new keys, strided as their strides say"),
      param("v_new", ParamKind::Pointer, dtype, {"B", "Nnew", "Hkv", "D"},
            "the new values, strided as their strides say"),
      param("k_cache", ParamKind::Pointer, cacheType,
            {"B | num_pages", "capacity | page_size", "Hkv", "D"},
            "the key cache, written in place"),
      param("v_cache", ParamKind::Pointer, cacheType,
            {"B | num_pages", "capacity | page_size", "Hkv", "D"},
            "the value cache, written in place"),
      param("cache_seqlens", ParamKind::Pointer, "i32", {"B"},
            "keys each sequence holds before the append"),
      param("seen", ParamKind::Pointer, "i32", {"B"},
            "written: cache_seqlens + Nnew, the attention's kv_lengths"),
      param("block_table", ParamKind::Pointer, "i32", {"B", "max_pages"},
            "a paged cache's pages (null for a contiguous one)")};
  if (e4m3Cache) {
    params.push_back(param("k_descale", ParamKind::Pointer, "f32",
                           {"1 | B * Hkv"}, "the key codes' factor"));
    params.push_back(param("v_descale", ParamKind::Pointer, "f32",
                           {"1 | B * Hkv"}, "the value codes' factor"));
    params.push_back(param("descale_layout", ParamKind::I32, "", {},
                           "as the attention's: 0 one descale each, 1 "
                           "[B, Hkv] each"));
  }
  static constexpr std::pair<StringRef, StringRef> kScalars[] = {
      {"B", "batch"},
      {"Nnew", "new rows a sequence"},
      {"Hkv", "key/value heads"},
      {"page_size", "rows a page (0: a contiguous cache)"},
      {"max_pages", "block_table's columns"},
      {"num_pages", "pages of a paged cache"},
      {"capacity",
       "keys a sequence can hold (capacity, or max_pages * page_size)"}};
  for (auto [name, meaning] : kScalars)
    params.push_back(param(name, ParamKind::I32, "", {}, meaning));
  for (StringRef tensor : {"k_new", "v_new", "k_cache", "v_cache"})
    for (StringRef dim : {"b", "n", "h"})
      params.push_back(
          param((tensor + "_stride_" + dim).str(), ParamKind::I64, "", {},
                dim == "b" ? "elements between batches (a paged cache's pages)"
                : dim == "n" ? "elements between rows"
                             : "elements between heads"));
  return params;
}

StringRef mlir::fagpu::paramKindName(ParamKind kind) {
  switch (kind) {
  case ParamKind::TensorMap:
    return "tensormap";
  case ParamKind::Pointer:
    return "pointer";
  case ParamKind::I32:
    return "i32";
  case ParamKind::I64:
    return "i64";
  case ParamKind::F32:
    return "f32";
  case ParamKind::Counter:
    return "counter";
  case ParamKind::Workspace:
    return "workspace";
  }
  return "";
}

ArrayAttr mlir::fagpu::paramsAttr(MLIRContext *ctx,
                                  ArrayRef<KernelParam> params) {
  Builder b(ctx);
  SmallVector<Attribute> entries;
  for (const KernelParam &p : params) {
    SmallVector<NamedAttribute> fields = {
        b.getNamedAttr("name", b.getStringAttr(p.name)),
        b.getNamedAttr("kind", b.getStringAttr(paramKindName(p.kind)))};
    if (!p.dtype.empty())
      fields.push_back(b.getNamedAttr("dtype", b.getStringAttr(p.dtype)));
    if (!p.shape.empty()) {
      SmallVector<Attribute> dims;
      for (const std::string &dim : p.shape)
        dims.push_back(b.getStringAttr(dim));
      fields.push_back(b.getNamedAttr("shape", b.getArrayAttr(dims)));
    }
    if (!p.meaning.empty())
      fields.push_back(b.getNamedAttr("meaning", b.getStringAttr(p.meaning)));
    if (p.kind == ParamKind::TensorMap) {
      fields.push_back(
          b.getNamedAttr("box_rows", b.getI64IntegerAttr(p.boxRows)));
      fields.push_back(b.getNamedAttr("rank", b.getI64IntegerAttr(p.rank)));
      fields.push_back(
          b.getNamedAttr("swizzle_bytes", b.getI64IntegerAttr(p.swizzleBytes)));
      fields.push_back(
          b.getNamedAttr("l2_promotion", b.getI64IntegerAttr(p.l2Promotion)));
    }
    entries.push_back(b.getDictionaryAttr(fields));
  }
  return b.getArrayAttr(entries);
}

FailureOr<SmallVector<KernelParam>> mlir::fagpu::paramsOf(ArrayAttr attr) {
  static constexpr ParamKind kKinds[] = {
      ParamKind::TensorMap, ParamKind::Pointer, ParamKind::I32,
      ParamKind::I64,       ParamKind::F32,     ParamKind::Counter,
      ParamKind::Workspace};
  SmallVector<KernelParam> params;
  for (Attribute entry : attr) {
    auto fields = dyn_cast<DictionaryAttr>(entry);
    if (!fields)
      return failure();
    auto name = fields.getAs<StringAttr>("name");
    auto kind = fields.getAs<StringAttr>("kind");
    if (!name || !kind)
      return failure();
    KernelParam p;
    p.name = name.str();
    const ParamKind *found = llvm::find_if(kKinds, [&](ParamKind k) {
      return paramKindName(k) == kind.getValue();
    });
    if (found == std::end(kKinds))
      return failure();
    p.kind = *found;
    if (auto dtype = fields.getAs<StringAttr>("dtype"))
      p.dtype = dtype.str();
    if (auto shape = fields.getAs<ArrayAttr>("shape"))
      for (Attribute dim : shape) {
        auto text = dyn_cast<StringAttr>(dim);
        if (!text)
          return failure();
        p.shape.push_back(text.str());
      }
    if (auto meaning = fields.getAs<StringAttr>("meaning"))
      p.meaning = meaning.str();
    if (p.kind == ParamKind::TensorMap) {
      auto boxRows = fields.getAs<IntegerAttr>("box_rows");
      auto rank = fields.getAs<IntegerAttr>("rank");
      auto swizzle = fields.getAs<IntegerAttr>("swizzle_bytes");
      auto promotion = fields.getAs<IntegerAttr>("l2_promotion");
      if (!boxRows || !rank || !swizzle || !promotion)
        return failure();
      p.boxRows = boxRows.getInt();
      p.rank = rank.getInt();
      p.swizzleBytes = swizzle.getInt();
      p.l2Promotion = promotion.getInt();
    }
    params.push_back(std::move(p));
  }
  return params;
}

/// A grid of formulas {x, y, z} (include/fa/Model/GridFormula.h's grammar;
/// an Attribute each: a string or an integer).
static DictionaryAttr gridOf(Builder &b, Attribute x, Attribute y,
                             Attribute z) {
  return b.getDictionaryAttr(
      {b.getNamedAttr("x", x), b.getNamedAttr("y", y), b.getNamedAttr("z", z)});
}

DictionaryAttr mlir::fagpu::launchGrid(MLIRContext *ctx, Target target,
                                       ScheduleAttr schedule) {
  Builder b(ctx);
  if (target == Target::sm_80)
    return gridOf(b, b.getStringAttr("ceil(Nq / block_r)"),
                  b.getStringAttr("Hq"), b.getStringAttr("B"));
  StringRef tiles = schedule.isPersistent()
                        ? "min(ceil(Nq / block_r) * Hq * B, SMs * ctas_per_sm)"
                        : "ceil(Nq / block_r) * Hq * B";
  Attribute chunks = schedule.isSplitKV()
                         ? Attribute(b.getStringAttr("kv_splits"))
                         : Attribute(b.getI64IntegerAttr(1));
  return gridOf(b, b.getStringAttr(tiles), chunks, b.getI64IntegerAttr(1));
}

DictionaryAttr mlir::fagpu::backwardGrid(MLIRContext *ctx) {
  Builder b(ctx);
  return gridOf(b, b.getStringAttr("ceil(Nk / block_c)"),
                b.getStringAttr("Hkv"), b.getStringAttr("B"));
}

SmallVector<KernelParam>
mlir::fagpu::backwardPreprocessParams(StringRef dtype, bool deterministic) {
  SmallVector<KernelParam> params = {
      param("o", ParamKind::Pointer, dtype, {"B", "Hq", "Nq", "D"},
            "the forward's output"),
      param("do", ParamKind::Pointer, dtype, {"B", "Hq", "Nq", "D"},
            "the gradient of the loss with respect to O"),
      param("row_dots", ParamKind::Pointer, "f32", {"B", "Hq", "Nq"},
            "written: rowsum(dO o O)"),
      param("dq_accum", ParamKind::Pointer, "f32", {"B", "Hq", "Nq", "D"},
            "written: zero")};
  if (deterministic)
    params.push_back(param("dq_semaphores", ParamKind::Pointer, "i32",
                           {"B", "Hq", "ceil(Nq / 64)"}, "written: zero"));
  params.append({param("Hq", ParamKind::I32, "", {}, "query heads"),
                 param("Nq", ParamKind::I32, "", {}, "query length")});
  return params;
}

SmallVector<KernelParam> mlir::fagpu::backwardConvertParams(StringRef dtype) {
  return {param("dq_accum", ParamKind::Pointer, "f32", {"B", "Hq", "Nq", "D"},
                "dQ in f32, as the main kernel left it"),
          param("dq", ParamKind::Pointer, dtype, {"B", "Hq", "Nq", "D"},
                "written: dQ"),
          param("Hq", ParamKind::I32, "", {}, "query heads"),
          param("Nq", ParamKind::I32, "", {}, "query length")};
}

DictionaryAttr mlir::fagpu::backwardRowsGrid(MLIRContext *ctx) {
  Builder b(ctx);
  return gridOf(
      b, b.getStringAttr("ceil(Nq / " + std::to_string(kBackwardRows) + ")"),
      b.getStringAttr("Hq"), b.getStringAttr("B"));
}

DictionaryAttr mlir::fagpu::valueLayoutGrid(MLIRContext *ctx) {
  // One thread per 16 keys of kValueLayoutColumnsPerThread V^T rows.
  Builder b(ctx);
  std::string keys = "Nk_" + std::to_string(kValueLayoutKeyAlign);
  std::string x = "ceil(B * Hkv * (" + keys + " / 16) * (D / " +
                  std::to_string(kValueLayoutColumnsPerThread) + ") / " +
                  std::to_string(kValueLayoutThreads) + ")";
  return gridOf(b, b.getStringAttr(x), b.getI64IntegerAttr(1),
                b.getI64IntegerAttr(1));
}

DictionaryAttr mlir::fagpu::kvAppendGrid(MLIRContext *ctx) {
  // One thread per (sequence, new row, head, kKVAppendColumnsPerThread
  // columns).
  Builder b(ctx);
  std::string x = "ceil(B * Nnew * Hkv * (D / " +
                  std::to_string(kKVAppendColumnsPerThread) + ") / " +
                  std::to_string(kKVAppendThreads) + ")";
  return gridOf(b, b.getStringAttr(x), b.getI64IntegerAttr(1),
                b.getI64IntegerAttr(1));
}
