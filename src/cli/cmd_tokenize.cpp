// `deepinfer tokenize` and `deepinfer detokenize`: text ↔ token ids with a model's tokenizer.
#include "cli/commands.h"
#include "text/tokenizer.h"

#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace deepinfer::cli {
namespace {

Result<text::Tokenizer> load(const std::string& path) { return text::Tokenizer::from_file(path); }

int fail(const Error& e) {
  std::cerr << "error: " << e.message << "\n";
  return 1;
}

// Ids separated by spaces and/or commas, optionally inside [ ].
Result<std::vector<text::TokenId>> parse_ids(const std::string& s) {
  std::vector<text::TokenId> ids;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '[' || c == ']') {
      ++i;
      continue;
    }
    text::TokenId id = 0;
    const auto [end, ec] = std::from_chars(s.data() + i, s.data() + s.size(), id);
    if (ec != std::errc() || (end < s.data() + s.size() && std::string_view(" ,\t\n]").find(*end) == std::string_view::npos)) {
      return make_error(Code::kInvalidArgument, "--ids: \"{}\" is not a list of token ids (at character {})", s, i);
    }
    ids.push_back(id);
    i = static_cast<std::size_t>(end - s.data());
  }
  return ids;
}

}  // namespace

void add_tokenize_commands(CLI::App& app, int& exit_code) {
  struct TokenizeArgs {
    std::string tokenizer, text, text_file;
    bool plain = false;
  };
  auto args = std::make_shared<TokenizeArgs>();
  auto* tok = app.add_subcommand("tokenize", "Print the token ids of a text, on one line separated by spaces");
  tok->add_option("--tokenizer", args->tokenizer, "tokenizer.json, or a model directory holding one")->required();
  tok->add_flag("--plain", args->plain, "Encode added-token lookalikes (<｜User｜>, ...) as ordinary text");
  auto* text_opt = tok->add_option("--text", args->text, "The text");
  auto* file_opt = tok->add_option("--text-file", args->text_file, "A file holding the text (UTF-8)");
  text_opt->excludes(file_opt);
  tok->callback([args, &exit_code, text_opt, file_opt] {
    if (text_opt->count() == 0 && file_opt->count() == 0) {
      exit_code = fail(make_error(Code::kInvalidArgument, "give --text or --text-file"));
      return;
    }
    auto t = load(args->tokenizer);
    if (!t) {
      exit_code = fail(t.error());
      return;
    }
    std::string input = args->text;
    if (file_opt->count() > 0) {
      std::ifstream in(args->text_file, std::ios::binary);
      if (!in) {
        exit_code = fail(make_error(Code::kNotFound, "cannot open {}", args->text_file));
        return;
      }
      std::ostringstream ss;
      ss << in.rdbuf();
      input = ss.str();
    }
    auto ids = t.value().encode(input, args->plain ? text::EncodeMode::kPlainText
                                                   : text::EncodeMode::kRecognizeAddedTokens);
    if (!ids) {
      exit_code = fail(ids.error());
      return;
    }
    std::string line;
    for (std::size_t i = 0; i < ids.value().size(); ++i) {
      if (i > 0) line += ' ';
      line += std::to_string(ids.value()[i]);
    }
    std::cout << line << "\n";
    exit_code = 0;
  });

  struct DetokenizeArgs {
    std::string tokenizer, ids;
    bool skip_special = false;
  };
  auto dargs = std::make_shared<DetokenizeArgs>();
  auto* detok = app.add_subcommand("detokenize", "Print the text of token ids");
  detok->add_option("--tokenizer", dargs->tokenizer, "tokenizer.json, or a model directory holding one")->required();
  detok->add_option("--ids", dargs->ids, "Token ids separated by spaces or commas")->required();
  detok->add_flag("--skip-special", dargs->skip_special, "Leave out special tokens (BOS, EOS, ...)");
  detok->callback([dargs, &exit_code] {
    auto t = load(dargs->tokenizer);
    if (!t) {
      exit_code = fail(t.error());
      return;
    }
    auto ids = parse_ids(dargs->ids);
    if (!ids) {
      exit_code = fail(ids.error());
      return;
    }
    auto text = t.value().decode(ids.value(), dargs->skip_special);
    if (!text) {
      exit_code = fail(text.error());
      return;
    }
    std::cout << text.value() << "\n";
    exit_code = 0;
  });
}

}  // namespace deepinfer::cli
