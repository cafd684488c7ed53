//! The release binary's stand-in for libunwind (bin-only: `main.rs` includes it, the library
//! does not). With `panic = "abort"` nothing ever unwinds: a panic runs our hook (a CNI error
//! and exit 1, `cni::skel`) or aborts. Yet std still calls the unwinder for one thing, the
//! backtrace its default panic hook prints under `RUST_BACKTRACE`, and its landing pads and
//! personality routine name a few more entry points. Linked from libunwind.a, those bring the
//! DWARF unwinder (a CFI parser and expression evaluator, ~70 KB with the `printf` it logs
//! with); and since `_Unwind_Backtrace` is then opaque to LTO, the frame callback it is given
//! keeps std's symbolizer (gimli, addr2line, rustc-demangle, miniz_oxide) alive as well.
//!
//! Defined here instead, `_Unwind_Backtrace` reports the end of the stack at once (a backtrace
//! prints its header and no frames: the same as libunwind printed, since build.rs drops the
//! `.eh_frame` tables it would read), LTO sees the callback is never called and removes what
//! only it reached, and `_Unwind_Resume` (reached only from a landing pad, that is from an
//! unwinding that never starts) aborts. armv7's EHABI names a few entry points of its own (the
//! register accessors `_Unwind_VRS_*`, the personality routines its `.ARM.exidx` entries name):
//! they fail, and are never called either.
#![allow(non_snake_case)]

use std::ffi::{c_int, c_void};

/// `_URC_END_OF_STACK`: what `_Unwind_Backtrace` returns when the walk reaches the last frame.
const END_OF_STACK: c_int = 5;

type Trace = extern "C" fn(*mut c_void, *mut c_void) -> c_int;

// SAFETY (every `no_mangle` below): these names are libunwind's, and the binary defines them
// only where it links no libunwind object that defines them too (a second definition fails
// the link, it cannot be picked silently); each matches the C prototype in <unwind.h> and
// touches none of its pointer arguments.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_Backtrace(_trace: Trace, _arg: *mut c_void) -> c_int {
    END_OF_STACK
}

#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetIP(_ctx: *mut c_void) -> usize {
    0
}

#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetIPInfo(_ctx: *mut c_void, _before: *mut c_int) -> usize {
    0
}

#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetDataRelBase(_ctx: *mut c_void) -> usize {
    0
}

#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetTextRelBase(_ctx: *mut c_void) -> usize {
    0
}

#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetRegionStart(_ctx: *mut c_void) -> usize {
    0
}

#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetLanguageSpecificData(_ctx: *mut c_void) -> *mut c_void {
    std::ptr::null_mut()
}

#[unsafe(no_mangle)]
extern "C" fn _Unwind_SetGR(_ctx: *mut c_void, _reg: c_int, _value: usize) {}

#[unsafe(no_mangle)]
extern "C" fn _Unwind_SetIP(_ctx: *mut c_void, _value: usize) {}

#[unsafe(no_mangle)]
extern "C" fn _Unwind_Resume(_exception: *mut c_void) -> ! {
    std::process::abort()
}

/// `_URC_FAILURE` (ARM EHABI): what the personality routines and frame unwinder answer.
#[cfg(target_arch = "arm")]
const FAILURE: c_int = 9;

/// `_UVRSR_NOT_IMPLEMENTED`: what the register accessors answer.
#[cfg(target_arch = "arm")]
const NOT_IMPLEMENTED: c_int = 1;

#[cfg(target_arch = "arm")]
#[unsafe(no_mangle)]
extern "C" fn _Unwind_VRS_Get(
    _ctx: *mut c_void,
    _class: c_int,
    _reg: u32,
    _repr: c_int,
    _value: *mut c_void,
) -> c_int {
    NOT_IMPLEMENTED
}

#[cfg(target_arch = "arm")]
#[unsafe(no_mangle)]
extern "C" fn _Unwind_VRS_Set(
    _ctx: *mut c_void,
    _class: c_int,
    _reg: u32,
    _repr: c_int,
    _value: *mut c_void,
) -> c_int {
    NOT_IMPLEMENTED
}

#[cfg(target_arch = "arm")]
#[unsafe(no_mangle)]
extern "C" fn __aeabi_unwind_cpp_pr0(
    _state: c_int,
    _ucbp: *mut c_void,
    _ctx: *mut c_void,
) -> c_int {
    FAILURE
}

#[cfg(target_arch = "arm")]
#[unsafe(no_mangle)]
extern "C" fn __aeabi_unwind_cpp_pr1(
    _state: c_int,
    _ucbp: *mut c_void,
    _ctx: *mut c_void,
) -> c_int {
    FAILURE
}

#[cfg(target_arch = "arm")]
#[unsafe(no_mangle)]
extern "C" fn __gnu_unwind_frame(_ucbp: *mut c_void, _ctx: *mut c_void) -> c_int {
    FAILURE
}
