//! RESP replies and their JSON on arbitrary bytes; the checks live in
//! `proto::json::fuzzing::fuzz_reply`, which `cargo test` also runs over the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| proto::json::fuzzing::fuzz_reply(data));
