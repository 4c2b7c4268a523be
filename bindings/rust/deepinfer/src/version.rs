//! Versions of the loaded library, and the check that it is the one this crate was built for.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU8, Ordering};

use deepinfer_sys as sys;

use crate::error::{Error, Result};

/// The ABI version this crate was built for: the number of the SONAME it links,
/// `libdeepinfer.so.0`.
pub const ABI_VERSION: u32 = sys::DI_ABI_VERSION;

/// The oldest library version this crate works with (0.2.0 as `MAJOR << 16 | MINOR << 8 | PATCH`).
const MIN_VERSION_NUMBER: u32 = sys::DI_VERSION_MAJOR << 16 | sys::DI_VERSION_MINOR << 8;

/// The loaded library's version, `"MAJOR.MINOR.PATCH"`.
///
/// ```
/// assert!(deepinfer::version().starts_with("0."));
/// ```
pub fn version() -> &'static str {
    // SAFETY: di_version returns a NUL-terminated string in static storage.
    unsafe { CStr::from_ptr(sys::di_version()) }
        .to_str()
        .unwrap_or("unknown")
}

/// The loaded library's version as `MAJOR << 16 | MINOR << 8 | PATCH` (0.2.0 is `0x000200`).
///
/// ```
/// assert!(deepinfer::version_number() >= 0x000200);
/// ```
pub fn version_number() -> u32 {
    // SAFETY: no arguments, no preconditions.
    unsafe { sys::di_version_number() }
}

/// The loaded library's ABI version (the number in its SONAME).
///
/// ```
/// assert_eq!(deepinfer::abi_version(), deepinfer::ABI_VERSION);
/// ```
pub fn abi_version() -> u32 {
    // SAFETY: no arguments, no preconditions.
    unsafe { sys::di_abi_version() }
}

const UNCHECKED: u8 = 0;
const COMPATIBLE: u8 = 1;
const INCOMPATIBLE: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNCHECKED);

/// Checks once that the loaded library has this crate's ABI and is recent enough; every object
/// that does not come from another one (engines, tokenizers, sampling parameters) is made after it.
pub(crate) fn ensure_compatible() -> Result<()> {
    match STATE.load(Ordering::Acquire) {
        COMPATIBLE => Ok(()),
        _ => {
            let outcome = compatibility(abi_version(), version_number(), version());
            let state = if outcome.is_ok() {
                COMPATIBLE
            } else {
                INCOMPATIBLE
            };
            STATE.store(state, Ordering::Release);
            outcome
        }
    }
}

/// The verdict on a loaded library's ABI and version (an error says what was found and what to do).
pub(crate) fn compatibility(abi: u32, number: u32, text: &str) -> Result<()> {
    let crate_version = env!("CARGO_PKG_VERSION");
    if abi != ABI_VERSION {
        return Err(Error::new(
            sys::DI_ERR_UNSUPPORTED,
            format!(
                "libdeepinfer ABI mismatch: the deepinfer crate {crate_version} was built for ABI \
                 {ABI_VERSION} (libdeepinfer.so.{ABI_VERSION}) but the loaded library {text} has ABI {abi}; \
                 install the DeepInfer library this crate was built against, or rebuild the crate \
                 against the installed one"
            ),
        ));
    }
    if number < MIN_VERSION_NUMBER {
        return Err(Error::new(
            sys::DI_ERR_UNSUPPORTED,
            format!(
                "libdeepinfer {text} is too old: the deepinfer crate {crate_version} needs {}.{} or newer",
                sys::DI_VERSION_MAJOR,
                sys::DI_VERSION_MINOR
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn the_linked_library_is_compatible() {
        assert_eq!(ensure_compatible(), Ok(()));
    }

    #[test]
    fn a_mismatch_is_reported_with_both_versions() {
        let err = compatibility(1, 0x010000, "1.0.0").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        assert!(err.message().contains("ABI mismatch"), "{err}");
        assert!(err.message().contains("built for ABI 0"), "{err}");
        assert!(err.message().contains("1.0.0 has ABI 1"), "{err}");
        let old = compatibility(ABI_VERSION, 0x000100, "0.1.0").unwrap_err();
        assert!(old.message().contains("0.1.0 is too old"), "{old}");
        assert!(compatibility(ABI_VERSION, 0x000301, "0.3.1").is_ok());
    }
}
