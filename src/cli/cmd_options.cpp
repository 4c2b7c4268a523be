// deepinfer options: the engine and backend options (di_engine_config_set_option, --option,
// $DEEPINFER_OPTIONS) with their types, defaults and meaning; --markdown prints docs/options.md.
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "engine/engine_config.h"

#include <cstdio>

namespace deepinfer::cli {

std::string options_markdown() {
  std::string md =
      "# Engine options\n\n"
      "Set with `di_engine_config_set_option(cfg, key, value)` (values as text; booleans 1/0, true/false, on/off,\n"
      "yes/no), on the command line with `--option key=value` or `DEEPINFER_OPTIONS=\"key=value,...\"`, and in the\n"
      "SDKs as keyword options of the engine. Options belong to the engine they are given to. This page is printed\n"
      "by `deepinfer options --markdown`; a test keeps it equal to the table in the code.\n\n"
      "| key | type | default | meaning |\n|---|---|---|---|\n";
  for (const OptionInfo& o : engine_option_infos())
    md += fmt::format("| `{}` | {} | {} | {} |\n", o.key, o.type, o.default_value.empty() ? "(none)" : std::string(o.default_value),
                      o.help);
  return md;
}

void add_options_command(CLI::App& app, int& exit_code) {
  auto markdown = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("options", "List the engine options (--option key=value) with their defaults");
  cmd->add_flag("--markdown", *markdown, "Print the table as docs/options.md holds it");
  cmd->callback([markdown, &exit_code] {
    if (*markdown) {
      std::fputs(options_markdown().c_str(), stdout);
    } else {
      for (const OptionInfo& o : engine_option_infos())
        std::printf("%-14s %-6s %-6s %.*s\n", std::string(o.key).c_str(), std::string(o.type).c_str(),
                    o.default_value.empty() ? "-" : std::string(o.default_value).c_str(), static_cast<int>(o.help.size()),
                    o.help.data());
    }
    exit_code = 0;
  });
}

}  // namespace deepinfer::cli
