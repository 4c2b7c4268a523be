#include "grammar/json_string_set.h"

#include "grammar/compile_budget.h"
#include "grammar/utf8.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

namespace deepinfer::grammar {
namespace {

Error too_large(size_t max_states) {
  return make_error(Code::kGrammar, "enum or const strings too large for one automaton (more than {} states)", max_states);
}

// The minimal acyclic automaton over code points of a sorted word list, built incrementally
// (Daciuk et al., 2000): after each word, the part of the previous word's path that no later word
// shares is replaced by equivalent registered states, so only the minimal automaton and one path
// are ever held.
class MinimalTrie {
 public:
  struct Node {
    std::vector<std::pair<uint32_t, uint32_t>> next;  // (code point, node), code points ascending
    bool final = false;
  };

  explicit MinimalTrie(size_t max_nodes) : max_nodes_(max_nodes) { nodes_.emplace_back(); }

  // Words must come sorted and unique.
  Result<void> add(const std::u32string& word) {
    // The common prefix with the previous word is a path of last children.
    uint32_t state = 0;
    size_t i = 0;
    while (i < word.size() && !nodes_[state].next.empty() && nodes_[state].next.back().first == word[i]) {
      state = nodes_[state].next.back().second;
      ++i;
    }
    minimize_below(state);
    for (; i < word.size(); ++i) {
      DI_TRY(fresh, new_node());
      nodes_[state].next.push_back({word[i], fresh});
      state = fresh;
    }
    nodes_[state].final = true;
    return CompileBudget::spend(word.size() + 1);
  }

  void finish() { minimize_below(0); }
  const Node& node(uint32_t id) const { return nodes_[id]; }

 private:
  // Registers (or replaces by an equivalent) every node on the path of last children below `top`,
  // deepest first.
  void minimize_below(uint32_t top) {
    std::vector<uint32_t> path{top};
    while (!nodes_[path.back()].next.empty()) path.push_back(nodes_[path.back()].next.back().second);
    for (size_t k = path.size() - 1; k > 0; --k) {
      uint32_t child = path[k], parent = path[k - 1];
      uint64_t h = signature(nodes_[child]);
      auto& bucket = register_[h];
      auto same = std::find_if(bucket.begin(), bucket.end(), [&](uint32_t r) {
        return nodes_[r].final == nodes_[child].final && nodes_[r].next == nodes_[child].next;
      });
      if (same != bucket.end()) {
        nodes_[parent].next.back().second = *same;
        nodes_[child] = Node{};
        free_.push_back(child);
      } else {
        bucket.push_back(child);
      }
    }
  }

  static uint64_t signature(const Node& n) {
    uint64_t h = n.final ? 0x9e3779b97f4a7c15ull : 0x632be59bd9b4e019ull;
    for (auto [cp, to] : n.next) h = (h ^ ((uint64_t{cp} << 32) | to)) * 0xff51afd7ed558ccdull + 0x2545f4914f6cdd1dull;
    return h;
  }

  Result<uint32_t> new_node() {
    if (!free_.empty()) {
      uint32_t id = free_.back();
      free_.pop_back();
      return id;
    }
    if (nodes_.size() >= max_nodes_) return too_large(max_nodes_);
    nodes_.emplace_back();
    return static_cast<uint32_t>(nodes_.size() - 1);
  }

  size_t max_nodes_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> free_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> register_;
};

// The spellings of one code point inside a JSON string, as symbols: a hex letter stands for both
// of its cases.
std::vector<std::string> spellings(uint32_t cp) {
  std::vector<std::string> out;
  if (cp >= 0x20 && cp != '"' && cp != '\\') {
    std::string raw;
    utf8_append(raw, cp);
    out.push_back(raw);
  }
  static constexpr std::pair<uint32_t, char> kShort[] = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {8, 'b'},
                                                         {9, 't'},   {10, 'n'},   {12, 'f'}, {13, 'r'}};
  for (auto [c, ch] : kShort) {
    if (cp == c) out.push_back(std::string("\\") + ch);
  }
  auto unit = [](uint32_t u) { return fmt::format("\\u{:04x}", u); };
  if (cp < 0x10000) {
    out.push_back(unit(cp));
  } else {
    uint32_t v = cp - 0x10000;
    out.push_back(unit(0xD800 + (v >> 10)) + unit(0xDC00 + (v & 0x3FF)));
  }
  return out;
}

bool is_escape_hex_letter(char c) { return c >= 'a' && c <= 'f'; }

}  // namespace

Result<Dfa> json_strings_dfa(std::vector<std::string> values, size_t max_states) {
  std::vector<std::u32string> words;
  words.reserve(values.size());
  for (const auto& v : values) {
    // Each code point of a value needs a state of its own: refuse long values before building.
    if (v.size() > max_states * 4) return too_large(max_states);
    std::u32string w;
    for (size_t i = 0; i < v.size();) {
      uint32_t cp = 0;
      size_t n = utf8_decode(std::string_view(v).substr(i), &cp);
      if (n == 0) return make_error(Code::kGrammar, "json schema: a string value is not valid UTF-8");
      w.push_back(cp);
      i += n;
    }
    if (w.size() + 2 > max_states) return too_large(max_states);
    words.push_back(std::move(w));
  }
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  MinimalTrie trie(max_states);
  for (const auto& w : words) {
    DI_TRYV(trie.add(w));
  }
  trie.finish();

  // Code point states in breadth-first order.
  std::vector<uint32_t> order{0};
  std::unordered_map<uint32_t, uint32_t> index{{0, 0}};
  for (size_t i = 0; i < order.size(); ++i) {
    for (auto [cp, to] : trie.node(order[i]).next) {
      if (index.emplace(to, static_cast<uint32_t>(order.size())).second) order.push_back(to);
    }
  }
  // Byte classes: each byte a spelling uses has its own class; the others share class 0 (dead).
  std::array<uint8_t, 256> cls{};
  uint32_t num_classes = 1;
  auto use = [&](uint8_t b) {
    if (!cls[b]) cls[b] = static_cast<uint8_t>(num_classes++);
  };
  use('"');
  for (uint32_t q : order) {
    for (auto [cp, to] : trie.node(q).next) {
      for (const auto& s : spellings(cp)) {
        for (char c : s) {
          use(static_cast<uint8_t>(c));
          if (is_escape_hex_letter(c)) use(static_cast<uint8_t>(c - 'a' + 'A'));
        }
      }
    }
  }
  // States: 0 dead, 1 before the opening quote, 2 after the closing quote, then one per code point
  // state, then the states inside spellings.
  std::vector<uint32_t> table;
  std::vector<uint8_t> accepting;
  auto add_state = [&](bool accept) -> Result<uint32_t> {
    if (accepting.size() >= max_states) return too_large(max_states);
    DI_TRYV(CompileBudget::spend(num_classes));
    accepting.push_back(accept ? 1 : 0);
    table.resize(table.size() + num_classes, 0);
    return static_cast<uint32_t>(accepting.size() - 1);
  };
  auto set = [&](uint32_t from, uint8_t byte, uint32_t to) { table[static_cast<size_t>(from) * num_classes + cls[byte]] = to; };
  for (size_t k = 0; k < 3 + order.size(); ++k) {
    DI_TRY(id, add_state(k == 2));
    (void)id;
  }
  const uint32_t first = 3;
  set(1, '"', first);
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& node = trie.node(order[i]);
    const uint32_t base = first + static_cast<uint32_t>(i);
    if (node.final) set(base, '"', 2);
    std::map<std::string, uint32_t> inner;  // spelled prefix -> state, below this code point state
    for (auto [cp, to] : node.next) {
      const uint32_t target = first + index.at(to);
      for (const auto& s : spellings(cp)) {
        uint32_t at = base;
        for (size_t j = 0; j < s.size(); ++j) {
          uint32_t next = target;
          if (j + 1 < s.size()) {
            auto [it, fresh] = inner.emplace(s.substr(0, j + 1), 0);
            if (fresh) {
              DI_TRY(id, add_state(false));
              it->second = id;
            }
            next = it->second;
          }
          auto b = static_cast<uint8_t>(s[j]);
          set(at, b, next);
          // The hex digits of \u escapes come in either case.
          if (j >= 2 && s[0] == '\\' && s[1] == 'u' && is_escape_hex_letter(s[j])) set(at, static_cast<uint8_t>(s[j] - 'a' + 'A'), next);
          at = next;
        }
      }
    }
  }
  std::array<uint8_t, 256> byte_class{};
  for (int b = 0; b < 256; ++b) byte_class[static_cast<size_t>(b)] = cls[static_cast<size_t>(b)];
  return Dfa::from_table(num_classes, byte_class, std::move(table), std::move(accepting), 1);
}

}  // namespace deepinfer::grammar
