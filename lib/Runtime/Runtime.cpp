//===- Runtime.cpp - launch flash-mlir kernels over the CUDA driver API ---===//
//
// Deliberately free of MLIR and LLVM: a machine with a driver and this one
// library can run kernels compiled elsewhere. libcuda is opened with dlopen
// so that the library also loads (and reports a clear error) where there is
// no driver.
//
//===----------------------------------------------------------------------===//

#include "fa-c/Runtime.h"
#include "fa/Dialect/FA/IR/KVChunk.h"
#include "fa/Dialect/FAGPU/IR/Traffic.h"
#include "fa/Model/PackGQA.h"
#include "fa/Model/Positions.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace {

thread_local std::string lastError;

int fail(const std::string &message) {
  lastError = message;
  return 1;
}

//===----------------------------------------------------------------------===//
// The driver entry points we use (types as in cuda.h; handles are pointers).
//===----------------------------------------------------------------------===//

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;

struct Driver {
  void *handle = nullptr;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDevicePrimaryCtxRetain)(void **, CUdevice);
  CUresult (*cuCtxSetCurrent)(void *);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(void **, const void *);
  CUresult (*cuModuleUnload)(void *);
  CUresult (*cuModuleGetFunction)(void **, void *, const char *);
  CUresult (*cuFuncSetAttribute)(void *, int, int);
  CUresult (*cuLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, void *, void **,
                             void **);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuCtxGetDevice)(CUdevice *);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuTensorMapEncodeTiled)(void *, int, unsigned, void *,
                                     const unsigned long long *,
                                     const unsigned long long *,
                                     const unsigned *, const unsigned *, int,
                                     int, int, int);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuGetErrorString)(CUresult, const char **);

  std::string describe(CUresult status) const {
    const char *name = nullptr, *text = nullptr;
    if (cuGetErrorName)
      cuGetErrorName(status, &name);
    if (cuGetErrorString)
      cuGetErrorString(status, &text);
    std::string s = name ? name : "CUDA error " + std::to_string(status);
    if (text)
      s += std::string(": ") + text;
    return s;
  }
};

Driver driver;
// Set once, under driverLock, after every entry point is resolved: launches
// on other threads read it without the lock.
std::atomic<bool> driverLoaded{false};
std::mutex driverLock;

/// Fails with "<call> failed: <name>: <description>".
int check(CUresult status, const char *call) {
  if (status == 0)
    return 0;
  return fail(std::string(call) + " failed: " + driver.describe(status));
}

int loadDriver() {
  if (driverLoaded)
    return 0;
  std::lock_guard<std::mutex> lock(driverLock);
  if (driverLoaded)
    return 0;
  // FLASHMLIR_LIBCUDA, when set, is the only library tried.
  const char *path = std::getenv("FLASHMLIR_LIBCUDA");
  const char *candidates[] = {path, path ? nullptr : "libcuda.so.1",
                              path ? nullptr : "libcuda.so"};
  std::string tried;
  for (const char *c : candidates) {
    if (!c)
      continue;
    driver.handle = dlopen(c, RTLD_NOW | RTLD_LOCAL);
    if (driver.handle)
      break;
    tried += std::string(tried.empty() ? "" : "; ") + dlerror();
  }
  if (!driver.handle)
    return fail("cannot load the CUDA driver library (libcuda.so.1); the "
                "runtime needs an NVIDIA driver: " +
                tried);
  struct Entry {
    const char *name;
    void **slot;
  } entries[] = {
      {"cuInit", (void **)&driver.cuInit},
      {"cuDeviceGet", (void **)&driver.cuDeviceGet},
      {"cuDevicePrimaryCtxRetain", (void **)&driver.cuDevicePrimaryCtxRetain},
      {"cuCtxSetCurrent", (void **)&driver.cuCtxSetCurrent},
      {"cuCtxSynchronize", (void **)&driver.cuCtxSynchronize},
      {"cuModuleLoadData", (void **)&driver.cuModuleLoadData},
      {"cuModuleUnload", (void **)&driver.cuModuleUnload},
      {"cuModuleGetFunction", (void **)&driver.cuModuleGetFunction},
      {"cuFuncSetAttribute", (void **)&driver.cuFuncSetAttribute},
      {"cuLaunchKernel", (void **)&driver.cuLaunchKernel},
      {"cuMemAlloc_v2", (void **)&driver.cuMemAlloc},
      {"cuMemFree_v2", (void **)&driver.cuMemFree},
      {"cuMemcpyHtoD_v2", (void **)&driver.cuMemcpyHtoD},
      {"cuMemcpyDtoH_v2", (void **)&driver.cuMemcpyDtoH},
      {"cuCtxGetDevice", (void **)&driver.cuCtxGetDevice},
      {"cuDeviceGetAttribute", (void **)&driver.cuDeviceGetAttribute},
      {"cuTensorMapEncodeTiled", (void **)&driver.cuTensorMapEncodeTiled},
      {"cuGetErrorName", (void **)&driver.cuGetErrorName},
      {"cuGetErrorString", (void **)&driver.cuGetErrorString},
  };
  for (Entry &e : entries) {
    *e.slot = dlsym(driver.handle, e.name);
    if (!*e.slot)
      return fail(std::string("the CUDA driver lacks ") + e.name);
  }
  if (check(driver.cuInit(0), "cuInit"))
    return 1;
  driverLoaded = true;
  return 0;
}

//===----------------------------------------------------------------------===//
// Launch metadata: the fields of fa-compile's JSON we need, read from strict
// JSON (RFC 8259: commas between members and elements and none trailing,
// numbers without leading zeros, no NaN or Infinity, control characters
// escaped in strings; a duplicate key refused in every object), as
// Python's json module with the flashmlir runtime's hooks reads it, so
// that both readers take the same texts. Every input gives a status and a
// message, never an exception or a read past the text (fuzzed by
// tools/fa-fuzz/fa-fuzz-metadata.cpp); each integer field has its range,
// checked where it is read, so nothing narrows when it reaches the driver.
//===----------------------------------------------------------------------===//

/// The valid range of each integer field, with the reason.
struct IntField {
  const char *name;
  long long min, max;
};
// head_dim: the dialect's [1, 2^16] (fa/Dialect/FA/IR/Validation.h);
// block_r: its tiles, [1, 2^20]; shared_memory_bytes: cuFuncSetAttribute and
// cuLaunchKernel take it as an int; tensor-map boxes: at most 256 rows
// (cuTensorMapEncodeTiled); ctas_per_sm: at most 32 resident CTAs per SM on
// any NVIDIA GPU so far; block: at most 1024 threads per dimension (checked
// again as a product below).
constexpr IntField kIntFields[] = {
    {"head_dim", 1, 1 << 16},
    {"value_head_dim", 1, 1 << 16},
    {"block_r", 1, 1 << 20},
    {"block_c", 1, 1 << 20},
    // The kernels' positions (fa/Model/Positions.h): 2^30 at most.
    {"window", 0, mlir::fa::model::kMaxKernelPosition},
    {"diagonal_offset", 0, mlir::fa::model::kMaxKernelPosition},
    {"shared_memory_bytes", 0, 0x7fffffff},
    {"tma_box_cols", 0, 256},
    {"tma_box_rows_kv", 0, 256},
    {"tma_box_rows_o", 0, 256},
    {"ctas_per_sm", 1, 32},
    {"block", 1, 1024},
    // fa::checkKVSplits's range, plus 0: the launch picks (auto).
    {"kv_splits", 0, 1024},
    // fa::checkPageSize's range, plus 0: contiguous K/V.
    {"page_size", 0, 1 << 20},
};

const IntField *intField(const std::string &key) {
  for (const IntField &f : kIntFields)
    if (key == f.name)
      return &f;
  return nullptr;
}

struct Metadata {
  std::string format, kernel, dtype;
  // O's element type: the inputs' for f16/bf16, f16 or bf16 for e4m3.
  std::string outDtype;
  // How the CTAs find their tiles: "grid", "one tile per CTA", "static"
  // (persistent, fixed stride) or "dynamic" (persistent, from a counter the
  // runtime passes as the last parameter).
  std::string tileScheduler;
  long headDim = -1, blockR = -1, sharedBytes = -1;
  // V's and O's head dim (0: absent, the head dim's).
  long valueHeadDim = 0;
  long valueColumns() const { return valueHeadDim ? valueHeadDim : headDim; }
  long ctasPerSM = 1; // resident CTAs per SM; a persistent grid is SMs x this
  long tmaBoxCols = 0, tmaBoxRowsKV = 0; // sm_90a: q, k, v as tensor maps
  long tmaBoxRowsO = 0;                  // > 0: o as a tensor map too
  bool causal = false;
  // What the traffic prediction needs (faMetadataPredictedBytes); absent in
  // metadata that predates them.
  std::string arch;
  long blockC = 0, window = 0, diagonalOffset = 0;
  bool bottomRight = false, writesLse = true;
  // The softmax scale the kernel was compiled for (the attention's own, or
  // 1/sqrt(D)); 0 in metadata that predates it.
  float scale = 0.0f;
  // Scores c tanh(s / c) (0: none).
  float softcap = 0.0f;
  bool tileGrid = false;   // one CTA per (query block, head) tile, B param
  bool persistent = false; // at most one CTA per SM strides the tiles
  // Split-KV: grid y = chunks; the launch default (0: fa::autoKVSplits).
  bool splitKV = false;
  long kvSplits = 0;
  // A KV cache: kv_lengths [B] and a paged K/V's block table (page_size
  // rows per page; 0: contiguous).
  bool kvLengths = false;
  long pageSize = 0;
  // A varlen batch: cu_seqlens_q/k [B + 1] and the packed rows of Q.
  bool varlen = false;
  std::vector<long> block;
  std::vector<std::string> params;
  // Each parameter's tensor-map box rows ("box": [cols, rows]), 0 where
  // it has none; in the order of `params`.
  std::vector<long> paramBoxRows;
  // Each parameter's tensor-map box row in bytes, the map's swizzle span
  // ("swizzle": "128B", "64B" or "32B"; 128 where absent). An e4m3 V^T of
  // B_c = 192 or 224 keys comes in boxes of 64 or 32 keys.
  std::vector<long> paramSwizzle;
  // Each parameter's tensor-map L2 promotion in bytes ("l2_promotion": 0,
  // 64, 128 or 256; 256 where absent, as before the key existed).
  std::vector<long> paramL2Promotion;
  // e4m3: the V layout kernel of the same cubin ("value_layout"): its name,
  // threads per block and parameter names.
  std::string valueLayoutKernel;
  std::vector<long> valueLayoutBlock;
  std::vector<std::string> valueLayoutParams;
  // The keys of a V^T row, padded to a multiple of this ("key_alignment":
  // 16 or 128; 16 where absent, as the layout kernels wrote before the key
  // existed).
  long valueLayoutKeyAlign = 16;
  // V columns a layout thread transposes ("columns_per_thread": 16, or 1
  // where absent -- kernels before it): the launch's thread count.
  long valueLayoutColumns = 1;
  // The rank of the tensor maps (every "tensormap" parameter's "rank"): 4
  // reads strided [B, H, N, D] tensors, 3 (or absent) contiguous ones.
  long mapRank = 0;
  bool strided() const { return mapRank == 4; }
  // Each parameter's "kind" ("tensormap", "pointer", "int32", ...; empty
  // where absent), in the order of `params`.
  std::vector<std::string> paramKinds;
  // Whether "tma_box_cols" was given (0 or not): the parameters' kinds are
  // then checked against the boxes.
  bool hasTmaBoxCols = false;
  // The fields the Python launcher needs that this reader would otherwise
  // default ("arch", "causal", "grid"), as they were given.
  std::vector<std::string> given;
};

class JsonScanner {
public:
  explicit JsonScanner(const std::string &text) : s(text) {}

  int parse(Metadata &m) {
    skipSpace();
    if (!eat('{'))
      return fail("launch metadata: expected a JSON object");
    std::vector<std::string> seen;
    for (int more = beginMembers('}'); more == 0;
         more = nextMember('}')) {
      std::string key;
      if (readKey(key, seen))
        return 1;
      if (key == "format" || key == "kernel" || key == "dtype" ||
          key == "tile_scheduler" || key == "arch" || key == "out_dtype") {
        std::string v;
        if (readString(v))
          return fail("launch metadata: '" + key + "' must be a string");
        (key == "format"      ? m.format
         : key == "kernel"    ? m.kernel
         : key == "dtype"     ? m.dtype
         : key == "arch"      ? m.arch
         : key == "out_dtype" ? m.outDtype
                              : m.tileScheduler) = v;
      } else if (key == "scale") {
        if (readScale(m.scale))
          return 1;
      } else if (key == "softcap") {
        if (readSoftcap(m.softcap))
          return 1;
      } else if (const IntField *field = intField(key);
                 field && key != "block") {
        long v;
        if (readInt(*field, v))
          return 1;
        (key == "head_dim"          ? m.headDim
         : key == "value_head_dim"  ? m.valueHeadDim
         : key == "block_r"         ? m.blockR
         : key == "block_c"         ? m.blockC
         : key == "window"          ? m.window
         : key == "diagonal_offset" ? m.diagonalOffset
         : key == "tma_box_cols"    ? m.tmaBoxCols
         : key == "tma_box_rows_kv" ? m.tmaBoxRowsKV
         : key == "tma_box_rows_o"  ? m.tmaBoxRowsO
         : key == "ctas_per_sm"     ? m.ctasPerSM
         : key == "kv_splits"       ? m.kvSplits
         : key == "page_size"       ? m.pageSize
                                    : m.sharedBytes) = v;
        if (key == "tma_box_cols")
          m.hasTmaBoxCols = true;
      } else if (key == "causal" || key == "tile_grid" ||
                 key == "persistent" || key == "bottom_right" ||
                 key == "writes_lse" || key == "split_kv" ||
                 key == "kv_lengths" || key == "varlen") {
        bool &flag = key == "causal"         ? m.causal
                     : key == "tile_grid"    ? m.tileGrid
                     : key == "bottom_right" ? m.bottomRight
                     : key == "writes_lse"   ? m.writesLse
                     : key == "split_kv"     ? m.splitKV
                     : key == "kv_lengths"   ? m.kvLengths
                     : key == "varlen"       ? m.varlen
                                             : m.persistent;
        if (readBool(flag))
          return fail("launch metadata: '" + key + "' must be true or false");
      } else if (key == "block") {
        if (readBlock("'block'", m.block))
          return 1;
      } else if (key == "params") {
        if (readParams(m))
          return 1;
      } else if (key == "value_layout") {
        if (readValueLayout(m))
          return 1;
      } else if (key == "grid") {
        // The launch grid's formulas (for people and the Python launcher,
        // which needs them): an object.
        skipSpace();
        if (pos >= s.size() || s[pos] != '{' || skipValue(0))
          return fail("launch metadata: 'grid' must be an object");
      } else if (skipValue(0)) {
        return fail("launch metadata: malformed value of '" + key + "'");
      }
      for (const char *required : {"arch", "causal", "grid"})
        if (key == required)
          m.given.push_back(key);
    }
    if (failed)
      return 1;
    skipSpace();
    if (pos != s.size())
      return fail("launch metadata: unexpected text after the JSON object at "
                  "offset " +
                  std::to_string(pos));
    return 0;
  }

private:
  /// Objects and arrays nest at most this deep (a bound on the recursion
  /// of skipValue; fa-compile's metadata nests four deep). The Python
  /// reader has the same bound (runtime._MAX_METADATA_DEPTH).
  static constexpr int kMaxDepth = 32;

  void skipSpace() {
    // JSON's whitespace: space, tab, line feed, carriage return.
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' ||
                              s[pos] == '\n' || s[pos] == '\r'))
      ++pos;
  }
  bool eat(char c) {
    if (pos < s.size() && s[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool eatWord(const char *word) {
    size_t n = std::strlen(word);
    if (s.compare(pos, n, word) != 0)
      return false;
    pos += n;
    return true;
  }
  /// After an object's '{' or an array's '[': 0 when a member follows, 2
  /// when `close` ends it at once.
  int beginMembers(char close) {
    skipSpace();
    if (eat(close))
      return 2;
    return 0;
  }
  /// After a member: 0 when ',' and another member follow, 2 at `close`,
  /// 1 (a failure, recorded in `failed`) on anything else -- a missing
  /// comma or a trailing one.
  int nextMember(char close) {
    skipSpace();
    if (eat(close))
      return 2;
    if (eat(',')) {
      skipSpace();
      if (pos < s.size() && s[pos] != close)
        return 0;
      return failMember("a trailing ','");
    }
    return failMember(std::string("expected ',' or '") + close + "'");
  }
  int failMember(const std::string &what) {
    failed = true;
    return fail("launch metadata: malformed JSON (" + what +
                ") at offset " + std::to_string(pos));
  }
  /// A member's key and its ':'; a key already in `seen` is refused.
  int readKey(std::string &key, std::vector<std::string> &seen) {
    skipSpace();
    if (readString(key) || (skipSpace(), !eat(':')))
      return fail("launch metadata: malformed JSON near offset " +
                  std::to_string(pos));
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      return fail("launch metadata: duplicate key '" + key + "'");
    seen.push_back(key);
    skipSpace();
    return 0;
  }
  int readBool(bool &flag) {
    if (eatWord("true"))
      flag = true;
    else if (eatWord("false"))
      flag = false;
    else
      return 1;
    return 0;
  }
  /// A JSON string: no raw control characters, escapes of JSON's set.
  int readString(std::string &out) {
    if (!eat('"'))
      return 1;
    while (pos < s.size() && s[pos] != '"') {
      unsigned char c = s[pos];
      if (c < 0x20)
        return 1;
      if (c == '\\') {
        if (++pos >= s.size() ||
            !std::strchr("\"\\/bfnrtu", s[pos]) || s[pos] == 0)
          return 1;
        if (s[pos] == 'u') {
          for (int i = 1; i <= 4; ++i)
            if (pos + i >= s.size() ||
                !std::isxdigit((unsigned char)s[pos + i]))
              return 1;
          out += s.substr(pos - 1, 6); // kept escaped: names are ASCII
          pos += 5;
          continue;
        }
      }
      out += s[pos++];
    }
    return eat('"') ? 0 : 1;
  }
  /// A launch's block: an array of at most three integers in the "block"
  /// field's range; `what` names it in messages.
  int readBlock(const std::string &what, std::vector<long> &block) {
    if (!eat('['))
      return fail("launch metadata: " + what + " must be an array");
    for (int more = beginMembers(']'); more == 0; more = nextMember(']')) {
      long v;
      if (readInt(*intField("block"), v))
        return 1;
      if (block.size() == 3)
        return fail("launch metadata: " + what + " must be three integers");
      block.push_back(v);
    }
    return failed ? 1 : 0;
  }

  /// JSON's number grammar at the cursor: -?(0|[1-9][0-9]*)(.[0-9]+)?
  /// ([eE][+-]?[0-9]+)?. Returns its length, 0 if there is none (a leading
  /// zero before digits, a lone '-', '+1', '.5', NaN, Infinity).
  size_t numberLength() const {
    size_t i = pos, n = s.size();
    auto digits = [&] {
      size_t start = i;
      while (i < n && std::isdigit((unsigned char)s[i]))
        ++i;
      return i - start;
    };
    if (i < n && s[i] == '-')
      ++i;
    if (i < n && s[i] == '0') {
      ++i;
    } else if (i < n && s[i] >= '1' && s[i] <= '9') {
      digits();
    } else {
      return 0;
    }
    if (i < n && s[i] == '.') {
      ++i;
      if (!digits())
        return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      if (i < n && (s[i] == '+' || s[i] == '-'))
        ++i;
      if (!digits())
        return 0;
    }
    // A digit right after "0" (a leading zero) is no number either.
    if (i < n && std::isdigit((unsigned char)s[i]))
      return 0;
    return i - pos;
  }
  /// A JSON number at the cursor: its text in `token` (at most 64
  /// characters of it) and, when it is one, its value; false otherwise.
  bool readNumber(std::string &token, double &value) {
    size_t length = numberLength();
    if (length == 0 || length > 64) {
      // For the message: the value as written, up to what ends it.
      size_t end = s.find_first_of(",}] \t\n\r", pos);
      token = s.substr(pos, std::min<size_t>(
                                end == std::string::npos ? 40 : end - pos, 40));
      return false;
    }
    token = s.substr(pos, length);
    pos += length;
    value = std::strtod(token.c_str(), nullptr);
    // 1e999 is JSON's grammar but no double: Python reads it as an
    // infinity, which is not JSON.
    return std::isfinite(value);
  }
  /// A number in the dialect's scale range [2^-64, 2^64] (what
  /// fa/Dialect/FA/IR/Validation.h allows), read as the f32 it was written
  /// from.
  int readScale(float &out) {
    std::string token;
    double value;
    if (!readNumber(token, value) || !(value >= 0x1p-64 && value <= 0x1p64))
      return fail("launch metadata: 'scale' must be a number in "
                  "[2^-64, 2^64], got '" +
                  token.substr(0, 40) + "'");
    out = static_cast<float>(value);
    return 0;
  }
  /// 0 (no softcap) or a number in fa::checkSoftcap's (0, 2^24].
  int readSoftcap(float &out) {
    std::string token;
    double value;
    if (!readNumber(token, value) || !(value >= 0 && value <= 0x1p24))
      return fail("launch metadata: 'softcap' must be 0 or a number in "
                  "(0, 2^24], got '" +
                  token.substr(0, 40) + "'");
    out = static_cast<float>(value);
    return 0;
  }

  /// Reads a JSON integer within `field`'s range; fails with a message
  /// naming the field and the range on anything else (no digits, a lone
  /// '-', a leading zero, a fraction or exponent, or a value past the
  /// range, however long).
  int readInt(const IntField &field, long &out) {
    std::string range = "[" + std::to_string(field.min) + ", " +
                        std::to_string(field.max) + "]";
    size_t length = numberLength();
    size_t start = pos;
    bool negative = eat('-');
    size_t digitsStart = pos;
    // Accumulate saturating at just past the largest bound: any longer
    // number is out of range anyway.
    const long long cap = 1LL << 40;
    long long value = 0;
    while (pos < s.size() && std::isdigit((unsigned char)s[pos])) {
      if (value < cap)
        value = value * 10 + (s[pos] - '0');
      ++pos;
    }
    if (length == 0 || pos - start != length)
      return fail(std::string("launch metadata: '") + field.name +
                  "' must be an integer in " + range);
    if (negative)
      value = -value;
    if (value < field.min || value > field.max)
      return fail(std::string("launch metadata: '") + field.name +
                  "' must be in " + range + ", got " +
                  (value >= cap || value <= -cap
                       ? s.substr(digitsStart - negative,
                                  std::min<size_t>(pos - digitsStart + negative,
                                                   40))
                       : std::to_string(value)));
    out = static_cast<long>(value);
    return 0;
  }
  /// Skips one JSON value, checking its grammar; objects' keys must be
  /// unique. `depth`: the objects and arrays around it.
  int skipValue(int depth) {
    skipSpace();
    if (pos >= s.size())
      return 1;
    char c = s[pos];
    if (c == '"') {
      std::string ignored;
      return readString(ignored);
    }
    if (c == '{' || c == '[') {
      if (depth >= kMaxDepth)
        return 1;
      ++pos;
      char close = c == '{' ? '}' : ']';
      std::vector<std::string> seen;
      int more = beginMembers(close);
      for (; more == 0; more = nextMember(close)) {
        std::string key;
        if ((c == '{' && readKey(key, seen)) || skipValue(depth + 1))
          return 1;
      }
      return more == 2 ? 0 : 1;
    }
    if (eatWord("true") || eatWord("false") || eatWord("null"))
      return 0;
    std::string token;
    double value;
    return readNumber(token, value) ? 0 : 1;
  }
  /// "params": [{"name": "q", "rank": 4, ...}, ...]: collects the names
  /// in order, the tensor maps' rank (one for all) and each parameter's
  /// kind.
  int readParams(Metadata &m) {
    std::vector<std::string> &names = m.params;
    if (!eat('['))
      return fail("launch metadata: 'params' must be an array");
    for (int more = beginMembers(']'); more == 0; more = nextMember(']')) {
      if (!eat('{'))
        return fail("launch metadata: 'params' must hold objects");
      std::string name, kind;
      bool named = false, boxed = false;
      long boxRows = 0, boxCols = 0, l2Promotion = 256, swizzle = 128;
      std::string dtype;
      std::vector<std::string> seen;
      int field = beginMembers('}');
      for (; field == 0; field = nextMember('}')) {
        std::string key;
        if (readKey(key, seen))
          return 1;
        if (key == "name") {
          if (readString(name))
            return fail("launch metadata: a parameter name must be a string");
          named = true;
        } else if (key == "box") {
          // [cols, rows], cuTensorMapEncodeTiled's box.
          static constexpr IntField kBox = {"box", 1, 256};
          long cols, rows;
          if (!eat('[') || (skipSpace(), readInt(kBox, cols)) ||
              (skipSpace(), !eat(',')) ||
              (skipSpace(), readInt(kBox, rows)) || (skipSpace(), !eat(']')))
            return fail("launch metadata: a parameter's 'box' must be two "
                        "integers in [1, 256]");
          boxRows = rows;
          boxCols = cols;
          boxed = true;
        } else if (key == "swizzle") {
          std::string span;
          if (readString(span))
            return fail("launch metadata: a parameter's 'swizzle' must be a "
                        "string");
          if (span != "128B" && span != "64B" && span != "32B")
            return fail("launch metadata: a parameter's 'swizzle' must be "
                        "\"128B\", \"64B\" or \"32B\", got \"" + span + "\"");
          swizzle = std::stol(span);
        } else if (key == "dtype" || key == "kind") {
          if (readString(key == "dtype" ? dtype : kind))
            return fail("launch metadata: a parameter's '" + key +
                        "' must be a string");
        } else if (key == "l2_promotion") {
          static constexpr IntField kPromotion = {"l2_promotion", 0, 256};
          if (readInt(kPromotion, l2Promotion))
            return 1;
          if (l2Promotion != 0 && l2Promotion != 64 && l2Promotion != 128 &&
              l2Promotion != 256)
            return fail("launch metadata: a parameter's 'l2_promotion' must "
                        "be 0, 64, 128 or 256 (bytes), got " +
                        std::to_string(l2Promotion));
        } else if (key == "rank") {
          static constexpr IntField kRank = {"rank", 3, 4};
          long rank;
          if (readInt(kRank, rank))
            return 1;
          if (m.mapRank && rank != m.mapRank)
            return fail("launch metadata: the tensor maps' ranks differ");
          m.mapRank = rank;
        } else if (skipValue(2)) {
          return fail("launch metadata: malformed 'params'");
        }
      }
      if (field != 2)
        return 1;
      if (!named)
        return fail("launch metadata: a parameter has no 'name'");
      // The launcher encodes a tensor map from its box.
      if (kind == "tensormap" && !boxed)
        return fail("launch metadata: parameter '" + name +
                    "' is a tensor map without a 'box'");
      // A box row is the swizzle span: the kernel's shared-memory layout is
      // the one the TMA writes.
      if (boxCols && boxCols * (dtype == "e4m3" ? 1 : 2) != swizzle)
        return fail("launch metadata: parameter '" + name +
                    "''s box rows (" + std::to_string(boxCols) +
                    " columns) are not its " + std::to_string(swizzle) +
                    "-byte swizzle");
      names.push_back(name);
      m.paramKinds.push_back(kind);
      m.paramBoxRows.push_back(boxRows);
      m.paramSwizzle.push_back(swizzle);
      m.paramL2Promotion.push_back(l2Promotion);
    }
    return failed ? 1 : 0;
  }

  /// "value_layout": {"kernel": name, "block": [x, y, z], "params":
  /// [{"name": ...}, ...], "grid": ...}: the e4m3 kernels' V layout kernel.
  int readValueLayout(Metadata &m) {
    if (!eat('{'))
      return fail("launch metadata: 'value_layout' must be an object");
    std::vector<std::string> seen;
    for (int more = beginMembers('}'); more == 0; more = nextMember('}')) {
      std::string key;
      if (readKey(key, seen))
        return 1;
      if (key == "kernel") {
        if (readString(m.valueLayoutKernel))
          return fail("launch metadata: 'value_layout''s kernel must be a "
                      "string");
      } else if (key == "block") {
        if (readBlock("'value_layout''s block", m.valueLayoutBlock))
          return 1;
      } else if (key == "params") {
        Metadata layout;
        if (readParams(layout))
          return 1;
        m.valueLayoutParams = layout.params;
      } else if (key == "key_alignment") {
        static constexpr IntField kAlign = {"key_alignment", 16, 128};
        if (readInt(kAlign, m.valueLayoutKeyAlign))
          return 1;
        if (m.valueLayoutKeyAlign != 16 && m.valueLayoutKeyAlign != 128)
          return fail("launch metadata: 'value_layout''s 'key_alignment' "
                      "must be 16 or 128, got " +
                      std::to_string(m.valueLayoutKeyAlign));
      } else if (key == "columns_per_thread") {
        static constexpr IntField kColumns = {"columns_per_thread", 1, 16};
        if (readInt(kColumns, m.valueLayoutColumns))
          return 1;
        if (m.valueLayoutColumns != 1 && m.valueLayoutColumns != 16)
          return fail("launch metadata: 'value_layout''s "
                      "'columns_per_thread' must be 1 or 16, got " +
                      std::to_string(m.valueLayoutColumns));
      } else if (skipValue(1)) {
        return fail("launch metadata: malformed 'value_layout'");
      }
    }
    return failed ? 1 : 0;
  }

  const std::string &s;
  size_t pos = 0;
  // A malformed separator (nextMember) ends every loop at once.
  bool failed = false;
};

int validate(const Metadata &m) {
  if (m.format != "flash-mlir-kernel-1")
    return fail("launch metadata: unknown format '" + m.format +
                "', expected 'flash-mlir-kernel-1'");
  if (m.kernel.empty())
    return fail("launch metadata: no 'kernel' name");
  // fa-compile writes each of them; the Python launcher reads them.
  for (const char *required : {"arch", "causal", "grid"})
    if (std::find(m.given.begin(), m.given.end(), required) == m.given.end())
      return fail(std::string("launch metadata: no '") + required + "'");
  bool fp8 = m.dtype == "e4m3";
  if (m.dtype != "f16" && m.dtype != "bf16" && !fp8)
    return fail("launch metadata: unsupported dtype '" + m.dtype + "'");
  // O: 16-bit; an f16/bf16 kernel's is its inputs' type (metadata that
  // predates the field gives none).
  if (fp8 ? m.outDtype != "f16" && m.outDtype != "bf16"
          : !m.outDtype.empty() && m.outDtype != m.dtype)
    return fail("launch metadata: 'out_dtype' must be " +
                std::string(fp8 ? "f16 or bf16 for an e4m3 kernel"
                                : "the inputs' dtype") +
                ", got '" + m.outDtype + "'");
  if (fp8 && (m.varlen || m.kvLengths || m.pageSize || m.splitKV))
    return fail("launch metadata: e4m3 kernels have no KV-cache, varlen or "
                "split-KV form");
  if (m.headDim <= 0 || m.blockR <= 0 || m.sharedBytes < 0)
    return fail("launch metadata: 'head_dim', 'block_r' and "
                "'shared_memory_bytes' must be given and positive");
  // V and O may be narrower than Q and K (sm_90a pads their tiles).
  if (m.valueColumns() > m.headDim)
    return fail("launch metadata: 'value_head_dim' (" +
                std::to_string(m.valueHeadDim) +
                ") must be at most 'head_dim' (" + std::to_string(m.headDim) +
                ")");
  if (m.block.size() != 3 || m.block[0] <= 0 || m.block[1] <= 0 ||
      m.block[2] <= 0)
    return fail("launch metadata: 'block' must be three positive integers");
  if (m.block[0] * m.block[1] * m.block[2] > 1024)
    return fail("launch metadata: 'block' must have at most 1024 threads "
                "(CUDA's limit per block), got " +
                std::to_string(m.block[0] * m.block[1] * m.block[2]));
  if (m.ctasPerSM < 1 || m.ctasPerSM > 32)
    return fail("launch metadata: 'ctas_per_sm' must be in [1, 32]");
  // e4m3: V comes as the layout kernel's V^T, and the descales follow.
  std::vector<std::string> expected = {
      "q",  "k",  fp8 ? "v_t" : "v", "o",   "lse",
      "Nq", "Nk", "Hq",              "Hkv", "scale_log2"};
  if (m.tileGrid)
    expected.push_back("B");
  // A varlen kernel's O map stores whole blocks; its threads copy a
  // sequence's last, partial block to o_rows (fagpu::kernelParams).
  bool copiesPartialBlocks = m.strided() && m.tmaBoxRowsO && m.varlen;
  if (copiesPartialBlocks)
    expected.push_back("o_rows");
  if (m.strided() && (!m.tmaBoxRowsO || copiesPartialBlocks))
    for (const char *name : {"o_stride_b", "o_stride_h", "o_stride_n"})
      expected.push_back(name);
  if (fp8)
    for (const char *name :
         {"q_descale", "k_descale", "v_descale", "descale_layout"})
      expected.push_back(name);
  if (m.varlen)
    for (const char *name :
         {"cu_seqlens_q", "cu_seqlens_k", "total_q", "total_k"})
      expected.push_back(name);
  if (m.kvLengths)
    expected.push_back("kv_lengths");
  if (m.pageSize) {
    if (!m.strided())
      return fail("launch metadata: a paged kernel reads K/V through rank-4 "
                  "tensor maps over the pages");
    for (const char *name : {"block_table", "max_pages", "num_pages"})
      expected.push_back(name);
  }
  if (m.splitKV) {
    if (!m.tileGrid)
      return fail("launch metadata: split-KV needs a tile-grid (wgmma) "
                  "kernel");
    for (const char *name :
         {"kv_splits", "o_partial", "lse_partial", "split_arrivals"})
      expected.push_back(name);
  }
  const std::string &sched = m.tileScheduler;
  if (!sched.empty() && sched != "grid" && sched != "one tile per CTA" &&
      sched != "static" && sched != "dynamic")
    return fail("launch metadata: unknown 'tile_scheduler' '" + sched + "'");
  if (sched == "dynamic") {
    if (m.splitKV)
      return fail("launch metadata: a split-KV kernel runs one tile per CTA");
    if (!m.persistent)
      return fail("launch metadata: a dynamic tile scheduler needs a "
                  "persistent kernel");
    expected.push_back("tile_counter");
  }
  if (m.params != expected) {
    auto join = [](const std::vector<std::string> &names) {
      std::string text;
      for (const std::string &name : names)
        text += (text.empty() ? "" : ", ") + name;
      return "(" + text + ")";
    };
    return fail("launch metadata: the parameter list " + join(m.params) +
                " does not match this runtime's " + join(expected));
  }
  // A box row is 128 bytes: 64 16-bit or 128 e4m3 columns.
  if (m.tmaBoxCols &&
      (m.tmaBoxCols != (fp8 ? 128 : 64) || m.tmaBoxRowsKV <= 0 ||
       m.tmaBoxRowsKV > 256 ||
       m.tmaBoxRowsO < 0 || m.tmaBoxRowsO > 256 || !m.tileGrid))
    return fail("launch metadata: tensor-map boxes must be 64 columns (128 "
                "for e4m3) by 1 to 256 rows, on a tile grid");
  if (m.mapRank && !m.tmaBoxCols)
    return fail("launch metadata: a 'rank' is given, but the kernel takes "
                "no tensor maps");
  if (m.tmaBoxRowsO && !m.tmaBoxCols)
    return fail("launch metadata: 'tma_box_rows_o' needs the tensor maps of "
                "q, k and v");
  // The parameters the launcher encodes as tensor maps: q, k and v (v_t),
  // and o where it is stored by TMA -- the ones the boxes describe.
  if (m.hasTmaBoxCols) {
    std::vector<std::string> maps, want;
    for (size_t i = 0; i < m.params.size(); ++i)
      if (m.paramKinds[i] == "tensormap")
        maps.push_back(m.params[i]);
    if (m.tmaBoxCols) {
      want.assign(expected.begin(), expected.begin() + 3);
      if (m.tmaBoxRowsO)
        want.push_back("o");
    }
    if (maps != want)
      return fail("launch metadata: the parameters of kind 'tensormap' must "
                  "be " +
                  std::string(want.empty() ? "none (tma_box_cols 0)"
                              : m.tmaBoxRowsO ? "q, k, v and o"
                                              : "q, k and v") +
                  ", as the boxes say");
  }
  // e4m3: the V layout kernel writes the attention's v_t (fagpu's
  // valueLayout ABI: V, V^T, B, Hkv, Nk, V's strides), one thread per
  // 16 keys of a V^T row.
  const std::vector<std::string> layoutParams = {
      "v", "v_t", "B", "Hkv", "Nk", "v_stride_b", "v_stride_h", "v_stride_n"};
  if (fp8 != !m.valueLayoutKernel.empty())
    return fail(fp8 ? "launch metadata: an e4m3 kernel needs its "
                      "'value_layout' kernel (V^T for the P V product)"
                    : "launch metadata: 'value_layout' is for e4m3 kernels");
  if (fp8 && (m.valueLayoutBlock.size() != 3 || m.valueLayoutBlock[1] != 1 ||
              m.valueLayoutBlock[2] != 1 ||
              m.valueLayoutParams != layoutParams || !m.tmaBoxCols ||
              !m.strided() || m.paramBoxRows[2] <= 0))
    return fail("launch metadata: the e4m3 'value_layout' must have a block "
                "[threads, 1, 1], the parameters (v, v_t, B, Hkv, Nk, "
                "v_stride_b, v_stride_h, v_stride_n), and an attention "
                "reading rank-4 tensor maps (v_t's with a box)");
  // faEncodeTensorMap (rank 3) encodes the 256-byte promotion only.
  if (!m.strided())
    for (long promotion : m.paramL2Promotion)
      if (promotion != 256)
        return fail("launch metadata: rank-3 tensor maps take an "
                    "'l2_promotion' of 256 only, got " +
                    std::to_string(promotion));
  return 0;
}

/// cuModuleLoadData reads the image without a size: it must be a cubin
/// whose ELF header and header tables lie inside the buffer, or text (PTX)
/// that ends within it.
int checkImage(const void *image, size_t size) {
  const unsigned char *p = static_cast<const unsigned char *>(image);
  if (size >= 4 && std::memcmp(p, "\x7f"
                                  "ELF",
                               4) == 0) {
    // ELF64, little endian: e_phoff at 32, e_shoff at 40, e_phentsize at
    // 54, e_phnum at 56, e_shentsize at 58, e_shnum at 60.
    if (size < 64 || p[4] != 2 || p[5] != 1)
      return fail("faKernelLoad: the cubin is truncated or not a 64-bit "
                  "little-endian ELF image (" +
                  std::to_string(size) + " bytes)");
    auto u64 = [&](size_t at) {
      uint64_t v;
      std::memcpy(&v, p + at, 8);
      return v;
    };
    auto u16 = [&](size_t at) {
      uint16_t v;
      std::memcpy(&v, p + at, 2);
      return v;
    };
    auto within = [&](uint64_t offset, uint64_t entry, uint64_t count) {
      return offset <= size && count <= (size - offset) / (entry ? entry : 1);
    };
    if (!within(u64(32), u16(54), u16(56)) ||
        !within(u64(40), u16(58), u16(60)))
      return fail("faKernelLoad: the cubin's header tables lie past its " +
                  std::to_string(size) + " bytes: truncated image");
    return 0;
  }
  if (!std::memchr(p, '\0', size))
    return fail("faKernelLoad: the image is neither a cubin (ELF) nor PTX "
                "text ending in a NUL byte within its size");
  return 0;
}

} // namespace

struct FaKernel {
  Metadata meta;
  void *module = nullptr;
  void *function = nullptr;
  // The dynamic tile scheduler's counters, one per stream: a launch finds
  // its counter zero and leaves it zero, so the launches of one stream
  // (ordered) share one, while two streams' launches may overlap.
  std::mutex countersLock;
  std::map<void *, CUdeviceptr> counters;
  // Split-KV's scratch, one per stream for the same reason, grown on
  // demand: partial O and LSE (f32), and the arrival counters (zeroed when
  // allocated, left zero by every launch).
  struct SplitScratch {
    CUdeviceptr partials = 0, arrivals = 0;
    size_t partialBytes = 0, arrivalBytes = 0;
  };
  std::map<void *, SplitScratch> splitScratch;
  // e4m3: the V layout kernel, and its V^T workspace per stream (the
  // attention of a launch reads it after the layout kernel, in stream
  // order; another stream's launch may overlap).
  void *layoutFunction = nullptr;
  struct Workspace {
    CUdeviceptr ptr = 0;
    size_t bytes = 0;
  };
  std::map<void *, Workspace> valueWorkspace;
};

namespace {
/// The current context's device's SM count, in `sms`.
int currentDeviceSMs(int &sms) {
  CUdevice dev;
  return check(driver.cuCtxGetDevice(&dev), "cuCtxGetDevice") ||
         check(driver.cuDeviceGetAttribute(&sms, 16 /*MULTIPROCESSOR_COUNT*/,
                                           dev),
               "cuDeviceGetAttribute(multiprocessor count)");
}

/// `bytes` of device memory in `ptr`, reallocated when smaller; zeroed when
/// `zero` (then kept zero by the kernels).
int ensureDeviceBytes(CUdeviceptr &ptr, size_t &have, size_t bytes, bool zero,
                      const char *what) {
  if (have >= bytes)
    return 0;
  if (ptr)
    driver.cuMemFree(ptr);
  ptr = 0;
  have = 0;
  if (check(driver.cuMemAlloc(&ptr, bytes), what))
    return 1;
  if (zero) {
    std::vector<unsigned char> zeros(bytes, 0);
    if (check(driver.cuMemcpyHtoD(ptr, zeros.data(), bytes), what)) {
      driver.cuMemFree(ptr);
      ptr = 0;
      return 1;
    }
  }
  have = bytes;
  return 0;
}
} // namespace

extern "C" {

const char *faRuntimeLastError(void) { return lastError.c_str(); }

int faKernelMetadataCheck(const char *metadataJson) {
  if (!metadataJson)
    return fail("faKernelMetadataCheck: the metadata is null");
  Metadata meta;
  std::string text(metadataJson);
  return JsonScanner(text).parse(meta) || validate(meta);
}

int faDeviceInit(int device) {
  if (loadDriver())
    return 1;
  CUdevice dev;
  void *ctx = nullptr;
  if (check(driver.cuDeviceGet(&dev, device), "cuDeviceGet") ||
      check(driver.cuDevicePrimaryCtxRetain(&ctx, dev),
            "cuDevicePrimaryCtxRetain") ||
      check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent"))
    return 1;
  return 0;
}

int faKernelLoad(const void *cubin, size_t cubinSize, const char *metadataJson,
                 int device, FaKernel **kernel) {
  if (!kernel)
    return fail("faKernelLoad: kernel must not be null");
  *kernel = nullptr;
  if (!cubin || cubinSize == 0)
    return fail("faKernelLoad: the cubin is empty");
  if (!metadataJson)
    return fail("faKernelLoad: the metadata is null");
  auto k = new FaKernel();
  std::string text(metadataJson);
  if (JsonScanner(text).parse(k->meta) || validate(k->meta)) {
    delete k;
    return 1;
  }
  if (checkImage(cubin, cubinSize) || faDeviceInit(device) ||
      check(driver.cuModuleLoadData(&k->module, cubin), "cuModuleLoadData")) {
    delete k;
    return 1;
  }
  CUresult status = driver.cuModuleGetFunction(&k->function, k->module,
                                               k->meta.kernel.c_str());
  if (status != 0) {
    std::string message =
        "the cubin has no kernel named '" + k->meta.kernel +
        "' (from the metadata): cuModuleGetFunction failed: " +
        driver.describe(status);
    driver.cuModuleUnload(k->module);
    delete k;
    return fail(message);
  }
  if (!k->meta.valueLayoutKernel.empty()) {
    status = driver.cuModuleGetFunction(&k->layoutFunction, k->module,
                                        k->meta.valueLayoutKernel.c_str());
    if (status != 0) {
      std::string message = "the cubin has no kernel named '" +
                            k->meta.valueLayoutKernel +
                            "' (the metadata's value_layout): "
                            "cuModuleGetFunction failed: " +
                            driver.describe(status);
      driver.cuModuleUnload(k->module);
      delete k;
      return fail(message);
    }
  }
  // Above 48 KiB, dynamic shared memory must be opted into per function.
  if (k->meta.sharedBytes > 48 * 1024 &&
      check(driver.cuFuncSetAttribute(k->function,
                                      /*MAX_DYNAMIC_SHARED_SIZE_BYTES=*/8,
                                      (int)k->meta.sharedBytes),
            "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_"
            "BYTES)")) {
    driver.cuModuleUnload(k->module);
    delete k;
    return 1;
  }
  *kernel = k;
  return 0;
}

int faKernelLoadFiles(const char *prefix, int device, FaKernel **kernel) {
  if (!prefix)
    return fail("faKernelLoadFiles: prefix must not be null");
  auto readAll = [](const std::string &path, std::string &out) {
    std::ifstream f(path, std::ios::binary);
    if (!f)
      return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return true;
  };
  std::string cubin, json;
  if (!readAll(std::string(prefix) + ".json", json))
    return fail(std::string("cannot read ") + prefix + ".json");
  if (!readAll(std::string(prefix) + ".cubin", cubin))
    return fail(std::string("cannot read ") + prefix + ".cubin");
  return faKernelLoad(cubin.data(), cubin.size(), json.c_str(), device, kernel);
}

const char *faKernelName(const FaKernel *k) {
  return k ? k->meta.kernel.c_str() : "";
}
int faKernelHeadDim(const FaKernel *k) { return k ? (int)k->meta.headDim : 0; }
int faKernelValueHeadDim(const FaKernel *k) {
  return k ? (int)k->meta.valueColumns() : 0;
}
int faKernelIsCausal(const FaKernel *k) { return k && k->meta.causal; }
const char *faKernelDType(const FaKernel *k) {
  return k ? k->meta.dtype.c_str() : "";
}
int faKernelMasks(const FaKernel *k, int *bottomRight, long long *window,
                  float *softcap) {
  if (!k)
    return fail("faKernelMasks: kernel must not be null");
  if (bottomRight)
    *bottomRight = k->meta.bottomRight;
  if (window)
    *window = k->meta.window;
  if (softcap)
    *softcap = k->meta.softcap;
  return 0;
}
int faKernelTiles(const FaKernel *k, int *blockR, int *blockC) {
  if (!k)
    return fail("faKernelTiles: kernel must not be null");
  if (blockR)
    *blockR = static_cast<int>(k->meta.blockR);
  if (blockC)
    *blockC = static_cast<int>(k->meta.blockC);
  return 0;
}
long long faKernelDiagonalOffset(const FaKernel *k) {
  return k ? k->meta.diagonalOffset : 0;
}

const char *faKernelOutDType(const FaKernel *k) {
  if (!k)
    return "";
  return k->meta.outDtype.empty() ? k->meta.dtype.c_str()
                                  : k->meta.outDtype.c_str();
}

float faKernelScale(const FaKernel *k) {
  if (!k)
    return 0.0f;
  if (k->meta.scale > 0.0f)
    return k->meta.scale;
  return 1.0f / std::sqrt(static_cast<float>(k->meta.headDim));
}

namespace {
/// A swizzled tiled map (dtype 0 f16, 1 bf16, 2 e4m3) with boxes of
/// `boxBytes` (128, 64 or 32: the swizzle span) by `boxRows` rows of one
/// matrix; rows past the last read as zeros. `dims` innermost first,
/// `byteStrides` of the outer dimensions.
int encodeTiledMap(void *map, const void *base, unsigned rank,
                   const unsigned long long *dims,
                   const unsigned long long *byteStrides, int boxRows,
                   int dtype, int l2PromotionBytes, int boxBytes = 128) {
  // A box row is the swizzle span: at 128 bytes 64 16-bit or 128 e4m3
  // elements (e4m3 is encoded as bytes: the TMA only moves them).
  const unsigned elementBytes = dtype == 2 ? 1 : 2;
  unsigned boxDims[4] = {(unsigned)boxBytes / elementBytes, (unsigned)boxRows,
                         1, 1};
  unsigned unit[4] = {1, 1, 1, 1};
  const int u8 = 0, f16 = 6, bf16 = 9;
  // CU_TENSOR_MAP_SWIZZLE_{32B, 64B, 128B}.
  const int swizzle = boxBytes == 32 ? 1 : boxBytes == 64 ? 2 : 3;
  const int type = dtype == 2 ? u8 : dtype == 1 ? bf16 : f16;
  // CU_TENSOR_MAP_L2_PROMOTION_{NONE, L2_64B, L2_128B, L2_256B}.
  const int l2Promotion = l2PromotionBytes == 64    ? 1
                          : l2PromotionBytes == 128 ? 2
                          : l2PromotionBytes == 256 ? 3
                                                    : 0;
  return check(driver.cuTensorMapEncodeTiled(
                   map, type, rank, const_cast<void *>(base),
                   const_cast<unsigned long long *>(dims),
                   const_cast<unsigned long long *>(byteStrides), boxDims,
                   unit, /*interleave=*/0, swizzle, l2Promotion,
                   /*oobFill=*/0),
               "cuTensorMapEncodeTiled");
}

/// The one rule for a strided [B, H, N, D] tensor's strides (elements; D's
/// is 1): a dimension longer than 1 needs a positive multiple of 8 (16
/// bytes: the TMA's stride unit, and the register epilogue's 16-byte
/// stores) below 2^39 (2^40 bytes, the TMA's limit). A dimension of length
/// 1 is never stepped: its stride becomes the contiguous one, so callers
/// may pass whatever their framework reports for it. Writes the strides to
/// use to `out`.
int checkStrides(const char *where, const char *name, const FaStrides &given,
                 long long batch, long long heads, long long rows,
                 long long headDim, FaStrides &out,
                 long long elementBytes = 2) {
  // 16 bytes: 8 16-bit or 16 e4m3 elements.
  const long long unit = 16 / elementBytes;
  const long long sizes[3] = {batch, heads, rows};
  const long long strides[3] = {given.batch, given.head, given.row};
  const long long contiguous[3] = {heads * rows * headDim, rows * headDim,
                                   headDim};
  const char *dims[3] = {"batch", "head", "row"};
  long long used[3];
  for (int i = 0; i < 3; ++i) {
    used[i] = strides[i];
    if (sizes[i] == 1) {
      used[i] = contiguous[i];
      continue;
    }
    if (strides[i] <= 0 || strides[i] % unit != 0 ||
        strides[i] * elementBytes >= (1LL << 40))
      return fail(std::string(where) + ": " + name + "'s " + dims[i] +
                  " stride must be a positive multiple of " +
                  std::to_string(unit) +
                  " elements (16 bytes) below 2^40 bytes, got " +
                  std::to_string(strides[i]));
  }
  out = {used[0], used[1], used[2]};
  return 0;
}
} // namespace

int faEncodeTensorMap(void *map, const void *base, long long matrices,
                      long long rows, long long headDim, long long elemBits,
                      int boxRows, int dtype) {
  if (loadDriver())
    return 1;
  if (!map || reinterpret_cast<uintptr_t>(map) % 64 != 0)
    return fail("faEncodeTensorMap: the map must be 64-byte aligned");
  if (!base || reinterpret_cast<uintptr_t>(base) % 16 != 0)
    return fail("faEncodeTensorMap: the tensor must be 16-byte aligned");
  if (elemBits != 16 || (dtype != 0 && dtype != 1))
    return fail("faEncodeTensorMap: only f16 (dtype 0) and bf16 (1) tensors");
  // cuTensorMapEncodeTiled: every dimension at most 2^32, strides below
  // 2^40 bytes.
  // D: whole 16-byte rows (the TMA's stride unit); the boxes of 64
  // columns may run past it (a padded head dim), the TMA fills zeros.
  if (matrices <= 0 || rows <= 0 || headDim <= 0 || headDim % 8 != 0 ||
      boxRows <= 0 || boxRows > 256 || matrices > (1LL << 32) ||
      rows > (1LL << 32) || headDim > (1LL << 16) ||
      rows * headDim * 2 >= (1LL << 40))
    return fail("faEncodeTensorMap: bad shape (matrices " +
                std::to_string(matrices) + ", rows " + std::to_string(rows) +
                ", head dim " + std::to_string(headDim) + ", box rows " +
                std::to_string(boxRows) + ")");
  // [B * H, N, D], D innermost.
  unsigned long long dims[3] = {(unsigned long long)headDim,
                                (unsigned long long)rows,
                                (unsigned long long)matrices};
  unsigned long long strides[2] = {(unsigned long long)headDim * 2,
                                   (unsigned long long)(rows * headDim * 2)};
  return encodeTiledMap(map, base, 3, dims, strides, boxRows, dtype,
                        /*l2PromotionBytes=*/256);
}


int faEncodeStridedTensorMap(void *map, const void *base, long long batch,
                             long long heads, long long rows,
                             long long headDim, long long strideB,
                             long long strideH, long long strideN,
                             int boxRows, int dtype) {
  return faEncodeStridedTensorMapL2(map, base, batch, heads, rows, headDim,
                                    strideB, strideH, strideN, boxRows, dtype,
                                    256);
}

namespace {
/// faEncodeStridedTensorMapL2 with boxes of `boxBytes` (the swizzle span).
int encodeStridedMap(void *map, const void *base, long long batch,
                     long long heads, long long rows, long long headDim,
                     long long strideB, long long strideH, long long strideN,
                     int boxRows, int dtype, int l2PromotionBytes,
                     int boxBytes) {
  if (l2PromotionBytes != 0 && l2PromotionBytes != 64 &&
      l2PromotionBytes != 128 && l2PromotionBytes != 256)
    return fail("faEncodeStridedTensorMap: the L2 promotion must be 0, 64, "
                "128 or 256 bytes, got " + std::to_string(l2PromotionBytes));
  if (!map || reinterpret_cast<uintptr_t>(map) % 64 != 0)
    return fail("faEncodeStridedTensorMap: the map must be 64-byte aligned");
  if (!base || reinterpret_cast<uintptr_t>(base) % 16 != 0)
    return fail("faEncodeStridedTensorMap: the tensor must be 16-byte "
                "aligned");
  if (dtype != 0 && dtype != 1 && dtype != 2)
    return fail("faEncodeStridedTensorMap: only f16 (dtype 0), bf16 (1) and "
                "e4m3 (2) tensors");
  // The innermost dimension (D, or the keys of an e4m3 V^T) in whole
  // 16-byte chunks; boxes past it (a padded head dim) read zeros.
  const long long elementBytes = dtype == 2 ? 1 : 2;
  if (batch <= 0 || heads <= 0 || rows <= 0 || headDim <= 0 ||
      headDim % (16 / elementBytes) != 0 || headDim > (1LL << 16) ||
      boxRows <= 0 ||
      boxRows > 256 || batch > (1LL << 32) || heads > (1LL << 32) ||
      rows > (1LL << 32))
    return fail("faEncodeStridedTensorMap: bad shape (batch " +
                std::to_string(batch) + ", heads " + std::to_string(heads) +
                ", rows " + std::to_string(rows) + ", head dim " +
                std::to_string(headDim) + ", box rows " +
                std::to_string(boxRows) + ")");
  FaStrides strides;
  if (checkStrides("faEncodeStridedTensorMap", "the tensor",
                   {strideB, strideH, strideN}, batch, heads, rows, headDim,
                   strides, elementBytes))
    return 1;
  // Innermost first: D, N, H, B.
  unsigned long long dims[4] = {
      (unsigned long long)headDim, (unsigned long long)rows,
      (unsigned long long)heads, (unsigned long long)batch};
  unsigned long long byteStrides[3] = {
      (unsigned long long)(strides.row * elementBytes),
      (unsigned long long)(strides.head * elementBytes),
      (unsigned long long)(strides.batch * elementBytes)};
  if (loadDriver())
    return 1;
  return encodeTiledMap(map, base, 4, dims, byteStrides, boxRows, dtype,
                        l2PromotionBytes, boxBytes);
}
} // namespace

int faEncodeStridedTensorMapL2(void *map, const void *base, long long batch,
                               long long heads, long long rows,
                               long long headDim, long long strideB,
                               long long strideH, long long strideN,
                               int boxRows, int dtype, int l2PromotionBytes) {
  return encodeStridedMap(map, base, batch, heads, rows, headDim, strideB,
                          strideH, strideN, boxRows, dtype, l2PromotionBytes,
                          /*boxBytes=*/128);
}

int faAutoKVSplits(long long tiles, long long kvBlocks, int sms) {
  return (int)mlir::fa::autoKVSplits(tiles, kvBlocks, sms);
}

int faDecodeHeadsPerTile(long long queries, long long qHeads,
                         long long kvHeads, int masked) {
  return (int)mlir::fa::model::decodeHeadsPerTile(queries, qHeads, kvHeads,
                                            masked != 0);
}

int faKernelLaunch(FaKernel *k, const void *q, const void *kp, const void *v,
                   void *o, float *lse, int batch, int qHeads, int kvHeads,
                   int qLen, int kvLen, float scale, void *stream) {
  return faKernelLaunchSplit(k, q, kp, v, o, lse, batch, qHeads, kvHeads, qLen,
                             kvLen, scale, /*kvSplits=*/-1, stream);
}

int faKernelLaunchSplit(FaKernel *k, const void *q, const void *kp,
                        const void *v, void *o, float *lse, int batch,
                        int qHeads, int kvHeads, int qLen, int kvLen,
                        float scale, int kvSplits, void *stream) {
  return faKernelLaunchStrided(k, q, nullptr, kp, nullptr, v, nullptr, o,
                               nullptr, lse, batch, qHeads, kvHeads, qLen,
                               kvLen, scale, kvSplits, stream);
}

namespace {
/// A KV cache's part of a launch: K/V are [entries, Hkv, rows, D] (entries
/// the batch, or the pages of a paged cache; rows Nk, or the page size),
/// with the kernel's kv_lengths and block table (device pointers).
struct KVCache {
  long long entries = 0;
  int rows = 0;
  const int *lengths = nullptr;
  const int *table = nullptr;
  int maxPages = 0;
  // A varlen batch: q, o are [1, Hq, qRows, D] (qRows the packed total)
  // and the prefix sums [B + 1] on the device; the kernel's B and Nq are
  // the sequences and the longest one's queries.
  const int *cuQ = nullptr, *cuK = nullptr;
  int qRows = 0;
  // An e4m3 launch: the descales, f32 on the device, laid out as
  // descaleLayout (FA_DESCALE_*) says.
  const float *qDescale = nullptr, *kDescale = nullptr, *vDescale = nullptr;
  int descaleLayout = FA_DESCALE_PER_TENSOR;
};

/// The keys of each row of an e4m3 kernel's V^T: Nk rounded up to the
/// metadata's key alignment (the layout kernel writes the padding as zero).
long long valueTransposedKeys(const FaKernel *k, long long kvLen) {
  const long long align = k->meta.valueLayoutKeyAlign;
  return (kvLen + align - 1) / align * align;
}

/// Runs an e4m3 kernel's V layout kernel on `stream`: V [B, Hkv, Nk, D]
/// (strided) to V^T [B, Hkv, D, keys] in the stream's workspace (keys:
/// valueTransposedKeys), permuted in 16s for P's register layout; the
/// workspace in `valueT`.
int runValueLayout(FaKernel *k, const void *v, const FaStrides &vStrides,
                   int batch, int kvHeads, int kvLen, void *stream,
                   CUdeviceptr &valueT) {
  const long long d = k->meta.headDim, keys = valueTransposedKeys(k, kvLen);
  // One thread per 16 keys of columns_per_thread V^T rows, on a 32-bit
  // grid.
  const long long threads = (long long)batch * kvHeads * (keys / 16) *
                            (d / k->meta.valueLayoutColumns);
  const long long perBlock = k->meta.valueLayoutBlock[0];
  if ((threads + perBlock - 1) / perBlock > 0x7fffffffLL)
    return fail("faKernelLaunchE4M3: sizes exceed the V layout kernel's "
                "32-bit grid");
  {
    std::lock_guard<std::mutex> lock(k->countersLock);
    FaKernel::Workspace &space = k->valueWorkspace[stream];
    if (ensureDeviceBytes(space.ptr, space.bytes,
                          (size_t)batch * kvHeads * d * keys, false,
                          "cuMemAlloc(V^T workspace)"))
      return 1;
    valueT = space.ptr;
  }
  long long strideB = vStrides.batch, strideH = vStrides.head,
            strideN = vStrides.row;
  void *args[] = {&v,      &valueT,  &batch,   &kvHeads,
                  &kvLen,  &strideB, &strideH, &strideN};
  return check(driver.cuLaunchKernel(
                   k->layoutFunction,
                   (unsigned)((threads + perBlock - 1) / perBlock), 1, 1,
                   (unsigned)perBlock, 1, 1, 0, stream, args, nullptr),
               "cuLaunchKernel(V layout)");
}

/// faKernelLaunchStrided and faKernelLaunchKVCache: `cache` gives K/V's
/// outer and row extents and the cache's operands.
int launchKernel(FaKernel *k, const void *q, const FaStrides *qStrides,
                 const void *kp, const FaStrides *kStrides, const void *v,
                 const FaStrides *vStrides, void *o, const FaStrides *oStrides,
                 float *lse, int batch, int qHeads, int kvHeads, int qLen,
                 const KVCache &cache, float scale, int kvSplits,
                 void *stream) {
  // The kernel's Nk: a paged sequence's capacity, else K/V's rows.
  int kvLen = cache.table ? cache.maxPages * cache.rows : cache.rows;
  const int *kvLengths = cache.lengths, *blockTable = cache.table;
  const int *cuQ = cache.cuQ, *cuK = cache.cuK;
  int maxPages = cache.maxPages;
  // What the kernel asserts its device-side inputs against: K's packed rows
  // (cu_seqlens_k ends within them) and the cache's pages (block-table
  // entries are below it).
  int keyRows = cache.rows, pages = (int)cache.entries;
  // Q's and O's outer extent and rows: the batch and Nq, or one batch row
  // of the packed queries.
  int qRows = cache.cuQ ? cache.qRows : qLen;
  long long qEntries = cache.cuQ ? 1 : batch;
  if (kvSplits < -1 || kvSplits > 1024)
    return fail("faKernelLaunch: kv_splits must be -1 (the metadata's "
                "default), 0 (auto) or a chunk count up to 1024, got " +
                std::to_string(kvSplits));
  if (!k)
    return fail("faKernelLaunch: kernel must not be null");
  if (!k->meta.splitKV && kvSplits > 1)
    return fail("faKernelLaunch: kv_splits = " + std::to_string(kvSplits) +
                " needs a split-KV kernel (fa-compile --split-kv); " +
                k->meta.kernel + " is not one");
  const char *names[] = {"q", "k", "v", "o", "lse"};
  const void *ptrs[] = {q, kp, v, o, lse};
  for (int i = 0; i < 5; ++i) {
    if (!ptrs[i])
      return fail(std::string("faKernelLaunch: ") + names[i] +
                  " must not be null");
    if (reinterpret_cast<uintptr_t>(ptrs[i]) % 16 != 0)
      return fail(std::string("faKernelLaunch: ") + names[i] +
                  " must be 16-byte aligned");
  }
  if (batch <= 0 || qHeads <= 0 || kvHeads <= 0 || qLen <= 0 || kvLen <= 0)
    return fail("faKernelLaunch: batch, heads and lengths must be positive");
  // The kernels add positions in 32 bits (fa/Model/Positions.h).
  if (qLen > mlir::fa::model::kMaxKernelPosition ||
      kvLen > mlir::fa::model::kMaxKernelPosition ||
      qRows > mlir::fa::model::kMaxKernelPosition)
    return fail("faKernelLaunch: sequence lengths must be at most 2^30 (the "
                "kernels' 32-bit positions), got Nq " +
                std::to_string(qLen) + ", Nk " + std::to_string(kvLen));
  if (qHeads % kvHeads != 0)
    return fail("faKernelLaunch: query heads (" + std::to_string(qHeads) +
                ") must be a multiple of key/value heads (" +
                std::to_string(kvHeads) + ")");
  if (batch > 65535 || qHeads > 65535)
    return fail("faKernelLaunch: batch and heads must be at most 65535");
  // The dialect's range (fa/Dialect/FA/IR/Validation.h): log2(e) * scale
  // must be a normal f32 and the scores finite.
  if (!(scale >= 0x1p-64f && scale <= 0x1p64f))
  {
    char text[32];
    std::snprintf(text, sizeof(text), "%.9g", scale); // round-trips an f32
    return fail(std::string("faKernelLaunch: scale must be in [2^-64, 2^64], "
                            "got ") +
                text);
  }
  // The tensors' strides (faKernelLaunchStrided's rule); contiguous ones
  // where none are given. Kernels without rank-4 maps take only those.
  // Q's and K's columns, and V's and O's (fewer where the kernel pads V).
  const long long d = k->meta.headDim, dv = k->meta.valueColumns();
  const bool fp8 = k->meta.dtype == "e4m3";
  if (fp8 != (cache.qDescale != nullptr))
    return fail("faKernelLaunch: " + k->meta.kernel +
                (fp8 ? " is an e4m3 kernel: launch it with faKernelLaunchE4M3"
                     : " takes 16-bit inputs: faKernelLaunchE4M3 is for "
                       "e4m3 kernels"));
  // Pack-GQA at decode (fa::model::decodeHeadsPerTile): one query a
  // sequence and a kernel without masks read Q and O [B, Hq, 1, D] as the
  // views [B, Hkv, G, D] and write the LSE [B, Hq, 1] as [B, Hkv, G], so
  // every K/V block is read once per K/V head instead of once per query
  // head.
  FaStrides packed[2];
  if (!cache.cuQ && !fp8 && k->meta.strided()) {
    int64_t group = mlir::fa::model::decodeHeadsPerTile(
        qLen, qHeads, kvHeads, k->meta.causal || k->meta.window > 0);
    if (group > 1) {
      const FaStrides *views[2] = {qStrides, oStrides};
      const long long cols[2] = {d, dv};
      for (int i = 0; i < 2; ++i) {
        FaStrides view =
            views[i] ? *views[i] : FaStrides{qHeads * cols[i], cols[i], cols[i]};
        packed[i] = {view.batch, group * view.head, view.head};
      }
      qStrides = &packed[0];
      oStrides = &packed[1];
      qHeads = kvHeads;
      qLen = qRows = (int)group;
    }
  }
  const FaStrides *given[4] = {qStrides, kStrides, vStrides, oStrides};
  const long long heads[4] = {qHeads, kvHeads, kvHeads, qHeads};
  const long long rows[4] = {qRows, cache.rows, cache.rows, qRows};
  const long long batches[4] = {qEntries, cache.entries, cache.entries,
                                qEntries};
  const long long columns[4] = {d, d, dv, dv};
  FaStrides strides[4];
  for (int i = 0; i < 4; ++i) {
    FaStrides contiguous = {heads[i] * rows[i] * columns[i],
                            rows[i] * columns[i], columns[i]};
    // e4m3 q, k, v are one byte; O is 16-bit.
    if (checkStrides("faKernelLaunch", names[i],
                     given[i] ? *given[i] : contiguous, batches[i], heads[i],
                     rows[i], columns[i], strides[i], fp8 && i < 3 ? 1 : 2))
      return 1;
    if (!k->meta.strided() &&
        (strides[i].batch != contiguous.batch ||
         strides[i].head != contiguous.head || strides[i].row != columns[i]))
      return fail(std::string("faKernelLaunch: ") + k->meta.kernel +
                  " takes contiguous [B, H, N, D] tensors (its tensor maps "
                  "are not rank 4: strided tensors need an sm_90a kernel); " +
                  names[i] + " has strides {" +
                  std::to_string(strides[i].batch) + ", " +
                  std::to_string(strides[i].head) + ", " +
                  std::to_string(strides[i].row) + "}");
  }
  if (!driverLoaded)
    return fail("faKernelLaunch: no driver (load the kernel first)");
  float scaleLog2 = scale * 1.4426950408889634f;
  // The slots after B are split-KV's (chunks, partials, arrivals) or the
  // dynamic tile scheduler's counter; the driver reads as many parameters
  // as the kernel takes.
  CUdeviceptr counter = 0;
  int splits = 1;
  CUdeviceptr oPartial = 0, lsePartial = 0, arrivals = 0;
  if (k->meta.splitKV) {
    splits = kvSplits >= 0 ? kvSplits : (int)k->meta.kvSplits;
    if (splits == 0) {
      int sms = 0;
      if (currentDeviceSMs(sms))
        return 1;
      long long tiles = (long long)((qLen + k->meta.blockR - 1) /
                                    k->meta.blockR) *
                        qHeads * batch;
      long blockC = k->meta.blockC > 0 ? k->meta.blockC : 128;
      splits = (int)mlir::fa::autoKVSplits(tiles, (kvLen + blockC - 1) / blockC,
                                           sms);
    }
    // Partial O [S, B, Hq, Nq, D] and LSE [S, B, Hq, Nq] in f32; an
    // arrival counter per query row.
    size_t rows = (size_t)batch * (size_t)qHeads * (size_t)qLen;
    size_t partialBytes = 4 * (size_t)splits * rows * (dv + 1);
    std::lock_guard<std::mutex> lock(k->countersLock);
    FaKernel::SplitScratch &scratch = k->splitScratch[stream];
    if (ensureDeviceBytes(scratch.partials, scratch.partialBytes, partialBytes,
                          false, "cuMemAlloc(split-KV partials)") ||
        ensureDeviceBytes(scratch.arrivals, scratch.arrivalBytes, 4 * rows,
                          true, "cuMemAlloc(split-KV arrivals)"))
      return 1;
    oPartial = scratch.partials;
    lsePartial = scratch.partials + 4 * (size_t)splits * rows * dv;
    arrivals = scratch.arrivals;
  }
  unsigned gridX = (unsigned)((qLen + k->meta.blockR - 1) / k->meta.blockR);
  unsigned gridY = (unsigned)qHeads, gridZ = (unsigned)batch;
  // The wgmma and tcgen05 kernels read q, k, v (and write o, with a TMA
  // store) through TMA tensor maps, passed by value.
  alignas(64) unsigned char maps[4][128];
  const void *bases[] = {q, kp, v, o};
  void *tensorArgs[4] = {&q, &kp, &v, &o};
  CUdeviceptr valueT = 0;
  long long keys = fp8 ? valueTransposedKeys(k, kvLen) : 0;
  if (fp8 && runValueLayout(k, v, strides[2], batch, kvHeads, kvLen, stream,
                            valueT))
    return 1;
  if (k->meta.tmaBoxCols) {
    int dtype = fp8 ? 2 : k->meta.dtype == "bf16" ? 1 : 0;
    long box[] = {k->meta.blockR, k->meta.tmaBoxRowsKV, k->meta.tmaBoxRowsKV,
                  k->meta.tmaBoxRowsO};
    for (int i = 0; i < (k->meta.tmaBoxRowsO ? 4 : 3); ++i) {
      if (fp8 && i == 2) {
        // V^T [B, Hkv, D, keys], contiguous: rows of D, keys innermost.
        if (encodeStridedMap(maps[2], (const void *)valueT, batch, kvHeads,
                             d, keys, kvHeads * d * keys, d * keys, keys,
                             (int)k->meta.paramBoxRows[2], dtype,
                             (int)k->meta.paramL2Promotion[2],
                             (int)k->meta.paramSwizzle[2]))
          return 1;
        tensorArgs[2] = maps[2];
        continue;
      }
      if (k->meta.strided()
              ? faEncodeStridedTensorMapL2(
                    maps[i], bases[i], batches[i], heads[i], rows[i],
                    columns[i], strides[i].batch, strides[i].head,
                    strides[i].row, (int)box[i], dtype,
                    (int)k->meta.paramL2Promotion[i])
              : faEncodeTensorMap(maps[i], bases[i],
                                  batches[i] * heads[i], rows[i], columns[i],
                                  16, (int)box[i], dtype))
        return 1;
      tensorArgs[i] = maps[i];
    }
  }
  if (k->meta.tileScheduler == "dynamic") {
    std::lock_guard<std::mutex> lock(k->countersLock);
    auto it = k->counters.find(stream);
    if (it == k->counters.end()) {
      const unsigned zero = 0;
      if (check(driver.cuMemAlloc(&counter, sizeof(zero)),
                "cuMemAlloc(tile counter)"))
        return 1;
      if (check(driver.cuMemcpyHtoD(counter, &zero, sizeof(zero)),
                "cuMemcpyHtoD(tile counter)")) {
        driver.cuMemFree(counter);
        return 1;
      }
      it = k->counters.emplace(stream, counter).first;
    }
    counter = it->second;
  }
  if (k->meta.tileGrid) {
    unsigned long long tiles =
        (unsigned long long)gridX * (unsigned)qHeads * (unsigned)batch;
    if (k->meta.persistent) {
      int sms = 0;
      if (currentDeviceSMs(sms))
        return 1;
      unsigned long long resident =
          (unsigned long long)sms * (unsigned long long)k->meta.ctasPerSM;
      if (resident < tiles)
        tiles = resident;
    }
    if (tiles > 0x7fffffffULL)
      return fail("faKernelLaunch: too many tiles for one grid (" +
                  std::to_string(tiles) + ")");
    gridX = (unsigned)tiles;
    gridY = (unsigned)splits;
    gridZ = 1;
  }
  // One argument per parameter of the metadata, by name: the kernel's ABI
  // (fagpu::kernelParams) is the one description of their order.
  long long oStrideB = strides[3].batch, oStrideH = strides[3].head,
            oStrideN = strides[3].row;
  std::vector<void *> args;
  for (const std::string &name : k->meta.params) {
    void *arg = name == "q"                ? tensorArgs[0]
                : name == "k"              ? tensorArgs[1]
                : name == "v"              ? tensorArgs[2]
                : name == "o"              ? tensorArgs[3]
                : name == "lse"            ? (void *)&lse
                : name == "Nq"             ? (void *)&qLen
                : name == "Nk"             ? (void *)&kvLen
                : name == "Hq"             ? (void *)&qHeads
                : name == "Hkv"            ? (void *)&kvHeads
                : name == "scale_log2"     ? (void *)&scaleLog2
                : name == "B"              ? (void *)&batch
                : name == "o_rows"         ? (void *)&o
                : name == "o_stride_b"     ? (void *)&oStrideB
                : name == "o_stride_h"     ? (void *)&oStrideH
                : name == "o_stride_n"     ? (void *)&oStrideN
                : name == "kv_splits"      ? (void *)&splits
                : name == "o_partial"      ? (void *)&oPartial
                : name == "lse_partial"    ? (void *)&lsePartial
                : name == "split_arrivals" ? (void *)&arrivals
                : name == "tile_counter"   ? (void *)&counter
                : name == "kv_lengths"     ? (void *)&kvLengths
                : name == "block_table"    ? (void *)&blockTable
                : name == "max_pages"      ? (void *)&maxPages
                : name == "cu_seqlens_q"   ? (void *)&cuQ
                : name == "cu_seqlens_k"   ? (void *)&cuK
                : name == "total_q"        ? (void *)&qRows
                : name == "total_k"        ? (void *)&keyRows
                : name == "num_pages"      ? (void *)&pages
                : name == "v_t"            ? tensorArgs[2]
                : name == "q_descale"      ? (void *)&cache.qDescale
                : name == "k_descale"      ? (void *)&cache.kDescale
                : name == "v_descale"      ? (void *)&cache.vDescale
                : name == "descale_layout" ? (void *)&cache.descaleLayout
                                           : nullptr;
    if (!arg) // validate() admits only the names above
      return fail("faKernelLaunch: unknown kernel parameter '" + name + "'");
    args.push_back(arg);
  }
  return check(driver.cuLaunchKernel(
                   k->function, gridX, gridY, gridZ, (unsigned)k->meta.block[0],
                   (unsigned)k->meta.block[1], (unsigned)k->meta.block[2],
                   (unsigned)k->meta.sharedBytes, stream, args.data(), nullptr),
               "cuLaunchKernel");
}

} // namespace

int faKernelLaunchStrided(FaKernel *k, const void *q,
                          const FaStrides *qStrides, const void *kp,
                          const FaStrides *kStrides, const void *v,
                          const FaStrides *vStrides, void *o,
                          const FaStrides *oStrides, float *lse, int batch,
                          int qHeads, int kvHeads, int qLen, int kvLen,
                          float scale, int kvSplits, void *stream) {
  if (k && k->meta.varlen)
    return fail("faKernelLaunch: " + k->meta.kernel +
                " runs a varlen batch (cu_seqlens): launch it with "
                "faKernelLaunchVarlen");
  if (k && (k->meta.kvLengths || k->meta.pageSize))
    return fail("faKernelLaunch: " + k->meta.kernel +
                " reads a KV cache (kv_lengths" +
                (k->meta.pageSize ? ", block table" : "") +
                "): launch it with faKernelLaunchKVCache");
  KVCache cache;
  cache.entries = batch;
  cache.rows = kvLen;
  return launchKernel(k, q, qStrides, kp, kStrides, v, vStrides, o, oStrides,
                      lse, batch, qHeads, kvHeads, qLen, cache, scale,
                      kvSplits, stream);
}

int faKernelLaunchE4M3(FaKernel *k, const void *q, const FaStrides *qStrides,
                       const void *kp, const FaStrides *kStrides,
                       const void *v, const FaStrides *vStrides, void *o,
                       const FaStrides *oStrides, float *lse, int batch,
                       int qHeads, int kvHeads, int qLen, int kvLen,
                       float scale, const float *qDescale,
                       const float *kDescale, const float *vDescale,
                       int descaleLayout, void *stream) {
  // The layout first: a bad value is refused without a kernel or a driver.
  if (descaleLayout != FA_DESCALE_PER_TENSOR &&
      descaleLayout != FA_DESCALE_PER_HEAD &&
      descaleLayout != FA_DESCALE_PER_BLOCK)
    return fail("faKernelLaunchE4M3: descaleLayout must be "
                "FA_DESCALE_PER_TENSOR (0), FA_DESCALE_PER_HEAD (1, [B, Hkv]) "
                "or FA_DESCALE_PER_BLOCK (2, per tile), got " +
                std::to_string(descaleLayout));
  if (!k)
    return fail("faKernelLaunchE4M3: kernel must not be null");
  if (k->meta.dtype != "e4m3")
    return fail("faKernelLaunchE4M3: " + k->meta.kernel + " takes " +
                k->meta.dtype + " inputs: launch it with "
                "faKernelLaunchStrided");
  for (const float *p : {qDescale, kDescale, vDescale})
    if (!p || reinterpret_cast<uintptr_t>(p) % 4 != 0)
      return fail("faKernelLaunchE4M3: q_descale, k_descale and v_descale "
                  "must be 4-byte aligned f32 scalars on the device (1.0 "
                  "for unscaled codes)");
  KVCache cache;
  cache.entries = batch;
  cache.rows = kvLen;
  cache.qDescale = qDescale;
  cache.kDescale = kDescale;
  cache.vDescale = vDescale;
  cache.descaleLayout = descaleLayout;
  return launchKernel(k, q, qStrides, kp, kStrides, v, vStrides, o, oStrides,
                      lse, batch, qHeads, kvHeads, qLen, cache, scale,
                      /*kvSplits=*/-1, stream);
}

int faKernelLaunchVarlen(FaKernel *k, const void *q,
                         const FaStrides *qStrides, const void *kp,
                         const FaStrides *kStrides, const void *v,
                         const FaStrides *vStrides, void *o,
                         const FaStrides *oStrides, float *lse, int sequences,
                         int qHeads, int kvHeads, int totalQ, int totalK,
                         int maxSeqlenQ, const int *cuSeqlensQ,
                         const int *cuSeqlensK, float scale, void *stream) {
  if (!k)
    return fail("faKernelLaunchVarlen: kernel must not be null");
  if (!k->meta.varlen)
    return fail("faKernelLaunchVarlen: " + k->meta.kernel +
                " runs no varlen batch (compile one with --varlen); launch "
                "it with faKernelLaunchStrided");
  for (const int *p : {cuSeqlensQ, cuSeqlensK})
    if (!p || reinterpret_cast<uintptr_t>(p) % 4 != 0)
      return fail("faKernelLaunchVarlen: cu_seqlens_q and cu_seqlens_k must "
                  "be 4-byte aligned int32 arrays [B + 1] on the device");
  if (sequences <= 0 || totalQ <= 0 || totalK <= 0 || maxSeqlenQ <= 0 ||
      maxSeqlenQ > totalQ)
    return fail("faKernelLaunchVarlen: the sequences, the packed totals and "
                "the longest sequence's queries (at most the total) must be "
                "positive, got " +
                std::to_string(sequences) + ", " + std::to_string(totalQ) +
                ", " + std::to_string(totalK) + ", " +
                std::to_string(maxSeqlenQ));
  KVCache cache;
  cache.entries = 1;
  cache.rows = totalK;
  cache.cuQ = cuSeqlensQ;
  cache.cuK = cuSeqlensK;
  cache.qRows = totalQ;
  return launchKernel(k, q, qStrides, kp, kStrides, v, vStrides, o, oStrides,
                      lse, sequences, qHeads, kvHeads, maxSeqlenQ, cache,
                      scale, /*kvSplits=*/-1, stream);
}

int faKernelLaunchKVCache(FaKernel *k, const void *q,
                          const FaStrides *qStrides, const void *kCache,
                          const FaStrides *kStrides, const void *vCache,
                          const FaStrides *vStrides, void *o,
                          const FaStrides *oStrides, float *lse, int batch,
                          int qHeads, int kvHeads, int qLen,
                          long long cacheEntries, int cacheRows,
                          const int *kvLengths, const int *blockTable,
                          int maxPages, float scale, int kvSplits,
                          void *stream) {
  if (!k)
    return fail("faKernelLaunchKVCache: kernel must not be null");
  const Metadata &m = k->meta;
  if (m.varlen)
    return fail("faKernelLaunchKVCache: " + m.kernel +
                " runs a varlen batch, not a KV cache");
  if (!m.kvLengths && !m.pageSize)
    return fail("faKernelLaunchKVCache: " + m.kernel +
                " reads no KV cache (compile one with --kv-lengths or "
                "--page-size); launch it with faKernelLaunchStrided");
  if (m.kvLengths != (kvLengths != nullptr))
    return fail(std::string("faKernelLaunchKVCache: ") + m.kernel +
                (m.kvLengths ? " takes kv_lengths [B] (int32): give them"
                             : " takes no kv_lengths: pass NULL"));
  if ((m.pageSize != 0) != (blockTable != nullptr))
    return fail(std::string("faKernelLaunchKVCache: ") + m.kernel +
                (m.pageSize
                     ? " reads a paged cache: give its block table [B, "
                       "max_pages] (int32)"
                     : " reads a contiguous cache: pass a NULL block table"));
  for (const void *p : {(const void *)kvLengths, (const void *)blockTable})
    if (p && reinterpret_cast<uintptr_t>(p) % 4 != 0)
      return fail("faKernelLaunchKVCache: kv_lengths and the block table "
                  "must be 4-byte aligned int32 arrays");
  if (cacheEntries <= 0 || cacheEntries > (1LL << 31) || cacheRows <= 0)
    return fail("faKernelLaunchKVCache: the cache's entries (" +
                std::to_string(cacheEntries) + ") and rows (" +
                std::to_string(cacheRows) + ") must be positive");
  if (m.pageSize) {
    if (cacheRows != m.pageSize)
      return fail("faKernelLaunchKVCache: " + m.kernel +
                  " reads pages of " + std::to_string(m.pageSize) +
                  " rows, got a cache of " + std::to_string(cacheRows) +
                  "-row pages");
    if (maxPages <= 0 || (long long)maxPages * cacheRows > 0x7fffffffLL)
      return fail("faKernelLaunchKVCache: max_pages must be in [1, " +
                  std::to_string(0x7fffffffLL / cacheRows) + "], got " +
                  std::to_string(maxPages));
  } else {
    if (cacheEntries != batch)
      return fail("faKernelLaunchKVCache: a contiguous cache has one entry "
                  "per sequence (" +
                  std::to_string(batch) + "), got " +
                  std::to_string(cacheEntries));
    maxPages = 0;
  }
  KVCache cache;
  cache.entries = cacheEntries;
  cache.rows = cacheRows;
  cache.lengths = kvLengths;
  cache.table = blockTable;
  cache.maxPages = maxPages;
  return launchKernel(k, q, qStrides, kCache, kStrides, vCache, vStrides, o,
                      oStrides, lse, batch, qHeads, kvHeads, qLen, cache,
                      scale, kvSplits, stream);
}

void faKernelDestroy(FaKernel *k) {
  if (!k)
    return;
  if (driverLoaded) {
    for (auto &entry : k->counters)
      driver.cuMemFree(entry.second);
    for (auto &entry : k->splitScratch) {
      if (entry.second.partials)
        driver.cuMemFree(entry.second.partials);
      if (entry.second.arrivals)
        driver.cuMemFree(entry.second.arrivals);
    }
    for (auto &entry : k->valueWorkspace)
      if (entry.second.ptr)
        driver.cuMemFree(entry.second.ptr);
    if (k->module)
      driver.cuModuleUnload(k->module);
  }
  delete k;
}

int faDeviceAlloc(size_t bytes, void **ptr) {
  if (!ptr)
    return fail("faDeviceAlloc: ptr must not be null");
  if (loadDriver())
    return 1;
  CUdeviceptr p = 0;
  if (check(driver.cuMemAlloc(&p, bytes), "cuMemAlloc"))
    return 1;
  *ptr = reinterpret_cast<void *>(p);
  return 0;
}

int faDeviceFree(void *ptr) {
  if (!ptr)
    return 0; // as free(NULL)
  if (loadDriver())
    return 1;
  return check(driver.cuMemFree(reinterpret_cast<CUdeviceptr>(ptr)),
               "cuMemFree");
}

int faCopyToDevice(void *dst, const void *src, size_t bytes) {
  if (bytes && (!dst || !src))
    return fail("faCopyToDevice: dst and src must not be null");
  if (loadDriver())
    return 1;
  return check(
      driver.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(dst), src, bytes),
      "cuMemcpyHtoD");
}

int faCopyToHost(void *dst, const void *src, size_t bytes) {
  if (bytes && (!dst || !src))
    return fail("faCopyToHost: dst and src must not be null");
  if (loadDriver())
    return 1;
  return check(
      driver.cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), bytes),
      "cuMemcpyDtoH");
}

int faDeviceSynchronize(void) {
  if (loadDriver())
    return 1;
  return check(driver.cuCtxSynchronize(), "cuCtxSynchronize");
}

} // extern "C"

namespace {
/// What the traffic rule needs of a kernel, from its metadata (parsed and
/// validated); `where` names the caller in messages.
int trafficKernelOf(const Metadata &m, const char *where,
                    mlir::fagpu::TrafficKernel &kernel) {
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
  if (JsonScanner(text).parse(m) || validate(m))
    return 1;
  mlir::fagpu::TrafficKernel kernel;
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
  if (std::optional<std::string> why = mlir::fagpu::checkTrafficShape(
          kernel, {batch, queryHeads, kvHeads, queryLen, keyLen}))
    return fail("faMetadataPredictedBytes: " + *why);
  mlir::fagpu::Traffic traffic = mlir::fagpu::kernelTraffic(
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
  if (JsonScanner(text).parse(m) || validate(m))
    return 1;
  mlir::fagpu::TrafficKernel kernel;
  if (trafficKernelOf(m, where, kernel) ||
      checkHeads(where, queryHeads, kvHeads))
    return 1;
  if (sequences < 1 || sequences > 0x7fffffffL)
    return fail("faMetadataPredictedSequenceBytes: the sequences must be in "
                "[1, 2^31 - 1]");
  std::vector<mlir::fagpu::SequenceLengths> lengths(sequences);
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
  if (std::optional<std::string> why = mlir::fagpu::checkSequencesTraffic(
          kernel, queryHeads, kvHeads, lengths.data(), sequences))
    return fail("faMetadataPredictedSequenceBytes: " + *why);
  mlir::fagpu::Traffic traffic = mlir::fagpu::sequencesTraffic(
      kernel, queryHeads, kvHeads, lengths.data(), sequences);
  *readBytes = static_cast<unsigned long long>(traffic.reads());
  *writeBytes = static_cast<unsigned long long>(traffic.writes());
  return 0;
}
