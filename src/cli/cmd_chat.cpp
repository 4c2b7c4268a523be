// deepinfer chat: an interactive conversation (history kept in the session, so each turn only
// processes its new tokens), or one turn with --message.
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/engine_options.h"

#include <iostream>

namespace deepinfer::cli {
namespace {

using abi::check;

struct ChatArgs {
  EngineOptions engine;
  std::string system;
  std::vector<std::string> messages;
};

Result<void> run_chat(const ChatArgs& a) {
  DI_TRY(engine, a.engine.open_engine());
  di_session* raw = nullptr;
  DI_TRYV(check(di_session_create(engine.get(), &raw)));
  abi::Session session(raw);
  // A stopped reply (Ctrl-C is not caught here, but a cancel from a client would be) stays in the chat.
  DI_TRYV(check(di_session_set_keep_cancelled_output(raw, 1)));
  if (!a.system.empty()) {
    DI_TRYV(check(di_session_add_message(raw, DI_ROLE_SYSTEM, a.system.data(), a.system.size())));
  }
  DI_TRY(sampling, a.engine.sampling(engine.get()));
  DI_TRY(grammar, a.engine.grammar(engine.get()));
  DI_TRYV(check(di_sampling_set_grammar(sampling.get(), grammar.get())));
  auto turn = [&](const std::string& message) -> Result<void> {
    DI_TRYV(check(di_session_add_message(raw, DI_ROLE_USER, message.data(), message.size())));
    DI_TRYV(check(di_session_generate(raw, sampling.get())));
    return stream_events(raw, a.engine.json);
  };
  if (!a.messages.empty()) {
    for (const auto& m : a.messages) {
      DI_TRYV(turn(m));
    }
  } else {
    std::fprintf(stderr, "Type a message and press Enter (an empty line or end of input quits).\n");
    std::string line;
    for (;;) {
      std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line) || line.empty()) break;
      DI_TRYV(turn(line));
    }
  }
  return ok();
}

}  // namespace

void add_chat_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ChatArgs>();
  auto* cmd = app.add_subcommand("chat", "Chat with the model (interactive, or --message for single turns)");
  args->engine.add_to(*cmd);
  cmd->add_option("--system", args->system, "System prompt");
  cmd->add_option("--message", args->messages, "A user message; repeat for several turns (no prompt is read then)");
  cmd->callback([args, &exit_code] { exit_code = report(run_chat(*args)); });
}

}  // namespace deepinfer::cli
