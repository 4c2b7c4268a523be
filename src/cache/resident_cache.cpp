#include "cache/resident_cache.h"

#include <algorithm>

namespace deepinfer {

void ResidentCache::keep(uint64_t owner, int32_t seq, std::vector<int32_t> processed, uint64_t step) {
  Resident& r = residents_[owner];
  if (r.seq >= 0 && r.seq != seq) table_.close(r.seq);
  r = Resident{seq, std::move(processed), step};
}

std::optional<ResidentCache::Reuse> ResidentCache::take(uint64_t owner, std::span<const int32_t> context, bool may_reuse) {
  auto it = residents_.find(owner);
  if (it == residents_.end()) return std::nullopt;
  Resident r = std::move(it->second);
  residents_.erase(it);
  const bool prefix = r.processed.size() < context.size() && std::equal(r.processed.begin(), r.processed.end(), context.begin());
  if (prefix && may_reuse) return Reuse{r.seq, std::move(r.processed)};
  table_.close(r.seq);
  return std::nullopt;
}

void ResidentCache::release(uint64_t owner) {
  auto it = residents_.find(owner);
  if (it == residents_.end()) return;
  table_.close(it->second.seq);
  residents_.erase(it);
}

}  // namespace deepinfer
