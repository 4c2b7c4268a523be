// What Backend::sample_rows takes for each row of logits: the arguments of sample_row (sampler.h),
// so a backend samples where the logits are and returns token ids (and logprobs) instead of the rows.
#pragma once

#include "sample/sampler.h"
#include "util/result.h"

#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer {

class ThreadPool;

// One row to sample: sample_row's arguments but the row itself. The pointers and spans must stay
// valid for the call.
struct RowSampling {
  const SamplingParams* params = nullptr;        // passed validate() for the row's width
  const SequenceSamplingState* state = nullptr;  // the completion's history (penalties, min_tokens)
  std::span<const int32_t> eos_token_ids;        // banned by min_tokens unless ignore_eos
  std::span<const uint32_t> grammar_bitmask;     // bitmask_words(width) words, bit set = allowed; empty: none
  SampleKey key;                                 // (seed, completion index, output position); unused when greedy
};

// kInvalidArgument unless `rows` has one entry per logits row (`logits_rows` of them).
Result<void> check_row_count(int64_t logits_rows, size_t rows);

// sample_row on each row of `logits` (rows.size() rows of `width` floats in host memory, left
// holding sample_row's processed rows), on `pool` when given. out[i] is row i's result.
void sample_rows_on_host(float* logits, int64_t width, std::span<const RowSampling> rows, std::vector<Result<SampleResult>>& out,
                         ThreadPool* pool);

}  // namespace deepinfer
