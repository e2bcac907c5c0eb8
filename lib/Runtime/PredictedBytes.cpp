//===- PredictedBytes.cpp - a kernel's traffic from its metadata
//------------===//
//
// faMetadataPredictedBytes and faMetadataPredictedSequenceBytes: the
// traffic rule of fagpu-io-report (fa/Model/Traffic.h) on the
// fields of a kernel's launch metadata. Needs no driver.
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include "fa/Model/Traffic.h"

#include <vector>

using namespace flashmlir::runtime;

namespace {
/// What the traffic rule needs of a kernel, from its metadata (parsed and
/// validated); `where` names the caller in messages.
int trafficKernelOf(const Metadata &m, const char *where,
                    mlir::fa::model::TrafficKernel &kernel) {
  if (m.blockC <= 0 || m.arch.empty())
    return fail(std::string(where) +
                ": the metadata has no 'block_c' or 'arch' (compiled before "
                "the prediction existed)");
  kernel.blockR = m.blockR;
  kernel.blockC = m.blockC;
  kernel.headDim = m.headDim;
  kernel.valueHeadDim = m.valueColumns();
  // Q/K/V of 2 bytes (f16, bf16) or 1 (e4m3); O is 16-bit either way.
  kernel.elementBytes = m.dtype == "e4m3" ? 1 : 2;
  kernel.outputBytes = 2;
  kernel.causal = m.causal;
  kernel.bottomRight = m.bottomRight;
  kernel.window = m.window;
  kernel.diagonalOffset = m.diagonalOffset;
  kernel.wholeBoxes = m.tmaBoxCols > 0;
  kernel.dynamicScheduler = m.tileScheduler == "dynamic";
  kernel.writesLse = m.writesLse;
  kernel.packedSequences = m.varlen;
  kernel.queryGroup = m.queryGroup;
  if (m.splitKV) {
    // The chunk count is the launch's: the metadata's default, if it has one.
    if (m.kvSplits < 1)
      return fail(std::string(where) +
                  ": a split-KV kernel whose chunk count is chosen per "
                  "launch (kv_splits 0): the traffic depends on that count; "
                  "compile with --split-kv N");
    kernel.kvSplits = m.kvSplits;
  }
  return 0;
}

int checkHeads(const char *where, long queryHeads, long kvHeads) {
  const long limit = 0x7fffffffL;
  if (queryHeads < 1 || kvHeads < 1 || queryHeads > limit || kvHeads > limit)
    return fail(std::string(where) + ": heads must be in [1, 2^31 - 1]");
  if (queryHeads % kvHeads != 0)
    return fail(std::string(where) + ": the query heads must be a multiple "
                                     "of the K/V heads");
  return 0;
}
} // namespace

int faMetadataPredictedBytes(const char *metadataJson, long batch,
                             long queryHeads, long kvHeads, long queryLen,
                             long keyLen, unsigned long long *readBytes,
                             unsigned long long *writeBytes) {
  const char *where = "faMetadataPredictedBytes";
  if (!metadataJson || !readBytes || !writeBytes)
    return fail("faMetadataPredictedBytes: null metadata or result pointer");
  Metadata m;
  std::string text(metadataJson);
  if (parseMetadata(text, m))
    return 1;
  mlir::fa::model::TrafficKernel kernel;
  if (trafficKernelOf(m, where, kernel))
    return 1;
  if (m.kvLengths || m.pageSize || m.varlen)
    return fail("faMetadataPredictedBytes: " + m.kernel +
                (m.varlen ? " runs a varlen batch"
                          : " reads a KV cache (per-sequence lengths or pages)") +
                ", whose traffic depends on each sequence's lengths: use "
                "faMetadataPredictedSequenceBytes");
  // Shapes within the kernels' 32-bit positions, heads dividing evenly.
  const long limit = 0x7fffffffL;
  for (long v : {batch, queryLen, keyLen})
    if (v < 1 || v > limit)
      return fail("faMetadataPredictedBytes: shape values must be in "
                  "[1, 2^31 - 1]");
  if (checkHeads(where, queryHeads, kvHeads))
    return 1;
  if (std::optional<std::string> why = mlir::fa::model::checkTrafficShape(
          kernel, {batch, queryHeads, kvHeads, queryLen, keyLen}))
    return fail("faMetadataPredictedBytes: " + *why);
  mlir::fa::model::Traffic traffic = mlir::fa::model::kernelTraffic(
      kernel, {batch, queryHeads, kvHeads, queryLen, keyLen});
  *readBytes = static_cast<unsigned long long>(traffic.reads());
  *writeBytes = static_cast<unsigned long long>(traffic.writes());
  return 0;
}

int faMetadataPredictedSequenceBytes(const char *metadataJson,
                                     long queryHeads, long kvHeads,
                                     long sequences, const long *queryLens,
                                     const long *keyLens,
                                     unsigned long long *readBytes,
                                     unsigned long long *writeBytes) {
  const char *where = "faMetadataPredictedSequenceBytes";
  if (!metadataJson || !readBytes || !writeBytes || !queryLens || !keyLens)
    return fail("faMetadataPredictedSequenceBytes: null metadata, lengths "
                "or result pointer");
  Metadata m;
  std::string text(metadataJson);
  if (parseMetadata(text, m))
    return 1;
  mlir::fa::model::TrafficKernel kernel;
  if (trafficKernelOf(m, where, kernel) ||
      checkHeads(where, queryHeads, kvHeads))
    return 1;
  if (sequences < 1 || sequences > 0x7fffffffL)
    return fail("faMetadataPredictedSequenceBytes: the sequences must be in "
                "[1, 2^31 - 1]");
  std::vector<mlir::fa::model::SequenceLengths> lengths(sequences);
  for (long s = 0; s < sequences; ++s) {
    if (queryLens[s] < 0 || keyLens[s] < 0 || queryLens[s] > 0x7fffffffL ||
        keyLens[s] > 0x7fffffffL)
      return fail("faMetadataPredictedSequenceBytes: sequence " +
                  std::to_string(s) +
                  "'s lengths must be in [0, 2^31 - 1], got " +
                  std::to_string(queryLens[s]) + " queries and " +
                  std::to_string(keyLens[s]) + " keys");
    lengths[s] = {queryLens[s], keyLens[s]};
  }
  if (std::optional<std::string> why = mlir::fa::model::checkSequencesTraffic(
          kernel, queryHeads, kvHeads, lengths.data(), sequences))
    return fail("faMetadataPredictedSequenceBytes: " + *why);
  mlir::fa::model::Traffic traffic = mlir::fa::model::sequencesTraffic(
      kernel, queryHeads, kvHeads, lengths.data(), sequences);
  *readBytes = static_cast<unsigned long long>(traffic.reads());
  *writeBytes = static_cast<unsigned long long>(traffic.writes());
  return 0;
}
