#include "grammar/codepoint_set.h"

#include <algorithm>

namespace deepinfer::grammar {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

}  // namespace

CodepointSet CodepointSet::range(uint32_t lo, uint32_t hi) {
  CodepointSet s;
  s.add(lo, hi);
  return s;
}

CodepointSet CodepointSet::all() { return range(0, kMaxCodepoint); }

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  hi = std::min(hi, kMaxCodepoint);
  if (lo > hi) return;
  // Split around the surrogate block so no member is a surrogate.
  if (lo <= kSurrogateHi && hi >= kSurrogateLo) {
    if (lo < kSurrogateLo) add(lo, kSurrogateLo - 1);
    if (hi > kSurrogateHi) add(kSurrogateHi + 1, hi);
    return;
  }
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), lo,
                             [](const CodepointRange& r, uint32_t v) { return r.hi + 1 < v; });
  CodepointRange merged{lo, hi};
  auto first = it;
  while (it != ranges_.end() && it->lo <= merged.hi + 1) {
    merged.lo = std::min(merged.lo, it->lo);
    merged.hi = std::max(merged.hi, it->hi);
    ++it;
  }
  it = ranges_.erase(first, it);
  ranges_.insert(it, merged);
}

void CodepointSet::add(const CodepointSet& other) {
  for (const auto& r : other.ranges_) add(r.lo, r.hi);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet out;
  uint32_t next = 0;
  for (const auto& r : ranges_) {
    if (r.lo > next) out.add(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.add(next, kMaxCodepoint);
  return out;
}

CodepointSet CodepointSet::intersect(const CodepointSet& other) const {
  CodepointSet out;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    uint32_t lo = std::max(ranges_[i].lo, other.ranges_[j].lo);
    uint32_t hi = std::min(ranges_[i].hi, other.ranges_[j].hi);
    if (lo <= hi) out.ranges_.push_back({lo, hi});
    if (ranges_[i].hi < other.ranges_[j].hi) ++i; else ++j;
  }
  return out;
}

CodepointSet CodepointSet::subtract(const CodepointSet& other) const {
  return intersect(other.complement());
}

bool CodepointSet::contains(uint32_t cp) const {
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), cp,
                             [](const CodepointRange& r, uint32_t v) { return r.hi < v; });
  return it != ranges_.end() && it->lo <= cp;
}

uint64_t CodepointSet::size() const {
  uint64_t n = 0;
  for (const auto& r : ranges_) n += r.hi - r.lo + 1;
  return n;
}

}  // namespace deepinfer::grammar
