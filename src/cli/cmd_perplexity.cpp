// deepinfer perplexity: the model's perplexity on a text file, evaluated in independent windows of
// W tokens (each from an empty context; the first token of a window is not predicted) — the
// protocol of models/train_demo.py, so the figure compares with PyTorch's.
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "engine/model_runner.h"
#include "text/tokenizer.h"

#include <cmath>
#include <filesystem>

namespace deepinfer::cli {
namespace {

struct PerplexityArgs {
  std::string model = DEEPINFER_DEFAULT_MODEL, text_file, device = "cpu";
  int window = 512;
};

Result<void> run_perplexity(const PerplexityArgs& a) {
  DI_TRY(text, read_input_file(a.text_file));
  DI_TRY(tok, text::Tokenizer::from_file(std::filesystem::path(a.model) / "tokenizer.json"));
  DI_TRY(ids, tok.encode(text, text::EncodeMode::kPlainText));
  const size_t w = static_cast<size_t>(a.window);
  if (ids.size() < w) return make_error(Code::kInvalidArgument, "{} has {} tokens, fewer than one window of {}", a.text_file, ids.size(), w);
  DI_TRY(backend, make_backend(a.device));
  DI_TRY(model, load_model_with_progress(a.model, *backend));
  RunnerOptions opt;
  opt.max_sequences = 1;
  opt.max_context = a.window;
  DI_TRY(runner, ModelRunner::create(*model, *backend, opt));
  const int64_t vocab = model->config().vocab_size;
  double nll = 0;
  size_t predicted = 0, windows = 0;
  for (size_t start = 0; start + w <= ids.size(); start += w, ++windows) {
    DI_TRY(seq, runner->open_sequence());
    DI_TRY(logits, runner->step({{seq, ids.data() + start, static_cast<int32_t>(w), ForwardBatch::Logits::kAll}}));
    runner->close_sequence(seq);
    for (size_t j = 0; j + 1 < w; ++j) {
      const float* row = logits.data() + j * vocab;
      double mx = row[0], sum = 0;
      for (int64_t v = 1; v < vocab; ++v) mx = std::max<double>(mx, row[v]);
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
      nll -= row[ids[start + j + 1]] - mx - std::log(sum);
      ++predicted;
    }
  }
  std::printf("tokens %zu, windows %zu of %d, predicted %zu, nll/token %.5f, perplexity %.3f\n", ids.size(), windows, a.window,
              predicted, nll / predicted, std::exp(nll / predicted));
  return ok();
}

}  // namespace

void add_perplexity_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PerplexityArgs>();
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of the model on a text file, in independent windows");
  cmd->add_option("--model", args->model, "Model directory with tokenizer.json")->capture_default_str();
  cmd->add_option("--text-file", args->text_file, "UTF-8 text to evaluate")->required();
  cmd->add_option("--window", args->window, "Tokens per window")->check(CLI::Range(2, 1 << 20))->capture_default_str();
  cmd->add_option("--device", args->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->callback([args, &exit_code] { exit_code = report(run_perplexity(*args)); });
}

}  // namespace deepinfer::cli
