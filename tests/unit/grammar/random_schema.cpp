#include "random_schema.h"

#include <string>
#include <vector>

namespace deepinfer::grammar::testing {
namespace {

using Json = nlohmann::ordered_json;

class Generator {
 public:
  explicit Generator(std::mt19937_64& rng) : rng_(rng) {}

  Json root() {
    Json s = node(0);
    if (chance(0.25)) {  // a recursive definition used somewhere below the root
      s = Json{{"$defs", {{"tree", {{"type", "object"}, {"properties", {{"label", {{"type", "string"}, {"maxLength", 12}}}, {"children", {{"type", "array"}, {"items", {{"$ref", "#/$defs/tree"}}}, {"maxItems", 2}}}}}, {"required", {"label"}}}}}},
               {"type", "object"},
               {"properties", {{"root", {{"$ref", "#/$defs/tree"}}}, {"extra", s}}},
               {"required", {"root"}}};
    }
    return s;
  }

 private:
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  size_t pick(size_t n) { return static_cast<size_t>(rng_() % n); }
  int64_t range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1)); }

  std::string name() {
    static const std::vector<std::string> names = {"id", "name", "value", "items", "a b", "ключ", "日本", "quote\"d", "back\\slash", "x/y", "tab\t", "emoji😀", "n", "meta"};
    return names[pick(names.size())];
  }

  Json node(int depth) {
    if (depth >= 3) return scalar();
    switch (pick(depth == 0 ? 4 : 9)) {
      case 0:
      case 1: return object(depth);
      case 2: return array(depth);
      case 3: return combinator(depth);
      default: return scalar();
    }
  }

  Json scalar() {
    switch (pick(8)) {
      case 0: return string_schema();
      case 1: return string_schema();
      case 2: return integer_schema();
      case 3: return number_schema();
      case 4: return Json{{"type", chance(0.5) ? "boolean" : "null"}};
      case 5: return enum_schema();
      case 6: return Json{{"type", Json::array({"string", "null"})}, {"maxLength", range(0, 6)}};
      default: return Json{{"const", const_value()}};
    }
  }

  Json string_schema() {
    Json s{{"type", "string"}};
    switch (pick(6)) {
      case 0: {
        static const std::vector<std::string> formats = {"date", "time", "date-time", "email", "uuid", "ipv4", "ipv6", "uri", "duration"};
        s["format"] = formats[pick(formats.size())];
        break;
      }
      case 1: {
        static const std::vector<std::string> patterns = {"^[a-z]+$", "^[A-Z]{2,4}-\\d{3}$", "^(foo|bar)*$", "abc", "^\\w+@\\w+\\.com$", "^[^\"\\\\]{0,5}$", "^.{2}$", "^[\\u4e00-\\u9fff]+$", "x$"};
        s["pattern"] = patterns[pick(patterns.size())];
        break;
      }
      case 2: s["minLength"] = range(0, 3); s["maxLength"] = range(3, 10); break;
      case 3: s["maxLength"] = range(0, 5); break;
      default: break;
    }
    return s;
  }

  Json bound(bool integer) {
    if (integer || chance(0.5)) return range(-1000, 1000);
    return static_cast<double>(range(-100000, 100000)) / 100.0;
  }

  Json integer_schema() {
    Json s{{"type", "integer"}};
    if (chance(0.2)) s["multipleOf"] = range(2, 7);
    if (chance(0.5)) s[chance(0.5) ? "minimum" : "exclusiveMinimum"] = bound(false);
    if (chance(0.5)) s[chance(0.5) ? "maximum" : "exclusiveMaximum"] = s.contains("minimum") ? Json(s["minimum"].get<double>() + static_cast<double>(range(0, 3000)) / 3.0) : bound(false);
    return s;
  }

  Json number_schema() {
    Json s{{"type", "number"}};
    if (chance(0.2)) s["multipleOf"] = chance(0.5) ? 0.5 : 0.25;  // exact in binary, as the Python validator divides floats
    if (chance(0.5)) s[chance(0.5) ? "minimum" : "exclusiveMinimum"] = bound(false);
    if (chance(0.5)) s[chance(0.5) ? "maximum" : "exclusiveMaximum"] = bound(false);
    return s;
  }

  Json const_value() {
    switch (pick(6)) {
      case 0: return "fixed \"value\"";
      case 1: return range(-5, 5);
      case 2: return 2.5;
      case 3: return nullptr;
      case 4: return Json{{"k", 1}, {"list", Json::array({true, "x"})}};
      default: return Json::array({1, "two", nullptr});
    }
  }

  Json enum_schema() {
    Json values = Json::array();
    size_t n = 1 + pick(5);
    for (size_t i = 0; i < n; ++i) values.push_back(chance(0.6) ? Json(name()) : const_value());
    return Json{{"enum", values}};
  }

  Json object(int depth) {
    Json s{{"type", "object"}};
    Json props = Json::object();
    Json required = Json::array();
    size_t n = pick(5);
    for (size_t i = 0; i < n; ++i) {
      std::string k = name();
      if (props.contains(k)) continue;
      props[k] = node(depth + 1);
      if (chance(0.5)) required.push_back(k);
    }
    if (!props.empty()) s["properties"] = props;
    if (!required.empty()) s["required"] = required;
    switch (pick(4)) {
      case 0: s["additionalProperties"] = false; break;
      case 1: s["additionalProperties"] = node(depth + 1); break;
      case 2: s["unevaluatedProperties"] = false; break;
      default: break;
    }
    if (chance(0.15)) s["maxProperties"] = range(static_cast<int64_t>(required.size()), static_cast<int64_t>(required.size()) + 2);
    if (chance(0.1) && !s.contains("additionalProperties")) s["propertyNames"] = Json{{"maxLength", 8}};
    if (chance(0.15)) s["patternProperties"] = Json{{"^x", {{"type", "integer"}}}, {"[0-9]$", scalar()}};
    return s;
  }

  Json array(int depth) {
    Json s{{"type", "array"}};
    if (chance(0.3)) {
      Json prefix = Json::array();
      size_t n = 1 + pick(3);
      for (size_t i = 0; i < n; ++i) prefix.push_back(node(depth + 1));
      s["prefixItems"] = prefix;
      if (chance(0.5)) s["items"] = false;
    } else {
      s["items"] = node(depth + 1);
    }
    if (chance(0.3)) s["minItems"] = range(0, 2);
    if (chance(0.15)) s["contains"] = Json{{"type", "boolean"}};
    if (chance(0.5)) s["maxItems"] = range(2, 4);
    return s;
  }

  Json combinator(int depth) {
    switch (pick(3)) {
      case 0: return Json{{"anyOf", Json::array({node(depth + 1), node(depth + 1)})}};
      case 1:  // provably exclusive: a const discriminator
        return Json{{"oneOf", Json::array({Json{{"type", "object"}, {"properties", {{"kind", {{"const", "a"}}}, {"x", node(depth + 1)}}}, {"required", {"kind"}}},
                                            Json{{"type", "object"}, {"properties", {{"kind", {{"const", "b"}}}, {"y", node(depth + 1)}}}, {"required", {"kind", "y"}}},
                                            Json{{"type", "string"}, {"maxLength", 3}}})}};
      default:
        return Json{{"allOf", Json::array({Json{{"type", "object"}, {"properties", {{"id", {{"type", "integer"}}}}}},
                                            Json{{"required", {"id"}}, {"properties", {{"id", {{"minimum", 0}, {"maximum", 99}}}, {"note", scalar()}}}}})}};
    }
  }

  std::mt19937_64& rng_;
};

}  // namespace

nlohmann::ordered_json random_schema(std::mt19937_64& rng) { return Generator(rng).root(); }

}  // namespace deepinfer::grammar::testing
