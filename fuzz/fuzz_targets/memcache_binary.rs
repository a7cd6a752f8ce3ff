//! The memcached binary-protocol parser on arbitrary bytes; the checks live
//! in `proto::memcache::binary::fuzzing::fuzz_request`, which `cargo test`
//! also runs over the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| proto::memcache::binary::fuzzing::fuzz_request(data));
