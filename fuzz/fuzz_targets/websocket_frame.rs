//! WebSocket frames and messages on arbitrary bytes; the checks live in
//! `proto::websocket::fuzzing::fuzz_frames`, which `cargo test` also runs over the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| proto::websocket::fuzzing::fuzz_frames(data));
