//! libFuzzer target `dhcp`: `cnibox::applets::fuzz::dhcp_packet` on every input (seeds: tests/fuzz/dhcp/).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(cnibox::applets::fuzz::dhcp_packet(data));
});
