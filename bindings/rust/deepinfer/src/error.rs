//! The error type: a kind for each of the library's codes, and the library's message.

use std::ffi::CStr;
use std::fmt;

use deepinfer_sys as sys;

/// A specialised `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, one kind per code of the C ABI (`di_code`).
///
/// Newer libraries may add codes: those come as [`ErrorKind::Unknown`] (the number is in
/// [`Error::code`]) until this crate names them, so match with a wildcard arm.
///
/// ```
/// use deepinfer::{ErrorKind, SamplingParams};
///
/// let err = SamplingParams::builder().temperature(-1.0).build().unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidArgument);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A parameter is out of range or malformed (the message names it).
    InvalidArgument,
    /// A file or key that must exist does not.
    NotFound,
    /// A checkpoint, config or tokenizer file is malformed.
    ModelFormat,
    /// Valid input this build or machine cannot handle (the message says what is missing).
    Unsupported,
    /// Memory ran out.
    OutOfMemory,
    /// Larger than the engine's limits (context length, state memory).
    Capacity,
    /// An output buffer was too small (the crate sizes its buffers itself; seen only from the raw ABI).
    BufferTooSmall,
    /// The caller asked to stop (a model load aborted by its progress callback).
    Cancelled,
    /// A grammar, JSON schema or regular expression failed to compile.
    Grammar,
    /// A file could not be read.
    Io,
    /// The device failed.
    Backend,
    /// Not valid in the object's current state (e.g. a session that is already generating).
    State,
    /// A wait timed out (reserved by the library; not produced by version 0.2).
    Timeout,
    /// The engine behind the object was dropped (or this process is a fork's child).
    Closed,
    /// A handle the library does not know: a freed session behind a [`CancelHandle`](crate::CancelHandle).
    InvalidHandle,
    /// A bug in DeepInfer; please report it.
    Internal,
    /// A code this version of the crate does not name (see [`Error::code`]).
    Unknown,
}

impl ErrorKind {
    /// The kind of a raw `di_code`.
    ///
    /// ```
    /// assert_eq!(deepinfer::ErrorKind::from_code(14), deepinfer::ErrorKind::Closed);
    /// assert_eq!(deepinfer::ErrorKind::from_code(77), deepinfer::ErrorKind::Unknown);
    /// ```
    pub fn from_code(code: i32) -> ErrorKind {
        match code {
            sys::DI_ERR_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
            sys::DI_ERR_NOT_FOUND => ErrorKind::NotFound,
            sys::DI_ERR_MODEL_FORMAT => ErrorKind::ModelFormat,
            sys::DI_ERR_UNSUPPORTED => ErrorKind::Unsupported,
            sys::DI_ERR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
            sys::DI_ERR_CAPACITY => ErrorKind::Capacity,
            sys::DI_ERR_BUFFER_TOO_SMALL => ErrorKind::BufferTooSmall,
            sys::DI_ERR_CANCELLED => ErrorKind::Cancelled,
            sys::DI_ERR_GRAMMAR => ErrorKind::Grammar,
            sys::DI_ERR_IO => ErrorKind::Io,
            sys::DI_ERR_BACKEND => ErrorKind::Backend,
            sys::DI_ERR_STATE => ErrorKind::State,
            sys::DI_ERR_TIMEOUT => ErrorKind::Timeout,
            sys::DI_ERR_CLOSED => ErrorKind::Closed,
            sys::DI_ERR_INVALID_HANDLE => ErrorKind::InvalidHandle,
            sys::DI_ERR_INTERNAL => ErrorKind::Internal,
            _ => ErrorKind::Unknown,
        }
    }
}

/// An error of the library: its code and its message.
///
/// `Display` shows the code's name and the library's message, e.g.
/// `invalid argument: temperature must be in [0, 1e6], got -1`.
///
/// ```
/// use deepinfer::{Engine, ErrorKind};
///
/// let err = Engine::builder().model("/no/such/model").build().unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::NotFound);
/// assert!(err.message().contains("/no/such/model"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    code: i32,
    message: String,
}

impl Error {
    pub(crate) fn new(code: i32, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
        }
    }

    /// Takes an error of the library: reads it and frees it.
    ///
    /// # Safety
    /// `err` is a non-null error the caller owns.
    pub(crate) unsafe fn take(err: *mut sys::di_error) -> Error {
        let code = sys::di_error_code(err);
        let message = CStr::from_ptr(sys::di_error_message(err))
            .to_string_lossy()
            .into_owned();
        sys::di_error_free(err);
        Error { code, message }
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_code(self.code)
    }

    /// The library's numeric code (`di_code`), also for codes newer than this crate.
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The library's message, naming what was wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: di_code_name returns static storage for any code.
        let name = unsafe { CStr::from_ptr(sys::di_code_name(self.code)) };
        write!(f, "{}: {}", name.to_string_lossy(), self.message)
    }
}

impl std::error::Error for Error {}

/// `Ok` for a null error, else the error (freed).
pub(crate) fn check(err: *mut sys::di_error) -> Result<()> {
    if err.is_null() {
        Ok(())
    } else {
        // SAFETY: a non-null error returned by the library belongs to the caller.
        Err(unsafe { Error::take(err) })
    }
}
