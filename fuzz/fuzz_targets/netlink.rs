//! libFuzzer target `netlink`: `cnibox::netlink::fuzz::reply` on every input (seeds: tests/fuzz/netlink/).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(cnibox::netlink::fuzz::reply(data));
});
