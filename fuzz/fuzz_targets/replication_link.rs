//! The replication link's messages and frames (what a replica reads from
//! its primary) on arbitrary bytes; the checks live in
//! `engine::replication::link::fuzzing::fuzz_link`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| engine::replication::link::fuzzing::fuzz_link(data));
