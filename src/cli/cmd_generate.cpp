// deepinfer generate: one generation from a prompt, streamed to stdout as it is produced.
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/engine_options.h"


namespace deepinfer::cli {
namespace {

struct GenerateArgs {
  EngineOptions engine;
  std::string prompt, prompt_file, ids;
  bool special = false;
  bool echo = true;
};

Result<void> run_generate(const GenerateArgs& a) {
  DI_TRY(engine, a.engine.open_engine());
  DI_TRY(session, engine->create_session());
  if (!a.ids.empty()) {
    DI_TRY(ids, parse_token_ids(a.ids, "--ids"));
    DI_TRYV(session->add_tokens(ids));
  } else {
    std::string prompt = a.prompt;
    if (!a.prompt_file.empty()) {
      DI_TRY(text, read_input_file(a.prompt_file));
      prompt = std::move(text);
    }
    DI_TRYV(session->add_text(prompt, a.special ? text::EncodeMode::kRecognizeAddedTokens : text::EncodeMode::kPlainText));
    if (a.echo && !a.engine.json) std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  }
  DI_TRY(grammar, a.engine.grammar(*engine));
  DI_TRYV(session->generate(a.engine.sampling(*engine), grammar));
  DI_TRYV(stream_events(*session, a.engine.json));
  engine->shutdown();
  return ok();
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text from a prompt, streaming it to stdout");
  args->engine.add_to(*cmd);
  auto* prompt = cmd->add_option("--prompt", args->prompt, "Prompt text");
  auto* file = cmd->add_option("--prompt-file", args->prompt_file, "File holding the prompt text");
  auto* ids = cmd->add_option("--ids", args->ids, "Prompt as space-separated token ids");
  prompt->excludes(file)->excludes(ids);
  file->excludes(ids);
  cmd->add_flag("--special", args->special, "Recognise control tokens written in the prompt (default: plain text)");
  cmd->add_flag("!--no-echo", args->echo, "Do not print the prompt before the output");
  cmd->callback([args, &exit_code, prompt, file, ids] {
    if (!*prompt && !*file && !*ids) {
      exit_code = report(make_error(Code::kInvalidArgument, "give --prompt, --prompt-file or --ids"));
      return;
    }
    exit_code = report(run_generate(*args));
  });
}

}  // namespace deepinfer::cli
