#include "backend/cuda/sample_pack.h"

#include "backend/cuda/cuda_common.h"
#include "sample/logits_processors.h"

#include <algorithm>
#include <cstring>

namespace deepinfer {
namespace {

namespace kn = kernels;

size_t align16(size_t n) { return (n + 15) & ~size_t(15); }

// What sample_row checks before the logits, and what the kernels need to stay inside the row (the
// host sampler's callers guarantee these through validate()).
Result<void> check_row(const RowSampling& row, int64_t vocab) {
  if (!row.params || !row.state) return make_error(Code::kInvalidArgument, "a row to sample has no sampling parameters or state");
  const SamplingParams& p = *row.params;
  if (row.state->vocab_size() != vocab)
    return make_error(Code::kInvalidArgument, "logits row has {} entries, the vocabulary {}", vocab, row.state->vocab_size());
  for (int32_t eos : row.eos_token_ids)
    if (eos < 0 || eos >= vocab) return make_error(Code::kInvalidArgument, "EOS id {} is outside the vocabulary [0, {})", eos, vocab);
  const auto outside = [&](const char* field, int32_t t) {
    return make_error(Code::kInvalidArgument, "{}: token {} is outside the vocabulary [0, {})", field, t, vocab);
  };
  for (int32_t t : p.allowed_token_ids)
    if (t < 0 || t >= vocab) return outside("allowed_token_ids", t);
  for (const auto& [t, bias] : p.logit_bias)
    if (t < 0 || t >= vocab) return outside("logit_bias", t);
  for (int32_t t : p.stop_token_ids)
    if (t < 0 || t >= vocab) return outside("stop_token_ids", t);
  if (p.logprobs && (*p.logprobs < 0 || *p.logprobs > kn::kMaxTopLogprobs))
    return make_error(Code::kInvalidArgument, "logprobs={} is outside [0, {}]", *p.logprobs, kn::kMaxTopLogprobs);
  return ok();
}

}  // namespace

SamplePack::~SamplePack() {
  if (in_) cudaFreeHost(in_);
  if (out_) cudaFreeHost(out_);
  if (in_device_) cudaFree(in_device_);
  if (uploaded_) cudaEventDestroy(uploaded_);
}

cudaError_t SamplePack::upload_beside(cudaStream_t copy, cudaStream_t run, const void** device) {
  cudaError_t e = cudaSuccess;
  if (!uploaded_) e = cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming);
  if (e == cudaSuccess && in_used_ > in_device_capacity_) {  // (the last step's kernel is done: its results were read)
    if (in_device_) cudaFree(in_device_);
    in_device_ = nullptr;
    in_device_capacity_ = 0;
    const size_t want = std::max(in_used_ + in_used_ / 2, size_t(1) << 16);
    e = cudaMalloc(&in_device_, want);  // (rare: the upload grows with the rows and their seen tokens)
    if (e != cudaSuccess) in_device_ = nullptr;
    in_device_capacity_ = in_device_ ? want : 0;
  }
  if (e == cudaSuccess) e = cudaMemcpyAsync(in_device_, in_, in_used_, cudaMemcpyHostToDevice, copy);
  if (e == cudaSuccess) e = cudaEventRecord(uploaded_, copy);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(run, uploaded_);
  *device = in_device_;
  return e;
}

Result<void> SamplePack::reserve(void*& buffer, size_t& capacity, size_t bytes, const char* what) {
  if (bytes <= capacity) return ok();
  if (buffer) cudaFreeHost(buffer);
  buffer = nullptr;
  capacity = 0;
  const size_t want = std::max(bytes + bytes / 2, size_t(1) << 16);
  const cudaError_t e = cudaMallocHost(&buffer, want);
  if (e != cudaSuccess) {
    buffer = nullptr;
    return cuda_error(e, what);
  }
  capacity = want;
  return ok();
}

// Steps 2-5 of one row as edits of single tokens, sorted by token, one per token.
void SamplePack::add_edits(const RowSampling& row) {
  const SamplingParams& p = *row.params;
  const SequenceSamplingState& st = *row.state;
  const size_t first = edits_.size();
  for (int32_t t : p.allowed_token_ids) edits_.push_back({t, kn::kEditAllowed, 0.0f, 0});
  for (const auto& [t, bias] : p.logit_bias) edits_.push_back({t, kn::kEditBias, bias, 0});
  if (st.num_generated() < p.min_tokens) {
    for (int32_t t : p.stop_token_ids) edits_.push_back({t, kn::kEditBanned, 0.0f, 0});
    if (!p.ignore_eos)
      for (int32_t t : row.eos_token_ids) edits_.push_back({t, kn::kEditBanned, 0.0f, 0});
  }
  auto by_token = [](const kn::SampleEdit& a, const kn::SampleEdit& b) { return a.token < b.token; };
  std::sort(edits_.begin() + static_cast<std::ptrdiff_t>(first), edits_.end(), by_token);
  if (p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    // The seen tokens (prompt and output: hundreds) come sorted: merged, not sorted again.
    const size_t mid = edits_.size();
    for (const auto& [t, seen] : st.occurrences()) edits_.push_back({t, kn::kEditSeen, 0.0f, seen.output_count});
    std::inplace_merge(edits_.begin() + static_cast<std::ptrdiff_t>(first), edits_.begin() + static_cast<std::ptrdiff_t>(mid), edits_.end(),
                       by_token);
  }
  const auto begin = edits_.begin() + static_cast<std::ptrdiff_t>(first);
  auto kept = begin;  // merges the entries of one token (each list names a token at most once, but allowed ids may repeat)
  for (auto it = begin; it != edits_.end(); ++it) {
    if (it != begin && it->token == (kept - 1)->token) {
      kn::SampleEdit& m = *(kept - 1);
      m.flags |= it->flags;
      if (it->flags & kn::kEditBias) m.bias = it->bias;
      if (it->flags & kn::kEditSeen) m.output_count = it->output_count;
    } else {
      *kept++ = *it;
    }
  }
  edits_.erase(kept, edits_.end());
}

Result<void> SamplePack::pack(std::span<const RowSampling> rows, int64_t vocab) {
  vocab_ = vocab;
  specs_.assign(rows.size(), kn::SampleRowSpec{});
  notes_.assign(rows.size(), RowNote{});
  edits_.clear();
  const size_t words = bitmask_words(static_cast<size_t>(vocab));
  size_t mask_words = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    kn::SampleRowSpec& sp = specs_[r];
    RowNote& note = notes_[r];
    if (auto c = check_row(rows[r], vocab); !c) {
      note.now = c.error();
      sp.flags = kn::kRowSkip;
      continue;
    }
    const RowSampling& row = rows[r];
    const SamplingParams& p = *row.params;
    note.position = row.state->num_generated();
    note.logprobs = p.logprobs.has_value();
    sp.temperature = p.temperature;
    sp.top_p = p.top_p;
    sp.min_p = p.min_p;
    sp.repetition = p.repetition_penalty;
    sp.frequency = p.frequency_penalty;
    sp.presence = p.presence_penalty;
    sp.top_k = p.top_k;
    sp.seed_lo = static_cast<uint32_t>(row.key.seed);
    sp.seed_hi = static_cast<uint32_t>(row.key.seed >> 32);
    sp.completion = row.key.completion_index;
    sp.position = row.key.position;
    sp.logprobs = p.logprobs ? *p.logprobs : -1;
    if (p.logprobs && p.logprobs_mode == LogprobsMode::kRaw) sp.flags |= kn::kRowRawLogprobs;
    if (!row.grammar_bitmask.empty()) {
      if (row.grammar_bitmask.size() != words) {
        note.deferred =
            make_error(Code::kInvalidArgument, "token bitmask has {} words, {} tokens need {}", row.grammar_bitmask.size(), vocab, words);
      } else {
        sp.flags |= kn::kRowGrammar | kn::kRowProcessed;
        sp.mask_offset = static_cast<int32_t>(mask_words);
        mask_words += words;
      }
    }
    if (!p.allowed_token_ids.empty()) sp.flags |= kn::kRowAllowedOnly | kn::kRowProcessed;
    const size_t first = edits_.size();
    add_edits(row);
    sp.edit_begin = static_cast<int32_t>(first);
    sp.edit_count = static_cast<int32_t>(edits_.size() - first);
    if (sp.edit_count > 0) sp.flags |= kn::kRowProcessed;
  }
  any_processed_ = std::any_of(specs_.begin(), specs_.end(),
                               [](const kn::SampleRowSpec& sp) { return (sp.flags & kn::kRowProcessed) && !(sp.flags & kn::kRowSkip); });
  if (mask_words > static_cast<size_t>(INT32_MAX) || edits_.size() > static_cast<size_t>(INT32_MAX))
    return make_error(Code::kInvalidArgument, "sample_rows: {} rows with grammar masks or {} edits are too many at once",
                      mask_words / words, edits_.size());

  edits_at_ = align16(specs_.size() * sizeof(kn::SampleRowSpec));
  masks_at_ = align16(edits_at_ + edits_.size() * sizeof(kn::SampleEdit));
  in_used_ = masks_at_ + mask_words * sizeof(uint32_t);
  DI_TRYV(reserve(in_, in_capacity_, in_used_, "allocating page-locked memory for sampling specs"));
  DI_TRYV(reserve(out_, out_capacity_, results_bytes(), "allocating page-locked memory for sampled tokens"));
  auto* in = static_cast<char*>(in_);
  std::memcpy(in, specs_.data(), specs_.size() * sizeof(kn::SampleRowSpec));
  if (!edits_.empty()) std::memcpy(in + edits_at_, edits_.data(), edits_.size() * sizeof(kn::SampleEdit));
  for (size_t r = 0; r < rows.size(); ++r)
    if (specs_[r].flags & kn::kRowGrammar)
      std::memcpy(in + masks_at_ + static_cast<size_t>(specs_[r].mask_offset) * sizeof(uint32_t), rows[r].grammar_bitmask.data(),
                  words * sizeof(uint32_t));
  return ok();
}

void SamplePack::unpack(std::vector<Result<SampleResult>>& out) const {
  out.clear();
  out.reserve(notes_.size());
  for (size_t r = 0; r < notes_.size(); ++r) {
    const RowNote& note = notes_[r];
    if (note.now) {
      out.push_back(*note.now);
      continue;
    }
    const kn::SampleOut& o = static_cast<const kn::SampleOut*>(out_)[r];
    if (o.token == kn::kSampleBadLogit) {
      out.push_back(model_logit_error(o.bad_value, o.bad_index));
    } else if (note.deferred) {
      out.push_back(*note.deferred);
    } else if (o.token == kn::kSampleNoToken) {
      out.push_back(make_error(Code::kInvalidArgument,
                               "no token can be generated at output position {}: the grammar mask, "
                               "allowed_token_ids and min_tokens exclude every token",
                               note.position));
    } else if (o.token < 0 || o.token >= vocab_) {
      out.push_back(make_error(Code::kInternal, "the device sampled token {} outside the vocabulary [0, {})", o.token, vocab_));
    } else {
      SampleResult s{o.token, std::nullopt};
      if (note.logprobs) {
        Logprobs lp{o.token, o.logprob, o.rank, {}};
        const int n = std::clamp(o.n_top, 0, kn::kMaxTopLogprobs);
        for (int i = 0; i < n; ++i) lp.top.push_back({o.top_token[i], o.top_logprob[i]});
        s.logprobs = std::move(lp);
      }
      out.push_back(std::move(s));
    }
  }
}

}  // namespace deepinfer
