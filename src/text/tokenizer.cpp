#include "text/tokenizer.h"

#include "text/added_vocabulary.h"
#include "text/bpe_model.h"
#include "text/byte_level.h"
#include "text/normalizer.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer_limits.h"
#include "text/utf8.h"
#include "util/file_reading.h"
#include "util/json_excerpt.h"

#include <nlohmann/json.hpp>

#include <unordered_set>

namespace deepinfer::text {

struct Tokenizer::Impl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedVocabulary added;
  std::unordered_map<std::string, TokenId> added_ids;  // content → id
  // Per id (index = id): token string, decoded bytes, flags.
  std::vector<std::string> token_strings;
  std::vector<std::string> token_bytes;
  std::vector<uint8_t> flags;
  std::optional<TokenId> bos, eos;

  static constexpr uint8_t kPresent = 1, kSpecial = 2;

  Result<void> encode_normalized(std::string_view text, std::vector<TokenId>& ids) const {
    return pre_tokenizer.split(text, [&](std::string_view piece) -> Result<void> {
      model.encode(piece, ids);
      return ok();
    });
  }

  template <class F>
  Result<void> normalized(std::string_view text, F&& then) const {
    if (normalizer.is_identity()) return then(text);
    DI_TRY(n, normalizer.apply(text));
    return then(std::string_view(n));
  }
};

namespace {

Result<void> check_decoder(const nlohmann::json& d, std::size_t depth) {
  if (depth > kMaxSequenceDepth) {
    return make_error(Code::kModelFormat, "decoder: Sequences nested more than {} deep", kMaxSequenceDepth);
  }
  if (d.is_null()) return make_error(Code::kUnsupported, "decoder: none given; byte-level BPE needs ByteLevel");
  if (!d.is_object() || !d.contains("type") || !d["type"].is_string()) {
    return make_error(Code::kModelFormat, "decoder: expected an object with a \"type\"");
  }
  const std::string type = d["type"];
  if (type == "ByteLevel") return ok();
  if (type == "Sequence" && d.contains("decoders") && d["decoders"].is_array() && d["decoders"].size() == 1) {
    return check_decoder(d["decoders"][0], depth + 1);
  }
  return make_error(Code::kUnsupported, "decoder type \"{}\" is not supported (ByteLevel)", text_excerpt(type));
}

// A token named in tokenizer_config.json: a string, or an object with "content".
std::optional<std::string> config_token(const nlohmann::json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

Result<Tokenizer> Tokenizer::from_file(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path file = std::filesystem::is_directory(path, ec) ? path / "tokenizer.json" : path;
  DI_TRY(json, read_whole_file(file, FileLimits{kMaxTokenizerFileBytes}));
  const std::filesystem::path config_path = file.parent_path() / "tokenizer_config.json";
  std::string config;
  if (entry_exists(config_path)) {
    DI_TRY(c, read_whole_file(config_path, FileLimits{kMaxTokenizerConfigBytes}));
    config = std::move(c);
  }
  auto tok = from_json(json, config);
  if (!tok) return make_error(tok.error().code, "{}: {}", file.string(), tok.error().message);
  return tok;
}

Result<std::optional<Tokenizer>> Tokenizer::from_model_dir(const std::filesystem::path& dir) {
  if (!entry_exists(dir / "tokenizer.json")) return std::optional<Tokenizer>();
  DI_TRY(tok, from_file(dir / "tokenizer.json"));
  return std::optional<Tokenizer>(std::move(tok));
}

Result<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json) {
  nlohmann::json j, config;
  try {
    j = nlohmann::json::parse(tokenizer_json);
    if (!config_json.empty()) config = nlohmann::json::parse(config_json);
  } catch (const nlohmann::json::exception& e) {
    return make_error(Code::kModelFormat, "not valid JSON: {}", text_excerpt(e.what(), 200));
  }
  if (!j.is_object()) return make_error(Code::kModelFormat, "tokenizer.json is not a JSON object");
  if (j.contains("version") && j["version"] != "1.0") {
    return make_error(Code::kUnsupported, "tokenizer.json version {} is not supported (1.0)",
                      json_excerpt(j["version"]));
  }
  for (const char* key : {"truncation", "padding"}) {
    if (j.contains(key) && !j[key].is_null()) {
      return make_error(Code::kUnsupported, "tokenizer.json sets \"{}\", which is not supported", key);
    }
  }
  if (!j.contains("model")) return make_error(Code::kModelFormat, "tokenizer.json has no \"model\"");
  const nlohmann::json null;
  auto part = [&](const char* key) -> const nlohmann::json& { return j.contains(key) ? j[key] : null; };

  auto impl = std::make_shared<Impl>();
  DI_TRY(normalizer, Normalizer::from_json(part("normalizer")));
  impl->normalizer = std::move(normalizer);
  DI_TRY(pre_tokenizer, PreTokenizer::from_json(part("pre_tokenizer")));
  impl->pre_tokenizer = std::move(pre_tokenizer);
  DI_TRY(model, BpeModel::from_json(j["model"]));
  impl->model = std::move(model);
  DI_TRYV(check_decoder(part("decoder"), 0));
  DI_TRY(added, AddedVocabulary::from_json(part("added_tokens"), impl->normalizer, impl->model.vocab()));
  impl->added = std::move(added);

  TokenId size = 0;
  for (const auto& [token, id] : impl->model.vocab()) size = std::max(size, id + 1);
  for (const AddedToken& t : impl->added.tokens()) size = std::max(size, t.id + 1);
  impl->token_strings.resize(size);
  impl->flags.assign(size, 0);
  for (const auto& [token, id] : impl->model.vocab()) {
    impl->token_strings[id] = token;
    impl->flags[id] |= Impl::kPresent;
  }
  std::unordered_set<std::string> special;
  for (const AddedToken& t : impl->added.tokens()) {
    impl->token_strings[t.id] = t.content;
    impl->flags[t.id] |= Impl::kPresent;
    impl->added_ids.emplace(t.content, t.id);
    if (t.special) special.insert(t.content);
  }
  impl->token_bytes.resize(size);
  for (TokenId id = 0; id < size; ++id) {
    if (!(impl->flags[id] & Impl::kPresent)) continue;
    impl->token_bytes[id] = token_to_bytes(impl->token_strings[id]);
    if (special.count(impl->token_strings[id])) impl->flags[id] |= Impl::kSpecial;
  }

  Tokenizer tok(impl);
  // BOS / EOS as tokenizer_config.json names them, else by DeepSeek's names.
  const auto bos = config_token(config, "bos_token");
  const auto eos = config_token(config, "eos_token");
  impl->bos = tok.token_to_id(bos.value_or("<｜begin▁of▁sentence｜>"));
  impl->eos = tok.token_to_id(eos.value_or("<｜end▁of▁sentence｜>"));
  return tok;
}

Result<std::vector<TokenId>> Tokenizer::encode(std::string_view text, EncodeMode mode) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  DI_TRYV(encode_append(text, mode, ids));
  return ids;
}

Result<void> Tokenizer::encode_append(std::string_view text, EncodeMode mode, std::vector<TokenId>& ids) const {
  if (const std::size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    return make_error(Code::kInvalidArgument, "text is not valid UTF-8 (byte offset {})", bad);
  }
  const Impl& im = *impl_;
  auto plain = [&](std::string_view normalized) { return im.encode_normalized(normalized, ids); };
  if (mode == EncodeMode::kPlainText) return im.normalized(text, plain);
  // As HF: tokens with normalized=false are found in the raw text, the others in each normalized
  // run between them; what remains is pre-tokenized and merged.
  return im.added.split(text, false, [&](std::string_view raw, const AddedToken* token) -> Result<void> {
    if (token != nullptr) {
      ids.push_back(token->id);
      return ok();
    }
    return im.normalized(raw, [&](std::string_view normalized) {
      return im.added.split(normalized, true, [&](std::string_view run, const AddedToken* t) -> Result<void> {
        if (t != nullptr) {
          ids.push_back(t->id);
          return ok();
        }
        return plain(run);
      });
    });
  });
}

Result<std::string> Tokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  std::string bytes;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!has_token(ids[i])) return make_error(Code::kInvalidArgument, "unknown token id {} (position {})", ids[i], i);
    if (skip_special && is_special(ids[i])) continue;
    bytes += impl_->token_bytes[ids[i]];
  }
  std::string text;
  text.reserve(bytes.size());
  append_utf8_lossy(text, bytes);
  return text;
}

TokenId Tokenizer::vocab_size() const { return static_cast<TokenId>(impl_->flags.size()); }

bool Tokenizer::has_token(TokenId id) const {
  return id >= 0 && id < vocab_size() && (impl_->flags[id] & Impl::kPresent);
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  const std::string key(token);
  if (const auto it = impl_->added_ids.find(key); it != impl_->added_ids.end()) return it->second;
  if (const auto it = impl_->model.vocab().find(key); it != impl_->model.vocab().end()) return it->second;
  return std::nullopt;
}

std::optional<std::string_view> Tokenizer::id_to_token(TokenId id) const {
  if (!has_token(id)) return std::nullopt;
  return impl_->token_strings[id];
}

std::string_view Tokenizer::token_bytes(TokenId id) const {
  return has_token(id) ? std::string_view(impl_->token_bytes[id]) : std::string_view();
}

bool Tokenizer::is_special(TokenId id) const { return has_token(id) && (impl_->flags[id] & Impl::kSpecial); }

std::optional<TokenId> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<TokenId> Tokenizer::eos_id() const { return impl_->eos; }

}  // namespace deepinfer::text
