// deepinfer generate: one generation from a prompt, streamed to stdout as it is produced.
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/engine_options.h"

namespace deepinfer::cli {
namespace {

using abi::check;

struct GenerateArgs {
  EngineOptions engine;
  std::string prompt, prompt_file, ids;
  bool special = false;
  bool echo = true;
};

Result<void> run_generate(const GenerateArgs& a) {
  DI_TRY(engine, a.engine.open_engine());
  di_session* raw = nullptr;
  DI_TRYV(check(di_session_create(engine.get(), &raw)));
  abi::Session session(raw);
  if (!a.ids.empty()) {
    DI_TRY(ids, parse_token_ids(a.ids, "--ids"));
    DI_TRYV(check(di_session_add_tokens(raw, ids.data(), ids.size())));
  } else {
    std::string prompt = a.prompt;
    if (!a.prompt_file.empty()) {
      DI_TRY(text, read_input_file(a.prompt_file));
      prompt = std::move(text);
    }
    DI_TRYV(check(di_session_add_text(raw, prompt.data(), prompt.size(), a.special ? DI_TEXT_SPECIAL : DI_TEXT_PLAIN)));
    if (a.echo && !a.engine.json) std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  }
  DI_TRY(sampling, a.engine.sampling(engine.get()));
  DI_TRY(grammar, a.engine.grammar(engine.get()));
  DI_TRYV(check(di_sampling_set_grammar(sampling.get(), grammar.get())));
  DI_TRYV(check(di_session_generate(raw, sampling.get())));
  return stream_events(raw, a.engine.json);
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
