// Tool definitions for a chat: DeepSeek's chat template has no place for them, so they are described
// to the model in a system block, with the call markup the template writes for assistant tool calls
// (chat.h). One rendering for every binding and server.
#pragma once

#include "util/result.h"

#include <string>
#include <string_view>

namespace deepinfer::text {

// An OpenAI-style JSON array of tools ([{"type": "function", "function": {"name", "description",
// "parameters"}}]) as the system text that describes them. kInvalidArgument names what is malformed.
Result<std::string> tools_system_prompt(std::string_view tools_json);

}  // namespace deepinfer::text
