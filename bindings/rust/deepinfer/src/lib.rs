//! DeepInfer for Rust: an embeddable inference engine for DeepSeek-V4-family models, on the
//! library's C ABI (`libdeepinfer.so`, through the `deepinfer-sys` crate).
//!
//! An [`Engine`] loads a model and batches every generation submitted to it; a [`Session`] holds
//! a context (a prompt, or a chat) and generates from it with [`SamplingParams`], optionally
//! constrained by a [`Grammar`]. Output streams as [`Event`]s from a [`Stream`], which is a
//! blocking [`Iterator`] and also has an `async fn next` that works under any async runtime.
//!
//! ```
//! use deepinfer::{Engine, SamplingParams};
//! # let model = std::env::var("DEEPINFER_MODEL")
//! #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
//!
//! let engine = Engine::builder().model(&model).build()?;
//! let mut session = engine.session()?;
//! session.add_text("def fibonacci(n):")?;
//! let params = SamplingParams::builder().temperature(0.0).max_tokens(32).build()?;
//! for event in session.generate(&params)? {
//!     print!("{}", event?.text());
//! }
//! # Ok::<(), deepinfer::Error>(())
//! ```
//!
//! # Threads and async
//!
//! [`Engine`], [`SamplingParams`], [`Grammar`], [`Tokenizer`] and [`Event`] are `Send + Sync`;
//! [`Session`] is `Send`; a [`CancelHandle`] cancels a generation from any thread. `Stream::next`
//! is an `async fn` woken through the completion queue's file descriptor by one small background
//! thread per process, so it needs no particular runtime.
//!
//! # Errors
//!
//! Every fallible call returns [`Result`]; an [`Error`] carries an [`ErrorKind`] (one per code of
//! the C ABI) and the library's message. The first engine, tokenizer or sampling parameters made
//! check that the loaded library has the ABI this crate was built for
//! ([`ABI_VERSION`]), and report a mismatch as [`ErrorKind::Unsupported`].
//!
//! # Finding the library
//!
//! `deepinfer-sys` links `libdeepinfer.so` found through `DEEPINFER_LIB_DIR` or `pkg-config
//! deepinfer`; at run time the dynamic loader must find `libdeepinfer.so.0` (install the library
//! system-wide, or set `LD_LIBRARY_PATH`).
#![deny(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]

mod batch;
mod completion;
mod engine;
mod error;
mod event;
mod ffi;
mod grammar;
mod info;
mod log;
mod queue;
mod reactor;
mod sampling;
mod session;
mod stream;
mod tokenizer;
mod version;

pub use completion::Completion;
pub use engine::{Device, Engine, EngineBuilder};
pub use error::{Error, ErrorKind, Result};
pub use event::{Event, EventKind, FinishReason, Logprobs, Usage};
pub use grammar::{Grammar, GrammarKind, GrammarOptions, Matcher};
pub use info::{ModelInfo, Stats};
pub use log::{clear_log_callback, set_log_callback, set_log_level, LogLevel};
pub use sampling::{SamplingParams, SamplingParamsBuilder};
pub use session::{CancelHandle, Role, Session};
pub use stream::Stream;
pub use tokenizer::Tokenizer;
pub use version::{abi_version, version, version_number, ABI_VERSION};
