//! Tokenizers: text to token ids and back, with or without a model.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use deepinfer_sys as sys;

use crate::error::{check, Result};
use crate::ffi;
use crate::version::ensure_compatible;

/// A byte-level BPE tokenizer loaded from a `tokenizer.json` (or a model directory), or an
/// engine's own ([`Engine::tokenizer`](crate::Engine::tokenizer)). `Send + Sync`.
///
/// ```
/// use deepinfer::Tokenizer;
/// # let model = std::env::var("DEEPINFER_MODEL")
/// #     .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../../models/demo").to_string());
///
/// let tokenizer = Tokenizer::from_file(&model)?;
/// let ids = tokenizer.encode("def main():", false)?;
/// assert_eq!(tokenizer.decode(&ids, false)?, "def main():");
/// let vocab = tokenizer.vocab_size()?;
/// assert!(ids.iter().all(|&id| (id as usize) < vocab));
/// # Ok::<(), deepinfer::Error>(())
/// ```
#[derive(Debug)]
pub struct Tokenizer {
    raw: *mut sys::di_tokenizer,
}

// SAFETY: calls taking a const di_tokenizer may run concurrently (deepinfer.h, Threading); only
// di_tokenizer_free (in Drop) changes it.
unsafe impl Send for Tokenizer {}
unsafe impl Sync for Tokenizer {}

impl Drop for Tokenizer {
    fn drop(&mut self) {
        // SAFETY: owned.
        unsafe { sys::di_tokenizer_free(self.raw) }
    }
}

impl Tokenizer {
    pub(crate) fn from_raw(raw: *mut sys::di_tokenizer) -> Tokenizer {
        Tokenizer { raw }
    }

    pub(crate) fn raw(&self) -> *const sys::di_tokenizer {
        self.raw
    }

    /// Loads a `tokenizer.json`, or the one in a model directory.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Tokenizer> {
        ensure_compatible()?;
        let (ptr, len) = ffi::text(path.as_ref().as_os_str().as_bytes());
        // SAFETY: `ptr`/`len` describe the path; `out` is written on success only.
        ffi::create(|out| unsafe { sys::di_tokenizer_create(ptr, len, out) })
            .map(Tokenizer::from_raw)
    }

    /// Largest token id + 1.
    pub fn vocab_size(&self) -> Result<usize> {
        let mut out = 0;
        // SAFETY: live; `out` is a valid place.
        check(unsafe { sys::di_tokenizer_vocab_size(self.raw, &mut out) })?;
        Ok(usize::try_from(out).unwrap_or(0))
    }

    /// Token ids of `text`; with `special`, added tokens written in the text are recognised
    /// (otherwise control-token lookalikes become ordinary tokens).
    pub fn encode(&self, text: &str, special: bool) -> Result<Vec<i32>> {
        let (ptr, len) = ffi::text(text.as_bytes());
        let flags = if special {
            sys::DI_TEXT_SPECIAL
        } else {
            sys::DI_TEXT_PLAIN
        };
        ffi::read_vec(text.len() / 2 + 8, |buf, cap, out_len| {
            // SAFETY: live; `ptr`/`len` describe `text`; the buffer holds `cap` ids.
            unsafe { sys::di_tokenizer_encode(self.raw, ptr, len, flags, buf, cap, out_len) }
        })
    }

    /// The text of token ids; with `skip_special`, special tokens are left out. An id outside
    /// the vocabulary is an [`InvalidArgument`](crate::ErrorKind::InvalidArgument) error.
    pub fn decode(&self, ids: &[i32], skip_special: bool) -> Result<String> {
        let flags = if skip_special {
            sys::DI_DETOK_SKIP_SPECIAL
        } else {
            0
        };
        ffi::read_string(ids.len() * 4 + 16, |buf, cap, out_len| {
            // SAFETY: live; `ids` is a valid slice; the buffer holds `cap` bytes.
            unsafe {
                sys::di_tokenizer_decode(
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
}
