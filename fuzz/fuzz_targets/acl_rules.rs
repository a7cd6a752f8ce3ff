//! ACL rules (ACL SETUSER's arguments, ACL file lines, the segment's user
//! text) on arbitrary bytes: the checks live in
//! `engine::acl::fuzzing::fuzz_rules`. `cargo test` also runs it over the
//! corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| engine::acl::fuzzing::fuzz_rules(data));
