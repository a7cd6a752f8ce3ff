//! DUMP payloads (Redis's RDB encoding of one value) on arbitrary bytes: the
//! checks live in `engine::rdb::fuzzing::fuzz_value`, which feeds the bytes
//! to RESTORE's decoder as they are and sealed with a valid footer (so the
//! body decoder sees them past the checksum), and round-trips whatever it
//! accepts. `cargo test` also runs it over the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| engine::rdb::fuzzing::fuzz_value(data));
