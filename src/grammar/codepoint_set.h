// A set of Unicode scalar values stored as sorted, disjoint, non-adjacent inclusive ranges.
// Surrogates (U+D800..U+DFFF) are never members: they cannot be encoded in UTF-8.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::grammar {

struct CodepointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // inclusive
  bool operator==(const CodepointRange&) const = default;
};

class CodepointSet {
 public:
  static constexpr uint32_t kMaxCodepoint = 0x10FFFF;

  CodepointSet() = default;
  static CodepointSet single(uint32_t cp) { return range(cp, cp); }
  static CodepointSet range(uint32_t lo, uint32_t hi);
  static CodepointSet all();

  void add(uint32_t lo, uint32_t hi);
  void add(uint32_t cp) { add(cp, cp); }
  void add(const CodepointSet& other);

  CodepointSet complement() const;
  CodepointSet intersect(const CodepointSet& other) const;
  CodepointSet subtract(const CodepointSet& other) const;

  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  uint64_t size() const;
  const std::vector<CodepointRange>& ranges() const { return ranges_; }
  bool operator==(const CodepointSet&) const = default;

 private:
  std::vector<CodepointRange> ranges_;
};

}  // namespace deepinfer::grammar
