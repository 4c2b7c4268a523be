//! Facts about an engine's model, and snapshots of its bookkeeping.

use deepinfer_sys as sys;

use crate::engine::Engine;
use crate::error::{check, Result};
use crate::ffi;

/// Facts about the model an engine loaded ([`Engine::model_info`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelInfo {
    /// Number of layers.
    pub layers: i64,
    /// Width of the residual stream.
    pub hidden_size: i64,
    /// Attention heads.
    pub attention_heads: i64,
    /// Routed experts per MoE layer.
    pub routed_experts: i64,
    /// Experts chosen per token.
    pub experts_per_token: i64,
    /// Vocabulary size.
    pub vocab_size: i64,
    /// The model's longest context.
    pub max_position: i64,
    /// Number of weights.
    pub parameters: i64,
    /// Bytes the weights take on the device.
    pub weight_bytes: i64,
    /// How the weights are held on the device, e.g. `"bf16"` or `"f32"`.
    pub weight_dtype: String,
}

impl ModelInfo {
    pub(crate) fn read(engine: &Engine) -> Result<ModelInfo> {
        let get = |key| {
            let mut out = 0;
            // SAFETY: the engine is live; `out` is a valid place.
            check(unsafe { sys::di_engine_model_info(engine.raw(), key, &mut out) }).map(|()| out)
        };
        Ok(ModelInfo {
            layers: get(sys::DI_MODEL_LAYERS)?,
            hidden_size: get(sys::DI_MODEL_HIDDEN_SIZE)?,
            attention_heads: get(sys::DI_MODEL_ATTENTION_HEADS)?,
            routed_experts: get(sys::DI_MODEL_ROUTED_EXPERTS)?,
            experts_per_token: get(sys::DI_MODEL_EXPERTS_PER_TOKEN)?,
            vocab_size: get(sys::DI_MODEL_VOCAB_SIZE)?,
            max_position: get(sys::DI_MODEL_MAX_POSITION)?,
            parameters: get(sys::DI_MODEL_PARAMETERS)?,
            weight_bytes: get(sys::DI_MODEL_WEIGHT_BYTES)?,
            weight_dtype: ffi::read_string(8, |buf, cap, out_len| {
                // SAFETY: the buffer holds `cap` bytes.
                unsafe { sys::di_engine_weight_dtype(engine.raw(), buf, cap, out_len) }
            })?,
        })
    }
}

/// A snapshot of an engine's bookkeeping ([`Engine::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Completions with model state, being computed.
    pub running_sequences: u64,
    /// Completions submitted and not yet started (or preempted).
    pub waiting_sequences: u64,
    /// Generations submitted and not finished.
    pub running_generations: u64,
    /// Idle sessions whose state is kept for their next turn.
    pub resident_sessions: u64,
    /// State memory in use, in bytes.
    pub state_bytes_used: u64,
    /// State memory in all, in bytes.
    pub state_bytes_total: u64,
    /// Context tokens processed since the engine started.
    pub prompt_tokens: u64,
    /// Tokens sampled since the engine started.
    pub generated_tokens: u64,
    /// Engine steps (forwards).
    pub steps: u64,
    /// Sequences whose state was given up to make room.
    pub preemptions: u64,
    /// Time spent in steps, in microseconds.
    pub step_microseconds: u64,
}

/// Frees a stats snapshot when dropped.
struct Snapshot(*mut sys::di_stats);

impl Drop for Snapshot {
    fn drop(&mut self) {
        // SAFETY: owned.
        unsafe { sys::di_stats_free(self.0) }
    }
}

impl Stats {
    pub(crate) fn read(engine: &Engine) -> Result<Stats> {
        // SAFETY: the engine is live; `out` is written on success only.
        let snapshot = Snapshot(ffi::create(|out| unsafe {
            sys::di_engine_stats(engine.raw(), out)
        })?);
        let get = |key| {
            let mut out = 0;
            // SAFETY: the snapshot is live; `out` is a valid place.
            check(unsafe { sys::di_stats_get(snapshot.0, key, &mut out) }).map(|()| out)
        };
        Ok(Stats {
            running_sequences: get(sys::DI_STAT_RUNNING_SEQUENCES)?,
            waiting_sequences: get(sys::DI_STAT_WAITING_SEQUENCES)?,
            running_generations: get(sys::DI_STAT_RUNNING_GENERATIONS)?,
            resident_sessions: get(sys::DI_STAT_RESIDENT_SESSIONS)?,
            state_bytes_used: get(sys::DI_STAT_STATE_BYTES_USED)?,
            state_bytes_total: get(sys::DI_STAT_STATE_BYTES_TOTAL)?,
            prompt_tokens: get(sys::DI_STAT_PROMPT_TOKENS)?,
            generated_tokens: get(sys::DI_STAT_GENERATED_TOKENS)?,
            steps: get(sys::DI_STAT_STEPS)?,
            preemptions: get(sys::DI_STAT_PREEMPTIONS)?,
            step_microseconds: get(sys::DI_STAT_STEP_MICROSECONDS)?,
        })
    }
}
