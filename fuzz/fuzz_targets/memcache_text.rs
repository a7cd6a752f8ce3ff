//! The memcached text/meta request parser on arbitrary bytes; the checks
//! live in `proto::memcache::fuzzing::fuzz_text`, which `cargo test` also
//! runs over the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| proto::memcache::fuzzing::fuzz_text(data));
