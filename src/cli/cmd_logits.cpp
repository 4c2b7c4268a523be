// deepinfer logits: every position's logits for a token-id file, as raw little-endian float32.
#include "cli/commands.h"
#include "cli/cli_util.h"
#include "engine/model_runner.h"
#include "sample/sampler.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace deepinfer::cli {
namespace {

struct LogitsArgs {
  std::string model, ids_file, out, device = "cpu";
  int chunk = 0;
};

Result<void> run_logits(const LogitsArgs& a) {
  DI_TRY(ids, read_token_ids(a.ids_file));
  if (ids.empty()) return make_error(Code::kInvalidArgument, "{} holds no token ids", a.ids_file);
  DI_TRY(backend, make_backend(a.device));
  DI_TRY(model, load_model_with_progress(a.model, *backend));
  RunnerOptions opt;
  opt.max_sequences = 1;
  opt.max_context = static_cast<int64_t>(ids.size());
  DI_TRY(runner, ModelRunner::create(*model, *backend, opt));
  DI_TRY(seq, runner->open_sequence());
  std::ofstream out(a.out, std::ios::binary);
  if (!out) return make_error(Code::kIo, "cannot write {}", a.out);
  const size_t chunk = a.chunk > 0 ? static_cast<size_t>(a.chunk) : ids.size();
  for (size_t s = 0; s < ids.size(); s += chunk) {
    const int32_t n = static_cast<int32_t>(std::min(chunk, ids.size() - s));
    DI_TRY(logits, runner->step({{seq, ids.data() + s, n, ForwardBatch::Logits::kAll}}));
    // NaN or infinities are the model's fault: an error, not a file of garbage and exit code 0.
    const size_t vocab = static_cast<size_t>(model->config().vocab_size);
    for (size_t row = 0; row * vocab < logits.size(); ++row) {
      if (auto finite = check_model_logits(logits.subspan(row * vocab, vocab)); !finite) {
        return make_error(finite.error().code, "position {}: {}", s + row, finite.error().message);
      }
    }
    out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  }
  if (!out.flush()) return make_error(Code::kIo, "writing {} failed", a.out);
  std::fprintf(stderr, "wrote %zu x %d logits to %s\n", ids.size(), model->config().vocab_size, a.out.c_str());
  return ok();
}

}  // namespace

void add_logits_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<LogitsArgs>();
  auto* cmd = app.add_subcommand("logits", "Run the model on token ids; write every position's logits as raw float32 [n x vocab]");
  cmd->add_option("--model", args->model, "Model directory (config.json, *.safetensors)")->required();
  cmd->add_option("--ids-file", args->ids_file, "File of whitespace-separated token ids")->required();
  cmd->add_option("--out", args->out, "Output file (little-endian float32, row-major)")->required();
  cmd->add_option("--chunk", args->chunk, "Process the ids in chunks of N tokens (default: all at once)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", args->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->callback([args, &exit_code] { exit_code = report(run_logits(*args)); });
}

}  // namespace deepinfer::cli
