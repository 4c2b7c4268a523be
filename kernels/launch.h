// What every launcher of the CUDA kernels shares: the batch and model-state metadata kernels read, the
// stream a launch goes to, and the one-time device setup. Launchers (one header per concept beside
// its .cu file, all gathered by di_kernels.h) are host-callable with no CUDA types beyond
// cudaStream_t (inside Stream), depend on nothing in src/ and keep no state: what a launch depends on
// comes in its arguments. Activations are fp32 row-major matrices, matrix weights bf16 (stored as
// uint16_t bits), small parameter vectors fp32. Every launcher returns the launch error
// (cudaGetLastError) and does nothing for empty work.
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
  // The backend's batch_invariant option: launchers pick a kernel variant by shape alone, never by
  // the number of rows (variants whose per-row arithmetic differs).
  bool invariant = false;
};

// Raises the shared-memory limit of every kernel that needs more than 48 KB, on the current device,
// as far as the device allows (launches that need more then fail). The backend calls it once for its
// device before any launch; with wgmma, also for the sm_90a kernels.
cudaError_t prepare_device(bool wgmma);
// The current device is sm_90 and the kernels were built for sm_90a: Hopper's warpgroup MMA kernels
// (attention_wgmma, indexer_scores_wgmma, moe_*_wgmma) may launch. Asks the device each call; the
// backend asks once.
bool wgmma_supported();

}  // namespace deepinfer::kernels
