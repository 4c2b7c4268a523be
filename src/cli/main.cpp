// The `deepinfer` command. Subcommands are added as the engine grows.
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"deepinfer: run DeepSeek-V4-family models"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
