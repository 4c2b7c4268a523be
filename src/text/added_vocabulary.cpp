#include "text/added_vocabulary.h"

#include "text/unicode_category.h"
#include "text/utf8.h"
#include "util/json_excerpt.h"
#include "util/log.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace deepinfer::text {
namespace {

// Rust's char::is_whitespace (the Unicode White_Space property), which HF's \s uses here.
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The Rust regex crate's \w: Alphabetic, marks, decimal digits, connector punctuation, joiners.
bool is_word(char32_t c) {
  const std::string_view cat = general_category(c);
  if (cat[0] == 'L' || cat[0] == 'M' || cat == "Nd" || cat == "Nl" || cat == "Pc") return true;
  // Joiners, and the circled / squared letters that are Alphabetic though not letters.
  return c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
         (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
}

// The character that ends text[0, end).
char32_t last_char(std::string_view text, std::size_t end) {
  std::size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return next_code_point(text, i);
}

// Start of the run of spaces that ends at `end`.
std::size_t spaces_before(std::string_view text, std::size_t end) {
  while (end > 0) {
    std::size_t i = end - 1;
    while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
    std::size_t j = i;
    if (!is_space(next_code_point(text, j))) break;
    end = i;
  }
  return end;
}

// End of the run of spaces that starts at `start`.
std::size_t spaces_after(std::string_view text, std::size_t start) {
  while (start < text.size()) {
    std::size_t j = start;
    if (!is_space(next_code_point(text, j))) break;
    start = j;
  }
  return start;
}

Result<bool> flag(const nlohmann::json& t, const char* key, bool fallback) {
  if (!t.contains(key) || t[key].is_null()) return fallback;
  if (!t[key].is_boolean()) return make_error(Code::kModelFormat, "added_tokens: \"{}\" must be a boolean", key);
  return t[key].get<bool>();
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view key, int token) {
  int node = 0;
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    auto& children = nodes[node].children;
    auto it = std::find_if(children.begin(), children.end(), [c](const auto& p) { return p.first == c; });
    if (it == children.end()) {
      nodes.push_back(Node{});
      nodes[node].children.emplace_back(c, static_cast<int>(nodes.size() - 1));
      node = static_cast<int>(nodes.size() - 1);
    } else {
      node = it->second;
    }
  }
  nodes[node].token = token;
  first[static_cast<unsigned char>(key[0])] = true;
}

std::pair<int, std::size_t> AddedVocabulary::Trie::longest_at(std::string_view text, std::size_t pos) const {
  std::pair<int, std::size_t> best{-1, pos};
  int node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto& children = nodes[node].children;
    auto it = std::find_if(children.begin(), children.end(), [c](const auto& p) { return p.first == c; });
    if (it == children.end()) break;
    node = it->second;
    if (nodes[node].token >= 0) best = {nodes[node].token, i + 1};
  }
  return best;
}

Result<AddedVocabulary> AddedVocabulary::from_json(const nlohmann::json& spec, const Normalizer& normalizer,
                                                   const std::unordered_map<std::string, TokenId>& vocab) {
  AddedVocabulary av;
  if (spec.is_null()) return av;
  if (!spec.is_array()) return make_error(Code::kModelFormat, "tokenizer.json: \"added_tokens\" must be an array");
  std::unordered_map<std::string, std::size_t> index;  // content → position in tokens_
  TokenId max_added = -1;
  const auto vocab_len = static_cast<TokenId>(vocab.size());
  for (const auto& t : spec) {
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() || !t.contains("id") ||
        !t["id"].is_number_integer() || t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() > INT32_MAX) {
      return make_error(Code::kModelFormat, "added_tokens: each entry needs a string \"content\" and a valid \"id\"");
    }
    AddedToken tok;
    tok.content = t["content"].get<std::string>();
    DI_TRY(special, flag(t, "special", false));
    DI_TRY(single_word, flag(t, "single_word", false));
    DI_TRY(lstrip, flag(t, "lstrip", false));
    DI_TRY(rstrip, flag(t, "rstrip", false));
    DI_TRY(normalized, flag(t, "normalized", !special));
    tok.special = special;
    tok.single_word = single_word;
    tok.lstrip = lstrip;
    tok.rstrip = rstrip;
    tok.normalized = normalized;
    if (tok.content.empty()) continue;  // HF ignores empty tokens
    if (const auto it = index.find(tok.content); it != index.end()) {
      const AddedToken& first = av.tokens_[it->second];
      if (first.special == tok.special && first.single_word == tok.single_word && first.lstrip == tok.lstrip &&
          first.rstrip == tok.rstrip && first.normalized == tok.normalized) {
        continue;  // an exact repeat, which HF ignores too
      }
      return make_error(Code::kModelFormat, "added_tokens: \"{}\" appears twice with different flags",
                        text_excerpt(tok.content));
    }
    // The id is the one HF assigns when it loads the file, whatever "id" says: the model's id for a
    // token it already has, else the next one after the vocabulary and the added tokens so far.
    if (const auto it = vocab.find(tok.content); it != vocab.end()) {
      tok.id = it->second;
    } else {
      tok.id = max_added >= 0 && (max_added >= vocab_len || vocab_len == 0) ? max_added + 1 : vocab_len;
    }
    if (const auto given = t["id"].get<TokenId>(); given != tok.id) {
      log(LogLevel::kWarn, "tokenizer.json: added token \"{}\" says id {} but is loaded as {}, as HF tokenizers does",
          text_excerpt(tok.content), given, tok.id);
    }
    max_added = std::max(max_added, tok.id);
    index.emplace(tok.content, av.tokens_.size());
    av.tokens_.push_back(std::move(tok));
  }
  for (std::size_t i = 0; i < av.tokens_.size(); ++i) {
    const AddedToken& tok = av.tokens_[i];
    if (tok.normalized) {
      DI_TRY(key, normalizer.apply(tok.content));
      if (!key.empty()) av.normalized_.insert(key, static_cast<int>(i));
    } else {
      av.raw_.insert(tok.content, static_cast<int>(i));
    }
  }
  return av;
}

Result<void> AddedVocabulary::split(std::string_view text, bool normalized_set, SplitSink sink) const {
  const Trie& trie = normalized_set ? normalized_ : raw_;
  if (trie.empty()) return text.empty() ? ok() : sink(text, nullptr);
  std::size_t start_offset = 0;  // end of what has been reported
  std::size_t pos = 0;           // where the next match search starts
  while (pos < text.size()) {
    if (!trie.first[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [index, match_end] = trie.longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    std::size_t start = pos, stop = match_end;
    pos = match_end;  // matching goes on after the match even when the flags reject it
    const AddedToken& tok = tokens_[index];
    if (tok.single_word) {
      const bool start_space = start == 0 || !is_word(last_char(text, start));
      std::size_t j = stop;
      const bool stop_space = stop == text.size() || !is_word(next_code_point(text, j));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(spaces_before(text, start), start_offset);
    if (tok.rstrip) stop = spaces_after(text, stop);
    if (start_offset < start) {
      DI_TRYV(sink(text.substr(start_offset, start - start_offset), nullptr));
    }
    DI_TRYV(sink(text.substr(start, stop - start), &tok));
    start_offset = stop;
  }
  if (start_offset < text.size()) {
    DI_TRYV(sink(text.substr(start_offset), nullptr));
  }
  return ok();
}

}  // namespace deepinfer::text
