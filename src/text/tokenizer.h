// Tokenizer: byte-level BPE loaded from a Hugging Face tokenizer.json, encoding exactly as HF
// `tokenizers` does (Tokenizer.encode(text, add_special_tokens=False)).
//
// Supported tokenizer.json parts (anything else is a load error that names it): normalizer null /
// NFC / NFD / NFKC / NFKD / Sequence; pre_tokenizer Sequence / Split / Digits / ByteLevel (last);
// model BPE (unk_token, fuse_unk, ignore_merges; no dropout); decoder ByteLevel; added tokens with
// special / normalized / lstrip / rstrip / single_word. The post_processor is not applied: it only
// adds tokens when asked to add special tokens, which encode() never does (add BOS yourself).
//
// Invalid UTF-8 input is rejected (Code::kInvalidArgument naming the byte offset), never replaced:
// a prompt is not silently changed. Text on which a split pattern exceeds its work budget (which
// grows with the text's length; only a pathological pattern of the tokenizer.json runs out) is
// Code::kCapacity.
//
// Loading is bounded whatever the file holds (text/tokenizer_limits.h): ids, Sequence depth, steps,
// file size; only regular files are read. Decoding replaces ill-formed byte sequences produced by token
// boundaries with U+FFFD, as HF does.
//
// A Tokenizer is immutable after loading and cheap to copy (shared state); encode and decode may run
// concurrently from any number of threads.
#pragma once

#include "text/token_id.h"
#include "util/result.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::text {

enum class EncodeMode {
  // Added tokens written in the text (e.g. "<｜User｜>") become their ids, as in HF.
  kRecognizeAddedTokens,
  // All of the text is ordinary text: an added-token lookalike is spelled out in ordinary tokens,
  // never turned into a control token. Use this for anything a user wrote.
  kPlainText,
};

class Tokenizer {
 public:
  // `path`: a tokenizer.json, or a model directory holding one. A tokenizer_config.json beside it,
  // when present, names the BOS / EOS tokens.
  static Result<Tokenizer> from_file(const std::filesystem::path& path);
  // DIR/tokenizer.json; nullopt when the directory has no such entry. An entry that cannot be read
  // (a symlink loop, a FIFO, ...) is an error, not a missing tokenizer.
  static Result<std::optional<Tokenizer>> from_model_dir(const std::filesystem::path& dir);
  // `tokenizer_json`: the text of a tokenizer.json; `config_json`: that of tokenizer_config.json,
  // or empty.
  static Result<Tokenizer> from_json(std::string_view tokenizer_json, std::string_view config_json = {});

  Result<std::vector<TokenId>> encode(std::string_view text,
                                      EncodeMode mode = EncodeMode::kRecognizeAddedTokens) const;
  // Appends the encoding of `text` to `ids` (on error, `ids` may hold part of it).
  Result<void> encode_append(std::string_view text, EncodeMode mode, std::vector<TokenId>& ids) const;

  // UTF-8 text of `ids`; an id without a token is Code::kInvalidArgument. skip_special drops
  // special added tokens (BOS, EOS, ...).
  Result<std::string> decode(std::span<const TokenId> ids, bool skip_special = false) const;

  // Largest token id + 1, added tokens included. Ids below it may still lack a token (has_token).
  TokenId vocab_size() const;
  bool has_token(TokenId id) const;
  std::optional<TokenId> token_to_id(std::string_view token) const;
  // The token as tokenizer.json spells it (byte-level characters for vocabulary tokens).
  std::optional<std::string_view> id_to_token(TokenId id) const;
  // The exact bytes `id` decodes to (may be a partial UTF-8 character); empty for an id without a
  // token.
  std::string_view token_bytes(TokenId id) const;
  // A special added token (skipped by decode(..., skip_special=true)).
  bool is_special(TokenId id) const;

  std::optional<TokenId> bos_id() const;
  std::optional<TokenId> eos_id() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace deepinfer::text
