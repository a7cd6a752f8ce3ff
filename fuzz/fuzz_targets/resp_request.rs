//! The RESP request parser on arbitrary bytes; the checks live in
//! `proto::fuzzing::fuzz_request`, which `cargo test` also runs over the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| proto::fuzzing::fuzz_request(data));
