//! The NATS client-protocol parser on arbitrary bytes; the checks live in
//! `proto::nats::fuzzing::fuzz_ops`, which `cargo test` also runs over the
//! corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| proto::nats::fuzzing::fuzz_ops(data));
