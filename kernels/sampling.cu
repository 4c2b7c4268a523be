// Sampling rows of logits on the device (sampling.h): the processing order of
// src/sample/sampling_params.h.
//
// One launch. The select kernel gives a row one block, or, where rows are fewer than the
// multiprocessors, a cluster of up to 8 blocks that share its passes (row_select.cuh): at batch 1 a
// row's passes are otherwise issue-bound on one SM. Each block first writes its slice of a row that
// steps 1-5 change into the row's work row (grammar mask and allowed tokens densely, then the row's
// sorted edit list: bias, min_tokens bans, penalties), each token computed from its raw logit in the
// host's order with the host's float operations; then the row's blocks do the rest on that row: the
// NaN / +inf check, greedy argmax, top_k, temperature, top_p, min_p, the draw and logprobs. Where
// the cuts fall among a few hundred of the row's highest tokens, they are made on a list of those in
// shared memory (draw_from_top_k, draw_from_top_p), and where top_k keeps up to 2048, top_p and the
// draw walk a sorted list of them, instead of passes over the row.
//
// Truncations keep a rank prefix of (value descending, id ascending). The cut is found without
// sorting the row: a histogram of the candidates over 2048 value buckets (counts, or masses for
// top_p) finds the bucket where the prefix ends; its members (at most kCompact, else the bucket's
// value range is split again) are sorted in shared memory and walked to the exact element. A cut is
// then a (value, id) threshold. Masses are weights (exp((x - max) / temperature), the host's float
// function) in 64-bit fixed point, so every sum is exact and independent of order: the token is a
// function of the row and its spec alone, whatever the batch. The draw walks the survivors in id
// order to the first whose running mass exceeds u * total, u the host's 53-bit Philox uniform.
#include "row_select.cuh"
#include "sampling.h"

#include <cmath>

namespace deepinfer::kernels {
namespace {

constexpr float kFixedScale = 0x1p40f;  // masses: weights in 64-bit fixed point
// Tokens a block of a row's cluster takes at least: below, the cluster's barriers cost more than
// the split saves (H200, one row, with the select kernel of 2026-12-03, since changed (see
// docs/bench/device-sampling-short-lists-h200-2026-12-04.md): top_p over 4,096 tokens 39 us a call in
// one block, 47 in two, 55 in eight; over 129,280 tokens 284 us in one, 81 in eight, 86 in sixteen).
constexpr int64_t kMinRowSlice = 12288;

// --- the host's arithmetic (src/sample/row_math.h), operation by operation (no contraction)

__device__ __forceinline__ float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f, kLn2Lo = 1.42860682030941723e-6f;
  constexpr float kRound = 12582912.0f;
  const bool underflow = !(x >= -87.3f);
  const float xc = underflow ? -87.3f : x;
  const float n = __fsub_rn(__fadd_rn(__fmul_rn(xc, kLog2e), kRound), kRound);
  const float r = __fsub_rn(__fsub_rn(xc, __fmul_rn(n, kLn2Hi)), __fmul_rn(n, kLn2Lo));
  float p = 1.0f / 5040.0f;
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 720.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 120.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 24.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 6.0f);
  p = __fadd_rn(__fmul_rn(p, r), 0.5f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  const float scale = __int_as_float((static_cast<int32_t>(n) + 127) << 23);
  return underflow ? 0.0f : __fmul_rn(p, scale);
}

__device__ __forceinline__ unsigned long long fixed_mass(float w) { return __float2ull_rn(__fmul_rn(w, kFixedScale)); }

// The 53 bits of sample_uniform (src/sample/sampling_rng.cpp): Philox4x32-10, key = seed, counter =
// (position, completion, 0 (the token-draw domain), 0).
__device__ __forceinline__ unsigned long long philox_bits53(uint32_t seed_lo, uint32_t seed_hi, uint32_t completion, uint32_t position,
                                                            const PhiloxConstants& p) {
  uint32_t c0 = position, c1 = completion, c2 = 0, c3 = 0, k0 = seed_lo, k1 = seed_hi;
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += p.weyl0;
      k1 += p.weyl1;
    }
    const uint32_t hi0 = __umulhi(p.multiplier0, c0), lo0 = p.multiplier0 * c0;
    const uint32_t hi1 = __umulhi(p.multiplier1, c2), lo1 = p.multiplier1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return (static_cast<unsigned long long>(c0) << 21) | (c1 >> 11);
}

// floor(bits53 * 2^-53 * total), exactly.
__device__ __forceinline__ unsigned long long scale_draw(unsigned long long bits53, unsigned long long total) {
  const unsigned long long hi = __umul64hi(bits53, total), lo = bits53 * total;
  return (hi << 11) | (lo >> 53);
}

// --- the row and the candidate sets of each step

struct RowCtx {
  const float* raw;   // the row's logits
  const float* work;  // after steps 1-5 (raw itself where they change nothing)
  int64_t vocab;
  float max, min;  // of the finite processed logits
  float temperature, inv_t;
  bool use_inv;
  float min_p;
  Cut top_k, top_p;

  // Step 7's weight of a finite processed logit, as exp_weights computes it.
  __device__ float weight(float x) const {
    const float d = __fsub_rn(x, max);
    return exp_nonpositive(use_inv ? __fmul_rn(d, inv_t) : __fdiv_rn(d, temperature));
  }
  // Whether token t (processed logit x) survives steps 8-10.
  __device__ bool survives(float x, int64_t t) const {
    return x > neg_inf() && top_k.keeps(x, t) && top_p.keeps(x, t) && (min_p <= 0.0f || weight(x) >= min_p);
  }
};

// Candidate sets: value(t, x) is token t's value (x its entry of row()), -inf outside the set;
// mass(v) its weight in fixed point (selections by mass).
struct TopKSet {  // step 8: the finite processed logits
  const RowCtx& c;
  __device__ const float* row() const { return c.work; }
  __device__ float value(int64_t, float x) const { return x; }
  __device__ unsigned long long mass(float) const { return 0; }
};
struct TopPSet {  // step 9: what top_k kept
  const RowCtx& c;
  __device__ const float* row() const { return c.work; }
  __device__ float value(int64_t t, float x) const { return x > neg_inf() && c.top_k.keeps(x, t) ? x : neg_inf(); }
  __device__ unsigned long long mass(float v) const { return fixed_mass(c.weight(v)); }
};
struct DrawSet {  // step 11: the survivors
  const RowCtx& c;
  __device__ unsigned long long operator()(int64_t t, float x) const { return c.survives(x, t) ? fixed_mass(c.weight(x)) : 0; }
};
// The row logprobs are computed from: the raw logits, the processed ones of a greedy row (after step
// 5), or the sampling distribution of a sampled row ((x - max) / temperature for survivors).
enum class LogprobSource { kRaw, kGreedy, kSampled };
struct LogprobSet {
  const RowCtx& c;
  LogprobSource source;
  __device__ const float* row() const { return source == LogprobSource::kRaw ? c.raw : c.work; }
  __device__ float value(int64_t t, float x) const {
    if (source != LogprobSource::kSampled) return x;
    return c.survives(x, t) ? __fdiv_rn(__fsub_rn(x, c.max), c.temperature) : neg_inf();
  }
  __device__ unsigned long long mass(float) const { return 0; }
};

// --- the kernels

__device__ __forceinline__ bool mask_allows(const uint32_t* mask, int64_t t) { return (mask[t >> 5] >> (t & 31)) & 1u; }

// Steps 1-5 for this block's slice of a processed row, into its work row `out` (apply_token_bitmask,
// apply_allowed_token_ids, then the row's sorted edits: apply_logit_bias, apply_min_tokens,
// apply_penalties), each token from its raw logit in the host's order with the host's float
// operations. Also finds the slice's first logit that is not finite (bad).
__device__ void prepare_slice(const float* raw, float* out, int64_t vocab, const SampleRowSpec& sp, const SampleEdit* edits,
                              const uint32_t* mask_words, int64_t& bad) {
  const uint32_t* mask = (sp.flags & kRowGrammar) ? mask_words + sp.mask_offset : nullptr;
  const bool allowed_only = sp.flags & kRowAllowedOnly;
  for_each_token_vec(raw, vocab, [&](int64_t t, float v) {
    if (!(fabsf(v) < pos_inf()) && t < bad) bad = t;
    out[t] = allowed_only || (mask && !mask_allows(mask, t)) ? neg_inf() : v;
  });
  if (sp.edit_count == 0) return;
  __syncthreads();  // the slice's listed tokens are written again below, by other threads
  const Slice sl = my_slice(vocab);
  const SampleEdit* e = edits + sp.edit_begin;
  // The slice's first edit: a binary search (dependent loads) only where the slice is not the row's first.
  int lo = 0, hi = sl.begin > 0 ? sp.edit_count : 0;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (e[mid].token < sl.begin)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (int i = lo + threadIdx.x; i < sp.edit_count && e[i].token < sl.end; i += kThreads) {
    const SampleEdit ed = e[i];
    const int64_t t = ed.token;
    float v = raw[t];
    if (mask && !mask_allows(mask, t)) v = neg_inf();
    if (allowed_only && !(ed.flags & kEditAllowed)) v = neg_inf();
    if (ed.flags & kEditBias) v = __fadd_rn(v, ed.bias);
    if (ed.flags & kEditBanned) v = neg_inf();
    if (ed.flags & kEditSeen) {
      if (sp.repetition != 1.0f) v = v > 0.0f ? __fdiv_rn(v, sp.repetition) : __fmul_rn(v, sp.repetition);
      if (ed.output_count > 0) {
        v = __fsub_rn(v, __fmul_rn(sp.frequency, static_cast<float>(ed.output_count)));
        v = __fsub_rn(v, sp.presence);
      }
    }
    out[t] = v;
  }
}

// Logprobs of the chosen token: its own, its rank and the top n (sample_row's compute_logprobs).
__device__ void write_logprobs(const RowCtx& c, LogprobSource source, int64_t token, int top_n, SampleOut* o, Shared& sh) {
  const LogprobSet set{c, source};
  const float* row = set.row();
  const float own = set.value(token, row[token]);
  RowStats st{c.vocab, neg_inf(), pos_inf(), neg_inf(), 0, INT64_MAX};  // (range and count only)
  for_each_token(row, c.vocab, [&](int64_t t, float x) {
    const float v = set.value(t, x);
    if (v > neg_inf()) {
      st.max = fmaxf(st.max, v);
      st.min = fminf(st.min, v);
      ++st.finite;
    }
  });
  st = row_stats(st, sh);
  const int64_t finite = st.finite;
  const float smax = st.max, smin = st.min;
  unsigned long long sum = 0;
  int64_t before = 0;  // tokens ranked before it: a larger value, or an equal one and a lower id
  for_each_token(row, c.vocab, [&](int64_t t, float x) {
    const float v = set.value(t, x);
    sum += fixed_mass(exp_nonpositive(__fsub_rn(v, smax)));
    before += v > own || (v == own && t < token);
  });
  const Sums sums = row_sums(Sums{sum, before}, sh);
  sum = sums.mass;
  before = sums.count;
  const double log_z = static_cast<double>(smax) + log(static_cast<double>(sum) * 0x1p-40);
  const bool leader = threadIdx.x == 0 && row_block() == 0;  // writes the row's result
  if (leader) {
    o->logprob = static_cast<float>(static_cast<double>(own) - log_z);
    o->rank = static_cast<int32_t>(before + 1);
    o->n_top = 0;
  }
  const int64_t n = min(static_cast<int64_t>(top_n), c.vocab);
  if (n <= 0) return;
  // The n best: a cut of the finite values, then (where fewer) the lowest ids of -inf.
  Cut cut{};
  int64_t last_inf = -1;
  if (n < finite) {
    cut = select_prefix(set, c.vocab, false, static_cast<unsigned long long>(n), 0.0f, smin, smax, sh);
  } else if (n > finite) {
    const unsigned long long k = static_cast<unsigned long long>(n - finite);
    last_inf = ordered_find(
        row, c.vocab, [&](int64_t t, float x) { return set.value(t, x) == neg_inf() ? 1ull : 0ull; },
        [k](unsigned long long) { return k - 1; }, sh);
  }
  __syncthreads();
  if (threadIdx.x == 0) sh.n_compact = 0;
  __syncthreads();
  for_each_token(row, c.vocab, [&](int64_t t, float x) {
    const float v = set.value(t, x);
    if (!(v > neg_inf() ? cut.keeps(v, t) : t <= last_inf)) return;
    const unsigned slot = atomicAdd(&sh.n_compact, 1u);
    if (slot < static_cast<unsigned>(kTopSlots)) sh.top[slot] = sort_key(v, t);
  });
  __syncthreads();
  if (const unsigned nb = row_blocks(); nb > 1) {  // the other blocks' entries to the first (n in all)
    row_sync();
    if (leader) {
      unsigned m = min(sh.n_compact, static_cast<unsigned>(kTopSlots));
      for (unsigned r = 1; r < nb; ++r) {
        const Shared* theirs = in_block(&sh, r);
        const unsigned k = min(theirs->n_compact, static_cast<unsigned>(kTopSlots));
        for (unsigned i = 0; i < k && m < static_cast<unsigned>(kTopSlots); ++i) sh.top[m++] = theirs->top[i];
      }
      sh.n_compact = m;
    }
    row_sync();
  }
  if (leader) {
    const int m = static_cast<int>(min(static_cast<int64_t>(min(sh.n_compact, static_cast<unsigned>(kTopSlots))), n));
    for (int i = 1; i < m; ++i)  // a handful: insertion sort, descending
      for (int j = i; j > 0 && sh.top[j] > sh.top[j - 1]; --j) {
        const unsigned long long k = sh.top[j];
        sh.top[j] = sh.top[j - 1];
        sh.top[j - 1] = k;
      }
    for (int i = 0; i < m; ++i) {
      const float v = key_value(static_cast<uint32_t>(sh.top[i] >> 32));
      o->top_token[i] = static_cast<int32_t>(~static_cast<uint32_t>(sh.top[i]));
      o->top_logprob[i] = static_cast<float>(static_cast<double>(v) - log_z);
    }
    o->n_top = m;
  }
}

// Cuts and the draw on a list of at most kThreads tokens in sh.big (sort keys, any order): the list
// top_k kept (draw_from_kept), or the row's highest tokens, of which the top_k best are kept (top_k >
// 0: draw_from_top_k) or among which top_p's cut falls (top_p_need_of_row > 0, of the row's mass:
// draw_from_top_p). A group of threads takes each entry and sums over the list, reading it from
// shared memory (each thread a share, then the group adds up): the entries ranked before it (top_k's
// cut) and their masses (top_p's), then the survivors' masses of lower ids (the draw). No sort and no
// scan, barely a barrier; the same integers summed as the row passes: the same cuts and token.
__device__ int64_t draw_from_short_list(RowCtx& c, const SampleRowSpec& sp, unsigned long long bits, int n, int64_t top_k,
                                        unsigned long long top_p_need_of_row, Shared& sh) {
  int lanes = 1;  // threads per entry (a power of two, up to a warp)
  while (lanes < 32 && n * lanes * 2 <= kThreads) lanes *= 2;
  const int i = threadIdx.x / lanes, sub = threadIdx.x % lanes;
  const bool lead = i < n && sub == 0;  // writes the entry's results
  // f(j) for this thread's entries j of the list (every lanes-th, four loads in flight), then the
  // group's sums of what f accumulated.
  const auto over_list = [&](auto&& f) {
    for (int j0 = sub; j0 < n; j0 += 4 * lanes)
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (j0 + u * lanes < n) f(j0 + u * lanes);
  };
  const auto group_sum = [lanes](unsigned long long v) {
    for (int o = 1; o < lanes; o <<= 1) v += __shfl_xor_sync(kFull, v, o);
    return v;
  };
  const unsigned long long key = i < n ? sh.big[i] : 0;
  const float x = key_value(static_cast<uint32_t>(key >> 32));
  const int64_t t = static_cast<int64_t>(~static_cast<uint32_t>(key));
  unsigned long long* mass = sh.stage;  // (free once gather_keys returned)
  bool kept = i < n;
  unsigned long long before = 0, mine = 0;  // top_p: the mass ranked before this entry; its own
  if (top_k > 0 || sp.top_p < 1.0f) {
    // One pass over the list: the entries ranked before this one, their masses and the list's. A kept
    // entry's predecessors are all kept, so its sum needs no other entry's rank.
    mine = i < n && sp.top_p < 1.0f ? TopPSet{c}.mass(x) : 0;
    if (lead) mass[i] = mine;
    __syncthreads();
    unsigned long long rank = 0, total = 0;
    over_list([&](int j) {
      const unsigned long long m = mass[j];
      const bool ahead = sh.big[j] > key;
      rank += ahead;
      before += ahead ? m : 0;
      total += m;
    });
    rank = group_sum(rank);
    before = group_sum(before);
    total = group_sum(total);
    if (top_k > 0) {  // the list holds more than top_k keeps: ranks decide
      kept = kept && rank < static_cast<unsigned long long>(top_k);
      if (lead && rank + 1 == static_cast<unsigned long long>(top_k)) {
        c.top_k = Cut{x, t, true};
        sh.list_mass = before + mine;
      }
    } else if (threadIdx.x == 0) {
      sh.list_mass = total;
    }
  }
  if (threadIdx.x == 0) {
    c.min_p = sp.min_p;
    sh.found = -1;
  }
  __syncthreads();
  if (sp.top_p < 1.0f) {
    const unsigned long long need = top_p_need_of_row > 0 ? top_p_need_of_row : fraction_need(sp.top_p, sh.list_mass);
    if (lead && kept && before < need && need <= before + mine) c.top_p = Cut{x, t, true};  // (one entry crosses it)
    __syncthreads();
  }
  mine = kept && c.survives(x, t) ? fixed_mass(c.weight(x)) : 0;
  if (lead) mass[i] = mine;
  __syncthreads();
  unsigned long long total = 0;
  before = 0;  // the mass of the survivors of lower ids
  over_list([&](int j) {
    const unsigned long long m = mass[j];
    total += m;
    if (static_cast<uint32_t>(sh.big[j]) > static_cast<uint32_t>(key)) before += m;  // (ids are stored inverted)
  });
  total = group_sum(total);
  before = group_sum(before);
  const unsigned long long target = scale_draw(bits, total);
  if (lead && before <= target && target < before + mine) sh.found = t;
  __syncthreads();
  return sh.found;
}

// Steps 9-11 where top_k kept at most kCompact tokens: those tokens are gathered into shared memory,
// and top_p's cut and the draw walk that list instead of passes over the row (on a narrow row at
// batch 1 the passes' latency is most of the kernel): a short list by draw_from_short_list, a longer
// one sorted once. The same cut and token as the row passes: the masses are the same integers, the
// order the same total order. Sets c.top_p and c.min_p (the logprobs read them); returns the drawn
// token, -1 where no survivor has mass.
__device__ int64_t draw_from_kept(RowCtx& c, const SampleRowSpec& sp, unsigned long long bits, Shared& sh) {
  const int n = static_cast<int>(gather_keys(
      c.work, c.vocab,
      [&](int64_t t, float x, unsigned long long& key) {
        if (!(x > neg_inf() && c.top_k.keeps(x, t))) return false;
        key = sort_key(x, t);
        return true;
      },
      sh));
  if (n <= kThreads) return draw_from_short_list(c, sp, bits, n, 0, 0, sh);
  sort_desc(sh.big, n);  // rank order
  const auto value_of = [&](int i) { return key_value(static_cast<uint32_t>(sh.big[i] >> 32)); };
  const auto id_of = [&](int i) { return static_cast<int64_t>(~static_cast<uint32_t>(sh.big[i])); };
  const TopPSet set{c};
  const int i0 = 4 * threadIdx.x;  // (n <= kCompact = 4 entries a thread)
  if (sp.top_p < 1.0f) {
    unsigned long long s = 0, total = 0;
    for (int j = 0; j < 4 && i0 + j < n; ++j) s += set.mass(value_of(i0 + j));
    block_exclusive_scan_u64(s, sh, &total);
    const int at = walk_sorted(set, n, true, fraction_need(sp.top_p, total), sh);
    if (threadIdx.x == 0) c.top_p = Cut{value_of(at), id_of(at), true};
  }
  if (threadIdx.x == 0) c.min_p = sp.min_p;
  __syncthreads();
  // The draw walks the survivors in id order: the list re-keyed by id (ascending as the keys descend).
  for (int i = threadIdx.x; i < n; i += kThreads)
    sh.big[i] = (static_cast<unsigned long long>(~static_cast<uint32_t>(id_of(i))) << 32) | __float_as_uint(value_of(i));
  sort_desc(sh.big, n);
  unsigned long long m[4], s = 0, total = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = i0 + j;
    const int64_t t = i < n ? static_cast<int64_t>(~static_cast<uint32_t>(sh.big[i] >> 32)) : 0;
    const float x = i < n ? __uint_as_float(static_cast<uint32_t>(sh.big[i])) : neg_inf();
    m[j] = i < n && c.survives(x, t) ? fixed_mass(c.weight(x)) : 0;
    s += m[j];
  }
  if (threadIdx.x == 0) sh.found = -1;
  const unsigned long long excl = block_exclusive_scan_u64(s, sh, &total);
  const unsigned long long target = scale_draw(bits, total);
  if (excl <= target && target < excl + s) {
    unsigned long long acc = excl;
    for (int j = 0; j < 4; ++j) {
      acc += m[j];
      if (acc > target) {
        sh.found = static_cast<int64_t>(~static_cast<uint32_t>(sh.big[i0 + j] >> 32));
        break;
      }
    }
  }
  __syncthreads();
  return sh.found;
}

// The row's tokens with finite values in buckets 0..b of select_prefix's histogram over [lo, hi],
// gathered into sh.big (draw_from_top_k, draw_from_top_p).
__device__ void gather_top_buckets(const RowCtx& c, float lo, float hi, double scale, int b, Shared& sh) {
  gather_keys(
      c.work, c.vocab,
      [&](int64_t t, float x, unsigned long long& key) {
        if (!(x >= lo && x <= hi) || bucket_of(x, hi, scale) > b) return false;
        key = sort_key(x, t);
        return true;
      },
      sh);
}

// Steps 8-11 where top_k keeps at most kThreads tokens: one histogram of the row's finite values
// finds the bucket where top_k's count is reached; where that bucket and those above it hold at most
// kThreads tokens, they are gathered and draw_from_short_list ranks them (top_k's cut), cuts top_p and
// draws, with none of select_prefix's sort and second pass. Returns kNotDrawn where the prefix is
// longer, the histogram and its boundary left in sh for select_prefix.
constexpr int64_t kNotDrawn = -2;
__device__ int64_t draw_from_top_k(RowCtx& c, const SampleRowSpec& sp, unsigned long long bits, Shared& sh) {
  const float lo = c.min, hi = c.max;
  const double scale = hi > lo ? (kBuckets - 1) / (static_cast<double>(hi) - static_cast<double>(lo)) : 0.0;
  histogram(TopKSet{c}, c.vocab, false, lo, hi, scale, sh);
  find_boundary(false, static_cast<unsigned long long>(sp.top_k), 0.0f, sh);
  const int b = sh.boundary;
  const unsigned long long n = sh.before + sh.boundary_count;  // the tokens of buckets 0..b
  if (b < 0 || n > static_cast<unsigned long long>(kThreads)) return kNotDrawn;
  gather_top_buckets(c, lo, hi, scale, b, sh);
  return draw_from_short_list(c, sp, bits, static_cast<int>(n), sp.top_k, 0, sh);
}

// Steps 9-11 without top_k, where top_p's cut falls among the row's highest kThreads tokens or
// fewer (a trained model's rows): the histogram of masses finds the bucket where top_p's need is
// reached; the tokens of that bucket and those above it are gathered and draw_from_short_list cuts
// and draws from them (every survivor is among them), instead of select_prefix's sort and the draw's
// passes over the row. Returns kNotDrawn where they are more, the histogram and its boundary left
// in sh for select_prefix.
__device__ int64_t draw_from_top_p(RowCtx& c, const SampleRowSpec& sp, unsigned long long bits, Shared& sh) {
  const float lo = c.min, hi = c.max;
  const double scale = hi > lo ? (kBuckets - 1) / (static_cast<double>(hi) - static_cast<double>(lo)) : 0.0;
  histogram(TopPSet{c}, c.vocab, true, lo, hi, scale, sh);
  find_boundary(true, 0, sp.top_p, sh);
  const int b = sh.boundary;
  const unsigned long long need = sh.need;
  if (b < 0) return kNotDrawn;
  const unsigned* count = reinterpret_cast<const unsigned*>(sh.big + kBuckets);
  unsigned long long mine = 0, n = 0;  // n: the tokens of buckets 0..b
  for (int i = threadIdx.x; i <= b; i += kThreads) mine += count[i];
  block_exclusive_scan_u64(mine, sh, &n);
  if (n > static_cast<unsigned long long>(kThreads)) return kNotDrawn;
  gather_top_buckets(c, lo, hi, scale, b, sh);
  return draw_from_short_list(c, sp, bits, static_cast<int>(n), 0, need, sh);
}

// Steps 8-11 otherwise: top_k's cut by select_prefix (cut_k), then draw_from_kept where it kept at
// most kCompact tokens, else top_p's cut and the draw by passes over the row. counted: the first
// cut's first histogram is in sh (draw_from_top_k's or draw_from_top_p's).
__device__ int64_t draw_over_row(RowCtx& c, const SampleRowSpec& sp, unsigned long long bits, bool cut_k, bool counted, Shared& sh) {
  if (cut_k) {
    const Cut k = select_prefix(TopKSet{c}, c.vocab, false, sp.top_k, 0.0f, c.min, c.max, sh, counted);
    counted = false;
    if (threadIdx.x == 0) c.top_k = k;
    __syncthreads();
  }
  if (c.top_k.on && sp.top_k <= kCompact) return draw_from_kept(c, sp, bits, sh);
  if (sp.top_p < 1.0f) {
    const Cut p = select_prefix(TopPSet{c}, c.vocab, true, 0, sp.top_p, c.min, c.max, sh, counted);
    if (threadIdx.x == 0) c.top_p = p;
    __syncthreads();
  }
  if (threadIdx.x == 0) c.min_p = sp.min_p;
  __syncthreads();
  return ordered_find(
      c.work, c.vocab, DrawSet{c}, [bits](unsigned long long total) { return scale_draw(bits, total); }, sh);
}

__global__ void __launch_bounds__(kThreads, 1)
    sample_select_kernel(const float* __restrict__ logits, int64_t vocab, const SampleRowSpec* specs, const SampleEdit* edits,
                         const uint32_t* mask_words, float* work, int64_t stride, SampleOut* out, PhiloxConstants philox) {
  pdl_begin();
  __shared__ Shared sh;
  const int64_t r = blockIdx.x / row_blocks();
  const bool leader = threadIdx.x == 0 && row_block() == 0;  // writes the row's result
  const SampleRowSpec sp = specs[r];
  if (sp.flags & kRowSkip) return;
  SampleOut* o = out + r;
  // The row's context lives in shared memory (read by every pass; registers stay free), written by
  // thread 0 between barriers.
  __shared__ RowCtx ctx;
  RowCtx& c = ctx;
  if (threadIdx.x == 0) {
    c = RowCtx{};
    c.raw = logits + r * vocab;
    c.work = (sp.flags & kRowProcessed) ? work + r * stride : c.raw;
    c.vocab = vocab;
  }
  __syncthreads();

  // sample_row's first check, a logit that is not finite (NaN or either infinity) anywhere in the
  // row (found by the pass that writes a processed row), then the processed row's range, finite
  // count and argmax, with one reduction.
  RowStats st{vocab, neg_inf(), pos_inf(), neg_inf(), 0, INT64_MAX};
  const bool processed = sp.flags & kRowProcessed;
  if (processed) {
    prepare_slice(c.raw, work + r * stride, vocab, sp, edits, mask_words, st.bad);
    row_sync();  // the row's work row, written by its blocks, complete and visible to all of them
  }
  for_each_token_vec(c.work, vocab, [&](int64_t t, float x) {
    if (!processed && !(fabsf(x) < pos_inf()) && t < st.bad) st.bad = t;
    if (x > neg_inf()) {
      st.max = fmaxf(st.max, x);
      st.min = fminf(st.min, x);
      ++st.finite;
    }
    if (x > st.best || (x == st.best && t < st.best_id)) {
      st.best = x;
      st.best_id = t;
    }
  });
  st = row_stats(st, sh);
  if (st.bad < vocab) {
    if (leader) {
      o->token = kSampleBadLogit;
      o->bad_index = static_cast<int32_t>(st.bad);
      o->bad_value = c.raw[st.bad];
    }
    return;
  }
  const int64_t finite = st.finite, argmax = st.best_id;
  if (finite == 0) {
    if (leader) o->token = kSampleNoToken;
    return;
  }
  if (threadIdx.x == 0) {
    c.max = st.max;
    c.min = st.min;
  }
  __syncthreads();

  int64_t token = argmax;
  const bool greedy = sp.temperature == 0.0f;
  if (!greedy) {
    if (threadIdx.x == 0) {
      c.temperature = sp.temperature;
      c.inv_t = __fdiv_rn(1.0f, sp.temperature);
      c.use_inv = isfinite(c.inv_t);
    }
    __syncthreads();
    const unsigned long long bits = philox_bits53(sp.seed_lo, sp.seed_hi, sp.completion, sp.position, philox);
    const bool cut_k = sp.top_k > 0 && sp.top_k < finite;
    const bool short_k = cut_k && sp.top_k <= kThreads, short_p = !cut_k && sp.top_p < 1.0f;
    int64_t drawn = short_k ? draw_from_top_k(c, sp, bits, sh) : short_p ? draw_from_top_p(c, sp, bits, sh) : kNotDrawn;
    if (drawn == kNotDrawn) drawn = draw_over_row(c, sp, bits, cut_k, short_k || short_p, sh);
    if (drawn >= 0) token = drawn;  // (the best token always survives with mass 2^40)
  }
  if (leader) o->token = static_cast<int32_t>(token);
  if (sp.logprobs < 0) return;
  const LogprobSource source = (sp.flags & kRowRawLogprobs) ? LogprobSource::kRaw
                               : greedy                     ? LogprobSource::kGreedy
                                                            : LogprobSource::kSampled;
  write_logprobs(c, source, token, sp.logprobs, o, sh);
}

__global__ void sample_uniform_bits_kernel(const uint32_t* keys, int64_t n, PhiloxConstants philox, uint64_t* bits) {
  pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const uint32_t* k = keys + 4 * i;
  bits[i] = philox_bits53(k[0], k[1], k[2], k[3], philox);
}

}  // namespace

int64_t sample_work_stride(int64_t vocab) { return (vocab + 3) / 4 * 4; }

int sample_row_blocks(int64_t rows, int64_t vocab) {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    cudaGetLastError();
    return 1;
  }
  if (major < 9) return 1;  // (clusters: sm_90)
  const int64_t sms = multiprocessors();
  int n = kMaxRowBlocks;
  while (n > 1 && (rows * n > sms || vocab < n * kMinRowSlice)) n /= 2;
  return n;
}

cudaError_t sample_rows(const float* logits, int64_t rows, int64_t vocab, const SampleRowSpec* specs, const SampleEdit* edits,
                        const uint32_t* mask_words, float* work, SampleOut* out, const PhiloxConstants& philox, Stream s, int row_blocks) {
  if (rows <= 0 || vocab <= 0) return cudaSuccess;
  if (row_blocks == 0) row_blocks = sample_row_blocks(rows, vocab);
  if (vocab > kMaxSampleVocab || rows * kMaxRowBlocks > 2147483647 || row_blocks < 1 || row_blocks > kMaxRowBlocks ||
      (row_blocks & (row_blocks - 1)) != 0)
    return cudaErrorInvalidValue;
  const int64_t stride = sample_work_stride(vocab);
  auto select = launch(sample_select_kernel, dim3(static_cast<unsigned>(rows * row_blocks)), dim3(kThreads), 0, s);
  if (row_blocks > 1) select.cluster(static_cast<unsigned>(row_blocks));
  cudaError_t e = select(logits, vocab, specs, edits, mask_words, work, stride, out, philox);
  if (e != cudaSuccess && row_blocks > 1) {  // a device (partition) that cannot place the cluster: one block a row
    cudaGetLastError();
    e = launch(sample_select_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, s)(logits, vocab, specs, edits, mask_words, work,
                                                                                              stride, out, philox);
  }
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

cudaError_t sample_uniform_bits(const uint32_t* keys, int64_t n, const PhiloxConstants& philox, uint64_t* bits, Stream s) {
  if (n <= 0) return cudaSuccess;
  const cudaError_t e = launch(sample_uniform_bits_kernel, dim3(blocks_for(n, 256)), dim3(256), 0, s)(keys, n, philox, bits);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
