//! The ACL rule parser's fuzz harness over `fuzz/corpus/acl_rules/` and
//! random bytes.

use proptest::prelude::*;

#[test]
fn the_fuzz_corpus_keeps_the_invariants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/acl_rules");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus dir") {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        engine::acl::fuzzing::fuzz_rules(&data);
        files += 1;
    }
    assert!(files >= 4);
}

proptest! {
    #[test]
    fn random_rules_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        engine::acl::fuzzing::fuzz_rules(&data);
    }

    #[test]
    fn rule_words_never_panic(words in proptest::collection::vec(
        prop_oneof![
            Just("on".to_string()), Just("off".to_string()), Just("+@all".to_string()),
            Just("-@all".to_string()), Just("~*".to_string()), Just("&*".to_string()),
            Just("resetchannels".to_string()), Just("reset".to_string()), Just("nopass".to_string()),
            "[~%&+<>#!(-][a-z@|*()~RW]{0,8}",
        ], 0..12)) {
        engine::acl::fuzzing::fuzz_rules(words.join(" ").as_bytes());
    }
}
