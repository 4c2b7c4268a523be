// The `deepinfer` command: one subcommand per cmd_*.cpp (see commands.h).
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "deepinfer.h"
#include "util/log.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// $DEEPINFER_LOG (debug, info, warn, error, off) sets the log level of the library and of the lab
// commands' own engine code (the library itself reads no environment variable).
void log_level_from_env() {
  const char* v = std::getenv("DEEPINFER_LOG");
  if (!v) return;
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error", "off"};
  for (int level = 0; level < 5; ++level)
    if (!std::strcmp(v, kNames[level])) {
      di_error_free(di_set_log_level(level));
      deepinfer::set_log_level(static_cast<deepinfer::LogLevel>(level));
    }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"deepinfer: run DeepSeek-V4-family models"};
  app.set_version_flag("--version", std::string("deepinfer ") + di_version() + " (ABI " + std::to_string(di_abi_version()) + ")");
  app.require_subcommand(1);
  int exit_code = 0;
  log_level_from_env();
  deepinfer::cli::set_command_line(argc, argv);
  deepinfer::cli::add_generate_command(app, exit_code);
  deepinfer::cli::add_chat_command(app, exit_code);
  deepinfer::cli::add_logits_command(app, exit_code);
  deepinfer::cli::add_perplexity_command(app, exit_code);
  deepinfer::cli::add_tokenize_commands(app, exit_code);
  deepinfer::cli::add_options_command(app, exit_code);
  deepinfer::cli::add_bench_command(app, exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
