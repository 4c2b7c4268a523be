#include "grammar/unicode_properties.h"

#include <utf8proc.h>

#include <array>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace deepinfer::grammar {
namespace {

// One set per utf8proc category (index = utf8proc_category_t), built once.
const std::array<CodepointSet, 30>& category_sets() {
  static const std::array<CodepointSet, 30> sets = [] {
    std::array<CodepointSet, 30> out;
    int current = -1;
    uint32_t run_start = 0;
    for (uint32_t cp = 0; cp <= CodepointSet::kMaxCodepoint + 1; ++cp) {
      int cat = cp <= CodepointSet::kMaxCodepoint ? static_cast<int>(utf8proc_category(static_cast<utf8proc_int32_t>(cp))) : -2;
      if (cat != current) {
        if (current >= 0 && current < 30) out[static_cast<size_t>(current)].add(run_start, cp - 1);
        current = cat;
        run_start = cp;
      }
    }
    return out;
  }();
  return sets;
}

// General_Category names and aliases (PropertyValueAliases.txt) -> utf8proc categories.
const std::map<std::string, std::vector<int>, std::less<>>& category_names() {
  static const std::map<std::string, std::vector<int>, std::less<>> names = [] {
    std::map<std::string, std::vector<int>, std::less<>> m;
    struct Entry {
      std::vector<std::string> names;
      std::vector<int> categories;
    };
    using C = utf8proc_category_t;
    const std::vector<Entry> entries = {
        {{"C", "Other"}, {C::UTF8PROC_CATEGORY_CN, C::UTF8PROC_CATEGORY_CC, C::UTF8PROC_CATEGORY_CF, C::UTF8PROC_CATEGORY_CS, C::UTF8PROC_CATEGORY_CO}},
        {{"Cc", "Control", "cntrl"}, {C::UTF8PROC_CATEGORY_CC}},
        {{"Cf", "Format"}, {C::UTF8PROC_CATEGORY_CF}},
        {{"Cn", "Unassigned"}, {C::UTF8PROC_CATEGORY_CN}},
        {{"Co", "Private_Use"}, {C::UTF8PROC_CATEGORY_CO}},
        {{"Cs", "Surrogate"}, {C::UTF8PROC_CATEGORY_CS}},
        {{"L", "Letter"}, {C::UTF8PROC_CATEGORY_LU, C::UTF8PROC_CATEGORY_LL, C::UTF8PROC_CATEGORY_LT, C::UTF8PROC_CATEGORY_LM, C::UTF8PROC_CATEGORY_LO}},
        {{"LC", "Cased_Letter"}, {C::UTF8PROC_CATEGORY_LU, C::UTF8PROC_CATEGORY_LL, C::UTF8PROC_CATEGORY_LT}},
        {{"Ll", "Lowercase_Letter"}, {C::UTF8PROC_CATEGORY_LL}},
        {{"Lm", "Modifier_Letter"}, {C::UTF8PROC_CATEGORY_LM}},
        {{"Lo", "Other_Letter"}, {C::UTF8PROC_CATEGORY_LO}},
        {{"Lt", "Titlecase_Letter"}, {C::UTF8PROC_CATEGORY_LT}},
        {{"Lu", "Uppercase_Letter"}, {C::UTF8PROC_CATEGORY_LU}},
        {{"M", "Mark", "Combining_Mark"}, {C::UTF8PROC_CATEGORY_MN, C::UTF8PROC_CATEGORY_MC, C::UTF8PROC_CATEGORY_ME}},
        {{"Mc", "Spacing_Mark"}, {C::UTF8PROC_CATEGORY_MC}},
        {{"Me", "Enclosing_Mark"}, {C::UTF8PROC_CATEGORY_ME}},
        {{"Mn", "Nonspacing_Mark"}, {C::UTF8PROC_CATEGORY_MN}},
        {{"N", "Number"}, {C::UTF8PROC_CATEGORY_ND, C::UTF8PROC_CATEGORY_NL, C::UTF8PROC_CATEGORY_NO}},
        {{"Nd", "Decimal_Number", "digit"}, {C::UTF8PROC_CATEGORY_ND}},
        {{"Nl", "Letter_Number"}, {C::UTF8PROC_CATEGORY_NL}},
        {{"No", "Other_Number"}, {C::UTF8PROC_CATEGORY_NO}},
        {{"P", "Punctuation", "punct"},
         {C::UTF8PROC_CATEGORY_PC, C::UTF8PROC_CATEGORY_PD, C::UTF8PROC_CATEGORY_PS, C::UTF8PROC_CATEGORY_PE, C::UTF8PROC_CATEGORY_PI,
          C::UTF8PROC_CATEGORY_PF, C::UTF8PROC_CATEGORY_PO}},
        {{"Pc", "Connector_Punctuation"}, {C::UTF8PROC_CATEGORY_PC}},
        {{"Pd", "Dash_Punctuation"}, {C::UTF8PROC_CATEGORY_PD}},
        {{"Pe", "Close_Punctuation"}, {C::UTF8PROC_CATEGORY_PE}},
        {{"Pf", "Final_Punctuation"}, {C::UTF8PROC_CATEGORY_PF}},
        {{"Pi", "Initial_Punctuation"}, {C::UTF8PROC_CATEGORY_PI}},
        {{"Po", "Other_Punctuation"}, {C::UTF8PROC_CATEGORY_PO}},
        {{"Ps", "Open_Punctuation"}, {C::UTF8PROC_CATEGORY_PS}},
        {{"S", "Symbol"}, {C::UTF8PROC_CATEGORY_SM, C::UTF8PROC_CATEGORY_SC, C::UTF8PROC_CATEGORY_SK, C::UTF8PROC_CATEGORY_SO}},
        {{"Sc", "Currency_Symbol"}, {C::UTF8PROC_CATEGORY_SC}},
        {{"Sk", "Modifier_Symbol"}, {C::UTF8PROC_CATEGORY_SK}},
        {{"Sm", "Math_Symbol"}, {C::UTF8PROC_CATEGORY_SM}},
        {{"So", "Other_Symbol"}, {C::UTF8PROC_CATEGORY_SO}},
        {{"Z", "Separator"}, {C::UTF8PROC_CATEGORY_ZS, C::UTF8PROC_CATEGORY_ZL, C::UTF8PROC_CATEGORY_ZP}},
        {{"Zl", "Line_Separator"}, {C::UTF8PROC_CATEGORY_ZL}},
        {{"Zp", "Paragraph_Separator"}, {C::UTF8PROC_CATEGORY_ZP}},
        {{"Zs", "Space_Separator"}, {C::UTF8PROC_CATEGORY_ZS}},
    };
    for (const auto& e : entries) {
      for (const auto& n : e.names) m.emplace(n, e.categories);
    }
    return m;
  }();
  return names;
}

}  // namespace

std::optional<CodepointSet> unicode_property(std::string_view name) {
  if (name == "Any") return CodepointSet::all();
  if (name == "ASCII") return CodepointSet::range(0, 0x7F);
  for (std::string_view prefix : {"General_Category=", "gc="}) {
    if (name.substr(0, prefix.size()) == prefix) {
      name.remove_prefix(prefix.size());
      break;
    }
  }
  const auto& sets = category_sets();
  if (name == "Assigned") return sets[UTF8PROC_CATEGORY_CN].complement();
  auto it = category_names().find(name);
  if (it == category_names().end()) return std::nullopt;
  CodepointSet out;
  for (int c : it->second) out.add(sets[static_cast<size_t>(c)]);
  return out;
}

}  // namespace deepinfer::grammar
