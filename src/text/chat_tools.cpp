#include "text/chat_tools.h"

#include <nlohmann/json.hpp>

namespace deepinfer::text {
namespace {

constexpr size_t kMaxToolsBytes = size_t(1) << 20;
constexpr size_t kMaxDepth = 64;  // nesting of a tool's parameters schema

Result<std::string> text_field(const nlohmann::json& obj, const char* key, size_t i, bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return make_error(Code::kInvalidArgument, "tool {}: \"function\" has no \"{}\"", i, key);
    return std::string();
  }
  if (!it->is_string()) return make_error(Code::kInvalidArgument, "tool {}: \"{}\" must be a string", i, key);
  return it->get<std::string>();
}

}  // namespace

Result<std::string> tools_system_prompt(std::string_view tools_json) {
  if (tools_json.size() > kMaxToolsBytes)
    return make_error(Code::kInvalidArgument, "the tool definitions take {} bytes, more than {}", tools_json.size(), kMaxToolsBytes);
  size_t depth = 0, max_depth = 0;
  const auto limit_depth = [&](int d, nlohmann::json::parse_event_t e, nlohmann::json&) {
    if (e == nlohmann::json::parse_event_t::object_start || e == nlohmann::json::parse_event_t::array_start) ++depth;
    if (e == nlohmann::json::parse_event_t::object_end || e == nlohmann::json::parse_event_t::array_end) --depth;
    max_depth = std::max(max_depth, depth);
    (void)d;
    return max_depth <= kMaxDepth;
  };
  nlohmann::json tools = nlohmann::json::parse(tools_json, limit_depth, /*allow_exceptions=*/false);
  if (max_depth > kMaxDepth) return make_error(Code::kInvalidArgument, "the tool definitions nest deeper than {}", kMaxDepth);
  if (tools.is_discarded()) return make_error(Code::kInvalidArgument, "the tool definitions are not valid JSON");
  if (!tools.is_array()) return make_error(Code::kInvalidArgument, "the tool definitions must be a JSON array");
  std::string out = "## Tools\nYou can call these functions.\n";
  for (size_t i = 0; i < tools.size(); ++i) {
    const nlohmann::json& t = tools[i];
    if (!t.is_object()) return make_error(Code::kInvalidArgument, "tool {} is not an object", i);
    if (t.contains("type") && t["type"] != "function")
      return make_error(Code::kInvalidArgument, "tool {}: only \"type\": \"function\" tools are supported", i);
    if (!t.contains("function") || !t["function"].is_object())
      return make_error(Code::kInvalidArgument, "tool {}: a tool needs a \"function\" object", i);
    const nlohmann::json& fn = t["function"];
    DI_TRY(name, text_field(fn, "name", i, true));
    if (name.empty()) return make_error(Code::kInvalidArgument, "tool {}: the function's name is empty", i);
    DI_TRY(description, text_field(fn, "description", i, false));
    const nlohmann::json params = fn.contains("parameters") ? fn["parameters"] : nlohmann::json{{"type", "object"}};
    if (!params.is_object()) return make_error(Code::kInvalidArgument, "tool {}: \"parameters\" must be a JSON Schema object", i);
    out += "\n### " + name + "\n";
    if (!description.empty()) out += "Description: " + description + "\n";
    out += "Parameters: " + params.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  out +=
      "\nTo call functions, answer with <｜tool▁calls▁begin｜>, then for each call <｜tool▁call▁begin｜>function"
      "<｜tool▁sep｜>the function's name, a new line, ```json, a new line, the arguments as JSON, a new line, ``` "
      "and <｜tool▁call▁end｜>; close the calls with <｜tool▁calls▁end｜>.";
  return out;
}

}  // namespace deepinfer::text
