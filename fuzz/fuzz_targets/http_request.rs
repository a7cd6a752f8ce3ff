//! HTTP request heads, bodies and command URIs on arbitrary bytes; the checks live in
//! `proto::http::fuzzing::fuzz_request`, which `cargo test` also runs over the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| proto::http::fuzzing::fuzz_request(data));
