//! Replays the checked-in cargo-fuzz corpus (`fuzz/corpus/resp_request/`,
//! seeds plus what the fuzzer kept) through the same harness the fuzz target
//! calls, so a stable `cargo test` covers every input and every regression
//! the fuzzer found. See `fuzz/README.md` for running the fuzzer itself.

use std::path::{Path, PathBuf};

use proto::fuzzing::fuzz_request;
use proto::resp::RequestParser;

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Every file of a corpus directory, sorted; panics when there is none, so a
/// moved or emptied corpus fails the test instead of passing vacuously.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = corpus_dir(target);
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} is missing: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("read corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, data)
        })
        .collect()
}

#[test]
fn resp_request_corpus_keeps_the_invariants() {
    let files = corpus("resp_request");
    for (path, data) in &files {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        // Name the input that broke before the harness's panic message.
        eprintln!("replaying {name} ({} bytes)", data.len());
        fuzz_request(data);
    }
    eprintln!("replayed {} inputs", files.len());
}

/// How a stream parsed whole ends: `Some(error)` or `None` (incomplete).
fn ending(data: &[u8]) -> Option<proto::ProtocolError> {
    let mut parser = RequestParser::new();
    let mut rest = data;
    loop {
        match parser.parse(rest) {
            Ok(Some((_, consumed))) => rest = &rest[consumed..],
            Ok(None) => return None,
            Err(e) => return Some(e),
        }
    }
}

#[test]
fn the_seed_corpus_covers_every_protocol_error() {
    // The seeds are named after what they exercise; each error kind has one,
    // and a seed named `err_*` really ends in an error (`half_*` and `huge_*`
    // in none).
    let files = corpus("resp_request");
    let mut names = Vec::new();
    for (path, data) in &files {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with("err_") {
            assert!(ending(data).is_some(), "{name} parses without an error");
        } else if name.starts_with("half_") || name.starts_with("huge_") {
            assert_eq!(ending(data), None, "{name}");
        }
        names.push(name.into_owned());
    }
    for prefix in [
        "err_too_big_mbulk",
        "err_too_big_bulk",
        "err_invalid_mbulk",
        "err_bulk",
        "err_expected_dollar",
        "err_too_big_inline",
        "err_unbalanced",
        "half_",
        "huge_",
        "pipeline_",
        "inline_",
        "multibulk_",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "no seed named {prefix}*"
        );
    }
}
