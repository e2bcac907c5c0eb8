//===- UpstreamParserGuard.h - inputs that crash MLIR 22.1.8's parser -*- C++ -*-===//
//
// Debian's MLIR 22.1.8 crashes (mlir-opt too) when the integer list after
// `permutation =` or `dimensions =` of linalg.transpose / broadcast / reduce
// does not parse: the custom parser reports "expected integer value" and
// then stores a null attribute that is dereferenced later. That is
// upstream's bug (found by tools/fa-fuzz; reproducer
// test/Fuzz/upstream-linalg-transpose-crash.mlir). flash-mlir's tools refuse
// such inputs with a diagnostic instead of crashing; drop this guard once the
// MLIR they build against is fixed.
//
//===----------------------------------------------------------------------===//

#ifndef FA_SUPPORT_UPSTREAMPARSERGUARD_H
#define FA_SUPPORT_UPSTREAMPARSERGUARD_H

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstddef>

namespace mlir::fa {

/// Offset of the first `permutation =` / `dimensions =` whose value is not
/// a plain `[integers]` list, or npos: the inputs the upstream parser
/// crashes on (a superset: anything not a well-formed list is refused).
inline size_t findUpstreamLinalgParserCrash(llvm::StringRef text) {
  for (llvm::StringRef key : {"permutation", "dimensions"}) {
    size_t pos = 0;
    while ((pos = text.find(key, pos)) != llvm::StringRef::npos) {
      size_t start = pos;
      pos += key.size();
      // Only the keyword itself: not part of a longer name, an SSA value
      // (%dimensions), an alias (#permutation) or a string ("...").
      if (start > 0) {
        char before = text[start - 1];
        if (llvm::isAlnum(before) || before == '_' || before == '%' ||
            before == '#' || before == '"' || before == '$' || before == '.')
          continue;
      }
      if (pos < text.size() &&
          (llvm::isAlnum(text[pos]) || text[pos] == '_'))
        continue;
      // Comments and string literals are not parsed as attributes: skip
      // when the keyword is inside a string or after a `//` that is not
      // itself inside one (scanned from the line's start, escapes
      // honoured: a string may hold "//").
      size_t lineStart = text.take_front(start).rfind('\n');
      lineStart = lineStart == llvm::StringRef::npos ? 0 : lineStart + 1;
      bool inString = false, inComment = false;
      for (size_t i = lineStart; i < start && !inComment; ++i) {
        char c = text[i];
        if (inString && c == '\\')
          ++i;
        else if (c == '"')
          inString = !inString;
        else if (!inString && c == '/' && i + 1 < start && text[i + 1] == '/')
          inComment = true;
      }
      if (inString || inComment)
        continue;
      llvm::StringRef rest = text.drop_front(pos).ltrim();
      if (!rest.consume_front("="))
        continue;
      // An entry of an attribute dictionary (`{` or `,` before it: the
      // generic form's `<{permutation = array<i64: ...>}>`) goes through the
      // attribute parser, which reports errors properly. After an operand
      // list it is the ops' custom syntax, whose parser crashes on anything
      // but a `[` list -- even a well-formed `array<i64: ...>`.
      llvm::StringRef before = text.take_front(start).rtrim();
      if (before.ends_with("{") || before.ends_with(","))
        continue;
      rest = rest.ltrim();
      if (!rest.consume_front("["))
        return start;
      size_t close = rest.find(']');
      if (close == llvm::StringRef::npos ||
          rest.take_front(close).find_first_not_of("0123456789, \r\n\t") !=
              llvm::StringRef::npos)
        return start;
    }
  }
  return llvm::StringRef::npos;
}

} // namespace mlir::fa

#endif // FA_SUPPORT_UPSTREAMPARSERGUARD_H
