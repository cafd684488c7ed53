//! libFuzzer target `cache`: `cnibox::applets::fuzz::cache_record` on every input (seeds: tests/fuzz/cache/).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(cnibox::applets::fuzz::cache_record(data));
});
