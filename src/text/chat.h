// Chat encoding in DeepSeek's format: messages → prompt token ids, reproducing the chat_template of
// DeepSeek's tokenizer_config.json exactly (as transformers' apply_chat_template renders it and
// HF tokenizers encodes the result), quirks included:
//  - all system messages are joined by "\n\n" and put first, right after BOS, wherever they appear;
//  - the first tool call of the conversation opens "<｜Assistant｜><｜tool▁calls▁begin｜>" and ends
//    with no closing markers; every later one (in any assistant message) is preceded by "\n" and
//    followed by "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>" (the template never resets that state);
//  - an assistant message with content ignores its tool_calls; one after tool outputs starts with
//    "<｜tool▁outputs▁end｜>" instead of "<｜Assistant｜>";
//  - the generation prompt is not added right after tool outputs (they end with
//    "<｜tool▁outputs▁end｜>").
// Structural tokens are emitted as ids; all message text (content, tool names, types, arguments)
// is encoded as plain text, so no message can inject a control token.
// Deliberate differences from the template: an unknown role is an error (the template drops the
// message silently), and so is a missing content where the template would fail.
#pragma once

#include "text/tokenizer.h"

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace deepinfer::text {

struct ToolCall {
  std::string type = "function";
  std::string name;
  std::string arguments;  // JSON text, written as given
};

struct ChatMessage {
  std::string role;                    // "system", "user", "assistant" or "tool"
  std::optional<std::string> content;  // none: an assistant message that only calls tools
  std::vector<ToolCall> tool_calls;    // read only when an assistant message has no content
};

// Prompt ids for `messages`; with add_generation_prompt, ends ready for the assistant's reply.
Result<std::vector<TokenId>> encode_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                         bool add_generation_prompt);

// The same prompt as text, as the template renders it (control tokens written out).
Result<std::string> render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt);

// Messages in the OpenAI / transformers JSON shape: [{"role", "content", "tool_calls": [{"type",
// "function": {"name", "arguments"}}]}]; "arguments" must be a string.
Result<std::vector<ChatMessage>> chat_messages_from_json(const nlohmann::json& messages);

}  // namespace deepinfer::text
