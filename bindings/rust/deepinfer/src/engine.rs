//! The engine: a loaded model that batches every generation submitted to it.

use std::any::Any;
use std::ops::ControlFlow;
use std::os::raw::c_void;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use deepinfer_sys as sys;

use crate::error::{check, Result};
use crate::ffi::{self, int32};
use crate::info::{ModelInfo, Stats};
use crate::sampling::SamplingParams;
use crate::session::Session;
use crate::tokenizer::Tokenizer;
use crate::version::ensure_compatible;

/// Where the engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Device {
    /// A GPU when the CUDA backend module, a driver and a GPU are present, else the CPU.
    #[default]
    Auto,
    /// The CPU (the reference backend).
    Cpu,
    /// A CUDA GPU ([`Unsupported`](crate::ErrorKind::Unsupported) at build time when none is usable).
    Cuda,
    /// A device this version of the crate does not name (its raw `di_device` value).
    Unknown(i32),
}

impl Device {
    fn raw(self) -> sys::di_device {
        match self {
            Device::Auto => sys::DI_DEVICE_AUTO,
            Device::Cpu => sys::DI_DEVICE_CPU,
            Device::Cuda => sys::DI_DEVICE_CUDA,
            Device::Unknown(v) => v,
        }
    }

    fn from_raw(v: sys::di_device) -> Device {
        match v {
            sys::DI_DEVICE_AUTO => Device::Auto,
            sys::DI_DEVICE_CPU => Device::Cpu,
            sys::DI_DEVICE_CUDA => Device::Cuda,
            other => Device::Unknown(other),
        }
    }
}

/// A loaded model and the thread that runs it: every generation of every session of the engine
/// is batched together.
///
/// An `Engine` is `Send + Sync`: share it between threads by reference (`std::thread::scope`) or
/// in an `Arc`. Dropping it cancels running generations and releases the model; sessions made
/// from it then fail with [`Closed`](crate::ErrorKind::Closed).
///
/// ```
/// use deepinfer::{Device, Engine};
/// # let model = std::env::var("DEEPINFER_MODEL")
/// #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
///
/// let engine = Engine::builder().model(&model).device(Device::Cpu).build()?;
/// assert_eq!(engine.device()?, Device::Cpu);
///
/// let info = engine.model_info()?;
/// println!("{} layers, {} parameters in {}", info.layers, info.parameters, info.weight_dtype);
/// let ids = engine.tokenize("hello world", false)?;
/// assert_eq!(engine.detokenize(&ids, false)?, "hello world");
/// assert_eq!(engine.stats()?.running_generations, 0);
///
/// let mut session = engine.session()?;
/// session.add_text("import os")?;
/// assert!(session.context_len()? > 0);
/// # Ok::<(), deepinfer::Error>(())
/// ```
#[derive(Debug)]
pub struct Engine {
    raw: *mut sys::di_engine,
}

// SAFETY: di_engine is thread-safe (deepinfer.h, Threading): any number of threads may use it at
// once, and only di_engine_free (in Drop, with exclusive access) changes it.
unsafe impl Send for Engine {}
unsafe impl Sync for Engine {}

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: the engine is owned; its sessions keep working handles that report Closed.
        unsafe { sys::di_engine_free(self.raw) }
    }
}

impl Engine {
    /// Starts configuring an engine; [`EngineBuilder::model`] is required.
    pub fn builder<'a>() -> EngineBuilder<'a> {
        EngineBuilder::default()
    }

    pub(crate) fn raw(&self) -> *const sys::di_engine {
        self.raw
    }

    /// A new session (a context whose model state persists between its generations).
    pub fn session(&self) -> Result<Session> {
        Session::new(self)
    }

    /// The library's sampling defaults overridden by the model's `generation_config.json`.
    pub fn sampling_defaults(&self) -> Result<SamplingParams> {
        // SAFETY: the engine is live; `out` is written on success only.
        let raw = ffi::create(|out| unsafe { sys::di_engine_sampling_defaults(self.raw, out) })?;
        Ok(SamplingParams::from_raw(raw))
    }

    /// The model's tokenizer ([`Unsupported`](crate::ErrorKind::Unsupported) when the model
    /// directory has none).
    pub fn tokenizer(&self) -> Result<Tokenizer> {
        // SAFETY: as above.
        let raw = ffi::create(|out| unsafe { sys::di_engine_tokenizer(self.raw, out) })?;
        Ok(Tokenizer::from_raw(raw))
    }

    /// Token ids of `text`; with `special`, control tokens written in the text are recognised.
    pub fn tokenize(&self, text: &str, special: bool) -> Result<Vec<i32>> {
        let (ptr, len) = ffi::text(text.as_bytes());
        let flags = if special {
            sys::DI_TEXT_SPECIAL
        } else {
            sys::DI_TEXT_PLAIN
        };
        ffi::read_vec(text.len() / 2 + 8, |buf, cap, out_len| {
            // SAFETY: `ptr`/`len` describe `text`; the buffer holds `cap` ids.
            unsafe { sys::di_engine_tokenize(self.raw, ptr, len, flags, buf, cap, out_len) }
        })
    }

    /// The text of token ids; with `skip_special`, special tokens are left out.
    pub fn detokenize(&self, ids: &[i32], skip_special: bool) -> Result<String> {
        let flags = if skip_special {
            sys::DI_DETOK_SKIP_SPECIAL
        } else {
            0
        };
        ffi::read_string(ids.len() * 4 + 16, |buf, cap, out_len| {
            // SAFETY: `ids` is a valid slice; the buffer holds `cap` bytes.
            unsafe {
                sys::di_engine_detokenize(
                    self.raw,
                    ids.as_ptr(),
                    ids.len(),
                    flags,
                    buf,
                    cap,
                    out_len,
                )
            }
        })
    }

    /// The device the engine runs on (never [`Device::Auto`]).
    pub fn device(&self) -> Result<Device> {
        let mut out = 0;
        // SAFETY: the engine is live; `out` is a valid place.
        check(unsafe { sys::di_engine_device(self.raw, &mut out) })?;
        Ok(Device::from_raw(out))
    }

    /// Whether the model has a tokenizer (text in and out, chat, stop strings, grammars).
    pub fn has_tokenizer(&self) -> Result<bool> {
        let mut out = 0;
        // SAFETY: as above.
        check(unsafe { sys::di_engine_has_tokenizer(self.raw, &mut out) })?;
        Ok(out != 0)
    }

    /// Vocabulary size (the width of the model's logits).
    pub fn vocab_size(&self) -> Result<usize> {
        let mut out = 0;
        // SAFETY: as above.
        check(unsafe { sys::di_engine_vocab_size(self.raw, &mut out) })?;
        Ok(usize::try_from(out).unwrap_or(0))
    }

    /// Longest context of one sequence, in tokens.
    pub fn max_context(&self) -> Result<usize> {
        let mut out = 0;
        // SAFETY: as above.
        check(unsafe { sys::di_engine_max_context(self.raw, &mut out) })?;
        Ok(usize::try_from(out).unwrap_or(0))
    }

    /// Tokens of context the engine's state memory holds in total.
    pub fn capacity_tokens(&self) -> Result<usize> {
        let mut out = 0;
        // SAFETY: as above.
        check(unsafe { sys::di_engine_capacity_tokens(self.raw, &mut out) })?;
        Ok(usize::try_from(out).unwrap_or(0))
    }

    /// End-of-sequence token ids.
    pub fn eos_tokens(&self) -> Result<Vec<i32>> {
        ffi::read_vec(8, |buf, cap, out_len| {
            // SAFETY: the buffer holds `cap` ids.
            unsafe { sys::di_engine_eos_tokens(self.raw, buf, cap, out_len) }
        })
    }

    /// Facts about the loaded model.
    pub fn model_info(&self) -> Result<ModelInfo> {
        ModelInfo::read(self)
    }

    /// A snapshot of the engine's bookkeeping.
    pub fn stats(&self) -> Result<Stats> {
        Stats::read(self)
    }
}

type ProgressFn<'a> = Box<dyn FnMut(u64, u64) -> ControlFlow<()> + 'a>;

/// Settings of an [`Engine`]; [`build`](EngineBuilder::build) loads the model.
///
/// Each setting is checked by the library when the engine is built: a bad value is an
/// [`InvalidArgument`](crate::ErrorKind::InvalidArgument) error naming it.
///
/// ```
/// use deepinfer::{Device, Engine};
/// use std::ops::ControlFlow;
/// # let model = std::env::var("DEEPINFER_MODEL")
/// #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
///
/// let mut loaded = 0;
/// let engine = Engine::builder()
///     .model(&model)
///     .device(Device::Cpu)
///     .threads(2)
///     .max_sequences(16)
///     .seed(7)
///     .option("dummy_weights", "0")
///     .progress(|done, _total| {
///         loaded = done;
///         ControlFlow::Continue(())
///     })
///     .build()?;
/// assert!(loaded > 0);
/// # Ok::<(), deepinfer::Error>(())
/// ```
#[must_use]
#[derive(Default)]
pub struct EngineBuilder<'a> {
    model: Option<PathBuf>,
    device: Option<Device>,
    threads: Option<i32>,
    max_sequences: Option<i32>,
    max_context: Option<i64>,
    state_memory: Option<u64>,
    state_memory_fraction: Option<f64>,
    max_batched_tokens: Option<i32>,
    seed: Option<u64>,
    options: Vec<(String, String)>,
    progress: Option<ProgressFn<'a>>,
}

impl std::fmt::Debug for EngineBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("model", &self.model)
            .field("device", &self.device)
            .field("threads", &self.threads)
            .field("max_sequences", &self.max_sequences)
            .field("max_context", &self.max_context)
            .field("state_memory", &self.state_memory)
            .field("state_memory_fraction", &self.state_memory_fraction)
            .field("max_batched_tokens", &self.max_batched_tokens)
            .field("seed", &self.seed)
            .field("options", &self.options)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// What the progress trampoline needs: the caller's closure and a panic caught in it.
struct ProgressContext<'f, 'a> {
    f: &'f mut ProgressFn<'a>,
    panic: Option<Box<dyn Any + Send>>,
}

unsafe extern "C" fn progress_trampoline(user: *mut c_void, done: u64, total: u64) -> i32 {
    // SAFETY: `user` is the ProgressContext of the build() call running di_engine_create on this
    // thread (the library calls this only before di_engine_create returns).
    let ctx = &mut *(user as *mut ProgressContext<'_, '_>);
    if ctx.panic.is_some() {
        return 1;
    }
    // A panic must not unwind into C: it aborts the load and is resumed once the library returned.
    match catch_unwind(AssertUnwindSafe(|| (ctx.f)(done, total))) {
        Ok(ControlFlow::Continue(())) => 0,
        Ok(ControlFlow::Break(())) => 1,
        Err(payload) => {
            ctx.panic = Some(payload);
            1
        }
    }
}

/// Frees an engine configuration when dropped.
struct Config(*mut sys::di_engine_config);

impl Drop for Config {
    fn drop(&mut self) {
        // SAFETY: owned.
        unsafe { sys::di_engine_config_free(self.0) }
    }
}

impl<'a> EngineBuilder<'a> {
    /// The model directory: `config.json`, `*.safetensors`, and optionally `tokenizer.json`,
    /// `tokenizer_config.json` and `generation_config.json`. Required.
    pub fn model(mut self, path: impl AsRef<Path>) -> Self {
        self.model = Some(path.as_ref().to_path_buf());
        self
    }

    /// The device (default [`Device::Auto`]).
    pub fn device(mut self, device: Device) -> Self {
        self.device = Some(device);
        self
    }

    /// CPU worker threads (default 0: one per core).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(int32(n));
        self
    }

    /// Sequences the engine keeps state for at once (default 64).
    pub fn max_sequences(mut self, n: usize) -> Self {
        self.max_sequences = Some(int32(n));
        self
    }

    /// Longest context of one sequence, in tokens (default 0: the model's maximum).
    pub fn max_context(mut self, tokens: usize) -> Self {
        self.max_context = Some(i64::try_from(tokens).unwrap_or(i64::MAX));
        self
    }

    /// Bytes for the shared pool of model state (default 0: automatic).
    pub fn state_memory(mut self, bytes: u64) -> Self {
        self.state_memory = Some(bytes);
        self
    }

    /// The share of a GPU's free memory that automatic state memory takes, in (0, 1] (default 0.9).
    pub fn state_memory_fraction(mut self, fraction: f64) -> Self {
        self.state_memory_fraction = Some(fraction);
        self
    }

    /// Tokens processed per engine step (default 2048).
    pub fn max_batched_tokens(mut self, n: usize) -> Self {
        self.max_batched_tokens = Some(int32(n));
        self
    }

    /// Seed of the engine's own generator, from which generations without a seed draw theirs
    /// (default: seeded from the operating system).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// A named setting of the engine or its backend, as text (`deepinfer options` lists them);
    /// repeatable. An unknown key is an [`InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// error at build time.
    pub fn option(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.push((key.into(), value.into()));
        self
    }

    /// Called on this thread while the model loads, with the bytes of weights loaded so far and
    /// in all (0 while unknown); [`ControlFlow::Break`] aborts the load, and `build` then fails
    /// with [`Cancelled`](crate::ErrorKind::Cancelled). A panic in `f` aborts the load too and is
    /// resumed by `build`.
    pub fn progress<F>(mut self, f: F) -> Self
    where
        F: FnMut(u64, u64) -> ControlFlow<()> + 'a,
    {
        self.progress = Some(Box::new(f));
        self
    }

    /// Loads the model and starts the engine.
    ///
    /// Fails with the library's error: [`NotFound`](crate::ErrorKind::NotFound) for a missing
    /// model directory, [`ModelFormat`](crate::ErrorKind::ModelFormat) for a malformed checkpoint,
    /// [`InvalidArgument`](crate::ErrorKind::InvalidArgument) for a bad setting, and
    /// [`Unsupported`](crate::ErrorKind::Unsupported) when the loaded library is not the one this
    /// crate was built for.
    pub fn build(mut self) -> Result<Engine> {
        ensure_compatible()?;
        // SAFETY: `out` is written on success only.
        let config = Config(ffi::create(|out| unsafe {
            sys::di_engine_config_create(out)
        })?);
        let cfg = config.0;
        // SAFETY (every call below): `cfg` is owned and live; text arguments are valid slices.
        if let Some(model) = &self.model {
            let (ptr, len) = ffi::text(model.as_os_str().as_bytes());
            check(unsafe { sys::di_engine_config_set_model_path(cfg, ptr, len) })?;
        }
        if let Some(device) = self.device {
            check(unsafe { sys::di_engine_config_set_device(cfg, device.raw()) })?;
        }
        if let Some(n) = self.threads {
            check(unsafe { sys::di_engine_config_set_threads(cfg, n) })?;
        }
        if let Some(n) = self.max_sequences {
            check(unsafe { sys::di_engine_config_set_max_sequences(cfg, n) })?;
        }
        if let Some(n) = self.max_context {
            check(unsafe { sys::di_engine_config_set_max_context(cfg, n) })?;
        }
        if let Some(bytes) = self.state_memory {
            check(unsafe { sys::di_engine_config_set_state_memory(cfg, bytes) })?;
        }
        if let Some(fraction) = self.state_memory_fraction {
            check(unsafe { sys::di_engine_config_set_state_memory_fraction(cfg, fraction) })?;
        }
        if let Some(n) = self.max_batched_tokens {
            check(unsafe { sys::di_engine_config_set_max_batched_tokens(cfg, n) })?;
        }
        if let Some(seed) = self.seed {
            check(unsafe { sys::di_engine_config_set_seed(cfg, seed) })?;
        }
        for (key, value) in &self.options {
            let (k, kl) = ffi::text(key.as_bytes());
            let (v, vl) = ffi::text(value.as_bytes());
            check(unsafe { sys::di_engine_config_set_option(cfg, k, kl, v, vl) })?;
        }
        let mut raw = std::ptr::null_mut();
        let created = match self.progress.as_mut() {
            None => check(unsafe { sys::di_engine_create(cfg, &mut raw) }),
            Some(f) => {
                let mut ctx = ProgressContext { f, panic: None };
                let user = &mut ctx as *mut ProgressContext<'_, '_> as *mut c_void;
                check(unsafe {
                    sys::di_engine_config_set_progress_callback(
                        cfg,
                        Some(progress_trampoline),
                        user,
                    )
                })?;
                let created = check(unsafe { sys::di_engine_create(cfg, &mut raw) });
                if let Some(payload) = ctx.panic.take() {
                    if created.is_ok() {
                        // The load went through although the callback panicked: release it first.
                        unsafe { sys::di_engine_free(raw) };
                    }
                    resume_unwind(payload);
                }
                created
            }
        };
        created?;
        Ok(Engine { raw })
    }
}
