//! Bytes in shared memory are untrusted input: any process can scribble on the
//! segment. With random words of a populated segment overwritten, every
//! operation must return (a value or an error) and never panic or hang.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::TempSegment;
use proptest::prelude::*;
use store::*;

fn scribble(path: &std::path::Path, writes: &[(u64, u64)]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let len = f.metadata().unwrap().len();
    for &(pos, word) in writes {
        // Keep the header's magic and version so that attach succeeds, and
        // aim at the populated part: header, contexts, index and the start of
        // the arena (a 4 MB segment with 8 contexts puts the arena at 304 KiB).
        let off = (16 + pos % (len.min(420_000) - 24)) & !7;
        f.write_all_at(&word.to_le_bytes(), off).unwrap();
    }
}

fn exercise(store: &Store) {
    let Ok(mut h) = store.handle() else { return };
    for i in 0..300u32 {
        let k = format!("key{i}");
        let _ = h.get(0, k.as_bytes());
        let _ = h.set(0, k.as_bytes(), &[7u8; 40], &SetOptions::default());
        let _ = h.append(0, k.as_bytes(), b"tail");
        let _ = h.incr_by(0, b"counter", 1);
        let _ = h.delete(0, format!("key{}", i / 2).as_bytes());
        let _ = h.rename(0, k.as_bytes(), b"renamed", false);
    }
    let _ = h.scan(0, 0, Some(b"key*"), 1000, None);
    let _ = h.sweep_expired(10_000);
    let _ = h.flushall();
    drop(h);
    let _ = store.check();
    let _ = store.info();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn scribbled_segment_never_panics_or_hangs(
        writes in proptest::collection::vec((any::<u64>(), prop_oneof![
            any::<u64>(),
            Just(0u64),
            Just(1u64),
            Just(u64::MAX),
            // A bucket's lock word free with its seqlock odd.
            Just(1u64 << 32),
            (0u64..8 << 20),
        ]), 1..40)
    ) {
        let seg = TempSegment::new("scribble");
        let mut opts = seg.options(4 << 20);
        opts.contexts = 8;
        {
            let store = Store::open(&opts).unwrap();
            let mut h = store.handle().unwrap();
            for i in 0..500u32 {
                h.set(0, format!("key{i}").as_bytes(), &vec![i as u8; (i % 90) as usize], &SetOptions::default()).unwrap();
            }
        }
        scribble(&seg.path, &writes);
        let done = Arc::new(AtomicBool::new(false));
        let watchdog = {
            let done = done.clone();
            std::thread::spawn(move || {
                for _ in 0..600 {
                    if done.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                eprintln!("a scribbled segment hung an operation");
                std::process::abort();
            })
        };
        opts.create = false;
        if let Ok(store) = Store::open(&opts) {
            exercise(&store);
        }
        done.store(true, Ordering::Relaxed);
        watchdog.join().unwrap();
    }
}
