// The sampler's randomness: Philox4x32-10 keyed by the request seed, with the draw's coordinates as
// the counter. A token's draw depends only on (seed, completion index, output position), never on
// batch composition, scheduling, preemption or how many draws other requests made.
#pragma once

#include "util/result.h"

#include <cstdint>

namespace deepinfer {

// Coordinates of one sampled token.
struct SampleKey {
  uint64_t seed = 0;
  uint32_t completion_index = 0;  // which of the request's n completions, [0, n)
  uint32_t position = 0;          // index of the token in the completion's output, 0 = first
};

// The uniform draw of one token: 53 random bits as a double in [0, 1).
// Philox key = seed (low word first); counter = (position, completion_index, 0, 0).
double sample_uniform(const SampleKey& key);

// A seed derived from a parent seed and a stream number (e.g. engine seed and request id), for
// engines configured with one seed. Uses a counter domain that token draws never touch.
uint64_t derive_seed(uint64_t parent_seed, uint64_t stream);

// A fresh seed from the operating system's entropy source, for requests without one. The engine
// reports it so the output can be replayed. Fails (Code::kInternal) only if there is no entropy
// source.
Result<uint64_t> fresh_seed();

}  // namespace deepinfer
