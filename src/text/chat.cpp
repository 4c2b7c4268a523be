#include "text/chat.h"

#include <nlohmann/json.hpp>

namespace deepinfer::text {
namespace {

constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";
constexpr std::string_view kOutputsBegin = "<｜tool▁outputs▁begin｜>";
constexpr std::string_view kOutputsEnd = "<｜tool▁outputs▁end｜>";
constexpr std::string_view kOutputBegin = "<｜tool▁output▁begin｜>";
constexpr std::string_view kOutputEnd = "<｜tool▁output▁end｜>";

// The rendered prompt as control tokens and runs of text; adjacent text is kept as one run, as HF
// sees it between two control tokens.
struct Piece {
  bool control;
  std::string text;
};

class Prompt {
 public:
  void control(std::string_view token) { pieces_.push_back({true, std::string(token)}); }
  void text(std::string_view s) {
    if (s.empty()) return;
    if (pieces_.empty() || pieces_.back().control) pieces_.push_back({false, ""});
    pieces_.back().text += s;
  }
  const std::vector<Piece>& pieces() const { return pieces_; }

 private:
  std::vector<Piece> pieces_;
};

void tool_call_body(Prompt& p, const ToolCall& call) {
  p.text(call.type);
  p.control(kSep);
  p.text(call.name);
  p.text("\n```json\n");
  p.text(call.arguments);
  p.text("\n```");
  p.control(kCallEnd);
}

Result<Prompt> build(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool") {
      return make_error(Code::kInvalidArgument, "message {}: unknown role \"{}\"", i, m.role);
    }
    if (m.role != "assistant" && !m.content) {
      return make_error(Code::kInvalidArgument, "message {} ({}) has no content", i, m.role);
    }
  }
  Prompt p;
  std::string system_prompt;
  bool first_system = true;
  for (const ChatMessage& m : messages) {
    if (m.role != "system") continue;
    if (!first_system) system_prompt += "\n\n";
    system_prompt += *m.content;
    first_system = false;
  }
  p.control(kBos);
  p.text(system_prompt);

  bool called_before = false;  // the template's ns.is_first: set by the first tool call, never reset
  bool after_tool = false;     // ns.is_tool
  bool first_output = true;    // ns.is_output_first, never reset either
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      after_tool = false;
      p.control(kUser);
      p.text(*m.content);
    } else if (m.role == "assistant" && !m.content) {
      after_tool = false;
      for (const ToolCall& call : m.tool_calls) {
        if (!called_before) {
          p.control(kAssistant);
          p.control(kCallsBegin);
          p.control(kCallBegin);
          tool_call_body(p, call);
          called_before = true;
        } else {
          p.text("\n");
          p.control(kCallBegin);
          tool_call_body(p, call);
          p.control(kCallsEnd);
          p.control(kEos);
        }
      }
    } else if (m.role == "assistant") {
      p.control(after_tool ? kOutputsEnd : kAssistant);
      p.text(*m.content);
      p.control(kEos);
      after_tool = false;
    } else if (m.role == "tool") {
      after_tool = true;
      if (first_output) {
        p.control(kOutputsBegin);
        first_output = false;
      } else {
        p.text("\n");
      }
      p.control(kOutputBegin);
      p.text(*m.content);
      p.control(kOutputEnd);
    }
  }
  if (after_tool) p.control(kOutputsEnd);
  if (add_generation_prompt && !after_tool) p.control(kAssistant);
  return p;
}

Result<std::string> string_field(const nlohmann::json& obj, const char* key, std::size_t index) {
  if (!obj.contains(key) || !obj[key].is_string()) {
    return make_error(Code::kInvalidArgument, "message {}: \"{}\" must be a string", index, key);
  }
  return obj[key].get<std::string>();
}

}  // namespace

Result<std::vector<TokenId>> encode_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                         bool add_generation_prompt) {
  DI_TRY(prompt, build(messages, add_generation_prompt));
  std::vector<TokenId> ids;
  for (const Piece& piece : prompt.pieces()) {
    if (!piece.control) {
      DI_TRYV(tokenizer.encode_append(piece.text, EncodeMode::kPlainText, ids));
      continue;
    }
    const auto id = tokenizer.token_to_id(piece.text);
    if (!id) return make_error(Code::kUnsupported, "chat: the tokenizer has no token {}", piece.text);
    ids.push_back(*id);
  }
  return ids;
}

Result<std::string> render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  DI_TRY(prompt, build(messages, add_generation_prompt));
  std::string text;
  for (const Piece& piece : prompt.pieces()) text += piece.text;
  return text;
}

Result<std::vector<ChatMessage>> chat_messages_from_json(const nlohmann::json& messages) {
  if (!messages.is_array()) return make_error(Code::kInvalidArgument, "chat messages must be a JSON array");
  std::vector<ChatMessage> out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object()) return make_error(Code::kInvalidArgument, "message {} is not an object", i);
    ChatMessage msg;
    DI_TRY(role, string_field(m, "role", i));
    msg.role = std::move(role);
    if (m.contains("content") && !m["content"].is_null()) {
      DI_TRY(content, string_field(m, "content", i));
      msg.content = std::move(content);
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array()) {
        return make_error(Code::kInvalidArgument, "message {}: \"tool_calls\" must be an array", i);
      }
      for (const auto& c : m["tool_calls"]) {
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
          return make_error(Code::kInvalidArgument, "message {}: a tool call needs a \"function\" object", i);
        }
        ToolCall call;
        if (c.contains("type")) {
          DI_TRY(type, string_field(c, "type", i));
          call.type = std::move(type);
        }
        DI_TRY(name, string_field(c["function"], "name", i));
        DI_TRY(arguments, string_field(c["function"], "arguments", i));
        call.name = std::move(name);
        call.arguments = std::move(arguments);
        msg.tool_calls.push_back(std::move(call));
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace deepinfer::text
