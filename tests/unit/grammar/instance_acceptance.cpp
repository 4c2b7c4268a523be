#include "instance_acceptance.h"

#include <functional>
#include <string>
#include <vector>

namespace deepinfer::grammar::testing {
namespace {

using Json = nlohmann::ordered_json;
using Rest = std::function<bool()>;

class Search {
 public:
  Search(Matcher& m, Layout layout) : m_(m), pretty_(layout == Layout::kPretty) {}

  // Emits `text`, then runs `rest`; undoes the text afterwards (the text of a successful search
  // stays in written()).
  bool emit(const std::string& text, const Rest& rest) {
    if (!m_.advance_bytes(text)) return false;
    size_t mark = written_.size();
    written_ += text;
    bool ok = rest();
    if (!ok) written_.resize(mark);
    (void)m_.rollback(1);
    return ok;
  }
  const std::string& written() const { return written_; }

  std::string newline(int indent) const { return pretty_ ? "\n" + std::string(static_cast<size_t>(indent) * 2, ' ') : ""; }

  bool value(const Json& v, int indent, const Rest& rest) {
    if (v.is_object()) {
      if (v.empty()) return emit("{}", rest);
      std::vector<std::string> keys;
      for (const auto& [k, _] : v.items()) keys.push_back(k);
      std::vector<bool> used(keys.size(), false);
      return emit("{", [&] { return members(v, keys, used, keys.size(), indent, rest); });
    }
    if (v.is_array()) {
      if (v.empty()) return emit("[]", rest);
      return emit("[", [&] { return elements(v, 0, indent, rest); });
    }
    return emit(v.dump(), rest);
  }

  bool members(const Json& v, const std::vector<std::string>& keys, std::vector<bool>& used, size_t left, int indent,
               const Rest& rest) {
    if (left == 0) return emit(newline(indent) + "}", rest);
    std::string sep = (left == keys.size() ? "" : ",") + newline(indent + 1);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (used[i]) continue;
      used[i] = true;
      std::string head = sep + Json(keys[i]).dump() + (pretty_ ? ": " : ":");
      bool ok = emit(head, [&] { return value(v.at(keys[i]), indent + 1, [&] { return members(v, keys, used, left - 1, indent, rest); }); });
      used[i] = false;
      if (ok) return true;
    }
    return false;
  }

  bool elements(const Json& v, size_t i, int indent, const Rest& rest) {
    if (i == v.size()) return emit(newline(indent) + "]", rest);
    std::string sep = (i == 0 ? "" : ",") + newline(indent + 1);
    return emit(sep, [&] { return value(v[i], indent + 1, [&] { return elements(v, i + 1, indent, rest); }); });
  }

 private:
  Matcher& m_;
  bool pretty_;
  std::string written_;
};

}  // namespace

bool accepts_instance(Matcher& matcher, const Json& value, Layout layout) {
  Search s(matcher, layout);
  return s.value(value, 0, [&] { return matcher.can_end(); });
}

std::optional<std::string> accepted_text(Matcher& matcher, const Json& value, Layout layout) {
  Search s(matcher, layout);
  if (!s.value(value, 0, [&] { return matcher.can_end(); })) return std::nullopt;
  return s.written();
}

}  // namespace deepinfer::grammar::testing
