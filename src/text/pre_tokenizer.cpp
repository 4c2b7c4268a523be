#include "text/pre_tokenizer.h"

#include "text/regex.h"
#include "text/tokenizer_limits.h"
#include "text/unicode_category.h"
#include "text/utf8.h"
#include "util/json_excerpt.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <string>

namespace deepinfer::text {

class PreTokenizer::Step {
 public:
  virtual ~Step() = default;
  virtual Result<void> split(std::string_view piece, PieceSink next) const = 0;
  virtual bool is_byte_level() const { return false; }
};

namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// One slice of a piece: a pattern match or the text between two matches.
struct Span {
  std::size_t start, end;
  bool is_match;
};

// HF's NormalizedString::split: matches and gaps, combined according to the behaviour, empty
// slices dropped.
Result<void> emit_spans(std::string_view piece, std::vector<Span> spans, Behavior behavior, PieceSink next) {
  std::vector<Span> out;
  out.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      out = std::move(spans);
      break;
    case Behavior::kRemoved:
      for (const Span& s : spans)
        if (!s.is_match) out.push_back(s);
      break;
    case Behavior::kContiguous:
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().start = it->start;
        } else {
          out.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  for (const Span& s : out) {
    if (s.end > s.start) {
      DI_TRYV(next(piece.substr(s.start, s.end - s.start)));
    }
  }
  return ok();
}

class SplitStep final : public PreTokenizer::Step {
 public:
  SplitStep(Regex re, Behavior behavior, bool invert) : re_(std::move(re)), behavior_(behavior), invert_(invert) {}

  Result<void> split(std::string_view piece, PieceSink next) const override {
    std::size_t prev = 0;
    if (behavior_ == Behavior::kIsolated) {  // every slice is kept: stream them without a list
      DI_TRYV(re_.for_each_match(piece, [&](std::size_t s, std::size_t e) -> Result<void> {
        if (s > prev) {
          DI_TRYV(next(piece.substr(prev, s - prev)));
        }
        if (e > s) {
          DI_TRYV(next(piece.substr(s, e - s)));
        }
        prev = e;
        return ok();
      }));
      if (prev < piece.size()) {
        DI_TRYV(next(piece.substr(prev)));
      }
      return ok();
    }
    std::vector<Span> spans;
    DI_TRYV(re_.for_each_match(piece, [&](std::size_t s, std::size_t e) -> Result<void> {
      if (s > prev) spans.push_back({prev, s, invert_});
      spans.push_back({s, e, !invert_});
      prev = e;
      return ok();
    }));
    if (prev < piece.size()) spans.push_back({prev, piece.size(), invert_});
    return emit_spans(piece, std::move(spans), behavior_, next);
  }

 private:
  Regex re_;
  Behavior behavior_;
  bool invert_;
};

// Digits: numeric characters (Unicode N*) one by one, or in runs.
class DigitsStep final : public PreTokenizer::Step {
 public:
  explicit DigitsStep(bool individual) : individual_(individual) {}

  Result<void> split(std::string_view piece, PieceSink next) const override {
    std::vector<Span> spans;
    std::size_t gap = 0;
    for (std::size_t i = 0; i < piece.size();) {
      const std::size_t start = i;
      if (general_category(next_code_point(piece, i))[0] == 'N') {
        if (gap < start) spans.push_back({gap, start, false});
        spans.push_back({start, i, true});
        gap = i;
      }
    }
    if (gap < piece.size()) spans.push_back({gap, piece.size(), false});
    return emit_spans(piece, std::move(spans), individual_ ? Behavior::kIsolated : Behavior::kContiguous, next);
  }

 private:
  bool individual_;
};

// ByteLevel: an optional leading space, then optionally GPT-2's split regex.
class ByteLevelStep final : public PreTokenizer::Step {
 public:
  ByteLevelStep(bool add_prefix_space, std::optional<Regex> re) : add_prefix_space_(add_prefix_space) {
    if (re) regex_split_.emplace(std::move(*re), Behavior::kIsolated, false);
  }

  Result<void> split(std::string_view piece, PieceSink next) const override {
    if (add_prefix_space_ && piece.front() != ' ') {
      std::string spaced;
      spaced.reserve(piece.size() + 1);
      spaced += ' ';
      spaced += piece;
      return regex_split_ ? regex_split_->split(spaced, next) : next(spaced);
    }
    return regex_split_ ? regex_split_->split(piece, next) : next(piece);
  }

  bool is_byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::optional<SplitStep> regex_split_;
};

constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Result<bool> get_bool(const nlohmann::json& spec, const char* key, bool fallback, std::string_view where) {
  if (!spec.contains(key) || spec[key].is_null()) return fallback;
  if (!spec[key].is_boolean()) return make_error(Code::kModelFormat, "{}: \"{}\" must be a boolean", where, key);
  return spec[key].get<bool>();
}

Result<Behavior> parse_behavior(const nlohmann::json& spec) {
  if (!spec.contains("behavior") || !spec["behavior"].is_string()) {
    return make_error(Code::kModelFormat, "pre_tokenizer Split: missing \"behavior\"");
  }
  const std::string b = spec["behavior"];
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  return make_error(Code::kModelFormat, "pre_tokenizer Split: unknown behavior \"{}\"", text_excerpt(b));
}

Result<std::shared_ptr<const PreTokenizer::Step>> parse_split(const nlohmann::json& spec) {
  if (!spec.contains("pattern") || !spec["pattern"].is_object()) {
    return make_error(Code::kModelFormat, "pre_tokenizer Split: missing \"pattern\"");
  }
  const auto& pattern = spec["pattern"];
  std::optional<Regex> re;
  if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
    DI_TRY(r, Regex::compile(pattern["Regex"].get<std::string>()));
    re = std::move(r);
  } else if (pattern.contains("String") && pattern["String"].is_string()) {
    DI_TRY(r, Regex::literal(pattern["String"].get<std::string>()));
    re = std::move(r);
  } else {
    return make_error(Code::kModelFormat, "pre_tokenizer Split: \"pattern\" must hold \"Regex\" or \"String\"");
  }
  DI_TRY(behavior, parse_behavior(spec));
  DI_TRY(invert, get_bool(spec, "invert", false, "pre_tokenizer Split"));
  return std::make_shared<SplitStep>(std::move(*re), behavior, invert);
}

Result<void> add(const nlohmann::json& spec, std::vector<std::shared_ptr<const PreTokenizer::Step>>& steps,
                 std::size_t depth) {
  if (depth > kMaxSequenceDepth) {
    return make_error(Code::kModelFormat, "pre_tokenizer: Sequences nested more than {} deep", kMaxSequenceDepth);
  }
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    return make_error(Code::kModelFormat, "pre_tokenizer: expected an object with a \"type\"");
  }
  const std::string type = spec["type"];
  if (type == "Sequence") {
    if (!spec.contains("pretokenizers") || !spec["pretokenizers"].is_array()) {
      return make_error(Code::kModelFormat, "pre_tokenizer Sequence: missing \"pretokenizers\" array");
    }
    for (const auto& p : spec["pretokenizers"]) {
      DI_TRYV(add(p, steps, depth + 1));
    }
  } else if (type == "Split") {
    DI_TRY(step, parse_split(spec));
    steps.push_back(std::move(step));
  } else if (type == "Digits") {
    DI_TRY(individual, get_bool(spec, "individual_digits", false, "pre_tokenizer Digits"));
    steps.push_back(std::make_shared<DigitsStep>(individual));
  } else if (type == "ByteLevel") {
    DI_TRY(prefix, get_bool(spec, "add_prefix_space", true, "pre_tokenizer ByteLevel"));
    DI_TRY(use_regex, get_bool(spec, "use_regex", true, "pre_tokenizer ByteLevel"));
    std::optional<Regex> re;
    if (use_regex) {
      DI_TRY(r, Regex::compile(kGpt2Pattern));
      re = std::move(r);
    }
    steps.push_back(std::make_shared<ByteLevelStep>(prefix, std::move(re)));
  } else {
    return make_error(Code::kUnsupported,
                      "pre_tokenizer type \"{}\" is not supported (Sequence, Split, Digits, ByteLevel)",
                      text_excerpt(type));
  }
  // Encoding recurses once per step for each piece: their number bounds the stack it needs.
  if (steps.size() > kMaxPreTokenizerSteps) {
    return make_error(Code::kModelFormat, "pre_tokenizer: more than {} steps", kMaxPreTokenizerSteps);
  }
  return ok();
}

}  // namespace

Result<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& spec) {
  PreTokenizer p;
  if (!spec.is_null()) {
    DI_TRYV(add(spec, p.steps_, 0));
  }
  for (std::size_t i = 0; i < p.steps_.size(); ++i) {
    const bool last = i + 1 == p.steps_.size();
    if (p.steps_[i]->is_byte_level() != last) {
      return make_error(Code::kUnsupported, "pre_tokenizer: ByteLevel must be the last step, and only the last");
    }
  }
  if (p.steps_.empty()) {
    return make_error(Code::kUnsupported, "pre_tokenizer: no ByteLevel step; only byte-level BPE is supported");
  }
  return p;
}

Result<void> PreTokenizer::run(std::size_t step, std::string_view piece, PieceSink sink) const {
  if (piece.empty()) return ok();
  if (step == steps_.size()) return sink(piece);
  return steps_[step]->split(piece, [&](std::string_view p) { return run(step + 1, p, sink); });
}

}  // namespace deepinfer::text
