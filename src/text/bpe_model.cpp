#include "text/bpe_model.h"

#include "text/byte_level.h"
#include "text/tokenizer_limits.h"
#include "util/json_excerpt.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace deepinfer::text {
namespace {

Result<std::optional<std::string>> optional_string(const nlohmann::json& m, const char* key) {
  if (!m.contains(key) || m[key].is_null()) return std::optional<std::string>{};
  if (!m[key].is_string()) return make_error(Code::kModelFormat, "model: \"{}\" must be a string", key);
  return std::optional<std::string>{m[key].get<std::string>()};
}

Result<bool> optional_bool(const nlohmann::json& m, const char* key) {
  if (!m.contains(key) || m[key].is_null()) return false;
  if (!m[key].is_boolean()) return make_error(Code::kModelFormat, "model: \"{}\" must be a boolean", key);
  return m[key].get<bool>();
}

// A merge is "a b" (older files) or ["a", "b"].
Result<std::pair<std::string, std::string>> parse_merge(const nlohmann::json& m, std::size_t rank) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    const std::size_t sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
      return make_error(Code::kModelFormat, "model: merge {} (\"{}\") is not two tokens separated by a space", rank,
                        text_excerpt(s));
    }
    return std::pair{s.substr(0, sp), s.substr(sp + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return std::pair{m[0].get<std::string>(), m[1].get<std::string>()};
  }
  return make_error(Code::kModelFormat, "model: merge {} is neither \"a b\" nor [\"a\", \"b\"]", rank);
}

}  // namespace

void BpeModel::MergeTable::reserve(std::size_t n) {
  std::size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  keys_.assign(cap, kEmptyKey);
  values_.assign(cap, Merge{});
  mask_ = cap - 1;
}

void BpeModel::MergeTable::insert(TokenId left, TokenId right, Merge m) {
  const uint64_t k = key(left, right);
  for (std::size_t i = (k * 0x9E3779B97F4A7C15ull) >> 20 & mask_;; i = (i + 1) & mask_) {
    if (keys_[i] == kEmptyKey || keys_[i] == k) {
      keys_[i] = k;
      values_[i] = m;  // a repeated pair keeps its last rank, as HF's map collection does
      return;
    }
  }
}

const BpeModel::Merge* BpeModel::MergeTable::find(TokenId left, TokenId right) const {
  const uint64_t k = key(left, right);
  for (std::size_t i = (k * 0x9E3779B97F4A7C15ull) >> 20 & mask_;; i = (i + 1) & mask_) {
    if (keys_[i] == k) return &values_[i];
    if (keys_[i] == kEmptyKey) return nullptr;
  }
}

Result<BpeModel> BpeModel::from_json(const nlohmann::json& model) {
  if (!model.is_object()) return make_error(Code::kModelFormat, "tokenizer.json: \"model\" is missing or not an object");
  const std::string type = model.contains("type") && model["type"].is_string() ? model["type"].get<std::string>()
                           : model.contains("merges")                          ? "BPE"
                                                                               : "";
  if (type != "BPE") {
    return make_error(Code::kUnsupported, "model type \"{}\" is not supported (only BPE)", text_excerpt(type));
  }
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() != 0.0) {
    return make_error(Code::kUnsupported, "model: BPE dropout is not supported (it makes encoding random)");
  }
  DI_TRY(prefix, optional_string(model, "continuing_subword_prefix"));
  DI_TRY(suffix, optional_string(model, "end_of_word_suffix"));
  if ((prefix && !prefix->empty()) || (suffix && !suffix->empty())) {
    return make_error(Code::kUnsupported, "model: continuing_subword_prefix / end_of_word_suffix are not supported");
  }
  DI_TRY(unk, optional_string(model, "unk_token"));
  DI_TRY(fuse_unk, optional_bool(model, "fuse_unk"));
  DI_TRY(byte_fallback, optional_bool(model, "byte_fallback"));
  DI_TRY(ignore_merges, optional_bool(model, "ignore_merges"));
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return make_error(Code::kModelFormat, "model: \"vocab\" is missing or not an object");
  }
  if (!model.contains("merges") || !model["merges"].is_array()) {
    return make_error(Code::kModelFormat, "model: \"merges\" is missing or not an array");
  }

  BpeModel m;
  m.fuse_unk_ = fuse_unk;
  m.ignore_merges_ = ignore_merges;
  const std::size_t entries = model["vocab"].size();
  m.vocab_.reserve(entries);
  // Every id gets a slot of the tokenizer's id table: ids far beyond the number of entries would
  // make a small file cost gigabytes (and INT32_MAX overflowed the table's size).
  const int64_t id_limit = std::min<int64_t>(kMaxTokenIds, 2 * static_cast<int64_t>(entries) + kSpareTokenIds);
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      return make_error(Code::kModelFormat, "model: vocab entry \"{}\" has no valid id", text_excerpt(token));
    }
    if (id.get<int64_t>() >= id_limit) {
      return make_error(Code::kModelFormat,
                        "model: vocab entry \"{}\" has id {}, beyond the {} ids a vocabulary of {} entries may use",
                        text_excerpt(token), id.get<int64_t>(), id_limit, entries);
    }
    m.vocab_.emplace(token, id.get<TokenId>());
  }
  if (unk) {
    const auto it = m.vocab_.find(*unk);
    if (it == m.vocab_.end()) {
      return make_error(Code::kModelFormat, "model: unk_token \"{}\" is not in the vocab", text_excerpt(*unk));
    }
    m.unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = m.vocab_.find(bytes_to_token(std::string(1, static_cast<char>(b))));
    m.byte_ids_[b] = it == m.vocab_.end() ? -1 : it->second;
    if (it == m.vocab_.end() && byte_fallback) {
      return make_error(Code::kUnsupported, "model: byte_fallback with a vocab that lacks byte {:#04x}", b);
    }
  }
  if (ignore_merges) {
    for (const auto& [token, id] : m.vocab_) m.vocab_by_bytes_.emplace(token_to_bytes(token), id);
  }

  const auto& merges = model["merges"];
  m.merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    DI_TRY(pair, parse_merge(merges[rank], rank));
    const auto a = m.vocab_.find(pair.first);
    const auto b = m.vocab_.find(pair.second);
    const auto ab = m.vocab_.find(pair.first + pair.second);
    if (a == m.vocab_.end() || b == m.vocab_.end() || ab == m.vocab_.end()) {
      return make_error(Code::kModelFormat, "model: merge {} (\"{} {}\") uses a token that is not in the vocab", rank,
                        text_excerpt(pair.first), text_excerpt(pair.second));
    }
    m.merges_.insert(a->second, b->second, Merge{static_cast<uint32_t>(rank), ab->second});
  }
  return m;
}

void BpeModel::encode(std::string_view piece, std::vector<TokenId>& out) const {
  if (ignore_merges_) {
    const auto it = vocab_by_bytes_.find(std::string(piece));
    if (it != vocab_by_bytes_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  merge_word(piece, out);
}

void BpeModel::merge_word(std::string_view piece, std::vector<TokenId>& out) const {
  struct Symbol {
    TokenId id;
    int32_t prev, next;
    bool alive;
  };
  struct Candidate {
    uint32_t rank, pos;
    TokenId merged;
    // std::*_heap keep the largest on top: the largest is the lowest rank, then the lowest position.
    bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> queue;
  symbols.clear();
  queue.clear();

  // Initial symbols: one per byte; bytes the vocabulary lacks become unk (fused if asked) or vanish.
  auto push = [&](TokenId id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  bool pending_unk = false;
  for (const char c : piece) {
    const TokenId id = byte_ids_[static_cast<unsigned char>(c)];
    if (id >= 0) {
      if (pending_unk) push(unk_id_);
      pending_unk = false;
      push(id);
    } else if (unk_id_ >= 0) {
      if (pending_unk && !fuse_unk_) push(unk_id_);
      pending_unk = true;
    }
  }
  if (pending_unk) push(unk_id_);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Merge* m = merges_.find(symbols[i].id, symbols[i + 1].id)) {
      queue.push_back({m->rank, static_cast<uint32_t>(i), m->merged});
    }
  }
  std::make_heap(queue.begin(), queue.end());
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end());
    const Candidate top = queue.back();
    queue.pop_back();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    // Skip stale candidates: the pair at this position changed since it was queued.
    const Merge* current = merges_.find(left.id, right.id);
    if (current == nullptr || current->merged != top.merged) continue;

    left.id = top.merged;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = static_cast<int32_t>(top.pos);
    if (left.prev >= 0) {
      if (const Merge* m = merges_.find(symbols[left.prev].id, left.id)) {
        queue.push_back({m->rank, static_cast<uint32_t>(left.prev), m->merged});
        std::push_heap(queue.begin(), queue.end());
      }
    }
    if (left.next >= 0) {
      if (const Merge* m = merges_.find(left.id, symbols[left.next].id)) {
        queue.push_back({m->rank, top.pos, m->merged});
        std::push_heap(queue.begin(), queue.end());
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace deepinfer::text
