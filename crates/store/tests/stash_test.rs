//! The per-context stash (docs/design.md I10): small overwrites reuse the
//! block they freed without the shared allocator lock, and stashed blocks are
//! accounted for while a context lives and given back when it leaves.

mod common;

use common::TempSegment;
use store::*;

fn stat(store: &Store, name: &str) -> u64 {
    store
        .info()
        .unwrap()
        .stats
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
}

#[test]
fn small_overwrites_take_only_the_bucket_lock() {
    let seg = TempSegment::new("stash-locks");
    let store = seg.open(8 << 20);
    let mut h = store.handle().unwrap();
    // Warm up: the first writes allocate from the arena and fill the stash.
    for i in 0..4u8 {
        h.set(0, b"quote", &[i; 100], &SetOptions::default())
            .unwrap();
    }
    let before = stat(&store, "lock_acquired");
    const N: u64 = 1000;
    for i in 0..N {
        h.set(0, b"quote", &[i as u8; 100], &SetOptions::default())
            .unwrap();
    }
    assert_eq!(
        stat(&store, "lock_acquired") - before,
        N,
        "one bucket lock per SET, no allocator lock"
    );
    assert_eq!(h.get(0, b"quote").unwrap(), Some(vec![(N - 1) as u8; 100]));
    assert!(store.arena_stats().unwrap().stashed_bytes > 0);
    // A live context's stash is part of a consistent segment.
    store.check().unwrap();
    drop(h);
    assert_eq!(
        store.arena_stats().unwrap().stashed_bytes,
        0,
        "detach gives stashed blocks back"
    );
    store.check().unwrap();
}

#[test]
fn a_full_arena_uses_the_writers_own_stash_before_failing() {
    let seg = TempSegment::new("stash-full");
    let mut opts = seg.options(2 << 20);
    opts.contexts = 8;
    let store = Store::open(&opts).unwrap();
    let mut h = store.handle().unwrap();
    // Fill with 200-byte values, then delete a few: their blocks go to the
    // stash. A 400-byte value fits in no single stashed block, so the write
    // must flush the stash into the arena (where neighbours coalesce).
    let mut n = 0u32;
    while h
        .set(0, &n.to_be_bytes(), &[1; 200], &SetOptions::default())
        .is_ok()
    {
        n += 1;
    }
    for i in 0..4u32 {
        assert!(h.delete(0, &(n / 2 + i).to_be_bytes()).unwrap());
    }
    assert!(store.arena_stats().unwrap().stashed_bytes > 0);
    h.set(0, b"big", &[2; 400], &SetOptions::default()).unwrap();
    assert_eq!(h.get(0, b"big").unwrap(), Some(vec![2; 400]));
    drop(h);
    store.check().unwrap();
}
