// What a tokenizer.json may ask for. Real files use a few steps nested once or twice; beyond these
// limits a file is Code::kModelFormat, so that loading and encoding stay bounded in stack, memory
// and time whatever the file says.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::text {

// Sequences nested inside Sequences (normalizer, pre_tokenizer, decoder).
inline constexpr std::size_t kMaxSequenceDepth = 32;
// Steps once Sequences are flattened: each pre-tokenizer step is a stack frame per piece while
// encoding, each normalizer step a pass over the text.
inline constexpr std::size_t kMaxPreTokenizerSteps = 64;
inline constexpr std::size_t kMaxNormalizerSteps = 64;
// Token ids: below 2^24 (config.json's vocab_size has the same bound), and below twice the
// vocabulary's entries plus kSpareTokenIds (room for padded vocabularies and added tokens). Every id
// below the largest costs a slot of the id table (~70 bytes).
inline constexpr int64_t kMaxTokenIds = int64_t{1} << 24;
inline constexpr int64_t kSpareTokenIds = 65536;
// tokenizer.json is parsed whole (its DOM takes 5-12 times its size); tokenizer_config.json is small.
inline constexpr uint64_t kMaxTokenizerFileBytes = 128ull << 20;  // the largest real ones are ~35 MB
inline constexpr uint64_t kMaxTokenizerConfigBytes = 16ull << 20;

}  // namespace deepinfer::text
