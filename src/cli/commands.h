// Each subcommand of `deepinfer` lives in its own cmd_*.cpp and registers itself here.
// A registration adds the subcommand to the app and sets its callback; the callback's exit code is
// returned through `exit_code`.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace deepinfer::cli {

void add_logits_command(CLI::App& app, int& exit_code);
void add_perplexity_command(CLI::App& app, int& exit_code);
void add_generate_command(CLI::App& app, int& exit_code);
void add_chat_command(CLI::App& app, int& exit_code);
// `tokenize` and `detokenize` (cmd_tokenize.cpp).
void add_tokenize_commands(CLI::App& app, int& exit_code);
// `options`: the engine option table; options_markdown() is docs/options.md.
void add_options_command(CLI::App& app, int& exit_code);
std::string options_markdown();
// `bench`: offline throughput and latency against the hardware ceilings (cmd_bench.cpp).
void add_bench_command(CLI::App& app, int& exit_code);

}  // namespace deepinfer::cli
