//! Zero-copy, read-only views of 1-D buffers (numpy arrays, `array.array`,
//! `memoryview`) that work in the one abi3 wheel built for Python 3.10+.
//!
//! Why not `pyo3::buffer`: the wheel is built against the stable ABI of
//! Python 3.10 (`abi3-py310`), and `Py_buffer`, `PyObject_GetBuffer` and
//! `PyBuffer_Release` entered the *limited API* only in 3.11 (bpo-45459), so
//! pyo3 leaves its buffer module out of such a build. Their *ABI* has not
//! changed since Python 3.3 (that is why 3.11 could add them as they were):
//! every Python from 3.10 on exports the two functions and lays the struct
//! out as below. This module declares exactly those two functions and that
//! struct, and nothing else outside the 3.10 limited API.
//!
//! A [`Column`] holds the exporter's buffer for as long as it lives and
//! releases it on drop; [`Column::as_slice`] borrows the elements from it.
//! This is the binding's one buffer reader: every column argument (the node
//! table's, `min_cut`'s edges, the memory budget's FLOPs) goes through
//! [`Column::read`], and each caller wraps the problem in its own exception.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::marker::PhantomData;

use pyo3::ffi;
use pyo3::prelude::*;

/// Python's `Py_buffer` (`Include/pybuffer.h`), unchanged since 3.3.
#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut ffi::PyObject,
    len: ffi::Py_ssize_t,
    itemsize: ffi::Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut ffi::Py_ssize_t,
    strides: *mut ffi::Py_ssize_t,
    suboffsets: *mut ffi::Py_ssize_t,
    internal: *mut c_void,
}

extern "C" {
    fn PyObject_GetBuffer(obj: *mut ffi::PyObject, view: *mut RawBuffer, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

/// `PyBUF_FULL_RO`: format, shape and strides filled in, read-only is fine
/// (indirect buffers are refused below by their `suboffsets`).
const PYBUF_FULL_RO: c_int = 0x0100 | 0x0010 | 0x0008 | 0x0004;

/// The element types a column may hold, by their `struct` format letters.
pub trait Scalar: Copy + 'static {
    /// Format letters of this type in native order (`int64` is `l` or `q`).
    const LETTERS: &'static [u8];
}

macro_rules! scalar {
    ($($t:ty => $letters:expr),* $(,)?) => {$(
        impl Scalar for $t {
            const LETTERS: &'static [u8] = $letters;
        }
    )*};
}
// Letters whose C type has this width on the platforms we build for (LP64);
// the item size is checked as well, so a letter of another width never passes.
scalar!(u8 => b"B", u32 => b"IL", u64 => b"LQN", i32 => b"il", i64 => b"lqn", f64 => b"d");

/// Why an object is not a 1-D column of `T`.
pub enum Problem {
    /// The object does not export a buffer (the `PyErr` says why).
    NotABuffer(PyErr),
    Dimensions(c_int),
    Format {
        format: String,
        itemsize: usize,
    },
    NotContiguous,
    Misaligned,
}

impl Problem {
    /// What is wrong with `obj` as a column of `dtype`, as a predicate.
    pub fn describe(&self, obj: &Bound<'_, PyAny>, dtype: &str) -> String {
        match self {
            Problem::NotABuffer(e) => {
                let type_name = obj
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".to_string(), |n| n.to_string());
                format!(
                    "must be a buffer of {dtype} (numpy array, array.array or memoryview), \
                     got {type_name}: {e}"
                )
            }
            Problem::Dimensions(n) => format!("must be 1-dimensional, got {n} dimensions"),
            Problem::Format { format, itemsize } => {
                format!("has dtype format {format:?} of {itemsize} bytes, expected {dtype}")
            }
            Problem::NotContiguous => "is not C-contiguous (use np.ascontiguousarray)".into(),
            Problem::Misaligned => format!("is not aligned for {dtype}"),
        }
    }
}

/// A 1-D, C-contiguous, aligned buffer of `T`, held until dropped.
pub struct Column<T: Scalar> {
    raw: Box<RawBuffer>,
    len: usize,
    _elements: PhantomData<T>,
}

impl<T: Scalar> Column<T> {
    /// [`Self::get`], a problem described for a message: `"<what> {problem}"`
    /// reads as a sentence (`"is not C-contiguous ..."`); `dtype` names `T`
    /// (`"int64"`).
    pub fn read(obj: &Bound<'_, PyAny>, dtype: &str) -> Result<Self, String> {
        Self::get(obj).map_err(|problem| problem.describe(obj, dtype))
    }

    /// Requests `obj`'s buffer and checks it holds a 1-D array of `T`.
    pub fn get(obj: &Bound<'_, PyAny>) -> Result<Self, Problem> {
        let mut raw = Box::new(RawBuffer {
            buf: std::ptr::null_mut(),
            obj: std::ptr::null_mut(),
            len: 0,
            itemsize: 0,
            readonly: 0,
            ndim: 0,
            format: std::ptr::null_mut(),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            suboffsets: std::ptr::null_mut(),
            internal: std::ptr::null_mut(),
        });
        // SAFETY: `obj` is a live object (we hold the GIL through `Bound`) and
        // `raw` a writable Py_buffer that stays at this address (boxed) until
        // `PyBuffer_Release` in `drop`, which runs only if this call succeeds.
        if unsafe { PyObject_GetBuffer(obj.as_ptr(), &raw mut *raw, PYBUF_FULL_RO) } != 0 {
            return Err(Problem::NotABuffer(PyErr::fetch(obj.py())));
        }
        let mut column = Self {
            raw,
            len: 0,
            _elements: PhantomData,
        };
        column.len = column.check()?;
        Ok(column)
    }

    /// The number of elements, or the first problem found.
    fn check(&self) -> Result<usize, Problem> {
        let raw = &*self.raw;
        if raw.ndim != 1 {
            return Err(Problem::Dimensions(raw.ndim));
        }
        let itemsize = usize::try_from(raw.itemsize).unwrap_or(0);
        // SAFETY: PyBUF_FORMAT was requested, so `format` is null ("B") or a
        // NUL-terminated string owned by the exporter while the buffer is held.
        let format = if raw.format.is_null() {
            c"B"
        } else {
            unsafe { CStr::from_ptr(raw.format) }
        };
        if itemsize != size_of::<T>() || !native_letter(format.to_bytes(), T::LETTERS) {
            return Err(Problem::Format {
                format: format.to_string_lossy().into_owned(),
                itemsize,
            });
        }
        // SAFETY: with ndim == 1 and PyBUF_STRIDES requested, `shape` and
        // `strides` point to one element each; `suboffsets` is null or one.
        let (count, stride, indirect) = unsafe {
            (
                *raw.shape,
                *raw.strides,
                !raw.suboffsets.is_null() && *raw.suboffsets >= 0,
            )
        };
        let len = usize::try_from(count).unwrap_or(0);
        if indirect || (len > 1 && stride != raw.itemsize) {
            return Err(Problem::NotContiguous);
        }
        if len > 0 && raw.buf.align_offset(align_of::<T>()) != 0 {
            return Err(Problem::Misaligned);
        }
        Ok(len)
    }

    /// The elements, borrowed from the exporting object.
    pub fn as_slice(&self) -> &[T] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `check` found the buffer 1-D, C-contiguous, aligned and
        // holding `len` items of `T`'s size and format. The exporter keeps the
        // memory alive and unresized while the buffer is held, which outlives
        // the borrow. Readers in the core read each element once and validate
        // it, so a concurrent writer (a caller bug) cannot make them misbehave.
        unsafe { std::slice::from_raw_parts(self.raw.buf.cast::<T>(), self.len) }
    }
}

impl<T: Scalar> Drop for Column<T> {
    fn drop(&mut self) {
        // A buffer is released with the thread attached to the interpreter;
        // after interpreter shutdown there is nothing left to release it to.
        let raw = &raw mut *self.raw;
        // SAFETY: `raw` was filled by a successful PyObject_GetBuffer and is
        // released exactly once, here.
        let _ = Python::try_attach(|_| unsafe { PyBuffer_Release(raw) });
    }
}

/// Whether `format` is one of `letters` in native byte order and alignment
/// (`l`, `@l`, `=l`, `<l` on little-endian machines), one element.
fn native_letter(format: &[u8], letters: &[u8]) -> bool {
    let letter = match format {
        [c] | [b'@' | b'=', c] => *c,
        [b'<', c] if cfg!(target_endian = "little") => *c,
        [b'>' | b'!', c] if cfg!(target_endian = "big") => *c,
        _ => return false,
    };
    letters.contains(&letter)
}

#[cfg(test)]
mod tests {
    use super::native_letter;

    #[test]
    fn native_formats_only() {
        assert!(native_letter(b"l", b"lqn"));
        assert!(native_letter(b"=q", b"lqn"));
        assert!(!native_letter(b"d", b"lqn"));
        assert!(!native_letter(b"2l", b"lqn"));
        assert_eq!(native_letter(b"<l", b"lqn"), cfg!(target_endian = "little"));
        assert_eq!(native_letter(b">l", b"lqn"), cfg!(target_endian = "big"));
    }
}
