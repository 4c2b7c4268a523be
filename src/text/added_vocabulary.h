// AddedVocabulary: the "added_tokens" of tokenizer.json and HF's rules for finding them in text:
// leftmost-longest matching, tokens with normalized=false looked for in the raw text and those
// with normalized=true in the normalized text, and the single_word / lstrip / rstrip adjustments.
#pragma once

#include "text/function_ref.h"
#include "text/normalizer.h"
#include "text/token_id.h"
#include "util/result.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace deepinfer::text {

struct AddedToken {
  std::string content;
  TokenId id = -1;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
};

class AddedVocabulary {
 public:
  // `spec` is the "added_tokens" array (null or absent: none); `vocab` is the model's vocabulary.
  // Ids are assigned as HF does (see the .cpp), not read from the file.
  static Result<AddedVocabulary> from_json(const nlohmann::json& spec, const Normalizer& normalizer,
                                           const std::unordered_map<std::string, TokenId>& vocab);

  const std::vector<AddedToken>& tokens() const { return tokens_; }

  // Cuts `text` into plain runs (token == nullptr) and added tokens, looking for the tokens whose
  // `normalized` flag equals `normalized_set`. Empty runs are not reported.
  using SplitSink = FunctionRef<Result<void>(std::string_view, const AddedToken*)>;
  Result<void> split(std::string_view text, bool normalized_set, SplitSink sink) const;

 private:
  // A byte trie of token contents for leftmost-longest search.
  struct Trie {
    struct Node {
      std::vector<std::pair<unsigned char, int>> children;
      int token = -1;  // index into tokens_
    };
    std::vector<Node> nodes{Node{}};
    std::array<bool, 256> first{};  // bytes that can start a match

    void insert(std::string_view key, int token);
    // The longest token starting at text[pos] as (token index, end), or token index -1.
    std::pair<int, std::size_t> longest_at(std::string_view text, std::size_t pos) const;
    bool empty() const { return nodes.size() == 1; }
  };

  std::vector<AddedToken> tokens_;
  Trie raw_;         // normalized == false
  Trie normalized_;  // normalized == true, keyed by normalized content
};

}  // namespace deepinfer::text
