//===- TMAKernel.cpp - the TMA-fed kernels' shared emitters
//-----------------===//
//
// Out-of-line definitions of TMAKernel.h (see there).
//
//===----------------------------------------------------------------------===//

#include "TMAKernel.h"

using namespace mlir;

namespace mlir::fa {

void replaceWithTensorMapLaunch(fagpu::AttentionOp op, LLVM::LLVMFuncOp kernel,
                                const TensorMapLaunch &launch) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  auto globalPtr = LLVM::LLVMPointerType::get(ctx, 1);
  auto hostPtr = LLVM::LLVMPointerType::get(ctx);
  auto i32 = b.getI32Type(), i64 = b.getI64Type();
  auto mapType = LLVM::LLVMArrayType::get(i64, 16);
  auto module = op->getParentOfType<ModuleOp>();
  auto encodeType = LLVM::LLVMFunctionType::get(
      i32, {hostPtr, hostPtr, i64, i64, i64, i64, i32, i32});
  auto stridedEncodeType =
      LLVM::LLVMFunctionType::get(i32, {hostPtr, hostPtr, i64, i64, i64, i64,
                                        i64, i64, i64, i32, i32, i32});
  auto runtimeFunction = [&](StringRef name, LLVM::LLVMFunctionType type) {
    auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
    if (!fn) {
      OpBuilder mb(module.getBodyRegion());
      fn = LLVM::LLVMFuncOp::create(mb, loc, name, type);
    }
    return fn;
  };
  LaunchOperands operands(b, loc, op);
  auto dim = [&](Value memref, int64_t d) { return operands.dim(memref, d); };
  auto toI64 = [&](Value index) -> Value {
    return arith::IndexCastOp::create(b, loc, i64, index);
  };
  auto c32 = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, v, 32);
  };
  // The memref's batch, head and row strides in elements, as i64.
  auto stridesOf = [&](Value memref) -> std::array<Value, 3> {
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
    return {toI64(metadata.getStrides()[0]), toI64(metadata.getStrides()[1]),
            toI64(metadata.getStrides()[2])};
  };
  auto c64 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, v, 64);
  };
  // Rank 4: faEncodeStridedTensorMapL2(map, base, B, H, N, D, batch, head
  // and row strides, boxRows, dtype (0 f16, 1 bf16, 2 e4m3), the map's L2
  // promotion in bytes); rank 3 (the 256-byte promotion only):
  // faEncodeTensorMap(map, base, B * H, N, D, elemBits, boxRows, dtype).
  // Each writes the 128-B CUtensorMap.
  auto mapSlot = [&] {
    Value one = arith::ConstantIntOp::create(b, loc, 1, 64);
    return LLVM::AllocaOp::create(b, loc, hostPtr, mapType, one, 64)
        .getResult();
  };
  auto dtypeCode = [&](const fagpu::KernelParam &p) {
    return c32(p.dtype == "e4m3" ? 2 : launch.bf16 ? 1 : 0);
  };
  auto encodeMap = [&](Value memref, const fagpu::KernelParam &p) -> Value {
    Value slot = mapSlot();
    Value base = alignedPointer(b, loc, memref, hostPtr);
    // The tensor's own columns (D for q and k, Dv for v and o): boxes past
    // them (a head dim padded to the tiles') read zeros.
    Value columns = c64(cast<MemRefType>(memref.getType()).getDimSize(3));
    if (p.rank == 4) {
      std::array<Value, 3> strides = stridesOf(memref);
      LLVM::CallOp::create(
          b, loc,
          runtimeFunction("faEncodeStridedTensorMapL2", stridedEncodeType),
          ValueRange{slot, base, toI64(dim(memref, 0)), toI64(dim(memref, 1)),
                     toI64(dim(memref, 2)), columns, strides[0], strides[1],
                     strides[2], c32(p.boxRows), dtypeCode(p),
                     c32(p.l2Promotion)});
    } else {
      Value matrices = arith::MulIOp::create(b, loc, toI64(dim(memref, 0)),
                                             toI64(dim(memref, 1)));
      LLVM::CallOp::create(
          b, loc, runtimeFunction("faEncodeTensorMap", encodeType),
          ValueRange{slot, base, matrices, toI64(dim(memref, 2)), columns,
                     c64(16), c32(p.boxRows), c32(launch.bf16 ? 1 : 0)});
    }
    return LLVM::LoadOp::create(b, loc, mapType, slot);
  };
  // Counters (the dynamic tile scheduler's, split-KV's arrivals) and
  // split-KV's partial results: device memory for this launch, counters
  // zeroed, freed after it (the runtimes keep them per stream instead).
  auto tokenType = gpu::AsyncTokenType::get(ctx);
  Value token;
  llvm::StringMap<Value> scratch;
  auto elementsOf = [&](const fagpu::KernelParam &p) -> Value {
    Value n = arith::ConstantIndexOp::create(b, loc, 1);
    for (const std::string &dim : p.shape) {
      Value size =
          dim == "S" ? arith::ConstantIndexOp::create(b, loc, launch.kvSplits)
                           .getResult()
          : dim == "D" || dim == "Dv"
              ? arith::ConstantIndexOp::create(b, loc, launch.valueHeadDim)
                    .getResult()
              : operands.size(dim);
      n = arith::MulIOp::create(b, loc, n, size);
    }
    return n;
  };
  for (const fagpu::KernelParam &p : launch.abi) {
    if (p.kind != fagpu::ParamKind::Counter &&
        p.kind != fagpu::ParamKind::Workspace)
      continue;
    if (!token)
      token = gpu::WaitOp::create(b, loc, tokenType, ValueRange{}).getResult(0);
    Type element = p.kind == fagpu::ParamKind::Counter ? Type(b.getI32Type())
                                                       : Type(b.getF32Type());
    // One element without a shape (the tile counter), else the shape's.
    auto alloc =
        p.shape.empty()
            ? gpu::AllocOp::create(b, loc, MemRefType::get({1}, element),
                                   tokenType, ValueRange{token}, ValueRange{},
                                   ValueRange{})
            : gpu::AllocOp::create(
                  b, loc, MemRefType::get({ShapedType::kDynamic}, element),
                  tokenType, ValueRange{token}, ValueRange{elementsOf(p)},
                  ValueRange{});
    token = alloc.getAsyncToken();
    if (p.kind == fagpu::ParamKind::Counter)
      token = gpu::MemsetOp::create(b, loc, tokenType, ValueRange{token},
                                    alloc.getMemref(), c32(0))
                  .getResult(0);
    scratch[p.name] = alloc.getMemref();
  }
  // e4m3: V^T [B, Hkv, D, Nk_128] in a workspace of this launch, written by
  // the layout kernel on the launch's stream before the attention reads it.
  Value valueT, keysPadded, kvHeads;
  if (!launch.valueLayoutKernel.empty()) {
    auto index = [&](int64_t v) {
      return arith::ConstantIndexOp::create(b, loc, v).getResult();
    };
    auto mul = [&](Value x, Value y) {
      return arith::MulIOp::create(b, loc, x, y).getResult();
    };
    Value batches = operands.size("B");
    kvHeads = operands.size("Hkv");
    // The layout kernel's 16-key groups of a V^T row.
    Value groups =
        mul(b.createOrFold<arith::CeilDivUIOp>(
                loc, operands.size("Nk"), index(fagpu::kValueLayoutKeyAlign)),
            index(fagpu::kValueLayoutKeyAlign / 16));
    keysPadded = mul(groups, index(16));
    Value bytes =
        mul(mul(mul(batches, kvHeads), index(launch.valueHeadDim)), keysPadded);
    if (!token)
      token = gpu::WaitOp::create(b, loc, tokenType, ValueRange{}).getResult(0);
    auto alloc = gpu::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI8Type()),
        tokenType, ValueRange{token}, ValueRange{bytes}, ValueRange{});
    valueT = alloc.getMemref();
    scratch["v_t"] = valueT;
    Value v = operands.tensor("v");
    std::array<Value, 3> vStrides = stridesOf(v);
    Value threads = index(fagpu::kValueLayoutThreads);
    Value one = index(1);
    // One thread per group of 16 keys and kValueLayoutColumnsPerThread
    // columns.
    Value blocks = b.createOrFold<arith::CeilDivUIOp>(
        loc,
        mul(mul(mul(batches, kvHeads), groups),
            index(launch.valueHeadDim / fagpu::kValueLayoutColumnsPerThread)),
        threads);
    auto layoutSym = SymbolRefAttr::get(
        b.getStringAttr("fa_kernels"),
        {FlatSymbolRefAttr::get(b.getStringAttr(launch.valueLayoutKernel))});
    token = gpu::LaunchFuncOp::create(
                b, loc, layoutSym, gpu::KernelDim3{blocks, one, one},
                gpu::KernelDim3{threads, one, one}, Value(),
                ValueRange{alignedPointer(b, loc, v, globalPtr),
                           alignedPointer(b, loc, valueT, globalPtr),
                           operands.i32("B"), operands.i32("Hkv"),
                           operands.i32("Nk"), vStrides[0], vStrides[1],
                           vStrides[2]},
                tokenType, ValueRange{alloc.getAsyncToken()})
                .getAsyncToken();
  }
  // V^T's map: rows D, columns Nk_128 of each (batch, head), contiguous.
  auto encodeValueT = [&](const fagpu::KernelParam &p) -> Value {
    Value slot = mapSlot();
    Value rowBytes = toI64(keysPadded);
    Value d = c64(launch.valueHeadDim);
    Value headStride = arith::MulIOp::create(b, loc, d, rowBytes);
    Value batchStride =
        arith::MulIOp::create(b, loc, toI64(kvHeads), headStride);
    LLVM::CallOp::create(
        b, loc,
        runtimeFunction("faEncodeStridedTensorMapL2", stridedEncodeType),
        ValueRange{slot, alignedPointer(b, loc, valueT, hostPtr),
                   toI64(operands.size("B")), toI64(kvHeads), d, rowBytes,
                   batchStride, headStride, rowBytes, c32(p.boxRows),
                   dtypeCode(p), c32(p.l2Promotion)});
    return LLVM::LoadOp::create(b, loc, mapType, slot);
  };
  SmallVector<Value> args =
      launchArguments(launch.abi, [&](const fagpu::KernelParam &p) -> Value {
        switch (p.kind) {
        case fagpu::ParamKind::TensorMap:
          if (p.name == "v_t")
            return encodeValueT(p);
          return encodeMap(operands.tensor(p.name), p);
        case fagpu::ParamKind::Pointer:
          return operands.pointer(p.name, globalPtr);
        case fagpu::ParamKind::Counter:
        case fagpu::ParamKind::Workspace:
          return alignedPointer(b, loc, scratch.lookup(p.name), globalPtr);
        case fagpu::ParamKind::F32:
          return operands.scaleLog2;
        case fagpu::ParamKind::I32:
          // Descales per tensor (rank 0), [B, Hkv] (rank 2, contiguous) or
          // per block (Q's and K's of rank 3); an e4m3 cache has K's and
          // V's only.
          if (p.name == "descale_layout") {
            Value descale =
                op.getQDescale() ? op.getQDescale() : op.getKDescale();
            return c32(int64_t(fagpu::descaleLayoutOf(
                           cast<MemRefType>(descale.getType()))))
                .getResult();
          }
          return p.name == "kv_splits" ? c32(launch.kvSplits).getResult()
                                       : operands.i32(p.name);
        case fagpu::ParamKind::I64: {
          std::array<Value, 3> strides = stridesOf(operands.tensor("o"));
          return p.name == "o_stride_b"   ? strides[0]
                 : p.name == "o_stride_h" ? strides[1]
                                          : strides[2];
        }
        }
        return Value();
      });
  // The grid the lowering gave the kernel, as the runtimes evaluate it.
  gpu::KernelDim3 grid =
      hostLaunchGrid(b, loc, kernel, launch.kvSplits,
                     [&](StringRef size) { return operands.size(size); });
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value threads = arith::ConstantIndexOp::create(b, loc, launch.threads);
  Value smemBytes = c32(launch.sharedBytes);
  auto kernelSym =
      SymbolRefAttr::get(b.getStringAttr("fa_kernels"),
                         {FlatSymbolRefAttr::get(kernel.getSymNameAttr())});
  if (!token) {
    gpu::LaunchFuncOp::create(b, loc, kernelSym, grid,
                              gpu::KernelDim3{threads, one, one}, smemBytes,
                              args, /*asyncObject=*/Value());
    op.erase();
    return;
  }
  token = gpu::LaunchFuncOp::create(
              b, loc, kernelSym, grid, gpu::KernelDim3{threads, one, one},
              smemBytes, args, tokenType, ValueRange{token})
              .getAsyncToken();
  for (const fagpu::KernelParam &p : launch.abi)
    if (Value memref = scratch.lookup(p.name))
      token =
          gpu::DeallocOp::create(b, loc, tokenType, ValueRange{token}, memref)
              .getResult(0);
  gpu::WaitOp::create(b, loc, Type(), ValueRange{token});
  op.erase();
}

LLVM::LLVMFuncOp
TMAKernelEmitter::beginKernel(gpu::GPUModuleOp module, StringRef name,
                              int64_t threads, int64_t ctasPerSM,
                              ArrayRef<fagpu::KernelParam> abi) {
  b.setInsertionPointToStart(module.getBody());
  auto smemType = LLVM::LLVMArrayType::get(b.getI8Type(), 0);
  LLVM::GlobalOp smemGlobal;
  if (!(smemGlobal = module.lookupSymbol<LLVM::GlobalOp>("fa_smem")))
    smemGlobal = LLVM::GlobalOp::create(
        b, loc, smemType, /*isConstant=*/false, LLVM::Linkage::External,
        "fa_smem", Attribute(), /*alignment=*/1024, /*addrSpace=*/3);
  LLVM::LLVMFuncOp fn =
      declareKernel(b, loc, module, name, threads, ctasPerSM, abi);
  auto arg = [&](StringRef param) { return kernelArgument(fn, abi, param); };
  qMap = arg("q");
  kMap = arg("k");
  // e4m3 kernels read V as the layout kernel's V^T.
  vMap = arg("v") ? arg("v") : arg("v_t");
  oMap = oPtr = Value();
  (abi[3].kind == fagpu::ParamKind::TensorMap ? oMap : oPtr) = arg("o");
  // O's data beside its map, where the threads copy a partial block.
  if (Value rows = arg("o_rows"))
    oPtr = rows;
  lsePtr = arg("lse");
  nq = arg("Nq");
  nk = arg("Nk");
  hq = arg("Hq");
  hkv = arg("Hkv");
  scaleLog2 = arg("scale_log2");
  batches = arg("B");
  tileCounterPtr = arg("tile_counter");
  kvSplits = arg("kv_splits");
  oPartialPtr = arg("o_partial");
  lsePartialPtr = arg("lse_partial");
  splitArrivalsPtr = arg("split_arrivals");
  oStrides = {arg("o_stride_b"), arg("o_stride_h"), arg("o_stride_n")};
  cuSeqlensQPtr = arg("cu_seqlens_q");
  cuSeqlensKPtr = arg("cu_seqlens_k");
  totalQ = arg("total_q");
  kvLengthsPtr = arg("kv_lengths");
  blockTablePtr = arg("block_table");
  maxPages = arg("max_pages");
  numPages = arg("num_pages");
  totalK = arg("total_k");
  stridedMaps = abi.front().rank == 4;

  smem = alignedSharedBase(smemGlobal);
  return fn;
}

Value TMAKernelEmitter::diagonalShift(const SoftmaxConfig &config, Value keys,
                                      Value queries) {
  IRArithmetic ir{b, loc};
  return mlir::fa::model::diagonalShift(ir, queriesOfRows(config, queries),
                                        keys, config.bottomRight,
                                        config.diagonalOffset);
}

Value TMAKernelEmitter::queriesOfRows(const SoftmaxConfig &config, Value rows) {
  if (!config.queryGroup)
    return rows;
  return arith::ShRUIOp::create(b, loc, rows,
                                c32(llvm::Log2_64(config.queryGroup)));
}

Value TMAKernelEmitter::loadGlobalI32(Value base, Value index) {
  return LLVM::LoadOp::create(b, loc, i32,
                              gep(globalPtr, i32, base, ext64(index)),
                              /*alignment=*/4, /*isVolatile=*/false,
                              /*isNonTemporal=*/false, /*isInvariant=*/true);
}

TMAKernelEmitter::VarlenTile TMAKernelEmitter::varlenTiles(Value tileId) {
  Value zero = c32(0);
  auto loop = scf::ForOp::create(b, loc, zero, batches, c32(1),
                                 ValueRange{zero, zero, zero, c32(1)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value seq = loop.getInductionVar();
    ValueRange carried = loop.getRegionIterArgs();
    Value prefix = carried[0];
    Value blocks = queryBlocksOf(sequenceLength(seq));
    Value next = add(prefix, mul(blocks, hq));
    SmallVector<Value> yielded = {next, carried[1], carried[2], carried[3]};
    // The count pass (once a CTA, before the roles split) asserts every
    // sequence's sums: a sequence whose sums decrease has no tiles, so
    // decodeTile's per-tile check would never see it.
    if (!tileId)
      assertSequenceSums(seq);
    if (tileId) {
      Value here = arith::AndIOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, tileId,
                                prefix),
          ult(tileId, next));
      yielded[1] = select(here, seq, carried[1]);
      yielded[2] = select(here, sub(tileId, prefix), carried[2]);
      yielded[3] = select(here, blocks, carried[3]);
    }
    scf::YieldOp::create(b, loc, yielded);
  }
  return {loop.getResult(0), loop.getResult(1), loop.getResult(2),
          loop.getResult(3)};
}

TMAKernelEmitter::VarlenTile TMAKernelEmitter::cursorVarlenTiles(Value tileId) {
  SmallVector<Location> locs(4, loc);
  auto loop =
      scf::WhileOp::create(b, loc, TypeRange{i32, i32, i32, i32},
                           ValueRange{cursorSeq, cursorPrefix, c32(0), c32(1)});
  {
    OpBuilder::InsertionGuard guard(b);
    Block *before = b.createBlock(&loop.getBefore(), {},
                                  TypeRange{i32, i32, i32, i32}, locs);
    Value seq = before->getArgument(0), prefix = before->getArgument(1);
    Value blocks = queryBlocksOf(sequenceLength(seq));
    Value next = add(prefix, mul(blocks, hq));
    // Past this sequence (and not the last): step on.
    Value onward = arith::AndIOp::create(
        b, loc, ult(add(seq, c32(1)), batches),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, tileId, next));
    scf::ConditionOp::create(b, loc, onward,
                             ValueRange{seq, prefix, next, blocks});
    Block *after = b.createBlock(&loop.getAfter(), {},
                                 TypeRange{i32, i32, i32, i32}, locs);
    scf::YieldOp::create(b, loc,
                         ValueRange{add(after->getArgument(0), c32(1)),
                                    after->getArgument(2), c32(0), c32(1)});
  }
  cursorSeq = loop.getResult(0);
  cursorPrefix = loop.getResult(1);
  return {Value(), loop.getResult(0), sub(tileId, loop.getResult(1)),
          loop.getResult(3)};
}

TMAKernelEmitter::VarlenTile TMAKernelEmitter::warpVarlenTiles(Value tileId,
                                                               Value lane) {
  Value zero = c32(0);
  auto shfl = [&](NVVM::ShflKind kind, Value v, Value offset, int64_t clamp) {
    return NVVM::ShflOp::create(b, loc, i32, c32(-1), v, offset, c32(clamp),
                                NVVM::ShflKindAttr::get(b.getContext(), kind),
                                UnitAttr())
        .getResult();
  };
  Value passes = divu(add(batches, c32(31)), c32(32));
  auto loop = scf::ForOp::create(b, loc, zero, passes, c32(1),
                                 ValueRange{zero, zero, zero, c32(1)});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value first = mul(loop.getInductionVar(), c32(32));
    ValueRange carried = loop.getRegionIterArgs();
    Value seq = add(first, lane);
    Value valid = ult(seq, batches);
    Value safe = select(valid, seq, zero);
    Value blocks = queryBlocksOf(select(valid, sequenceLength(safe), zero));
    Value tiles = mul(blocks, hq);
    // Inclusive scan of the lanes' tile counts (lanes past B add 0).
    Value end = tiles;
    for (int64_t k = 1; k < 32; k *= 2) {
      Value up = shfl(NVVM::ShflKind::up, end, c32(k), 0);
      end = select(ult(lane, c32(k)), end, add(end, up));
    }
    end = add(end, carried[0]);
    Value start = sub(end, tiles);
    Value here = arith::AndIOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, tileId, start),
        ult(tileId, end));
    Value mask = NVVM::VoteSyncOp::create(
                     b, loc, i32, c32(-1), here,
                     NVVM::VoteSyncKindAttr::get(b.getContext(),
                                                 NVVM::VoteSyncKind::ballot))
                     .getResult();
    Value found =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, mask, zero);
    Value owner =
        select(found, math::CountTrailingZerosOp::create(b, loc, mask), zero);
    Value ownerStart = shfl(NVVM::ShflKind::idx, start, owner, 0x1f);
    Value ownerBlocks = shfl(NVVM::ShflKind::idx, blocks, owner, 0x1f);
    scf::YieldOp::create(
        b, loc,
        ValueRange{shfl(NVVM::ShflKind::idx, end, c32(31), 0x1f),
                   select(found, add(first, owner), carried[1]),
                   select(found, sub(tileId, ownerStart), carried[2]),
                   select(found, ownerBlocks, carried[3])});
  }
  return {loop.getResult(0), loop.getResult(1), loop.getResult(2),
          loop.getResult(3)};
}

Value TMAKernelEmitter::localSmemAddress() {
  Value raw = LLVM::InlineAsmOp::create(
                  b, loc, i32, ValueRange{}, "mov.u32 $0, fa_smem;", "=r",
                  /*has_side_effects=*/true, /*is_align_stack=*/false,
                  LLVM::tailcallkind::TailCallKind::None,
                  LLVM::AsmDialectAttr(), ArrayAttr())
                  .getResult(0);
  return add(raw, alignmentPad(raw));
}

void TMAKernelEmitter::prefetchTensorMaps() {
  for (Value map : {qMap, kMap, vMap})
    NVVM::PrefetchOp::create(b, loc, /*cacheLevel=*/nullptr,
                             /*evictPriority=*/nullptr, map,
                             /*predicate=*/Value(), /*tensormap=*/true);
}

void TMAKernelEmitter::loadTile(Value map, Value tileOffset, int64_t rows,
                                Value row, ValueRange matrixCoords, Value bar,
                                int64_t firstRow, int64_t tileRows,
                                Value column, int64_t swizzle) {
  if (!tileRows)
    tileRows = rows;
  int64_t blockColumns = swizzle / elementBytes;
  for (int64_t cb = 0; cb < headDim / blockColumns; ++cb) {
    Value dst =
        sharedAt(add(tileOffset, c32((cb * tileRows + firstRow) * swizzle)));
    SmallVector<Value> coords =
        mapCoordinates(cb * blockColumns, row, matrixCoords);
    if (column)
      coords[0] = add(column, coords[0]);
    NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
        b, loc, dst, map, coords, bar, ValueRange{}, Value(), Value(),
        NVVM::TMALoadMode::TILE,
        /*isCTAOnly=*/true, NVVM::CTAGroupKindAttr(), Value());
  }
}

void TMAKernelEmitter::storeRowBlock(Value tileOffset, int64_t blockStride,
                                     Value row, ValueRange matrixCoords) {
  int64_t blockColumns = columnsPerBlock();
  for (int64_t cb = 0; cb < headDim / blockColumns; ++cb) {
    Value src = sharedAt(add(tileOffset, c32(cb * blockStride)));
    NVVM::CpAsyncBulkTensorSharedCTAToGlobalOp::create(
        b, loc, oMap, src, mapCoordinates(cb * blockColumns, row, matrixCoords),
        /*l2CacheHint=*/Value(),
        NVVM::TMAStoreModeAttr::get(b.getContext(), NVVM::TMAStoreMode::TILE),
        /*predicate=*/Value());
  }
}

Value TMAKernelEmitter::descriptor(Value byteOffset, int64_t leadingBytes,
                                   int64_t strideBytes, int64_t format) {
  Value addr = ext64(add(localSmemAddress(), byteOffset));
  Value encoded = arith::ShRUIOp::create(b, loc, addr, c64(4));
  int64_t fixed = ((leadingBytes >> 4) & 0x3FFF) << 16 |
                  ((strideBytes >> 4) & 0x3FFF) << 32 | format;
  return arith::OrIOp::create(b, loc, encoded, c64(fixed));
}

AttentionTile TMAKernelEmitter::decodeTile(Value tileId) {
  AttentionTile tile;
  tile.id = tileId;
  // Query blocks of one head next to each other: they share K/V in L2
  // (a longest-first order across all heads measured slower,
  // docs/hopper.md). Causal: the longest of a head first, so the short
  // ones fill the gaps at the end.
  Value qBlock, batch, head, matrix;
  auto longestFirst = [&](Value qBlocks) {
    if (config.causal)
      qBlock = sub(sub(qBlocks, c32(1)), qBlock);
  };
  if (varlenRealTiles) {
    VarlenTile found = collectiveLane ? warpVarlenTiles(tileId, collectiveLane)
                       : cursorSeq    ? cursorVarlenTiles(tileId)
                                      : varlenTiles(tileId);
    qBlock = remu(found.local, found.blocks);
    longestFirst(found.blocks);
    batch = found.batch;
    head = divu(found.local, found.blocks);
    matrix = add(mul(batch, hq), head);
  } else {
    Value qBlocks = queryBlocks();
    qBlock = remu(tileId, qBlocks);
    matrix = divu(tileId, qBlocks);
    longestFirst(qBlocks);
    batch = divu(matrix, hq);
    head = remu(matrix, hq);
  }
  Value kvHead = divu(head, divu(hq, hkv));
  // Third coordinate of the tensor maps: the [N, D] matrix of (batch,
  // head).
  tile.qMatrix = matrix;
  tile.kvMatrix = add(mul(batch, hkv), kvHead);
  tile.batch = batch;
  tile.qHead = head;
  tile.kvHead = kvHead;
  Value qStart = tile.qStart = mul(qBlock, c32(blockR));
  // A KV cache: the sequence's own key count, asserted to be within the
  // cache's capacity Nk (a negative one is a large unsigned one), so that
  // a bad length never reads past a sequence's pages nor is silently
  // clamped.
  tile.nk = nk;
  if (kvLengthsPtr) {
    tile.nk = loadGlobalI32(kvLengthsPtr, batch);
    if (assertsTileInputs)
      deviceAssert(ule(tile.nk, nk),
                   "flash-mlir: kv_lengths (cache_seqlens) must be in "
                   "[0, capacity]");
  }
  tile.nq = nq;
  tile.qBase = tile.kBase = c32(0);
  if (cuSeqlensQPtr) {
    // A varlen batch: the sequence's rows from its prefix sums.
    Value next = add(batch, c32(1));
    tile.qBase = loadGlobalI32(cuSeqlensQPtr, batch);
    tile.nq = sub(loadGlobalI32(cuSeqlensQPtr, next), tile.qBase);
    tile.kBase = loadGlobalI32(cuSeqlensKPtr, batch);
    tile.nk = sub(loadGlobalI32(cuSeqlensKPtr, next), tile.kBase);
  }
  // Persistent varlen kernels asserted every sequence's sums when they
  // counted the tiles (varlenTiles), before the roles split.
  if (cuSeqlensQPtr && assertsTileInputs && !varlenRealTiles)
    assertSums(batch, tile.qBase, tile.nq, tile.kBase, tile.nk);

  // K/V blocks visited (mlir::fa::model::kvBlockRange: causal stops at the
  // last row's diagonal, a window bounds both sides; at least one block where
  // a sequence may have no keys).
  IRArithmetic ir{b, loc};
  // Pack-GQA beyond one query: the tile's rows are queries
  // [qStart / G, (qStart + B_r) / G) (G divides B_r and qStart).
  Value firstQuery = queriesOfRows(config, qStart);
  Value queries = queriesOfRows(config, tile.nq);
  int64_t queryRows = config.queryGroup ? blockR / config.queryGroup : blockR;
  mlir::fa::model::KVRange<IRArithmetic> range = mlir::fa::model::kvBlockRange(
      ir, firstQuery, queries, tile.nk, queryRows, blockC, config.causal,
      config.window, config.bottomRight, config.diagonalOffset,
      /*keyLengths=*/static_cast<bool>(kvLengthsPtr || cuSeqlensQPtr));
  tile.firstBlock = range.first;
  tile.numBlocks = range.end;
  tile.unmaskedEnd = mlir::fa::model::unmaskedBlocksEnd(
      ir, range, firstQuery, queries, tile.nk, blockC, config.causal,
      config.window, config.bottomRight, config.diagonalOffset);
  if (cuSeqlensQPtr) {
    // A varlen tile past its sequence's end (the grid covers the longest
    // sequence's query blocks): one masked block, nothing stored, so that
    // a persistent loop's roles agree on it without a branch.
    Value empty = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                        qStart, tile.nq);
    tile.numBlocks =
        select(empty, minu(tile.numBlocks, add(tile.firstBlock, c32(1))),
               tile.numBlocks);
    tile.unmaskedEnd = select(empty, tile.firstBlock, tile.unmaskedEnd);
  }
  return tile;
}

void TMAKernelEmitter::assertSums(Value seq, Value qBase, Value qRows,
                                  Value kBase, Value kRows) {
  Value qEnd = add(qBase, qRows), kEnd = add(kBase, kRows);
  // Sequence 0 starts both sums at 0 (q | k == 0).
  Value startsAtZero = arith::OrIOp::create(
      b, loc, ult(c32(0), seq),
      eq(arith::OrIOp::create(b, loc, qBase, kBase), c32(0)));
  Value ok = andi(andi(ule(qBase, qEnd), ule(qEnd, totalQ)),
                  andi(ule(kBase, kEnd), ule(kEnd, totalK)));
  ok = andi(andi(ok, ule(qRows, nq)), startsAtZero);
  deviceAssert(ok, "flash-mlir: cu_seqlens_q and cu_seqlens_k must start "
                   "at 0, not decrease and end within the packed rows, "
                   "and no sequence may have more queries than "
                   "max_seqlen_q");
}

void TMAKernelEmitter::assertSequenceSums(Value seq) {
  Value next = add(seq, c32(1));
  Value qBase = loadGlobalI32(cuSeqlensQPtr, seq);
  Value kBase = loadGlobalI32(cuSeqlensKPtr, seq);
  assertSums(seq, qBase, sub(loadGlobalI32(cuSeqlensQPtr, next), qBase), kBase,
             sub(loadGlobalI32(cuSeqlensKPtr, next), kBase));
}

void TMAKernelEmitter::assertTilePages(const AttentionTile &tile, Value lane,
                                       int64_t pageSize) {
  Value endKey = minu(mul(tile.numBlocks, c32(blockC)), tile.nk);
  Value firstPage = divu(mul(tile.firstBlock, c32(blockC)), c32(pageSize));
  Value endPage = divu(add(endKey, c32(pageSize - 1)), c32(pageSize));
  Value rowStart = mul(tile.batch, maxPages);
  auto loop =
      scf::ForOp::create(b, loc, add(firstPage, lane), endPage, c32(32));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value page =
      loadGlobalI32(blockTablePtr, add(rowStart, loop.getInductionVar()));
  deviceAssert(ult(page, numPages),
               "flash-mlir: block_table entries a sequence reads must be "
               "pages of the cache, in [0, num_pages)");
}

std::pair<Value, SmallVector<Value>>
TMAKernelEmitter::keyValueRow(const AttentionTile &tile, Value key,
                              int64_t pageSize) {
  if (!pageSize)
    return {cuSeqlensQPtr ? add(tile.kBase, key) : key, keyValueMatrix(tile)};
  Value entry = add(mul(tile.batch, maxPages), divu(key, c32(pageSize)));
  Value page = loadGlobalI32(blockTablePtr, entry);
  return {remu(key, c32(pageSize)), {tile.kvHead, page}};
}

} // namespace mlir::fa
