//! Large collections in their paged form (B+trees of arena blocks): deep
//! trees built from big items, every key operation that moves, copies or
//! drops a tree, and the segment check after each step.

mod common;

use common::TempSegment;
use store::*;

const SEGMENT: u64 = 64 << 20;

fn big(i: usize) -> Vec<u8> {
    format!("{i:06}-{}", "v".repeat(150)).into_bytes()
}

fn list(h: &mut Handle, db: u8, key: &[u8]) -> Option<Vec<Vec<u8>>> {
    h.read_collection::<List, _>(db, key, |l| l.range(0, l.len()))
        .unwrap()
}

fn encoding(h: &mut Handle, db: u8, key: &[u8]) -> Vec<u8> {
    let mut raw = Vec::new();
    h.get_into(db, key, &mut raw).unwrap();
    raw
}

#[test]
fn copy_rename_move_and_delete_keep_trees_whole() {
    let seg = TempSegment::new("paged-keys");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    let items: Vec<Vec<u8>> = (0..3000).map(big).collect();
    h.write_collection::<List, _>(0, b"l", true, |l| {
        for i in &items {
            l.push_back(i)?;
        }
        Ok(())
    })
    .unwrap();
    store.check().unwrap();
    assert_eq!(list(&mut h, 0, b"l").unwrap(), items);
    assert!(h.copy(0, b"l", 1, b"c", false).unwrap());
    store.check().unwrap();
    assert_eq!(list(&mut h, 1, b"c").unwrap(), items);
    h.rename(0, b"l", b"r", false).unwrap();
    store.check().unwrap();
    assert!(h.move_key(0, b"r", 2).unwrap());
    store.check().unwrap();
    assert_eq!(list(&mut h, 2, b"r").unwrap(), items);
    // Writing to the copy leaves the original alone.
    h.write_collection::<List, _>(1, b"c", false, |l| l.set(1500, b"changed"))
        .unwrap();
    assert_eq!(list(&mut h, 2, b"r").unwrap(), items);
    assert_eq!(list(&mut h, 1, b"c").unwrap()[1500], b"changed");
    store.check().unwrap();
    let used = store.info().unwrap().arena.used_blocks;
    assert!(h.delete(1, b"c").unwrap());
    h.set(2, b"r", b"a string now", &SetOptions::default())
        .unwrap();
    store.check().unwrap();
    assert!(store.info().unwrap().arena.used_blocks < used / 10);
    h.flushall().unwrap();
    store.check().unwrap();
    assert_eq!(encoding(&mut h, 0, b"l"), b"");
}
