//! libFuzzer target `gob`: `cnibox::applets::fuzz::gob_stream` on every input (seeds: tests/fuzz/gob/).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(cnibox::applets::fuzz::gob_stream(data));
});
