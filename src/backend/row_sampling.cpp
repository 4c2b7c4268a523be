#include "backend/row_sampling.h"

#include "util/thread_pool.h"

namespace deepinfer {
namespace {

Result<SampleResult> sample_one(std::span<float> row, const RowSampling& r) {
  if (!r.params || !r.state) return make_error(Code::kInvalidArgument, "a row to sample has no sampling parameters or state");
  return sample_row(row, *r.params, *r.state, r.eos_token_ids, r.grammar_bitmask, r.key);
}

}  // namespace

Result<void> check_row_count(int64_t logits_rows, size_t rows) {
  if (logits_rows != static_cast<int64_t>(rows))
    return make_error(Code::kInvalidArgument, "sample_rows: {} rows of logits, {} rows to sample", logits_rows, rows);
  return ok();
}

void sample_rows_on_host(float* logits, int64_t width, std::span<const RowSampling> rows, std::vector<Result<SampleResult>>& out,
                         ThreadPool* pool) {
  out.assign(rows.size(), make_error(Code::kInternal, "row not sampled"));
  const auto run = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i)
      out[i] = sample_one(std::span<float>(logits + static_cast<int64_t>(i) * width, static_cast<size_t>(width)), rows[i]);
  };
  if (pool && rows.size() > 1) {
    pool->parallel_for(rows.size(), 1, run);
  } else {
    run(0, rows.size());
  }
}

}  // namespace deepinfer
