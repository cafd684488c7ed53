//! libFuzzer target `dbus`: `cnibox::dbus::fuzz::reply` on every input (seeds: tests/fuzz/dbus/).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(cnibox::dbus::fuzz::reply(data));
});
