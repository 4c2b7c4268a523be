// The `deepinfer` command: one subcommand per cmd_*.cpp (see commands.h).
#include "cli/cli_util.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"deepinfer: run DeepSeek-V4-family models"};
  app.require_subcommand(1);
  int exit_code = 0;
  deepinfer::cli::set_command_line(argc, argv);
  deepinfer::cli::add_generate_command(app, exit_code);
  deepinfer::cli::add_chat_command(app, exit_code);
  deepinfer::cli::add_logits_command(app, exit_code);
  deepinfer::cli::add_perplexity_command(app, exit_code);
  deepinfer::cli::add_tokenize_commands(app, exit_code);
  deepinfer::cli::add_bench_command(app, exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
