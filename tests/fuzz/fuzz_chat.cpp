// Chat input from a caller: tool definitions (di_session_set_tools: their system block) and messages
// in the OpenAI JSON shape, rendered and encoded with the DeepSeek tokenizer. Input: JSON text (read
// both as a tools array and as messages), optionally NUL and text that becomes a user message and a
// tool call's arguments after them.
#include "deepseek_tokenizer.h"
#include "fuzz_input.h"
#include "text/chat.h"
#include "text/chat_tools.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <vector>

using namespace deepinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [json_text, rest] = fuzz::split_input(data, size);
  std::vector<text::ChatMessage> messages;
  if (auto tools = text::tools_system_prompt(json_text)) messages.push_back({"system", std::move(tools).value(), {}});
  if (const auto j = nlohmann::json::parse(json_text, nullptr, false); !j.is_discarded())
    if (auto parsed = text::chat_messages_from_json(j)) messages.insert(messages.end(), parsed.value().begin(), parsed.value().end());
  const std::string more(rest);
  messages.push_back({"user", more, {}});
  messages.push_back({"assistant", std::nullopt, {text::ToolCall{"function", "lookup", more}}});
  for (const bool prompt : {false, true}) {
    (void)text::render_chat(messages, prompt);
    if (auto ids = text::encode_chat(fuzz::deepseek_tokenizer(), messages, prompt))
      for (const text::TokenId id : ids.value())
        if (!fuzz::deepseek_tokenizer().has_token(id)) std::abort();  // the prompt holds an id the model cannot take
  }
  return 0;
}
