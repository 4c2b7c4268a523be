#include "cli/commands.h"

namespace deepinfer::cli {

void add_logits_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("logits", "Run the model on token ids and write every position's logits");
  cmd->callback([&exit_code] { exit_code = 1; });
}

}  // namespace deepinfer::cli
