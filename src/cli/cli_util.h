// Helpers shared by the subcommands: loading with a progress line, reading id files, error exit.
#pragma once

#include "backend/backend.h"
#include "model/deepseek_v4.h"
#include "util/result.h"

#include <memory>
#include <string>
#include <vector>

namespace deepinfer::cli {

// Prints "deepinfer: <code>: <message>" to stderr for an error; returns the process exit code.
int report(const Result<void>& r);
// A file named on the command line (prompt, ids, schema, text): a regular file or a pipe, at most
// 256 MiB (a device such as /dev/zero is refused instead of read for ever).
Result<std::string> read_input_file(const std::string& path);
Result<std::vector<int32_t>> read_token_ids(const std::string& path);
Result<std::vector<int32_t>> parse_token_ids(const std::string& text, const std::string& source);
// key=value pairs of $DEEPINFER_OPTIONS ("key=value,..."): how the command line takes engine and
// backend options (di_engine_config_set_option) from the environment.
std::vector<std::pair<std::string, std::string>> options_from_env();
// The backend options among them (the lab commands build backends themselves).
Result<BackendOptions> backend_options_from_env();
Result<std::unique_ptr<Backend>> make_backend(const std::string& device);
Result<std::unique_ptr<DeepseekV4>> load_model_with_progress(const std::string& dir, Backend& backend);
// The process's command line, as main received it (for reports).
void set_command_line(int argc, char** argv);
const std::string& command_line();

}  // namespace deepinfer::cli
