//! libFuzzer target `config`: `cnibox::applets::fuzz::config` on every input (seeds: tests/fuzz/config/).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(cnibox::applets::fuzz::config(data));
});
