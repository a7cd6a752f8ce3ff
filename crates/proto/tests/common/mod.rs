//! What the fuzz-harness tests share: the checked-in cargo-fuzz corpora.

use std::path::Path;

/// Every file of `fuzz/corpus/<target>/` with its name, sorted by name.
/// Panics when the corpus is missing or empty, so a moved or emptied corpus
/// fails the test instead of passing vacuously.
pub fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} is missing: {e}", dir.display()))
        .map(|e| e.expect("read corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            (name.into_owned(), data)
        })
        .collect()
}

/// Whether a corpus file is one the fuzzer kept (named by its SHA-1) rather
/// than a hand-written seed (named after what it exercises).
#[allow(dead_code)]
pub fn is_fuzzer_find(name: &str) -> bool {
    name.len() == 40 && name.bytes().all(|b| b.is_ascii_hexdigit())
}
