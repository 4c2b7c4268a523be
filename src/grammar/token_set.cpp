#include "grammar/token_set.h"

#include <bit>
#include <cstring>

namespace deepinfer::grammar {
namespace {

// Bits set in x, without the library call std::popcount becomes where the target lacks popcnt.
inline uint32_t bits_set(uint32_t x) {
  x = x - ((x >> 1) & 0x55555555u);
  x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
  return (((x + (x >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24;
}

}  // namespace

TokenSet TokenSet::from_mask(const uint32_t* words, size_t num_words) {
  // A list while the members number less than 1/kListFraction of the bits: stop counting there.
  const size_t list_limit = num_words * 32 / kListFraction;
  size_t count = 0;
  for (size_t w = 0; w < num_words && count < list_limit; ++w) {
    if (words[w] != 0) count += bits_set(words[w]);  // most words of a sparse mask are empty
  }
  TokenSet s;
  if (count < list_limit) {
    s.ids_.reserve(count);
    for (size_t w = 0; w < num_words; ++w) {
      for (uint32_t bits = words[w]; bits != 0; bits &= bits - 1) {
        s.ids_.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(std::countr_zero(bits))));
      }
    }
  } else {
    s.bits_.assign(words, words + num_words);
  }
  return s;
}

TokenSet TokenSet::from_ids(std::vector<int32_t> ids, size_t num_words) {
  TokenSet s;
  if (list_form(ids.size(), num_words)) {
    s.ids_ = std::move(ids);
    s.ids_.shrink_to_fit();
  } else {
    s.bits_.assign(num_words, 0);
    for (int32_t id : ids) s.bits_[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
  }
  return s;
}

TokenSet TokenSet::from_dense_mask(std::vector<uint32_t> words) {
  TokenSet s;
  s.bits_ = std::move(words);
  return s;
}

void TokenSet::append_to(std::vector<int32_t>& ids) const {
  ids.insert(ids.end(), ids_.begin(), ids_.end());
  for (size_t w = 0; w < bits_.size(); ++w) {
    for (uint32_t bits = bits_[w]; bits != 0; bits &= bits - 1) {
      ids.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(std::countr_zero(bits))));
    }
  }
}

void TokenSet::or_into(uint32_t* words) const {
  for (int32_t id : ids_) words[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
  for (size_t w = 0; w < bits_.size(); ++w) words[w] |= bits_[w];
}

void TokenSet::copy_into(uint32_t* words, size_t num_words) const {
  if (!bits_.empty()) {
    std::memcpy(words, bits_.data(), num_words * sizeof(uint32_t));
    return;
  }
  std::memset(words, 0, num_words * sizeof(uint32_t));
  or_into(words);
}

}  // namespace deepinfer::grammar
