//! String and key operations through the embedded API, one behaviour per test.

mod common;

use common::TempSegment;
use store::*;

const MB: u64 = 1 << 20;

#[test]
fn set_get_overwrite_delete() {
    let seg = TempSegment::new("basic");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    assert_eq!(h.get(0, b"k").unwrap(), None);
    h.set(0, b"k", b"v1", &SetOptions::default()).unwrap();
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"v1".to_vec()));
    h.set(0, b"k", b"value two", &SetOptions::default())
        .unwrap();
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"value two".to_vec()));
    assert_eq!(h.dbsize(0).unwrap(), 1);
    assert!(h.delete(0, b"k").unwrap());
    assert!(!h.delete(0, b"k").unwrap());
    assert_eq!(h.get(0, b"k").unwrap(), None);
    assert_eq!(h.dbsize(0).unwrap(), 0);
    drop(h);
    store.check().unwrap();
}
