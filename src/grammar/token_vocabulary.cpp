#include "grammar/token_vocabulary.h"

#include <algorithm>

namespace deepinfer::grammar {

Result<std::shared_ptr<const TokenVocabulary>> TokenVocabulary::create(std::vector<std::string> token_bytes,
                                                                      std::vector<int32_t> eos_ids) {
  if (token_bytes.empty()) return make_error(Code::kInvalidArgument, "token vocabulary is empty");
  if (token_bytes.size() > static_cast<size_t>(INT32_MAX)) {
    return make_error(Code::kInvalidArgument, "token vocabulary too large ({} entries)", token_bytes.size());
  }
  for (int32_t id : eos_ids) {
    if (id < 0 || static_cast<size_t>(id) >= token_bytes.size()) {
      return make_error(Code::kInvalidArgument, "eos token id {} outside the vocabulary of {}", id, token_bytes.size());
    }
  }
  std::sort(eos_ids.begin(), eos_ids.end());
  eos_ids.erase(std::unique(eos_ids.begin(), eos_ids.end()), eos_ids.end());
  std::shared_ptr<TokenVocabulary> v(new TokenVocabulary());
  for (int32_t id : eos_ids) token_bytes[static_cast<size_t>(id)].clear();
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t x) { h = (h ^ x) * 1099511628211ull; };
  for (const auto& s : token_bytes) {
    mix(s.size());
    for (char c : s) mix(static_cast<uint8_t>(c));
  }
  for (int32_t id : eos_ids) mix(0x100000000ull | static_cast<uint32_t>(id));
  v->fingerprint_ = h;
  v->trie_ = TokenTrie(token_bytes);
  std::vector<std::string> part(token_bytes.size());
  for (size_t i = 0; i < token_bytes.size(); ++i) {
    if (token_bytes[i].size() <= kShortTokenBytes) part[i] = token_bytes[i];
  }
  v->short_trie_ = TokenTrie(part);
  for (size_t i = 0; i < token_bytes.size(); ++i) part[i] = token_bytes[i].size() > kShortTokenBytes ? token_bytes[i] : std::string();
  v->long_trie_ = TokenTrie(part);
  v->bytes_ = std::move(token_bytes);
  v->eos_ = std::move(eos_ids);
  return std::shared_ptr<const TokenVocabulary>(std::move(v));
}

bool TokenVocabulary::is_eos(int32_t id) const { return std::binary_search(eos_.begin(), eos_.end(), id); }

}  // namespace deepinfer::grammar
