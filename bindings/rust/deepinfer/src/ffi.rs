//! Helpers for calling the C ABI: text arguments, sized outputs, and handles that free themselves.

use std::os::raw::c_char;

use deepinfer_sys as sys;

use crate::error::{check, Error, ErrorKind, Result};

/// A `(pointer, length)` text argument.
pub(crate) fn text(s: &[u8]) -> (*const c_char, usize) {
    (s.as_ptr().cast(), s.len())
}

/// A count for an `int32_t` parameter: larger values saturate, so the library rejects them with
/// its own message naming the field.
pub(crate) fn int32(n: impl TryInto<i32>) -> i32 {
    n.try_into().unwrap_or(i32::MAX)
}

/// Reads a `(buf, cap, *out_len)` output, growing the buffer to the size the library asks for
/// (outputs that grow between calls are retried until they fit).
pub(crate) fn read_vec<T: Copy + Default>(
    initial: usize,
    mut call: impl FnMut(*mut T, usize, *mut usize) -> *mut sys::di_error,
) -> Result<Vec<T>> {
    let mut buf = vec![T::default(); initial];
    loop {
        let mut len = 0usize;
        match check(call(buf.as_mut_ptr(), buf.len(), &mut len)) {
            Ok(()) => {
                buf.truncate(len);
                return Ok(buf);
            }
            Err(e) if e.kind() == ErrorKind::BufferTooSmall && len > buf.len() => {
                buf.resize(len, T::default());
            }
            Err(e) => return Err(e),
        }
    }
}

/// The same for text (UTF-8 from the library; anything else is replaced, never trusted).
pub(crate) fn read_string(
    initial: usize,
    call: impl FnMut(*mut c_char, usize, *mut usize) -> *mut sys::di_error,
) -> Result<String> {
    let bytes: Vec<u8> = read_vec::<c_char>(initial, call)?
        .into_iter()
        .map(|c| c as u8)
        .collect();
    Ok(String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// Creates an object through a `T **out` call.
pub(crate) fn create<T>(call: impl FnOnce(*mut *mut T) -> *mut sys::di_error) -> Result<*mut T> {
    let mut out = std::ptr::null_mut();
    check(call(&mut out))?;
    if out.is_null() {
        return Err(Error::new(
            sys::DI_ERR_INTERNAL,
            "the library returned no handle",
        ));
    }
    Ok(out)
}

/// Reads a value through a getter of a live handle. Such a getter fails only on a handle the
/// library does not know, which the owning wrapper rules out: a failure is a bug, reported loudly.
pub(crate) fn get<H, T: Default>(
    handle: *const H,
    getter: unsafe extern "C" fn(*const H, *mut T) -> *mut sys::di_error,
) -> T {
    let mut out = T::default();
    // SAFETY: `handle` is live (owned by the caller's wrapper) and `out` is a valid place.
    if let Err(e) = check(unsafe { getter(handle, &mut out) }) {
        panic!("deepinfer: a getter failed on a live handle: {e}");
    }
    out
}
