// Sampling on the device (sampling.cu): the processing order of src/sample/sampling_params.h on rows
// of logits, one block (or one cluster of blocks) per row for the choice, so a row's token depends
// on nothing but the row and its spec (batch-invariant), and the same uniform draw as the host's
// (Philox4x32-10 keyed by (seed, completion, position)). Masses are summed in 64-bit fixed point (weights times 2^40): exact
// integer sums, the same in any order.
#pragma once

#include "launch.h"

namespace deepinfer::kernels {

inline constexpr int kMaxTopLogprobs = 20;                    // sampling_params.h's kMaxLogprobs
inline constexpr int64_t kMaxSampleVocab = int64_t(1) << 24;  // fixed-point masses of wider rows could overflow

// Philox4x32-10's constants, from the host's definition (src/sample/philox.h).
struct PhiloxConstants {
  uint32_t multiplier0, multiplier1, weyl0, weyl1;
};

enum SampleRowFlag : int32_t {
  kRowSkip = 1,          // not sampled (the host found it invalid): its result is not read
  kRowProcessed = 2,     // steps 1-5 change the row: the kernel writes it to the work rows first
  kRowAllowedOnly = 4,   // tokens without kEditAllowed get -inf
  kRowGrammar = 8,       // mask_offset: the row's grammar bitmask
  kRowRawLogprobs = 16,  // logprobs of the raw logits (else of the processed ones)
};

// One row's parameters (sampling_params.h).
struct SampleRowSpec {
  float temperature = 1.0f;  // 0: greedy
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  float repetition = 1.0f, frequency = 0.0f, presence = 0.0f;
  int32_t top_k = 0;  // <= 0: off
  uint32_t seed_lo = 0, seed_hi = 0, completion = 0, position = 0;
  int32_t logprobs = -1;                   // -1: off; else the number of top alternatives, <= kMaxTopLogprobs
  int32_t flags = 0;                       // SampleRowFlag
  int32_t mask_offset = 0;                 // words into mask_words (kRowGrammar)
  int32_t edit_begin = 0, edit_count = 0;  // the row's edits, sorted by token, one per token
};

enum SampleEditFlag : uint32_t {
  kEditAllowed = 1,  // listed in allowed_token_ids
  kEditBias = 2,     // logit_bias: += bias
  kEditBanned = 4,   // min_tokens: a stop or EOS id gets -inf
  kEditSeen = 8,     // in the prompt or the output: the penalties apply (output_count for frequency / presence)
};

// What steps 2-5 do to one token.
struct SampleEdit {
  int32_t token = 0;
  uint32_t flags = 0;
  float bias = 0.0f;
  int32_t output_count = 0;
};

enum SampleStatus : int32_t { kSampleNoToken = -1, kSampleBadLogit = -2 };

// One row's result.
struct SampleOut {
  int32_t token;      // the sampled token, or a SampleStatus
  int32_t bad_index;  // kSampleBadLogit: the first NaN / +inf logit
  float bad_value;
  float logprob;  // logprobs (spec.logprobs >= 0): the token's, its rank, the top n_top
  int32_t rank;
  int32_t n_top;
  int32_t top_token[kMaxTopLogprobs];
  float top_logprob[kMaxTopLogprobs];
};

// Floats per work row (rows of processed logits).
int64_t sample_work_stride(int64_t vocab);

// Samples rows of logits [rows, vocab] (vocab <= kMaxSampleVocab): out[r] from specs[r], its edits
// (edits + spec.edit_begin) and grammar mask (mask_words + spec.mask_offset). work: rows *
// sample_work_stride(vocab) floats, or null where no spec has kRowProcessed. row_blocks: the blocks
// that share each row (a cluster: 1, 2, 4 or 8; more than 1 on sm_90 only), or 0 for
// sample_row_blocks(rows, vocab); the results do not depend on it. Launch sizes depend only on
// rows, vocab and row_blocks (capturable).
cudaError_t sample_rows(const float* logits, int64_t rows, int64_t vocab, const SampleRowSpec* specs, const SampleEdit* edits,
                        const uint32_t* mask_words, float* work, SampleOut* out, const PhiloxConstants& philox, Stream s,
                        int row_blocks = 0);

// The blocks sample_rows gives each of `rows` rows of `vocab` logits by default: as many as keep
// every block on a multiprocessor of its own, up to 8, while each block has a few thousand tokens of
// the row (one on devices before sm_90).
int sample_row_blocks(int64_t rows, int64_t vocab);
// The 53 random bits of each token draw: keys[4 i .. 4 i + 3] = seed low word, seed high word,
// completion, position (the device side of sample_uniform, for tests).
cudaError_t sample_uniform_bits(const uint32_t* keys, int64_t n, const PhiloxConstants& philox, uint64_t* bits, Stream s);

}  // namespace deepinfer::kernels
