#include "test_vocabularies.h"

#include "grammar/utf8.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>

namespace deepinfer::grammar::testing {
namespace {

// GPT-2's bytes_to_unicode(), inverted: code point -> byte.
std::map<uint32_t, uint8_t> unicode_to_bytes() {
  std::map<uint32_t, uint8_t> out;
  std::vector<int> printable;
  for (int b = '!'; b <= '~'; ++b) printable.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) printable.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) printable.push_back(b);
  std::vector<bool> is_printable(256, false);
  for (int b : printable) {
    is_printable[static_cast<size_t>(b)] = true;
    out[static_cast<uint32_t>(b)] = static_cast<uint8_t>(b);
  }
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    if (!is_printable[static_cast<size_t>(b)]) out[next++] = static_cast<uint8_t>(b);
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const TokenVocabulary>> load_hf_vocabulary(const std::string& path, size_t vocab_size) {
  std::ifstream in(path);
  if (!in) return make_error(Code::kNotFound, "cannot open {}", path);
  nlohmann::json tok;
  try {
    tok = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    return make_error(Code::kModelFormat, "{}: {}", path, e.what());
  }
  auto inverse = unicode_to_bytes();
  std::vector<std::string> bytes(vocab_size);
  for (const auto& [text, id_json] : tok["model"]["vocab"].items()) {
    size_t id = id_json.get<size_t>();
    if (id >= vocab_size) return make_error(Code::kModelFormat, "token id {} beyond vocabulary size {}", id, vocab_size);
    std::string out;
    bool ok = true;
    for (size_t i = 0; i < text.size();) {
      uint32_t cp = 0;
      size_t n = utf8_decode(std::string_view(text).substr(i), &cp);
      auto it = inverse.find(cp);
      if (n == 0 || it == inverse.end()) {
        ok = false;
        break;
      }
      out.push_back(static_cast<char>(it->second));
      i += n;
    }
    bytes[id] = ok ? out : std::string();
  }
  std::vector<int32_t> eos;
  for (const auto& added : tok["added_tokens"]) {
    size_t id = added["id"].get<size_t>();
    if (id >= vocab_size) return make_error(Code::kModelFormat, "added token id {} beyond vocabulary size {}", id, vocab_size);
    const auto& content = added["content"].get_ref<const std::string&>();
    bytes[id] = added["special"].get<bool>() ? std::string() : content;
    if (content == "<｜end▁of▁sentence｜>") eos.push_back(static_cast<int32_t>(id));
  }
  return TokenVocabulary::create(std::move(bytes), std::move(eos));
}

std::shared_ptr<const TokenVocabulary> deepseek_vocabulary() {
  static std::once_flag once;
  static std::shared_ptr<const TokenVocabulary> vocab;
  std::call_once(once, [] {
    auto v = load_hf_vocabulary(std::string(DI_GOLDEN_DIR) + "/tokenizer/tokenizer.json", 129280);
    if (!v) {
      fprintf(stderr, "%s\n", v.error().message.c_str());
      std::abort();
    }
    vocab = v.value();
  });
  return vocab;
}

std::shared_ptr<const TokenVocabulary> byte_vocabulary() {
  static std::once_flag once;
  static std::shared_ptr<const TokenVocabulary> vocab;
  std::call_once(once, [] {
    std::vector<std::string> bytes(257);
    for (int b = 0; b < 256; ++b) bytes[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
    vocab = TokenVocabulary::create(std::move(bytes), {256}).value();
  });
  return vocab;
}

}  // namespace deepinfer::grammar::testing
