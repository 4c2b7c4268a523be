//! The library's log: its level, and where messages go (stderr by default).

use std::cell::Cell;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use deepinfer_sys as sys;

use crate::error::{check, Error, Result};
use crate::version::ensure_compatible;

/// How important a log message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Details for developers.
    Debug,
    /// Progress (model loading, for one).
    Info,
    /// Something worth a look (the default threshold).
    Warn,
    /// A failure.
    Error,
    /// As a threshold: no messages at all.
    Off,
}

impl LogLevel {
    fn raw(self) -> sys::di_log_level {
        match self {
            LogLevel::Debug => sys::DI_LOG_DEBUG,
            LogLevel::Info => sys::DI_LOG_INFO,
            LogLevel::Warn => sys::DI_LOG_WARN,
            LogLevel::Error => sys::DI_LOG_ERROR,
            LogLevel::Off => sys::DI_LOG_OFF,
        }
    }

    fn from_raw(level: sys::di_log_level) -> LogLevel {
        match level {
            sys::DI_LOG_DEBUG => LogLevel::Debug,
            sys::DI_LOG_INFO => LogLevel::Info,
            sys::DI_LOG_WARN => LogLevel::Warn,
            _ => LogLevel::Error,
        }
    }
}

/// Drops log messages below `level` (the default is [`LogLevel::Warn`]). Process-wide.
///
/// ```
/// deepinfer::set_log_level(deepinfer::LogLevel::Error)?;
/// # Ok::<(), deepinfer::Error>(())
/// ```
pub fn set_log_level(level: LogLevel) -> Result<()> {
    ensure_compatible()?;
    // SAFETY: plain value argument.
    check(unsafe { sys::di_set_log_level(level.raw()) })
}

type LogFn = Box<dyn Fn(LogLevel, &str) + Send + Sync>;

/// The installed callback (a leaked `Box<LogFn>` as an address; 0 for none), replaced under this lock.
static INSTALLED: Mutex<usize> = Mutex::new(0);

thread_local! {
    // Older clippy mistakes thread_local's const initialiser for an interior-mutable const.
    #[allow(clippy::declare_interior_mutable_const)]
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

unsafe extern "C" fn log_trampoline(
    user: *mut c_void,
    level: sys::di_log_level,
    message: *const c_char,
    len: usize,
) {
    // SAFETY: `user` is the Box<LogFn> installed with this trampoline; the library stops calling
    // it before set_log_callback frees it. `message` holds `len` bytes during the call.
    let f = &*(user as *const LogFn);
    let text = String::from_utf8_lossy(std::slice::from_raw_parts(message.cast::<u8>(), len));
    IN_CALLBACK.with(|c| c.set(true));
    // A panic must not unwind into C; it is dropped here (the message is lost, the process goes on).
    let _ = catch_unwind(AssertUnwindSafe(|| f(LogLevel::from_raw(level), &text)));
    IN_CALLBACK.with(|c| c.set(false));
}

/// Sends the library's log messages to `f` instead of stderr (process-wide); see
/// [`clear_log_callback`] to go back to stderr.
///
/// `f` may be called from any thread, one message at a time. A panic in `f` is caught and the
/// message dropped. Calling `set_log_callback` or `clear_log_callback` from inside `f` is a
/// [`State`](crate::ErrorKind::State) error (the library calls `f` under a lock those calls take).
///
/// ```
/// use std::sync::{Arc, Mutex};
///
/// let lines = Arc::new(Mutex::new(Vec::new()));
/// let sink = lines.clone();
/// deepinfer::set_log_callback(move |level, message| {
///     sink.lock().unwrap().push(format!("{level:?} {message}"));
/// })?;
/// deepinfer::clear_log_callback()?;
/// # Ok::<(), deepinfer::Error>(())
/// ```
pub fn set_log_callback<F>(f: F) -> Result<()>
where
    F: Fn(LogLevel, &str) + Send + Sync + 'static,
{
    install(Some(Box::new(f)))
}

/// Sends the library's log messages back to stderr.
///
/// ```
/// deepinfer::clear_log_callback()?;
/// # Ok::<(), deepinfer::Error>(())
/// ```
pub fn clear_log_callback() -> Result<()> {
    install(None)
}

fn install(f: Option<LogFn>) -> Result<()> {
    ensure_compatible()?;
    if IN_CALLBACK.with(|c| c.get()) {
        return Err(Error::new(
            sys::DI_ERR_STATE,
            "the log callback cannot be changed from inside the log callback",
        ));
    }
    let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    let new = f.map_or(0, |f| Box::into_raw(Box::new(f)) as usize);
    // SAFETY: the trampoline matches the callback type; `new` stays alive until replaced.
    unsafe {
        if new == 0 {
            sys::di_set_log_callback(None, std::ptr::null_mut());
        } else {
            sys::di_set_log_callback(Some(log_trampoline), new as *mut c_void);
        }
    }
    let old = std::mem::replace(&mut *installed, new);
    if old != 0 {
        // SAFETY: once di_set_log_callback returned, the old callback is never called again.
        drop(unsafe { Box::from_raw(old as *mut LogFn) });
    }
    Ok(())
}
