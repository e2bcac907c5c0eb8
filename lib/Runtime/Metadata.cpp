//===- Metadata.cpp - launch metadata, read and validated -------------------===//
//
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
//
//===----------------------------------------------------------------------===//

#include "RuntimeImpl.h"

#include "fa/Model/GridFormula.h"
#include "fa/Model/Positions.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace flashmlir::runtime {
namespace {

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
    // Pack-GQA beyond one query (fagpu's query_group): 0, or the query
    // heads packed a K/V head (a power of two up to 64, checked below).
    {"query_group", 0, 64},
    // Tiles of at most 8 real rows (fagpu's max_rows): 0 or 8, below.
    {"max_rows", 0, 8},
};

const IntField *intField(const std::string &key) {
  for (const IntField &f : kIntFields)
    if (key == f.name)
      return &f;
  return nullptr;
}

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
          key == "tile_scheduler" || key == "arch" || key == "out_dtype" ||
          key == "kv_dtype") {
        std::string v;
        if (readString(v))
          return fail("launch metadata: '" + key + "' must be a string");
        (key == "format"      ? m.format
         : key == "kernel"    ? m.kernel
         : key == "dtype"     ? m.dtype
         : key == "arch"      ? m.arch
         : key == "out_dtype" ? m.outDtype
         : key == "kv_dtype"  ? m.kvDtype
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
         : key == "query_group"     ? m.queryGroup
         : key == "max_rows"        ? m.maxRows
                                    : m.sharedBytes) = v;
        if (key == "tma_box_cols")
          m.hasTmaBoxCols = true;
      } else if (key == "causal" || key == "tile_grid" || key == "persistent" ||
                 key == "bottom_right" || key == "writes_lse" ||
                 key == "split_kv" || key == "kv_lengths" || key == "varlen") {
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
      } else if (key == "kv_append") {
        if (readKvAppend(m))
          return 1;
      } else if (key == "grid") {
        if (readGrid("'grid'", m.grid))
          return 1;
      } else if (key == "deterministic") {
        if (readBool(m.deterministic))
          return fail("launch metadata: 'deterministic' must be true or "
                      "false");
      } else if (key == "preprocess" || key == "convert") {
        if (readRowsKernel(key, key == "preprocess" ? m.preprocess : m.convert))
          return 1;
      } else if (skipValue(0)) {
        return fail("launch metadata: malformed value of '" + key + "'");
      }
      for (const char *required :
           {"arch", "causal", "grid", "bottom_right", "deterministic"})
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

  /// A launch grid, `what` in messages: {"x": ..., "y": ..., "z": ...},
  /// each an integer in [1, 2^31 - 1] (kept as its digits) or a formula
  /// (a string; validate() checks its grammar and names).
  int readGrid(const std::string &what, GridFormulas &grid) {
    if (!eat('{'))
      return fail("launch metadata: " + what + " must be an object");
    std::vector<std::string> seen;
    for (int more = beginMembers('}'); more == 0; more = nextMember('}')) {
      std::string key;
      if (readKey(key, seen))
        return 1;
      if (key != "x" && key != "y" && key != "z")
        return fail("launch metadata: " + what +
                    " has 'x', 'y' and 'z', "
                    "not '" +
                    key + "'");
      std::string &dim = grid[key[0] - 'x'];
      if (pos < s.size() && s[pos] == '"') {
        if (readString(dim) || dim.empty())
          return fail("launch metadata: " + what + "'s '" + key +
                      "' must be an integer or a formula");
        continue;
      }
      static constexpr IntField kDimension = {"grid", 1, 0x7fffffffLL};
      long value;
      if (readInt(kDimension, value))
        return 1;
      dim = std::to_string(value);
    }
    if (failed)
      return 1;
    for (int i = 0; i < 3; ++i)
      if (grid[i].empty())
        return fail("launch metadata: " + what + " has no '" +
                    std::string(1, char('x' + i)) + "'");
    return 0;
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
  /// 0 (no softcap) or a number in fa::checkSoftcap's [2^-64, 2^24].
  int readSoftcap(float &out) {
    std::string token;
    double value;
    if (!readNumber(token, value) ||
        !(value == 0 || (value >= 0x1p-64 && value <= 0x1p24)))
      return fail("launch metadata: 'softcap' must be 0 or a number in "
                  "[2^-64, 2^24], got '" +
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

  /// An auxiliary kernel's object (`what`: "value_layout" or "kv_append"):
  /// {"kernel": name, "block": [x, y, z], "params": [{"name": ...}, ...],
  /// "grid": ..., and the keys `other` reads (1 on an error, -1 for a key
  /// it does not know)}.
  template <typename OtherKeys>
  int readAuxiliary(const std::string &what, std::string &kernel,
                    std::vector<long> &block, std::vector<std::string> &params,
                    std::vector<std::string> &kinds, OtherKeys other) {
    const std::string quoted = "'" + what + "''s ";
    if (!eat('{'))
      return fail("launch metadata: '" + what + "' must be an object");
    std::vector<std::string> seen;
    for (int more = beginMembers('}'); more == 0; more = nextMember('}')) {
      std::string key;
      if (readKey(key, seen))
        return 1;
      if (key == "kernel") {
        if (readString(kernel))
          return fail("launch metadata: " + quoted + "kernel must be a string");
      } else if (key == "block") {
        if (readBlock(quoted + "block", block))
          return 1;
      } else if (key == "params") {
        Metadata auxiliary;
        if (readParams(auxiliary))
          return 1;
        params = auxiliary.params;
        kinds = auxiliary.paramKinds;
      } else if (int read = other(key); read >= 0) {
        if (read)
          return 1;
      } else if (skipValue(1)) {
        return fail("launch metadata: malformed '" + what + "'");
      }
    }
    return failed ? 1 : 0;
  }

  /// "value_layout": the e4m3 kernels' V layout kernel, with its
  /// "key_alignment" and "columns_per_thread".
  int readValueLayout(Metadata &m) {
    m.hasValueLayout = true;
    std::vector<std::string> kinds;
    return readAuxiliary("value_layout", m.valueLayoutKernel,
                         m.valueLayoutBlock, m.valueLayoutParams, kinds,
                         [&](const std::string &key) -> int {
                           // The two values each key takes: the layout kernels
                           // before and after it.
                           if (key == "grid")
                             return readGrid("'value_layout''s grid",
                                             m.valueLayoutGrid);
                           if (key == "key_alignment")
                             return readEither({"key_alignment", 16, 128},
                                               m.valueLayoutKeyAlign);
                           if (key == "columns_per_thread")
                             return readEither({"columns_per_thread", 1, 16},
                                               m.valueLayoutColumns);
                           return -1;
                         });
  }

  /// value_layout's integer `field`, which must be its min or its max.
  int readEither(const IntField &field, long &out) {
    if (readInt(field, out))
      return 1;
    if (out != field.min && out != field.max)
      return fail("launch metadata: 'value_layout''s '" +
                  std::string(field.name) + "' must be " +
                  std::to_string(field.min) + " or " +
                  std::to_string(field.max) + ", got " + std::to_string(out));
    return 0;
  }

  /// "kv_append": a KV cache's append kernel, with its
  /// "columns_per_thread" (validate() checks them together).
  int readKvAppend(Metadata &m) {
    m.hasKvAppend = true;
    std::vector<std::string> kinds;
    return readAuxiliary(
        "kv_append", m.kvAppendKernel, m.kvAppendBlock, m.kvAppendParams, kinds,
        [&](const std::string &key) -> int {
          if (key == "grid")
            return readGrid("'kv_append''s grid", m.kvAppendGrid);
          if (key != "columns_per_thread")
            return -1;
          static constexpr IntField kColumns = {"columns_per_thread", 1, 1024};
          return readInt(kColumns, m.kvAppendColumns) ? 1 : 0;
        });
  }

  /// A backward kernel's "preprocess" or "convert" object.
  int readRowsKernel(const std::string &what, Metadata::RowsKernel &rows) {
    rows.given = true;
    return readAuxiliary(what, rows.kernel, rows.block, rows.params,
                         rows.paramKinds, [&](const std::string &key) -> int {
                           if (key == "grid")
                             return readGrid("'" + what + "''s grid",
                                             rows.grid);
                           return -1;
                         });
  }

  const std::string &s;
  size_t pos = 0;
  // A malformed separator (nextMember) ends every loop at once.
  bool failed = false;
};

/// A grid the launchers evaluate: three formulas in the names they give
/// (kGridNames).
int checkGridFormulas(const std::string &what, const GridFormulas &grid,
                      bool backward = false) {
  // A backward launch gives its sizes and the kernel's tiles.
  static constexpr const char *kBackwardGridNames[] = {
      "B", "Hq", "Hkv", "Nq", "Nk", "D", "block_r", "block_c"};
  for (int i = 0; i < 3; ++i) {
    std::string error;
    if (grid[i].empty())
      return fail("launch metadata: no " + what);
    if (!mlir::fa::model::GridFormula::check(
            grid[i],
            [&](std::string_view name) {
              if (backward)
                return std::find(std::begin(kBackwardGridNames),
                                 std::end(kBackwardGridNames),
                                 name) != std::end(kBackwardGridNames);
              return std::find(std::begin(kGridNames), std::end(kGridNames),
                               name) != std::end(kGridNames);
            },
            error))
      return fail("launch metadata: " + what + ": " + error);
  }
  return 0;
}

/// `names` as "(a, b, c)".
std::string joinNames(const std::vector<std::string> &names) {
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : ", ") + name;
  return "(" + text + ")";
}

/// Whether `given` holds each of `expected` once, in any order (the
/// launchers bind by name), each of the kind `expected` gives it
/// (`givenKinds`: "kind", in the order of `given`); 1 with a message naming
/// `what` otherwise.
int checkParams(
    const std::string &what, const std::vector<std::string> &given,
    const std::vector<std::string> &givenKinds,
    const std::vector<std::pair<std::string, std::string>> &expected) {
  std::vector<std::string> have = given, want;
  for (const auto &entry : expected)
    want.push_back(entry.first);
  std::vector<std::string> wanted = want;
  std::sort(have.begin(), have.end());
  std::sort(want.begin(), want.end());
  if (have != want)
    return fail("launch metadata: " + what + "'s parameters " +
                joinNames(given) + " do not match this runtime's " +
                joinNames(wanted));
  for (size_t i = 0; i < given.size(); ++i)
    for (const auto &[name, kind] : expected)
      if (given[i] == name && givenKinds[i] != kind)
        return fail("launch metadata: " + what + "'s parameter '" + name +
                    "' must be a " + kind + ", got '" + givenKinds[i] + "'");
  return 0;
}

/// A launch block: three positive sizes of at most 1024 threads in all.
int checkBlock(const std::string &what, const std::vector<long> &block) {
  if (block.size() != 3 || block[0] <= 0 || block[1] <= 0 || block[2] <= 0)
    return fail("launch metadata: " + what +
                " must be three positive integers");
  if (block[0] * block[1] * block[2] > 1024)
    return fail("launch metadata: " + what +
                " must have at most 1024 threads (CUDA's limit per block), "
                "got " +
                std::to_string(block[0] * block[1] * block[2]));
  return 0;
}

/// A backward kernel's metadata (fa-compile --backward): the main kernel's
/// fields and parameters (fagpu::backwardParams), and its preprocess and
/// convert kernels' (backwardPreprocessParams, backwardConvertParams).
int validateBackward(const Metadata &m) {
  if (m.kernel.empty())
    return fail("launch metadata: no 'kernel' name");
  for (const char *required :
       {"arch", "grid", "causal", "bottom_right", "deterministic"})
    if (std::find(m.given.begin(), m.given.end(), required) == m.given.end())
      return fail(std::string("launch metadata: no '") + required + "'");
  if (m.dtype != "f16" && m.dtype != "bf16")
    return fail("launch metadata: a backward kernel's dtype must be f16 or "
                "bf16, got '" +
                m.dtype + "'");
  if (m.headDim != 64 && m.headDim != 128)
    return fail("launch metadata: a backward kernel's head_dim must be 64 or "
                "128, got " +
                std::to_string(m.headDim));
  // At most the 227 KiB of shared memory a Hopper CTA may use.
  if (m.blockC <= 0 || m.sharedBytes <= 0 || m.sharedBytes > 232448)
    return fail("launch metadata: 'block_c' must be given and positive, "
                "'shared_memory_bytes' in [1, 232448]");
  if (m.scale <= 0.0f)
    return fail("launch metadata: a backward kernel's 'scale' must be given "
                "and positive");
  if (checkBlock("'block'", m.block) ||
      checkGridFormulas("'grid'", m.grid, /*backward=*/true))
    return 1;
  if (m.hasValueLayout || m.hasKvAppend)
    return fail("launch metadata: a backward kernel has no 'value_layout' or "
                "'kv_append'");
  using Params = std::vector<std::pair<std::string, std::string>>;
  const std::string pointer = "pointer", i32 = "i32";
  Params expected = {
      {"q", pointer},        {"k", pointer},  {"v", pointer},
      {"lse", pointer},      {"do", pointer}, {"row_dots", pointer},
      {"dq_accum", pointer}, {"dk", pointer}, {"dv", pointer},
      {"Hq", i32},           {"Hkv", i32},    {"Nq", i32},
      {"Nk", i32},           {"scale", "f32"}};
  Params preprocess = {{"o", pointer},        {"do", pointer},
                       {"row_dots", pointer}, {"dq_accum", pointer},
                       {"Hq", i32},           {"Nq", i32}};
  if (m.deterministic) {
    expected.push_back({"dq_semaphores", pointer});
    preprocess.push_back({"dq_semaphores", pointer});
  }
  if (checkParams("the backward kernel", m.params, m.paramKinds, expected))
    return 1;
  const std::pair<const Metadata::RowsKernel *, Params> rows[] = {
      {&m.preprocess, preprocess},
      {&m.convert,
       {{"dq_accum", pointer}, {"dq", pointer}, {"Hq", i32}, {"Nq", i32}}}};
  for (const auto &[kernel, names] : rows) {
    std::string what = kernel == &m.preprocess ? "preprocess" : "convert";
    if (!kernel->given)
      return fail("launch metadata: no '" + what +
                  "' (a backward kernel launches its preprocess and dQ "
                  "conversion from the same cubin)");
    if (kernel->kernel.empty() || kernel->kernel == m.kernel)
      return fail("launch metadata: '" + what +
                  "' must name another kernel of the cubin");
    if (checkGridFormulas("'" + what + "''s grid", kernel->grid,
                          /*backward=*/true) ||
        checkBlock("'" + what + "''s block", kernel->block) ||
        checkParams("'" + what + "'", kernel->params, kernel->paramKinds,
                    names))
      return 1;
  }
  return 0;
}

int validate(const Metadata &m, bool backward) {
  if (backward) {
    if (!m.backward())
      return fail("launch metadata: format '" + m.format +
                  "' is not a backward kernel's (expected '" +
                  Metadata::kBackwardFormat + "')");
    return validateBackward(m);
  }
  if (m.backward())
    return fail("launch metadata: format '" + m.format +
                "' is a backward kernel's: faBackwardKernelLoad loads it");
  if (m.format != "flash-mlir-kernel-1")
    return fail("launch metadata: unknown format '" + m.format +
                "', expected 'flash-mlir-kernel-1'");
  if (m.preprocess.given || m.convert.given)
    return fail("launch metadata: 'preprocess' and 'convert' belong to a "
                "backward kernel's metadata");
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
  // fagpu's query_group rule (ScheduleValidation.cpp): 0, or a power of
  // two from 2 that divides block_r, on an e4m3-free, varlen-free kernel.
  if (m.queryGroup &&
      (m.queryGroup < 2 || (m.queryGroup & (m.queryGroup - 1)) ||
       (m.blockR > 0 && m.blockR % m.queryGroup) || fp8 || m.varlen))
    return fail("launch metadata: 'query_group' must be 0 or a power of two "
                "from 2 dividing 'block_r', on a 16-bit kernel without "
                "varlen batches, got " +
                std::to_string(m.queryGroup));
  // fagpu's max_rows rule (ScheduleValidation.cpp): 0, or 8 on a 16-bit
  // kernel without varlen batches.
  if ((m.maxRows != 0 && m.maxRows != 8) || (m.maxRows && (fp8 || m.varlen)))
    return fail("launch metadata: 'max_rows' must be 0, or 8 on a 16-bit "
                "kernel without varlen batches, got " +
                std::to_string(m.maxRows));
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
  // An e4m3 KV cache beside a 16-bit Q: K's and V's descales.
  if (!m.kvDtype.empty() && m.kvDtype != m.dtype) {
    if (m.kvDtype != "e4m3" || fp8 || m.varlen)
      return fail("launch metadata: 'kv_dtype' must be the dtype's, or e4m3 "
                  "beside a 16-bit dtype without varlen batches, got '" +
                  m.kvDtype + "'");
    for (const char *name : {"k_descale", "v_descale", "descale_layout"})
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
  // Attention sinks, score_mod / mask_mod captures (pointers launched from
  // Python), capture0 .. capture<n - 1>, and a mask_mod's key ranges.
  size_t captures = 0;
  for (size_t i = 0; i < m.params.size(); ++i) {
    bool pointer = m.paramKinds[i] == "pointer";
    if ((m.params[i] == "sinks" || m.params[i] == "key_ranges") && pointer)
      expected.push_back(m.params[i]);
    else if (m.params[i].rfind("capture", 0) == 0 && pointer)
      expected.push_back("capture" + std::to_string(captures++));
  }
  // The kernel's own order is the one the launch binds in (by name): the
  // runtime checks which parameters there are, not where.
  std::vector<std::string> given = m.params, wanted = expected;
  std::sort(given.begin(), given.end());
  std::sort(wanted.begin(), wanted.end());
  if (given != wanted) {
    auto join = [](const std::vector<std::string> &names) {
      std::string text;
      for (const std::string &name : names)
        text += (text.empty() ? "" : ", ") + name;
      return "(" + text + ")";
    };
    return fail("launch metadata: the parameter list " + join(m.params) +
                " does not match this runtime's " + join(expected) +
                " (in any order)");
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
    std::sort(maps.begin(), maps.end());
    std::sort(want.begin(), want.end());
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
  // A KV cache's append kernel: one thread a (sequence, new row, head, 8
  // columns), its parameters bound by name.
  if (m.hasKvAppend) {
    if (!m.kvLengths)
      return fail("launch metadata: 'kv_append' is for KV-cache kernels "
                  "(kv_lengths)");
    if (m.kvAppendKernel.empty())
      return fail("launch metadata: 'kv_append''s kernel must name a kernel");
    if (m.kvAppendBlock.size() != 3 || m.kvAppendBlock[1] != 1 ||
        m.kvAppendBlock[2] != 1)
      return fail("launch metadata: 'kv_append''s block must be [threads in "
                  "[1, 1024], 1, 1]");
    if (m.kvAppendColumns != kKVAppendColumns)
      return fail("launch metadata: 'kv_append''s columns_per_thread must "
                  "be " +
                  std::to_string(kKVAppendColumns) + ", got " +
                  std::to_string(m.kvAppendColumns));
    std::vector<std::string> names = m.kvAppendParams,
                             want = kvAppendParamNames(m.kvDtype == "e4m3" &&
                                                       m.dtype != "e4m3");
    std::sort(names.begin(), names.end());
    std::sort(want.begin(), want.end());
    if (names != want)
      return fail("launch metadata: 'kv_append''s parameters must be the "
                  "append kernel's, each once");
  }
  // The grids the launchers evaluate: formulas in names they give.
  const std::pair<const char *, const GridFormulas *> grids[] = {
      {"'grid'", &m.grid},
      {"'value_layout''s grid",
       m.valueLayoutKernel.empty() ? nullptr : &m.valueLayoutGrid},
      {"'kv_append''s grid", m.hasKvAppend ? &m.kvAppendGrid : nullptr}};
  for (const auto &[what, grid] : grids)
    if (grid && checkGridFormulas(what, *grid))
      return 1;
  return 0;
}

} // namespace

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

std::vector<std::string> kvAppendParamNames(bool e4m3Cache) {
  std::vector<std::string> names = {"k_new",      "v_new", "k_cache",
                                    "v_cache",    "seen",  "cache_seqlens",
                                    "block_table"};
  if (e4m3Cache)
    names.insert(names.end(), {"k_descale", "v_descale", "descale_layout"});
  names.insert(names.end(), {"B", "Nnew", "Hkv", "page_size", "max_pages",
                             "num_pages", "capacity"});
  for (const char *tensor : {"k_new", "v_new", "k_cache", "v_cache"})
    for (const char *dim : {"b", "n", "h"})
      names.push_back(std::string(tensor) + "_stride_" + dim);
  return names;
}

int parseMetadata(const std::string &text, Metadata &m, bool backward) {
  return JsonScanner(text).parse(m) || validate(m, backward);
}

} // namespace flashmlir::runtime

using namespace flashmlir::runtime;

extern "C" {

int faKernelMetadataCheck(const char *metadataJson) {
  if (!metadataJson)
    return fail("faKernelMetadataCheck: the metadata is null");
  Metadata meta;
  std::string text(metadataJson);
  return parseMetadata(text, meta);
}

} // extern "C"
