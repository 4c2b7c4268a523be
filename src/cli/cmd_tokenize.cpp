// deepinfer tokenize / detokenize: text ↔ token ids with a model's tokenizer.
#include "cli/abi.h"
#include "cli/cli_util.h"
#include "cli/commands.h"

#include <cstdio>
#include <vector>

namespace deepinfer::cli {
namespace {

struct TokenizeArgs {
  std::string tokenizer, text, text_file;
  bool plain = false;
};

struct DetokenizeArgs {
  std::string tokenizer, ids;
  bool skip_special = false;
};

using abi::check;

Result<abi::Tokenizer> open_tokenizer(const std::string& path) {
  di_tokenizer* raw = nullptr;
  DI_TRYV(check(di_tokenizer_create(path.data(), path.size(), &raw)));
  return abi::Tokenizer(raw);
}

Result<void> run_tokenize(const TokenizeArgs& a, bool from_file) {
  std::string input = a.text;
  if (from_file) {
    DI_TRY(text, read_input_file(a.text_file));
    input = std::move(text);
  }
  DI_TRY(tok, open_tokenizer(a.tokenizer));
  const di_text_flags flags = a.plain ? DI_TEXT_PLAIN : DI_TEXT_SPECIAL;
  size_t n = 0;
  di_error* sized = di_tokenizer_encode(tok.get(), input.data(), input.size(), flags, nullptr, 0, &n);
  if (sized && di_error_code(sized) != DI_ERR_BUFFER_TOO_SMALL) return check(sized);
  di_error_free(sized);
  std::vector<int32_t> ids(n);
  DI_TRYV(check(di_tokenizer_encode(tok.get(), input.data(), input.size(), flags, ids.data(), ids.size(), &n)));
  std::string line;
  for (const int32_t id : ids) {
    if (!line.empty()) line += ' ';
    line += std::to_string(id);
  }
  std::printf("%s\n", line.c_str());
  return ok();
}

Result<void> run_detokenize(const DetokenizeArgs& a) {
  DI_TRY(ids, parse_token_ids(a.ids, "--ids"));
  DI_TRY(tok, open_tokenizer(a.tokenizer));
  const di_detok_flags flags = a.skip_special ? DI_DETOK_SKIP_SPECIAL : 0;
  size_t n = 0;
  di_error* sized = di_tokenizer_decode(tok.get(), ids.data(), ids.size(), flags, nullptr, 0, &n);
  if (sized && di_error_code(sized) != DI_ERR_BUFFER_TOO_SMALL) return check(sized);
  di_error_free(sized);
  std::string text(n, '\0');
  DI_TRYV(check(di_tokenizer_decode(tok.get(), ids.data(), ids.size(), flags, text.data(), text.size(), &n)));
  std::fwrite(text.data(), 1, n, stdout);
  std::printf("\n");
  return ok();
}

}  // namespace

void add_tokenize_commands(CLI::App& app, int& exit_code) {
  auto t = std::make_shared<TokenizeArgs>();
  auto* tok = app.add_subcommand("tokenize", "Print the token ids of a text on one line, separated by spaces");
  tok->add_option("--tokenizer", t->tokenizer, "tokenizer.json, or a model directory holding one")->required();
  tok->add_flag("--plain", t->plain, "Encode added-token lookalikes (<｜User｜>, ...) as ordinary text");
  auto* text = tok->add_option("--text", t->text, "The text");
  auto* file = tok->add_option("--text-file", t->text_file, "A file holding the text (UTF-8)");
  text->excludes(file);
  file->excludes(text);
  tok->callback([t, &exit_code, text, file] {
    exit_code = text->count() + file->count() == 0
                    ? report(make_error(Code::kInvalidArgument, "give --text or --text-file"))
                    : report(run_tokenize(*t, file->count() > 0));
  });

  auto d = std::make_shared<DetokenizeArgs>();
  auto* detok = app.add_subcommand("detokenize", "Print the text of token ids");
  detok->add_option("--tokenizer", d->tokenizer, "tokenizer.json, or a model directory holding one")->required();
  detok->add_option("--ids", d->ids, "Token ids separated by spaces")->required();
  detok->add_flag("--skip-special", d->skip_special, "Leave out special tokens (BOS, EOS, ...)");
  detok->callback([d, &exit_code] { exit_code = report(run_detokenize(*d)); });
}

}  // namespace deepinfer::cli
