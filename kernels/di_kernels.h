// CUDA kernels of the DeepInfer CUDA backend, behind plain launch functions (host-callable, no CUDA
// types beyond cudaStream_t, inside Stream). Depends on nothing in src/ and keeps no state: what a
// launch depends on comes in its arguments. Activations are fp32 row-major matrices,
// matrix weights bf16 (stored as uint16_t bits), small parameter vectors fp32. Every launcher
// returns the launch error (cudaGetLastError) and does nothing for empty work.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace deepinfer::kernels {

using bf16_t = uint16_t;  // bits of __nv_bfloat16

// One sequence of the batch (mirrors deepinfer::SequenceStep).
struct SeqInfo {
  int32_t slot, first_row, n_tokens, n_past, table_offset, n_blocks;
};

// Batch metadata in device memory.
struct BatchDev {
  const int32_t* tokens = nullptr;     // [rows]
  const int32_t* positions = nullptr;  // [rows]
  const int32_t* row_seq = nullptr;    // [rows]
  const SeqInfo* seqs = nullptr;       // [n_seqs]
  const int32_t* block_tables = nullptr;
  int32_t rows = 0, n_seqs = 0;
};

// Model state storage (offsets and sizes in floats).
struct StateDev {
  float* slots = nullptr;
  float* blocks = nullptr;
  int64_t slot_floats = 0, block_floats = 0;
  int32_t block_tokens = 1;
};

// One layer's state layout (mirrors deepinfer::LayerStateLayout).
struct LayerDev {
  int32_t head_dim = 0, window = 0, rate = 0, overlap = 0, index_dim = 0, entries_per_block = 0;
  int64_t window_offset = 0, ring_offset = 0, index_ring_offset = 0, entry_offset = 0, index_key_offset = 0;
};

struct RopeDev {
  const float* inv_freq = nullptr;  // [rope_dim / 2]
  int32_t rope_dim = 0;
  float attention_factor = 1.0f;
};

// A window of compressor state that closes in this step: seqs[seq], window index w.
struct CompressJob {
  int32_t seq, w;
};

// Where a launcher enqueues its kernels: the stream, and whether they launch with programmatic
// dependent launch (each kernel's blocks scheduled while the previous kernel ends; every kernel
// waits for it in pdl_begin()). The backend's `pdl` option.
struct Stream {
  cudaStream_t id = nullptr;
  bool pdl = true;
};

// Raises the shared-memory limit of every kernel that needs more than 48 KB, on the current device,
// as far as the device allows (launches that need more then fail). The backend calls it once for its
// device before any launch; with wgmma, also for the sm_90a kernels.
cudaError_t prepare_device(bool wgmma);
// The current device is sm_90 and the kernels were built for sm_90a: Hopper's warpgroup MMA kernels
// (attention_wgmma, indexer_scores_wgmma, moe_*_wgmma) may launch. Asks the device each call; the
// backend asks once.
bool wgmma_supported();

// --- elementwise / row ops (basic.cu)
cudaError_t f32_to_bf16(const float* x, bf16_t* y, int64_t n, Stream s);
cudaError_t bf16_to_f32(const bf16_t* x, float* y, int64_t n, Stream s);
// Element i = mean + stddev * u(seed, i), u uniform with unit variance (src/backend/random_fill.h
// computes the same values on the host). Writes f32 and/or bf16 (either may be null).
cudaError_t fill_random(float* f32, bf16_t* b16, int64_t n, float mean, float stddev, uint64_t seed, Stream s);
// Keeps one multiprocessor busy for about `ns` nanoseconds (lets the host queue work ahead when
// timing ops with events).
cudaError_t spin(int64_t ns, Stream s);
// out[r] = table[tokens[r]] repeated `times` times (bf16 table, or fp32 when table_b16 is null)
cudaError_t embed(const bf16_t* table_b16, const float* table_f32, int64_t vocab, int64_t cols, const int32_t* tokens,
                  int64_t rows, int times, float* out, Stream s);
// x and out may alias. With rope (and positions), each normalised group is then rotated as
// rope(..., head_dim = group, inverse = false) would.
cudaError_t rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t cols, int group, float* out,
                     Stream s, const RopeDev* rope = nullptr, const int32_t* positions = nullptr);
// rms_norm of two tensors of the same rows (and group, eps, rope) in one launch.
struct NormTensor {
  const float* x = nullptr;
  const float* weight = nullptr;  // group floats, or null
  int64_t cols = 0;               // a multiple of the group (0: no tensor)
  float* out = nullptr;
  bool bf16 = false;  // x and out hold bf16 values (cols, group and rope_dim multiples of 4; 8-byte aligned)
};
cudaError_t rms_norm_pair(const NormTensor& a, const NormTensor& b, float eps, int64_t rows, int group, Stream s,
                          const RopeDev* rope = nullptr, const int32_t* positions = nullptr);
cudaError_t rope(float* x, int64_t rows, int64_t cols, int head_dim, RopeDev rope, const int32_t* positions, bool inverse,
                 Stream s);
// rope on bf16 values (rotated in fp32, rounded back).
cudaError_t rope_bf16(bf16_t* x, int64_t rows, int64_t cols, int head_dim, RopeDev rope, const int32_t* positions, bool inverse,
                      Stream s);
cudaError_t add(float* a, const float* b, int64_t n, Stream s);
cudaError_t gather_rows(const float* x, int64_t cols, const int32_t* rows, int64_t n, float* out, Stream s);
// out[r] = index of the largest value of row r, the lowest among equal ones; -1 when the row is all
// -inf, -2 when it holds a NaN or +inf (greedy decoding without moving the logits).
cudaError_t argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out, Stream s);
// g = silu(min(g, limit)) * clamp(u, -limit, limit), in place on g
cudaError_t swiglu(float* g, const float* u, int64_t n, float limit, Stream s);
// h = bf16(silu(min(g, limit)) * clamp(u, -limit, limit))
cudaError_t swiglu_bf16(const float* g, const float* u, int64_t n, float limit, bf16_t* h, Stream s);

// Hyper-connection mixes: for a few outputs (n <= kMixMaxOut), all fp32, where a general GEMM
// library leaves most of the GPU idle. partial [rows][mix_splits(K)][n + 1]: per column chunk of x,
// x · w[j] for j < n and, at n, Σ x² (the RMS norm the mixes apply). Deterministic: the consumers
// (hc_pre, hc_head) sum the chunks in a fixed order.
inline constexpr int kMixMaxOut = 64;
int mix_splits(int64_t K);
cudaError_t mix_partial(const float* x, int64_t rows, int64_t K, const float* w, int n, float* partial, Stream s);
// out[t * ld] = Σ_k x[t, k]² (with a mix computed elsewhere into a one-split partial).
cudaError_t row_sumsq(const float* x, int64_t rows, int64_t K, float* out, int64_t ld, Stream s);

// Hyper-connections from the mix partials of the raw (un-normalised) streams (`splits` chunks of
// (2 + hc) hc + 1, resp. hc + 1, values per row); the kernels apply the unweighted RMS norm of each row.
// hc_pre with norm_weight also applies the sublayer's RMS norm (weight norm_weight, eps norm_eps) to collapsed.
// hc_pre may overwrite partial (prefill: the collapse's weights are left in it).
cudaError_t hc_pre(const float* streams, float* partial, int splits, int64_t rows, int hc, int64_t d, const float* base,
                   const float* scale, int sinkhorn_iters, float eps, float norm_eps, const float* norm_weight, float* collapsed,
                   float* post, float* comb, Stream s);
cudaError_t hc_head(const float* streams, const float* partial, int splits, int64_t rows, int hc, int64_t d, const float* base,
                    const float* scale, float eps, float norm_eps, const float* norm_weight, float* out, Stream s);
cudaError_t hc_post(const float* streams, const float* out, const float* post, const float* comb, int64_t rows, int hc,
                    int64_t d, float* new_streams, Stream s);
// hc_post, and the partials (hc_post_mix_splits(hc, d) of them, the layout of mix_partial's) of the
// next site's mix of the new streams with w [n, hc * d] fp32, n <= kMixMaxOut: decode, where a
// separate mix launch costs more than its work. d % 4 == 0, 16-byte aligned rows.
int hc_post_mix_splits(int hc, int64_t d);
cudaError_t hc_post_mix(const float* streams, const float* out, const float* post, const float* comb, int64_t rows, int hc, int64_t d,
                        float* new_streams, const float* w, int n, float* partial, Stream s);

// --- products of a few rows (gemv.cu): decode steps, where reading each weight once at full
// bandwidth is all that matters. fp32 activations (not rounded to bf16), bf16 weights, fp32
// accumulation in a fixed order (a row's result does not depend on the others).
inline constexpr int kGemvMaxRows = 4;
// k a multiple of 8, rows of x (ldx floats apart) and w 16-byte aligned.
bool gemv_supported(const float* x, int64_t ldx, const bf16_t* w, int64_t k);
// out[r, o] (ldo floats apart) = x[r, g k .. g k + k) · w[o, :k] for r < rows <= kGemvMaxRows and
// o < n_out, where g = o / n_group (n_group = n_out: a plain product; else a grouped one).
cudaError_t gemv(const float* x, int64_t rows, int64_t ldx, const bf16_t* w, int64_t n_out, int64_t k, int64_t n_group, float* out,
                 int64_t ldo, Stream s);
// Several products of the same rows of x (each as gemv above, k columns) in one launch: at decode
// the products a layer takes from one input are mostly small, and a launch each costs more than
// reading their weights.
inline constexpr int kGemvMaxProducts = 8;
struct GemvProduct {
  const bf16_t* w = nullptr;
  float* out = nullptr;
  int64_t n_out = 0, n_group = 0, ldo = 0;
};
struct GemvList {
  GemvProduct p[kGemvMaxProducts];
  int64_t first_block[kGemvMaxProducts] = {};  // set by gemv_list
  int count = 0;
  // When set (k floats, 16-byte aligned; plain products only): the products are of x's rows
  // normalised to unit RMS over their k columns, times norm (rms_norm's result, which is not stored).
  const float* norm = nullptr;
  float norm_eps = 0.0f;
};
cudaError_t gemv_list(const float* x, int64_t rows, int64_t ldx, int64_t k, const GemvList& list, Stream s);
// Experts of a few rows without a permutation. Each row has per_row() entries: slots i < top_k are
// routed experts (experts[t, i] of the stacked w1 / w3 / w2, scaled by weights[t, i]; experts null:
// expert 0, weights null: 1), slot top_k, when sw1 is set, the shared expert (scale 1).
struct GemvExperts {
  const int32_t* experts = nullptr;  // [rows, top_k]
  const float* weights = nullptr;    // [rows, top_k]
  int top_k = 0, n_exp = 0;
  const bf16_t *w1 = nullptr, *w3 = nullptr, *w2 = nullptr;     // [n_exp, inter, d] x 2, [n_exp, d, inter]
  const bf16_t *sw1 = nullptr, *sw3 = nullptr, *sw2 = nullptr;  // the shared expert: [inter, d] x 2, [d, inter]
  __host__ __device__ int per_row() const { return top_k + (sw1 ? 1 : 0); }
};
// h [rows * per_row, inter] fp32: entry e = scale * clamped SwiGLU(x[row] · w1^T, x[row] · w3^T);
// zeros for an invalid routed expert. rows * per_row <= 65535; d % 8 == 0.
cudaError_t expert_gate_up(const float* x, int64_t d, int64_t rows, const GemvExperts& ex, int64_t inter, float limit, float* h,
                           Stream s);
// out[t] = (accumulate ? out[t] : 0) + Σ_slots h[entry] @ w2^T, summed in slot order (invalid experts
// add nothing). With more than one slot: part [rows * per_row, d] floats of scratch and
// expert_down_counters(rows, d) counters that are zero (the launch leaves them zero).
int64_t expert_down_counters(int64_t rows, int64_t d);
cudaError_t expert_down(const float* h, int64_t inter, int64_t rows, const GemvExperts& ex, int64_t d, bool accumulate, float* out,
                        float* part, unsigned* counters, Stream s);

// --- model state (state.cu)
// Pools each closing window of `jobs` into one normalised, rotated entry (reads this step's kv/gate
// rows and the ring of earlier steps). Run before compress_ring_write of the same step.
// Launches max_jobs blocks; those at or past *n_jobs (device) do nothing, so that a captured graph
// serves steps with any number of closing windows up to max_jobs. With `part` (max_jobs x
// compress_pool_runs(L) x 3 x dim floats; null: one launch) windows of more than kCompressRunSlots
// slots are pooled in runs of that many by more blocks, then merged.
cudaError_t compress_pool(const float* kv, const float* gate, const float* ape, const float* norm, float norm_eps,
                          RopeDev rope, bool indexer, const CompressJob* jobs, const int32_t* n_jobs, int max_jobs,
                          BatchDev b, StateDev st, LayerDev L, float* part, Stream s);
constexpr int kCompressRunSlots = 8;
int compress_pool_runs(const LayerDev& L);
// Stores this step's last ring_rows kv | gate+ape rows into each sequence's compressor ring.
cudaError_t compress_ring_write(const float* kv, const float* gate, const float* ape, bool indexer, BatchDev b,
                                StateDev st, LayerDev L, Stream s);
// Appends this step's kv rows to each sequence's sliding-window ring.
cudaError_t window_write(const float* kv, BatchDev b, StateDev st, LayerDev L, Stream s);
// Sliding window + compressed entries (all visible ones, or `selected` [rows, sel_cols] when given)
// with per-head sinks. head_dim <= 512. n_splits > 1 shares each (row, head)'s keys among that many
// blocks (for small batches, where rows x heads blocks leave the GPU idle) and merges them after;
// partial then holds rows * heads * n_splits * (head_dim + 2) floats. With unrope.inv_freq each output
// head's rope channels are rotated back by the row's position (in the merge when there is one).
cudaError_t attention(const float* q, const float* kv, const float* sinks, const int32_t* selected, int64_t sel_cols,
                      int heads, BatchDev b, StateDev st, LayerDev L, float* out, Stream s, int n_splits = 1,
                      float* partial = nullptr, RopeDev unrope = {});
// The same attention on the tensor cores for head_dim 512 (bf16 operands, fp32 accumulation and
// softmax; kernels/attention_mqa.cu): each key is read once per group of 64 heads. Supported when
// the state layout keeps every key row 16-byte aligned. partial: rows * heads * n_splits * 514 floats.
// head_tile: heads a block, 64 or 16 (decode: 4x the blocks, a quarter of the query staging and
// partial output each).
bool attention_mqa_supported(const StateDev& st, const LayerDev& L);
// out_b16 (n_splits 1, head_tile 64): the output in bf16 there instead of out (prefill, for a
// product that reads bf16), rotated back (unrope) on the bf16 values.
cudaError_t attention_mqa(const float* q, const float* kv, const float* sinks, const int32_t* selected, int64_t sel_cols, int heads,
                          BatchDev b, StateDev st, LayerDev L, float* out, Stream s, int n_splits, float* partial,
                          RopeDev unrope = {}, int head_tile = 64, bf16_t* out_b16 = nullptr);
// Prefill kernels on Hopper's warpgroup MMA read bf16 key tables of the forward (kernels/key_table.cu):
// per sequence, kAttention: its ring (when it has a past) then its compressed entries (512 wide);
// kIndexer: its compressed index keys. key_table_rows of them a sequence; key_table_build fills the
// table and seq_first (each sequence's first table row). kv: this forward's key rows in bf16
// ([rows][512]; the attention's, null for the indexer).
struct KeyTableDev {
  const bf16_t* kv = nullptr;
  const bf16_t* rows = nullptr;
  const int32_t* seq_first = nullptr;
};
enum class KeyTableKind { kAttention, kIndexer };
int64_t key_table_rows(int32_t n_past, int32_t n_tokens, const LayerDev& L, KeyTableKind kind);
cudaError_t key_table_build(BatchDev b, StateDev st, LayerDev L, KeyTableKind kind, int64_t max_seq_rows, bf16_t* rows, int32_t* seq_first,
                            Stream s);
// The same attention as attention_mqa (head_dim 512, bf16 operands, fp32 softmax; attention_wgmma.cu)
// from a kAttention table.
// The output in bf16 (rows x heads x 512), rotated back by unrope when given. A block a
// multiprocessor walks the (row, 64 heads) items, each item's query loaded while the one before ends. The query from qb
// (bf16) or q (fp32): exactly one of them. With qn (qb only; rope_dim <= 64), each query head is
// rotated by its row's position as it is loaded and its scores scaled by its 1 / rms (an RMS norm
// without weight), instead of rms_norm_pair normalising and rotating the query before.
struct QueryNorm {
  float eps = -1.0f;  // < 0: the query is read as it is
  RopeDev rope;
};
cudaError_t attention_wgmma(const float* q, const bf16_t* qb, KeyTableDev t, const float* sinks, const int32_t* selected,
                            int64_t sel_cols, int heads, BatchDev b, StateDev st, LayerDev L, bf16_t* out, RopeDev unrope,
                            QueryNorm qn, Stream s);
// scores[r - row_begin][w] for the visible indexer keys of rows [row_begin, row_begin + n_rows);
// max_visible bounds the visible count of those rows.
cudaError_t indexer_scores(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows,
                           int64_t max_visible, BatchDev b, StateDev st, LayerDev L, float* scores, int64_t ld,
                           Stream s);
// The same scores on the tensor cores (bf16 operands, fp32 accumulation; kernels/indexer_mqa.cu)
// for up to 64 heads of index_dim 16..128 (a multiple of 16). q 16-byte aligned. 64+ rows of
// sequences averaging 4+ rows (prefill chunks) are scored 4 rows a block (each key tile loaded once
// for them), others a row a block.
bool indexer_scores_mqa_supported(int heads, const StateDev& st, const LayerDev& L);
cudaError_t indexer_scores_mqa(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows, int64_t max_visible,
                               BatchDev b, StateDev st, LayerDev L, float* scores, int64_t ld, Stream s);
// The same scores on Hopper's warpgroup MMA from a kIndexer key table (kernels/indexer_wgmma.cu):
// prefill rows (sequences of 4+ rows), up to 64 heads of index_dim 64 or 128 (on a device where
// wgmma_supported()).
bool indexer_scores_wgmma_supported(int heads, const LayerDev& L);
cudaError_t indexer_scores_wgmma(const float* q, const float* weights, int heads, int64_t row_begin, int64_t n_rows, int64_t max_visible,
                                 BatchDev b, LayerDev L, KeyTableDev t, float* scores, int64_t ld, Stream s);
// Top k of each row's visible scores (ties: lower index first), in index order, -1 padded. k <= 4096.
// Rows of up to 16 K entries are held in registers; longer ones are read from memory every pass.
cudaError_t topk_rows(const float* scores, int64_t ld, int64_t row_begin, int64_t n_rows, int rate, BatchDev b, int k,
                      int32_t* out, Stream s);

// --- MoE (moe.cu)
enum class ScoreFunc : int { kSqrtSoftplus = 0, kSigmoid = 1, kSoftmax = 2 };
// logits [rows, n_exp] -> experts [rows, top_k] and weights [rows, top_k]. tid2eid [table_rows, top_k]:
// hash routing by token id. n_exp <= 1024.
cudaError_t route(const float* logits, int64_t rows, int n_exp, const float* bias, const int32_t* tid2eid,
                  int64_t table_rows, const int32_t* tokens, ScoreFunc score, int top_k, float scaling, int32_t* experts,
                  float* weights, Stream s);
// Decode: the gate product (x [rows, d] · gate [n_exp, d]^T, fp32, into logits [rows, n_exp]) and the
// routing in one launch, whose last block routes; counter: one unsigned, zero, left zero.
inline constexpr int kGateRouteMaxRows = 4;
bool gate_route_supported(const float* x, int64_t rows, int64_t d, const float* gate);
cudaError_t gate_route(const float* x, int64_t rows, int64_t d, const float* gate, int n_exp, const float* bias, const int32_t* tid2eid,
                       int64_t table_rows, const int32_t* tokens, ScoreFunc score, int top_k, float scaling, float* logits,
                       unsigned* counter, int32_t* experts, float* weights, Stream s);

// Token permutation for the grouped expert GEMMs. `entries` = rows * top_k.
// Rows per tile: kMoeTileRows, or kMoeBigTileRows where experts get many rows (prefill) and weight
// reuse across rows pays (K % 8 == 0 and 16-byte aligned operands: the pipelined kernel only).
inline constexpr int kMoeTileRows = 32;
inline constexpr int kMoeBigTileRows = 128;
struct MoePlan {
  int32_t* counts;      // [n_exp]   (zeroed by moe_plan)
  int32_t* local;       // [entries] rank of each entry within its expert
  int32_t* offsets;     // [n_exp + 1]
  int32_t* pos;         // [entries] row of each entry in the permuted order (-1: invalid expert)
  int4* tiles;          // [max_tiles] (expert, row begin, row end, 0)
  int32_t* n_tiles;     // [1]
  int32_t max_tiles;    // ceil(entries / tile_rows) + min(n_exp, entries)
  int32_t tile_rows = kMoeTileRows;
  int32_t* sources = nullptr;  // [entries] (optional) the input row of each permuted row: entry / top_k
  int32_t top_k = 1;
};
cudaError_t moe_plan(const int32_t* experts, int64_t entries, int n_exp, MoePlan p, Stream s);
// pos[i] = base[experts[i]] + local[i] (-1 for an invalid expert): entries into per-expert slabs
// starting at row base[e], for batched products over slabs (after moe_plan's counts).
cudaError_t moe_slab_positions(const int32_t* experts, const int32_t* local, int64_t entries, const int32_t* base, int32_t* pos,
                               Stream s);
// xperm[pos[e]] = bf16(x[e / top_k])
cudaError_t moe_gather(const float* x, int64_t d, int64_t entries, int top_k, const int32_t* pos, bf16_t* xperm,
                       Stream s);
// h = clamped SwiGLU(xperm @ w1[e]^T, xperm @ w3[e]^T) (bf16 [entries, inter]), per tile's expert:
// a cp.async pipelined kernel where K % 8 == 0 and the operands are 16-byte aligned, else (32-row
// tiles) a synchronous one.
cudaError_t moe_gate_up(const bf16_t* xperm, const bf16_t* w1, const bf16_t* w3, int64_t d, int64_t inter, float limit,
                        const int4* tiles, const int32_t* n_tiles, int max_tiles, int tile_rows, bf16_t* h, Stream s);
// y = h @ w2[e]^T (fp32 [entries, d])
cudaError_t moe_down(const bf16_t* h, const bf16_t* w2, int64_t inter, int64_t d, const int4* tiles,
                     const int32_t* n_tiles, int max_tiles, int tile_rows, float* y, Stream s);
// The same two products on Hopper's warpgroup MMA for kMoeBigTileRows tiles (moe_wgmma.cu; d and
// inter multiples of 128, an sm_90a device: wgmma_supported()). Gate/up reads its rows from x, the
// unpermuted bf16 input, through the plan's sources (no gathered copy).
cudaError_t moe_gate_up_wgmma(const bf16_t* x, const int32_t* sources, const bf16_t* w1, const bf16_t* w3, int64_t d, int64_t inter,
                              float limit, const int4* tiles, const int32_t* n_tiles, int max_tiles, bf16_t* h, Stream s);
// Down writes y in fp32 or (y null) in bf16 to y_bf16.
cudaError_t moe_down_wgmma(const bf16_t* h, const bf16_t* w2, int64_t inter, int64_t d, const int4* tiles, const int32_t* n_tiles,
                           int max_tiles, float* y, bf16_t* y_bf16, Stream s);
// fp32 weights and activations (the backend's fp32 reference mode): same contracts, h fp32.
cudaError_t moe_gather_f32(const float* x, int64_t d, int64_t entries, int top_k, const int32_t* pos, float* xperm, Stream s);
cudaError_t moe_gate_up_f32(const float* xperm, const float* w1, const float* w3, int64_t d, int64_t inter, float limit,
                            const int4* tiles, const int32_t* n_tiles, int max_tiles, float* h, Stream s);
cudaError_t moe_down_f32(const float* h, const float* w2, int64_t inter, int64_t d, const int4* tiles, const int32_t* n_tiles,
                         int max_tiles, float* y, Stream s);
// out[t] += Σ_i weights[t, i] * y[pos[t * top_k + i]]
cudaError_t moe_combine(const float* y, const int32_t* pos, const float* weights, int64_t rows, int top_k, int64_t d,
                        float* out, Stream s);
cudaError_t moe_combine(const bf16_t* y, const int32_t* pos, const float* weights, int64_t rows, int top_k, int64_t d,
                        float* out, Stream s);

}  // namespace deepinfer::kernels
