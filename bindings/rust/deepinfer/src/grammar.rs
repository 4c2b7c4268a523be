//! Structured output: grammars that constrain a generation, and matchers that follow one by hand.

use deepinfer_sys as sys;

use crate::engine::Engine;
use crate::error::{check, Result};
use crate::ffi::{self, int32};
use crate::tokenizer::Tokenizer;
use crate::version::ensure_compatible;

/// The language of a grammar's spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GrammarKind {
    /// A regular expression the whole output matches.
    Regex,
    /// A JSON Schema (draft 2020-12) the output is an instance of.
    JsonSchema,
    /// An EBNF grammar (GBNF dialect, start rule `root`).
    Ebnf,
}

impl GrammarKind {
    fn raw(self) -> sys::di_grammar_kind {
        match self {
            GrammarKind::Regex => sys::DI_GRAMMAR_REGEX,
            GrammarKind::JsonSchema => sys::DI_GRAMMAR_JSON_SCHEMA,
            GrammarKind::Ebnf => sys::DI_GRAMMAR_EBNF,
        }
    }
}

/// How a grammar is compiled (the default: JSON whitespace allowed, runs unbounded).
///
/// ```
/// let compact = deepinfer::GrammarOptions::new().compact_whitespace(true);
/// # let _ = compact;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrammarOptions {
    compact_whitespace: bool,
    max_whitespace_run: u32,
}

impl GrammarOptions {
    /// The defaults.
    pub fn new() -> GrammarOptions {
        GrammarOptions::default()
    }

    /// JSON Schema: no whitespace between JSON tokens.
    pub fn compact_whitespace(mut self, compact: bool) -> Self {
        self.compact_whitespace = compact;
        self
    }

    /// JSON Schema: the longest run of whitespace between JSON tokens (0: unbounded).
    pub fn max_whitespace_run(mut self, n: u32) -> Self {
        self.max_whitespace_run = n;
        self
    }

    fn flags(self) -> sys::di_grammar_flags {
        if self.compact_whitespace {
            sys::DI_GRAMMAR_COMPACT_WHITESPACE
        } else {
            0
        }
    }
}

/// A compiled grammar: attached to [`SamplingParams`](crate::SamplingParams) with
/// [`grammar`](crate::SamplingParamsBuilder::grammar), only tokens that keep the output a prefix
/// of a match are sampled, and the output ends only where it is a complete match.
///
/// A spec that fails to compile, or uses a feature that cannot be enforced, is a
/// [`Grammar`](crate::ErrorKind::Grammar) error naming the keyword or position. Grammars are
/// immutable and `Send + Sync`.
///
/// ```
/// use deepinfer::{Grammar, SamplingParams};
/// # let model = std::env::var("DEEPINFER_MODEL")
/// #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
/// # let engine = deepinfer::Engine::builder().model(&model).build()?;
///
/// let digits = Grammar::regex(&engine, "[0-9]{3}")?;
/// let params = SamplingParams::builder().grammar(&digits).max_tokens(8).build()?;
/// let mut session = engine.session()?;
/// session.add_text("x = ")?;
/// let text: String = session.generate(&params)?.text()?;
/// assert!(text.len() == 3 && text.chars().all(|c| c.is_ascii_digit()), "{text:?}");
///
/// let schema = r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#;
/// let object = Grammar::json_schema(&engine, schema)?;
/// let yes_no = Grammar::ebnf(&engine, r#"root ::= "yes" | "no""#)?;
/// # let _ = (object, yes_no);
/// # Ok::<(), deepinfer::Error>(())
/// ```
#[derive(Debug)]
pub struct Grammar {
    raw: *mut sys::di_grammar,
}

// SAFETY: compiled grammars are immutable; const calls may run concurrently (deepinfer.h).
unsafe impl Send for Grammar {}
unsafe impl Sync for Grammar {}

impl Drop for Grammar {
    fn drop(&mut self) {
        // SAFETY: owned; parameters it is attached to hold their own reference.
        unsafe { sys::di_grammar_free(self.raw) }
    }
}

impl Grammar {
    pub(crate) fn from_raw(raw: *mut sys::di_grammar) -> Grammar {
        Grammar { raw }
    }

    pub(crate) fn raw(&self) -> *const sys::di_grammar {
        self.raw
    }

    /// Compiles a JSON Schema for the engine's tokenizer.
    pub fn json_schema(engine: &Engine, schema: &str) -> Result<Grammar> {
        Grammar::compile(
            engine,
            GrammarKind::JsonSchema,
            schema,
            GrammarOptions::default(),
        )
    }

    /// Compiles a regular expression for the engine's tokenizer.
    pub fn regex(engine: &Engine, pattern: &str) -> Result<Grammar> {
        Grammar::compile(
            engine,
            GrammarKind::Regex,
            pattern,
            GrammarOptions::default(),
        )
    }

    /// Compiles an EBNF grammar (GBNF dialect, start rule `root`) for the engine's tokenizer.
    pub fn ebnf(engine: &Engine, grammar: &str) -> Result<Grammar> {
        Grammar::compile(
            engine,
            GrammarKind::Ebnf,
            grammar,
            GrammarOptions::default(),
        )
    }

    /// Compiles a grammar of any kind with options, for the engine's tokenizer.
    pub fn compile(
        engine: &Engine,
        kind: GrammarKind,
        spec: &str,
        options: GrammarOptions,
    ) -> Result<Grammar> {
        let (ptr, len) = ffi::text(spec.as_bytes());
        ffi::create(|out| {
            // SAFETY: the engine is live; `ptr`/`len` describe `spec`.
            unsafe {
                sys::di_grammar_compile_options(
                    engine.raw(),
                    kind.raw(),
                    ptr,
                    len,
                    options.flags(),
                    options.max_whitespace_run,
                    out,
                )
            }
        })
        .map(Grammar::from_raw)
    }

    /// Compiles a grammar for a tokenizer without a model: masks are `vocab_size` wide (`None`:
    /// the tokenizer's size) and `eos_ids` are allowed exactly when the output is complete.
    pub fn for_tokenizer(
        tokenizer: &Tokenizer,
        vocab_size: Option<usize>,
        eos_ids: &[i32],
        kind: GrammarKind,
        spec: &str,
        options: GrammarOptions,
    ) -> Result<Grammar> {
        let (ptr, len) = ffi::text(spec.as_bytes());
        let width = vocab_size.map_or(0, int32);
        ffi::create(|out| {
            // SAFETY: the tokenizer is live; slices are valid.
            unsafe {
                sys::di_grammar_compile_for_tokenizer(
                    tokenizer.raw(),
                    width,
                    eos_ids.as_ptr(),
                    eos_ids.len(),
                    kind.raw(),
                    ptr,
                    len,
                    options.flags(),
                    options.max_whitespace_run,
                    out,
                )
            }
        })
        .map(Grammar::from_raw)
    }

    /// The error `spec` would give when compiled, without compiling it for a tokenizer.
    ///
    /// ```
    /// use deepinfer::{ErrorKind, Grammar, GrammarKind, GrammarOptions};
    ///
    /// assert!(Grammar::validate(GrammarKind::Regex, "a+b", GrammarOptions::new()).is_ok());
    /// let err = Grammar::validate(GrammarKind::Regex, "a(b", GrammarOptions::new()).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::Grammar);
    /// ```
    pub fn validate(kind: GrammarKind, spec: &str, options: GrammarOptions) -> Result<()> {
        ensure_compatible()?;
        let (ptr, len) = ffi::text(spec.as_bytes());
        // SAFETY: `ptr`/`len` describe `spec`.
        check(unsafe {
            sys::di_grammar_validate(
                kind.raw(),
                ptr,
                len,
                options.flags(),
                options.max_whitespace_run,
            )
        })
    }

    /// A matcher at the start of this grammar.
    pub fn matcher(&self) -> Result<Matcher> {
        // SAFETY: the grammar is live; `out` is written on success only.
        ffi::create(|out| unsafe { sys::di_matcher_create(self.raw, out) })
            .map(|raw| Matcher { raw })
    }
}

/// Follows one output through a [`Grammar`], token by token: which tokens may come next, and
/// whether the output may end (for tools that sample outside the engine).
///
/// ```
/// use deepinfer::{Grammar, GrammarKind, GrammarOptions, Tokenizer};
/// # let model = std::env::var("DEEPINFER_MODEL")
/// #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
///
/// let tokenizer = Tokenizer::from_file(&model)?;
/// let grammar = Grammar::for_tokenizer(&tokenizer, None, &[0], GrammarKind::Regex, "ab+", GrammarOptions::new())?;
/// let mut matcher = grammar.matcher()?;
/// matcher.accept_bytes("ab")?;
/// assert!(matcher.can_end()?);
/// assert!(matcher.accept_bytes("x").is_err());
/// # Ok::<(), deepinfer::Error>(())
/// ```
#[derive(Debug)]
pub struct Matcher {
    raw: *mut sys::di_matcher,
}

// SAFETY: a matcher is used by one thread at a time (every call takes &self or &mut self of an
// object that is not Sync); moving it between threads is allowed.
unsafe impl Send for Matcher {}

impl Drop for Matcher {
    fn drop(&mut self) {
        // SAFETY: owned.
        unsafe { sys::di_matcher_free(self.raw) }
    }
}

impl Matcher {
    /// Consumes a token ([`InvalidArgument`](crate::ErrorKind::InvalidArgument), state unchanged,
    /// when the grammar does not allow it here).
    pub fn accept_token(&mut self, token: i32) -> Result<()> {
        // SAFETY: owned and live.
        check(unsafe { sys::di_matcher_accept_token(self.raw, token) })
    }

    /// Consumes raw UTF-8 bytes as one step (state unchanged when not allowed).
    pub fn accept_bytes(&mut self, bytes: impl AsRef<[u8]>) -> Result<()> {
        let (ptr, len) = ffi::text(bytes.as_ref());
        // SAFETY: owned and live; `ptr`/`len` describe `bytes`.
        check(unsafe { sys::di_matcher_accept_string(self.raw, ptr, len) })
    }

    /// Undoes the last `n` accept steps.
    pub fn rollback(&mut self, n: usize) -> Result<()> {
        // SAFETY: owned and live.
        check(unsafe { sys::di_matcher_rollback(self.raw, n) })
    }

    /// Back to the start of the grammar.
    pub fn reset(&mut self) -> Result<()> {
        // SAFETY: owned and live.
        check(unsafe { sys::di_matcher_reset(self.raw) })
    }

    /// The tokens allowed next as a bitmask: bit `i % 32` of word `i / 32` is set when token `i`
    /// is allowed.
    pub fn allowed_mask(&mut self) -> Result<Vec<u32>> {
        let raw = self.raw;
        ffi::read_vec(0, |buf, cap, out_len| {
            // SAFETY: owned and live; the buffer holds `cap` words.
            unsafe { sys::di_matcher_fill_mask(raw, buf, cap, out_len) }
        })
    }

    /// Whether the output so far is a complete match (end-of-sequence is allowed).
    pub fn can_end(&self) -> Result<bool> {
        let mut out = 0;
        // SAFETY: owned and live.
        check(unsafe { sys::di_matcher_can_end(self.raw, &mut out) })?;
        Ok(out != 0)
    }

    /// Whether an end-of-sequence token was accepted (nothing more can follow).
    pub fn is_terminated(&self) -> Result<bool> {
        let mut out = 0;
        // SAFETY: owned and live.
        check(unsafe { sys::di_matcher_is_terminated(self.raw, &mut out) })?;
        Ok(out != 0)
    }
}
