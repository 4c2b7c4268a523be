#include "util/json_excerpt.h"

#include <nlohmann/json.hpp>

#include <vector>

namespace deepinfer {
namespace {

using json = nlohmann::json;

// Length of the longest prefix of text[0, n) that does not end inside a UTF-8 character.
std::size_t utf8_floor(std::string_view text, std::size_t n) {
  if (n >= text.size()) return text.size();
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return n;
}

void append_string(std::string& out, std::string_view s, std::size_t max_chars) {
  const std::size_t keep = utf8_floor(s, max_chars);
  out += json(std::string(s.substr(0, keep))).dump(-1, ' ', false, json::error_handler_t::replace);
  if (keep < s.size()) out.insert(out.size() - 1, "...");
}

}  // namespace

std::string text_excerpt(std::string_view text, std::size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  std::string out(text.substr(0, utf8_floor(text, max_chars)));
  out += "...";
  return out;
}

std::string json_excerpt(const json& value, std::size_t max_chars) {
  struct Frame {
    const json* container;
    json::const_iterator next;
  };
  std::string out;
  std::vector<Frame> open;  // at most one frame per character written, so bounded by max_chars
  auto begin = [&](const json& v) {
    if (v.is_object() || v.is_array()) {
      out += v.is_object() ? '{' : '[';
      open.push_back({&v, v.cbegin()});
    } else if (v.is_string()) {
      append_string(out, v.get_ref<const std::string&>(), max_chars);
    } else {
      out += v.dump();  // a number, boolean or null: short, no nesting
    }
  };
  begin(value);
  while (!open.empty() && out.size() <= max_chars) {
    Frame& f = open.back();
    if (f.next == f.container->cend()) {
      out += f.container->is_object() ? '}' : ']';
      open.pop_back();
      continue;
    }
    if (f.next != f.container->cbegin()) out += ',';
    const bool is_object = f.container->is_object();
    if (is_object) {
      append_string(out, f.next.key(), max_chars);
      out += ':';
    }
    const json& child = *f.next;
    ++f.next;  // before begin(), which may grow `open` and move `f`
    begin(child);
  }
  if (out.size() > max_chars || !open.empty()) {
    out.resize(utf8_floor(out, max_chars));
    out += "...";
  }
  return out;
}

}  // namespace deepinfer
