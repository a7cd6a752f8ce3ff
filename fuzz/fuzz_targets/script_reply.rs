//! The boundary between Lua and the command engine on arbitrary bytes: the
//! checks live in `engine::script_fuzzing::fuzz_reply`, which parses the
//! bytes as the reply of a script's command, converts what parses to Lua
//! and back (RESP2 and RESP3), and prints a Lua number as a command
//! argument. `cargo test` also runs it over the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| engine::script_fuzzing::fuzz_reply(data));
