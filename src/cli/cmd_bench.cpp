// deepinfer bench: offline throughput and latency of the model runner (no engine loop, no HTTP),
// against two ceilings measured in the same run: device-to-device copy bandwidth and the bf16
// matrix rate. Prints markdown tables:
//   - decode: time per output token at each batch size and context, with the bytes the step must
//     move (model_cost.h) over the measured bandwidth as the floor;
//   - prefill: tokens/s with FLOPs over the measured matrix rate;
//   - per-op device time of one decode step (--breakdown).
// Decode at a long context starts from a synthetic context (Backend::randomize_state,
// ModelRunner::set_synthetic_length): its cost does not depend on what the state holds, and
// prefilling 256 x 32K tokens first would take minutes.
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "engine/model_runner.h"
#include "model/memory_plan.h"
#include "model/model_cost.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace deepinfer::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::string model, device = "auto", out;
  bool dummy = false;
  int threads = 0;
  std::vector<int> batch_sizes{1, 8, 32, 64, 128, 256};
  std::vector<int> input_lens{4096};
  int output_len = 32;
  int warmup = 4;
  int eager_steps = 4;
  int host_logit_steps = 8;
  bool breakdown = false;
  std::vector<int> breakdown_batches{1, 64};
  bool compare = false;
  bool no_graphs = false;
  bool no_decode = false, no_prefill = false;
  bool memory_plan = false;
  double device_gb = 0, reserve_gb = 6;
  int prefill_chunk = 8192;
  int64_t prefill_max_tokens = 65536;
  double max_seconds = 0;
  uint64_t seed = 0;
};

// Markdown goes to stdout (flushed as it comes) and, with --out, to a file.
class Report {
 public:
  explicit Report(const std::string& path) {
    if (!path.empty()) file_.open(path);
  }
  void line(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    std::printf("%s\n", buf);
    std::fflush(stdout);
    if (file_) file_ << buf << "\n" << std::flush;
  }
  void blank() { line("%s", ""); }

 private:
  std::ofstream file_;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

std::string gb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", bytes / 1e9);
  return b;
}

// The settings --compare times off their defaults, one at a time: the boolean rows of the backend
// option table (backend_options.h). Those a live backend cannot change (fixed when it is made) are
// refused by Backend::set_options and skipped.
struct Knob {
  std::string option, before, now;  // before: the value off the default; now: the default
};
std::vector<Knob> compare_knobs() {
  std::vector<Knob> knobs;
  for (const OptionInfo& o : backend_option_infos())
    if (o.type == "bool") knobs.push_back({std::string(o.key), o.default_value == "1" ? "0" : "1", std::string(o.default_value)});
  return knobs;
}

double sum_ms(const std::vector<OpTime>& prof) {
  double s = 0;
  for (const OpTime& t : prof) s += t.ms;
  return s;
}

class Bench {
 public:
  Bench(const BenchArgs& a, Backend& be, DeepseekV4& model, Report& rep)
      : a_(a),
        be_(be),
        model_(model),
        rep_(rep),
        cost_(model.config(), be.weight_dtype() == "native" ? WeightStorage::kNative : WeightStorage::kBf16),
        rng_(a.seed),
        t0_(Clock::now()) {
    if (auto o = backend_options_from_env()) options_ = o.value();
  }

  void set_ceilings(const DeviceCeilings& c) { ceil_ = c; }

  bool over_budget() const { return a_.max_seconds > 0 && seconds_since(t0_) > a_.max_seconds; }

  // Sets one backend option on the live backend (the others keep their values); false when the
  // backend refuses it (nothing changes then).
  bool set_knob(const std::string& key, const std::string& value) {
    BackendOptions o = options_;
    if (!set_backend_option(o, key, value) || !be_.set_options(o)) return false;
    options_ = o;
    return true;
  }

  std::vector<int32_t> random_ids(size_t n) {
    std::uniform_int_distribution<int32_t> tok(2, model_.config().vocab_size - 1);
    std::vector<int32_t> v(n);
    for (auto& x : v) x = tok(rng_);
    return v;
  }

  struct DecodeRow {
    int batch = 0;
    double tpot_ms = 0, eager_ms = 0, host_logits_ms = 0, greedy_ms = 0;
    ModelCost::DecodeBytes bytes;
    bool done = false;
  };

  // Decode at `context` for every batch size; then the breakdown.
  Result<void> decode(int context) {
    const int max_b = *std::max_element(a_.batch_sizes.begin(), a_.batch_sizes.end());
    // Every step a sequence takes, the breakdown's and the knob comparisons' included.
    const int knob_steps = a_.compare ? static_cast<int>(knobs_.size()) * (a_.warmup + a_.output_len + 1) : 0;
    const int steps = a_.eager_steps + a_.warmup + a_.output_len + 2 * a_.host_logit_steps + 7 + 1 + knob_steps;
    RunnerOptions ro;
    ro.max_sequences = max_b;
    ro.max_context = context + steps + 8;
    ro.graphs = !a_.no_graphs;
    DI_TRY(runner, ModelRunner::create(model_, be_, ro));
    std::fprintf(stderr, "decode at context %d: state for %d x %lld tokens\n", context, max_b, static_cast<long long>(ro.max_context));

    DecodeRuns runs;
    for (int B : a_.batch_sizes) {
      if (over_budget()) {
        DecodeRow row;
        row.batch = B;
        runs.rows.push_back(row);
        continue;
      }
      DI_TRYV(decode_batch(*runner, B, context, runs));
    }
    model_.set_logits_to_host(true);
    report_decode(context, runs.rows);
    report_decode_profiles(context, runs);
    return ok();
  }

  // Prefill of B sequences of `context` tokens, in forwards of at most prefill_chunk tokens.
  Result<void> prefill(int context) {
    std::vector<int> bs;
    for (int B : a_.batch_sizes)
      if (static_cast<int64_t>(B) * context <= std::max<int64_t>(a_.prefill_max_tokens, context)) bs.push_back(B);
    if (bs.empty()) bs.push_back(1);
    const int max_b = *std::max_element(bs.begin(), bs.end());
    RunnerOptions ro;
    ro.max_sequences = max_b + 1;
    ro.max_context = context;
    ro.graphs = !a_.no_graphs;
    DI_TRY(runner, ModelRunner::create(model_, be_, ro));
    std::fprintf(stderr, "prefill at context %d\n", context);
    model_.set_logits_to_host(false);
    DI_TRYV(warm_up_prefill(*runner, context));
    rep_.line("### Prefill at context %d", context);
    rep_.blank();
    rep_.line("B sequences of %d prompt tokens, processed as the engine's chunked prefill does: forwards of at most %d tokens "
              "(sequences packed), logits of each prompt's last token; the median of three runs, each with new prompts. FLOPs: projections, mixes, router, shared + %d routed "
              "experts, attention over the visible keys, the indexer's scores, the LM head (model_cost.h). Batches above %lld "
              "tokens are not run: their forwards are the same full chunks.",
              context, a_.prefill_chunk, model_.config().experts_per_token, static_cast<long long>(a_.prefill_max_tokens));
    rep_.blank();
    rep_.line("| batch | tokens | forwards | time s | tokens/s | TTFT ms (last sequence) | TFLOP/s | fraction of bf16 matrix rate |");
    rep_.line("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (int B : bs) {
      if (over_budget()) {
        rep_.line("| %d | (skipped: time budget) | | | | | | |", B);
        continue;
      }
      DI_TRY(t, time_prefill(*runner, B, context));
      const double tokens = static_cast<double>(B) * context;
      char frac[32] = "n/a";
      if (ceil_.bf16_flops > 0) std::snprintf(frac, sizeof frac, "%.1f%%", 100.0 * t.flops / t.seconds / ceil_.bf16_flops);
      rep_.line("| %d | %.0f | %d | %.3f | %.0f | %.1f | %.1f | %s |", B, tokens, t.forwards, t.seconds, tokens / t.seconds,
                t.seconds * 1e3, t.flops / t.seconds / 1e12, frac);
      prefill_results_.push_back({context, B, tokens / t.seconds, ceil_.bf16_flops > 0 ? t.flops / t.seconds / ceil_.bf16_flops : 0});
      std::fprintf(stderr, "  batch %d: %.0f tokens/s (median of %d)\n", B, tokens / t.seconds, t.runs);
    }
    rep_.blank();
    if (a_.breakdown && !over_budget()) {
      DI_TRYV(prefill_breakdown(*runner, context));
    }
    model_.set_logits_to_host(true);
    return ok();
  }

  void summary() {
    rep_.line("### Against the targets");
    rep_.blank();
    rep_.line("| figure | measured | floor or ceiling | ratio | target |");
    rep_.line("|---|---:|---:|---:|---|");
    for (const auto& [ctx, r] : decode_results_) {
      if (r.batch != 1 && r.batch != 64) continue;
      if (ceil_.copy_bytes_per_s <= 0) continue;
      const double floor_ms = r.bytes.total() / ceil_.copy_bytes_per_s * 1e3;
      rep_.line("| batch-%d decode TPOT, context %d | %.3f ms | %.3f ms | %.2fx | <= %s |", r.batch, ctx, r.tpot_ms, floor_ms,
                r.tpot_ms / floor_ms, r.batch == 1 ? "1.5x" : "1.6x");
    }
    for (const auto& p : prefill_results_)
      if (p.fraction > 0)
        rep_.line("| prefill, batch %d, context %d | %.0f tokens/s | | %.1f%% of the bf16 matrix rate | >= 40%% |", p.batch, p.context,
                  p.tokens_per_s, 100 * p.fraction);
    rep_.blank();
  }

 private:
  // A knob compared off its default at one batch size: the step's op sums and graph TPOTs.
  struct Compare {
    int batch;
    const Knob* knob;
    double before_sum, now_sum, before_tpot, now_tpot;
  };
  // What the decode sweep of one context measured.
  struct DecodeRuns {
    std::vector<DecodeRow> rows;
    std::vector<std::pair<int, std::vector<OpTime>>> profiles;  // by batch size
    std::vector<Compare> compares;
  };
  // Timed decode steps of a set of sequences, one token each.
  struct DecodeSteps {
    Bench& bench;
    ModelRunner& runner;
    std::vector<int32_t> seqs;
    bool greedy = false;  // steps end with the best token of each row (ModelRunner::step_greedy)

    // One step's wall time (ms), the backend finished.
    Result<double> step() {
      std::vector<int32_t> ids = bench.random_ids(seqs.size());
      std::vector<ModelRunner::Feed> feeds;
      for (size_t i = 0; i < seqs.size(); ++i) feeds.push_back({seqs[i], &ids[i], 1, ForwardBatch::Logits::kLast});
      const auto t = Clock::now();
      if (greedy) {
        DI_TRYV(runner.step_greedy(feeds));
      } else {
        DI_TRYV(runner.step(feeds));
      }
      DI_TRYV(bench.be_.finish());
      return seconds_since(t) * 1e3;
    }
    Result<double> mean_of(int n) {
      double sum = 0;
      for (int i = 0; i < n; ++i) {
        DI_TRY(ms, step());
        sum += ms;
      }
      return n > 0 ? sum / n : 0.0;
    }
  };
  // A prefill of B prompts: the median wall time of its runs, its forwards and FLOPs.
  struct PrefillTime {
    double seconds = 0, flops = 0;
    int forwards = 0, runs = 0;
  };

  // The decode row of batch B (eager, graph replay, logits to the host, greedy), then its breakdown.
  Result<void> decode_batch(ModelRunner& runner, int B, int context, DecodeRuns& runs) {
    DecodeRow row;
    row.batch = B;
    DecodeSteps steps{*this, runner, {}};
    for (int i = 0; i < B; ++i) {
      DI_TRY(id, runner.open_sequence());
      DI_TRYV(runner.set_synthetic_length(id, context));
      steps.seqs.push_back(id);
    }
    DI_TRYV(be_.randomize_state(a_.seed + static_cast<uint64_t>(B)));
    model_.set_logits_to_host(false);
    // Eager (every op launched from the host) for comparison, then graph replays.
    be_.set_graphs(false);
    DI_TRYV(steps.mean_of(1));
    DI_TRY(eager, steps.mean_of(a_.eager_steps));
    row.eager_ms = eager;
    be_.set_graphs(!a_.no_graphs);
    DI_TRYV(steps.mean_of(a_.warmup));
    DI_TRY(tpot, steps.mean_of(a_.output_len));
    row.tpot_ms = tpot;
    // The same steps with the logits copied to the host, as the engine's sampler needs them today.
    model_.set_logits_to_host(true);
    DI_TRYV(steps.mean_of(a_.host_logit_steps > 0 ? 1 : 0));  // the first allocates the page-locked memory
    DI_TRY(with_host, steps.mean_of(a_.host_logit_steps));
    row.host_logits_ms = a_.host_logit_steps > 0 ? with_host - tpot : 0;
    model_.set_logits_to_host(false);
    // Greedy decoding's steps: the argmax on the device and one id per row back (graphs of their own).
    steps.greedy = true;
    DI_TRYV(steps.mean_of(a_.host_logit_steps > 0 ? 2 : 0));
    DI_TRY(with_greedy, steps.mean_of(a_.host_logit_steps));
    row.greedy_ms = a_.host_logit_steps > 0 ? with_greedy - tpot : 0;
    steps.greedy = false;
    row.bytes = cost_.decode_bytes(B, context + a_.eager_steps + a_.warmup + a_.output_len / 2);
    row.done = true;
    runs.rows.push_back(row);
    std::fprintf(stderr, "  batch %d: %.3f ms/token (eager %.3f)\n", B, row.tpot_ms, row.eager_ms);

    if (a_.breakdown && std::find(a_.breakdown_batches.begin(), a_.breakdown_batches.end(), B) != a_.breakdown_batches.end()) {
      DI_TRYV(decode_breakdown(steps, B, row.tpot_ms, runs));
    }
    for (int32_t id : steps.seqs) runner.close_sequence(id);
    return ok();
  }

  // One profiled eager step of batch B; with --compare, each option off its default.
  Result<void> decode_breakdown(DecodeSteps& steps, int B, double tpot_ms, DecodeRuns& runs) {
    be_.set_op_profiling(true);
    DI_TRYV(steps.step());
    DI_TRY(prof, be_.take_op_profile());
    runs.profiles.emplace_back(B, std::move(prof));
    if (a_.compare) {
      // Each option off its default, one at a time.
      for (const Knob& k : knobs_) {
        // The graph TPOT then (set_options dropped the graphs: warm up to re-capture; the warm-up
        // also keeps first-launch costs out of the profile), then its profile.
        be_.set_op_profiling(false);
        if (!set_knob(k.option, k.before)) continue;
        DI_TRYV(steps.mean_of(a_.warmup));
        DI_TRY(tpot1, steps.mean_of(a_.output_len));
        be_.set_op_profiling(true);
        DI_TRYV(steps.step());
        DI_TRY(prof1, be_.take_op_profile());
        set_knob(k.option, k.now);
        runs.compares.push_back({B, &k, sum_ms(prof1), sum_ms(runs.profiles.back().second), tpot1, tpot_ms});
      }
    }
    be_.set_op_profiling(false);
    return ok();
  }

  void report_decode(int context, const std::vector<DecodeRow>& rows) {
    rep_.line("### Decode at context %d", context);
    rep_.blank();
    rep_.line("Each sequence holds %d tokens of synthetic context; a step decodes one token per sequence. TPOT: mean over %d "
              "steps (CUDA graphs%s), logits left on the device; eager: every op launched from the host; +logits D2H: "
              "extra time when the step copies the logits to page-locked host memory (what the engine's host sampler reads); "
              "+greedy ms: extra time when the step ends with each row's best token instead (argmax on the device, 4 bytes "
              "per row back: the engine's plain greedy steps). "
              "Floor: bytes the step must move / measured copy bandwidth (dense weights + the routed experts the batch "
              "activates under uniform routing + the state attention and the indexer read).",
              context, a_.output_len, a_.no_graphs ? " off" : "");
    rep_.blank();
    rep_.line("| batch | TPOT ms | eager ms | +logits D2H ms | +greedy ms | tokens/s | experts/layer | bytes/step GB | floor ms | "
              "TPOT / floor | fraction of HBM BW |");
    rep_.line("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const DecodeRow& r : rows) {
      if (!r.done) {
        rep_.line("| %d | (skipped: time budget) | | | | | | | | | |", r.batch);
        continue;
      }
      const double floor_ms = ceil_.copy_bytes_per_s > 0 ? r.bytes.total() / ceil_.copy_bytes_per_s * 1e3 : 0;
      char fl[32] = "n/a", ratio[32] = "n/a", frac[32] = "n/a";
      if (floor_ms > 0) {
        std::snprintf(fl, sizeof fl, "%.3f", floor_ms);
        std::snprintf(ratio, sizeof ratio, "%.2f", r.tpot_ms / floor_ms);
        std::snprintf(frac, sizeof frac, "%.0f%%", 100.0 * floor_ms / r.tpot_ms);
      }
      rep_.line("| %d | %.3f | %.3f | %.3f | %.3f | %.0f | %.0f | %s | %s | %s | %s |", r.batch, r.tpot_ms, r.eager_ms,
                r.host_logits_ms, r.greedy_ms, r.batch / (r.tpot_ms * 1e-3), r.bytes.distinct_experts, gb(r.bytes.total()).c_str(),
                fl, ratio, frac);
      decode_results_.push_back({context, r});
    }
    rep_.blank();
  }

  void report_decode_profiles(int context, const DecodeRuns& runs) {
    for (const auto& [B, prof] : runs.profiles) {
      if (prof.empty()) {
        rep_.line("(%s keeps no per-op timings: no breakdown for batch %d.)", be_.name().c_str(), B);
        rep_.blank();
        continue;
      }
      double total = 0;
      for (const OpTime& t : prof) total += t.ms;
      rep_.line("#### Per-op device time of one decode step: batch %d, context %d (eager, events around each op)", B, context);
      rep_.blank();
      rep_.line("Sum %.3f ms over %zu kinds of op. Products are named by their weight's shape (rows x cols): e.g. at V4-Flash "
                "shape 1024x4096 wq_a, 32768x1024 wq_b, 512x4096 wkv, 4096x8192 wo_b, grouped 8192x4096 wo_a, 129280x4096 the LM head; "
                "the shared expert's three products are one op.",
                total, prof.size());
      rep_.blank();
      rep_.line("| op | calls | ms | share |");
      rep_.line("|---|---:|---:|---:|");
      const size_t n = std::min<size_t>(prof.size(), 20);
      for (size_t i = 0; i < n; ++i)
        rep_.line("| %s | %lld | %.3f | %.1f%% |", prof[i].op.c_str(), static_cast<long long>(prof[i].calls), prof[i].ms,
                  total > 0 ? 100.0 * prof[i].ms / total : 0.0);
      bool first = true;
      for (const Compare& cmp : runs.compares)
        if (cmp.batch == B) {
          if (first) {
            rep_.blank();
            rep_.line("Backend options off their defaults (one at a time, same step; `deepinfer options` says what each does):");
            rep_.blank();
            rep_.line("| option | step sum then | step sum default | TPOT then | TPOT default |");
            rep_.line("|---|---:|---:|---:|---:|");
            first = false;
          }
          rep_.line("| %s=%s | %.3f | %.3f | %.3f | %.3f |", cmp.knob->option.c_str(), cmp.knob->before.c_str(), cmp.before_sum, cmp.now_sum,
                    cmp.before_tpot, cmp.now_tpot);
        }
      rep_.blank();
    }
  }

  // Warm-up: a whole prompt of `context` tokens, twice. The first grows the backend's scratch
  // arena chunk by chunk (a later chunk sees more context: the indexer's scores grow with it); the
  // second merges the chunks (a device sync, cudaFree and cudaMalloc: ~10 ms at an 8192-token
  // forward of V4-Flash-4L), which would otherwise land in the timed forwards.
  Result<void> warm_up_prefill(ModelRunner& runner, int context) {
    for (int warm = 0; warm < 2; ++warm) {
      DI_TRY(id, runner.open_sequence());
      std::vector<int32_t> ids = random_ids(static_cast<size_t>(context));
      for (int done = 0; done < context;) {
        const int n = std::min(context - done, a_.prefill_chunk);
        DI_TRYV(runner.step({{id, ids.data() + done, n, done + n == context ? ForwardBatch::Logits::kLast : ForwardBatch::Logits::kNone}}));
        done += n;
      }
      DI_TRYV(be_.finish());
      runner.close_sequence(id);
    }
    return ok();
  }

  // Three runs, each with new prompts (new routing: an arena high-water mark or a new product
  // shape costs host time once, not in steady state); the median is reported.
  Result<PrefillTime> time_prefill(ModelRunner& runner, int B, int context) {
    std::vector<double> times;
    PrefillTime out;
    for (int run = 0; run < 3 && (run == 0 || !over_budget()); ++run) {
      std::vector<int32_t> seqs;
      std::vector<std::vector<int32_t>> prompts;
      for (int i = 0; i < B; ++i) {
        DI_TRY(id, runner.open_sequence());
        seqs.push_back(id);
        prompts.push_back(random_ids(static_cast<size_t>(context)));
      }
      std::vector<int> done(B, 0);
      out.forwards = 0;
      out.flops = 0;
      const auto t = Clock::now();
      for (int next = 0; next < B;) {
        std::vector<ModelRunner::Feed> feeds;
        int budget = a_.prefill_chunk;
        for (int i = next; i < B && budget > 0; ++i) {
          const int n = std::min(budget, context - done[i]);
          const bool last = done[i] + n == context;
          feeds.push_back({seqs[i], prompts[i].data() + done[i], n, last ? ForwardBatch::Logits::kLast : ForwardBatch::Logits::kNone});
          for (int p = done[i]; p < done[i] + n; ++p) out.flops += cost_.token_flops(p);
          if (last) out.flops += cost_.head_flops();
          done[i] += n;
          budget -= n;
        }
        DI_TRYV(runner.step(feeds));
        ++out.forwards;
        while (next < B && done[next] == context) ++next;
      }
      DI_TRYV(be_.finish());
      times.push_back(seconds_since(t));
      for (int32_t id : seqs) runner.close_sequence(id);
    }
    std::sort(times.begin(), times.end());
    out.seconds = times[times.size() / 2];
    out.runs = static_cast<int>(times.size());
    return out;
  }

  // The per-op profile of the last chunk of one prompt (the most context), after a synthetic
  // context; with --compare, each option off its default.
  Result<void> prefill_breakdown(ModelRunner& runner, int context) {
    const int n = std::min(context, a_.prefill_chunk);
    std::vector<int32_t> ids = random_ids(static_cast<size_t>(n));
    auto profile_chunk = [&]() -> Result<std::vector<OpTime>> {
      DI_TRY(id, runner.open_sequence());
      DI_TRYV(runner.set_synthetic_length(id, context - n));
      DI_TRYV(be_.randomize_state(a_.seed + 99));
      be_.set_op_profiling(true);
      auto stepped = runner.step({{id, ids.data(), n, ForwardBatch::Logits::kLast}});
      auto prof = be_.take_op_profile();
      be_.set_op_profiling(false);
      runner.close_sequence(id);
      DI_TRYV(stepped);
      return prof;
    };
    // Profiled twice: the first forward of a profile still pays first-use costs (cuBLAS picks
    // kernels for the new expert-slab shapes).
    if (auto warm = profile_chunk(); !warm) return warm.error();
    DI_TRY(prof, profile_chunk());
    if (prof.empty()) return ok();
    const double total = sum_ms(prof);
    double flops = cost_.head_flops();
    for (int p = context - n; p < context; ++p) flops += cost_.token_flops(p);
    rep_.line("#### Per-op device time of one prefill forward: %d tokens at positions %d..%d", n, context - n, context - 1);
    rep_.blank();
    rep_.line("Sum %.3f ms (%.0f tokens/s, %.1f TFLOP/s).", total, n / (total * 1e-3), flops / (total * 1e-3) / 1e12);
    rep_.blank();
    rep_.line("| op | calls | ms | share |");
    rep_.line("|---|---:|---:|---:|");
    for (size_t i = 0; i < std::min<size_t>(prof.size(), 15); ++i)
      rep_.line("| %s | %lld | %.3f | %.1f%% |", prof[i].op.c_str(), static_cast<long long>(prof[i].calls), prof[i].ms,
                100.0 * prof[i].ms / total);
    rep_.blank();
    if (a_.compare) {
      rep_.line("Backend options off their defaults (one at a time, same forward):");
      rep_.blank();
      rep_.line("| option | forward sum then | forward sum default |");
      rep_.line("|---|---:|---:|");
      for (const Knob& k : knobs_) {
        if (over_budget() || !set_knob(k.option, k.before)) continue;
        auto before = profile_chunk();
        set_knob(k.option, k.now);
        DI_TRYV(before);
        rep_.line("| %s=%s | %.3f | %.3f |", k.option.c_str(), k.before.c_str(), sum_ms(before.value()), total);
      }
      rep_.blank();
    }
    return ok();
  }

  struct PrefillResult {
    int context, batch;
    double tokens_per_s, fraction;
  };

  const BenchArgs& a_;
  Backend& be_;
  BackendOptions options_;  // what set_knob last applied
  const std::vector<Knob> knobs_ = compare_knobs();
  DeepseekV4& model_;
  Report& rep_;
  ModelCost cost_;
  std::mt19937 rng_;
  Clock::time_point t0_;
  DeviceCeilings ceil_;
  std::vector<std::pair<int, DecodeRow>> decode_results_;
  std::vector<PrefillResult> prefill_results_;
};

// --memory-plan: the model's weights in the released formats against the device's memory, without
// building the model (the full V4-Flash does not fit in bf16).
Result<void> print_memory_plan(const BenchArgs& a, Backend& backend, Report& rep) {
  DI_TRY(config, DeepseekV4::read_config(a.model));
  DI_TRY(cpu, make_cpu_backend(1));  // (the model's small derived tables)
  DI_TRY(plan, plan_memory(config, *cpu));
  const bool cuda = backend.name().rfind("cuda", 0) == 0;
  const double device = a.device_gb > 0 ? a.device_gb * 1e9 : cuda ? static_cast<double>(backend.free_memory_bytes()) : 141e9;
  rep.line("## deepinfer bench --memory-plan");
  rep.blank();
  rep.line("- command: `%s`", command_line().c_str());
  rep.line("- date: %s", utc_now().c_str());
  rep.line("- model %s: %d layers, hidden %d, %d experts (inter %d), vocab %d", a.model.c_str(), config.num_layers, config.hidden_size,
           config.num_experts, config.moe_intermediate_size, config.vocab_size);
  rep.line("- device: %s", a.device_gb > 0 ? "as given (--device-gb)"
                           : cuda          ? (backend.name() + ", its free memory now").c_str()
                                           : "an H200's 141 GB (no CUDA device here; --device-gb sets another)");
  rep.blank();
  for (const std::string& line : describe_memory_plan(plan, device, a.reserve_gb * 1e9, {4096, 32768, 131072, 1048576}))
    rep.line("%s", line.c_str());
  return ok();
}

Result<void> run_bench(const BenchArgs& a) {
  Report rep(a.out);
  std::unique_ptr<Backend> backend;
  auto cpu = [&]() -> Result<void> {
    DI_TRY(b, make_cpu_backend(a.threads));
    backend = std::move(b);
    return ok();
  };
  if (a.device == "cpu") {
    DI_TRYV(cpu());
  } else {
    auto cuda = make_backend(a.device == "auto" ? "cuda" : a.device);
    if (cuda) {
      backend = std::move(cuda).value();
    } else if (a.device != "auto") {
      return cuda.error();
    } else {
      DI_TRYV(cpu());
    }
  }
  if (a.memory_plan) return print_memory_plan(a, *backend, rep);
  std::unique_ptr<DeepseekV4> model;
  const auto t_load = Clock::now();
  if (a.dummy) {
    DI_TRY(config, DeepseekV4::read_config(a.model));
    std::fprintf(stderr, "building %s with random weights on %s ...\n", a.model.c_str(), backend->name().c_str());
    DI_TRY(m, DeepseekV4::random(config, *backend, a.seed));
    model = std::move(m);
  } else {
    DI_TRY(m, load_model_with_progress(a.model, *backend));
    model = std::move(m);
  }
  const double load_s = seconds_since(t_load);
  const ModelConfig& c = model->config();
  const bool native = backend->weight_dtype() == "native";
  const ModelCost cost(c, native ? WeightStorage::kNative : WeightStorage::kBf16);
  const std::string device_weights =
      backend->weight_bytes() >= 0 ? ", " + gb(static_cast<double>(backend->weight_bytes())) + " GB on the device" : std::string();

  rep.line("## deepinfer bench");
  rep.blank();
  rep.line("- command: `%s`", command_line().c_str());
  rep.line("- date: %s", utc_now().c_str());
  rep.line(
      "- backend: %s; model %s%s: %d layers (%s), hidden %d, %d heads x %d, %d experts top-%d (inter %d), vocab %d; "
      "%s GB of weights as the floors count them (%s)%s; built in %.2f s",
      backend->name().c_str(), a.model.c_str(), a.dummy ? " (random weights)" : "", c.num_layers,
      [&] {
        std::string s;
        for (int l = 0; l < c.num_layers; ++l) {
          if (l) s += ", ";
          s += c.attention_types[l] == AttentionType::kCsa ? "CSA" : c.attention_types[l] == AttentionType::kHca ? "HCA" : "SWA";
          s += c.moe_routing[l] == MoeRouting::kHash ? "/hash" : "";
        }
        return s;
      }()
          .c_str(),
      c.hidden_size, c.num_heads, c.head_dim, c.num_experts, c.experts_per_token, c.moe_intermediate_size, c.vocab_size,
      gb(cost.stored_weight_bytes()).c_str(), native ? "FP8 linears, MXFP4 experts, bf16 other matrices" : "bf16 matrices",
      device_weights.c_str(), load_s);

  Bench bench(a, *backend, *model, rep);
  auto ceil = backend->measure_ceilings();
  if (ceil) {
    const DeviceCeilings& d = ceil.value();
    rep.line("- device: %s, %.0f GiB; measured copy bandwidth %.2f TB/s (1 GiB device-to-device, read + write); bf16 matrix "
             "rate %.0f TFLOP/s (cuBLAS 8192^3, fp32 accumulation); both medians of 20 and 10 runs",
             d.device.c_str(), static_cast<double>(d.memory_bytes) / (1 << 30), d.copy_bytes_per_s / 1e12, d.bf16_flops / 1e12);
    bench.set_ceilings(d);
  } else {
    rep.line("- ceilings: not measured (%s): fractions are n/a", ceil.error().message.c_str());
  }
  rep.blank();

  for (int ctx : a.input_lens) {
    if (!a.no_decode) {
      DI_TRYV(bench.decode(ctx));
    }
    if (!a.no_prefill) {
      DI_TRYV(bench.prefill(ctx));
    }
  }
  bench.summary();
  return ok();
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Offline throughput and latency (prefill, decode, per-op breakdown) against the hardware ceilings");
  cmd->add_option("--model", a->model, "Model directory, or with --dummy-weights a config.json")->required();
  cmd->add_flag("--dummy-weights", a->dummy, "Build the model from its config alone with random weights made on the device");
  cmd->add_option("--device", a->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads (0: one per core)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch-sizes", a->batch_sizes, "Decode batch sizes")->delimiter(',')->capture_default_str();
  cmd->add_option("--input-len", a->input_lens, "Prompt length = decode context (several: each gets its tables)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--output-len", a->output_len, "Decode steps timed per batch size")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "Untimed decode steps before timing (graph capture happens here)")->capture_default_str();
  cmd->add_option("--eager-steps", a->eager_steps, "Decode steps timed without CUDA graphs, for comparison")->capture_default_str();
  cmd->add_flag("--breakdown", a->breakdown, "Per-op device time of one decode step");
  cmd->add_option("--breakdown-batches", a->breakdown_batches, "Batch sizes that get a breakdown")->delimiter(',')->capture_default_str();
  cmd->add_flag("--compare", a->compare, "In the breakdown, also time each backend option off its default (one at a time)");
  cmd->add_flag("--no-graphs", a->no_graphs, "Never replay decode steps as CUDA graphs");
  cmd->add_flag("--no-decode", a->no_decode, "Skip decode");
  cmd->add_flag("--no-prefill", a->no_prefill, "Skip prefill");
  cmd->add_option("--prefill-chunk", a->prefill_chunk, "Tokens per prefill forward")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--prefill-max-tokens", a->prefill_max_tokens, "Largest batch x input-len prefilled")->capture_default_str();
  cmd->add_option("--max-seconds", a->max_seconds, "Skip what starts after this many seconds (0: no limit)")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of the weights, state and token ids")->capture_default_str();
  cmd->add_option("--out", a->out, "Also write the markdown to this file");
  cmd->add_flag("--memory-plan", a->memory_plan,
                "Only print what the model needs with its weights in the released formats (FP8, MXFP4) against the device's memory");
  cmd->add_option("--device-gb", a->device_gb, "--memory-plan: device memory in GB (default: the CUDA device's free memory, else 141)");
  cmd->add_option("--reserve-gb", a->reserve_gb, "--memory-plan: GB kept on each device for activations and workspaces")
      ->capture_default_str();
  cmd->callback([a, &exit_code] { exit_code = report(run_bench(*a)); });
}

}  // namespace deepinfer::cli
