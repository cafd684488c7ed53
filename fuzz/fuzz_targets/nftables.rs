//! libFuzzer target `nftables`: `cnibox::netlink::fuzz::nft_dump` on every input (seeds: tests/fuzz/nftables/).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(cnibox::netlink::fuzz::nft_dump(data));
});
