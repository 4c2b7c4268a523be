// deepinfer chat: an interactive conversation (history kept in the session, so each turn only
// processes its new tokens), or one turn with --message.
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/engine_options.h"

#include <iostream>

namespace deepinfer::cli {
namespace {

struct ChatArgs {
  EngineOptions engine;
  std::string system;
  std::vector<std::string> messages;
};

Result<void> run_chat(const ChatArgs& a) {
  DI_TRY(engine, a.engine.open_engine());
  DI_TRY(session, engine->create_session());
  if (!a.system.empty()) {
    DI_TRYV(session->add_message("system", a.system));
  }
  const SamplingParams params = a.engine.sampling(*engine);
  DI_TRY(grammar, a.engine.grammar(*engine));
  auto turn = [&](const std::string& message) -> Result<void> {
    DI_TRYV(session->add_message("user", message));
    DI_TRYV(session->generate(params, grammar));
    return stream_events(*session, a.engine.json);
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
  engine->shutdown();
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
