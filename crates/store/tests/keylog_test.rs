//! The key log (ipc/keylog.rs): a handle reports the keys it created, expired
//! or evicted, in order and with their logical db, only while asked to.

mod common;

use std::sync::atomic::Ordering;

use common::{expiring_at, put, stat, TempSegment};
use store::*;

const MB: u64 = 1 << 20;
const T0: u64 = 1_700_000_000_000;

fn taken(h: &mut Handle) -> Vec<(u8, Vec<u8>, KeyEvent)> {
    let mut out = Vec::new();
    h.take_key_log(&mut out);
    out
}

fn ev(db: u8, key: &str, e: KeyEvent) -> (u8, Vec<u8>, KeyEvent) {
    (db, key.as_bytes().to_vec(), e)
}

#[test]
fn nothing_is_recorded_while_off() {
    let seg = TempSegment::new("keylog-off");
    let (store, clock) = seg.open_with_clock(4 * MB, T0);
    let mut h = store.handle().unwrap();
    h.set(0, b"k", b"v", &expiring_at(T0 + 10)).unwrap();
    clock.store(T0 + 20, Ordering::Relaxed);
    assert_eq!(h.get(0, b"k").unwrap(), None);
    assert!(!h.key_log_pending());
    assert!(taken(&mut h).is_empty());
}

#[test]
fn creations_are_new_keys_only() {
    let seg = TempSegment::new("keylog-created");
    let store = seg.open(4 * MB);
    let mut h = store.handle().unwrap();
    h.set_key_log(false, true);
    put(&mut h, 0, b"a", b"1");
    put(&mut h, 0, b"a", b"2");
    h.incr_by(3, b"n", 1).unwrap();
    h.incr_by(3, b"n", 1).unwrap();
    h.write_collection::<List, _>(0, b"l", true, |l| l.push_back(b"x"))
        .unwrap();
    h.write_collection::<List, _>(0, b"l", true, |l| l.push_back(b"y"))
        .unwrap();
    assert_eq!(
        taken(&mut h),
        vec![
            ev(0, "a", KeyEvent::Created),
            ev(3, "n", KeyEvent::Created),
            ev(0, "l", KeyEvent::Created),
        ]
    );
    assert!(!h.key_log_pending());
}

#[test]
fn rename_and_copy_always_create_their_destination() {
    let seg = TempSegment::new("keylog-rename");
    let store = seg.open(4 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"a", b"1");
    put(&mut h, 0, b"b", b"2");
    h.set_key_log(true, true);
    assert!(h.rename(0, b"a", b"b", false).unwrap());
    assert!(h.copy(0, b"b", 2, b"c", false).unwrap());
    assert!(h.copy(0, b"b", 2, b"c", true).unwrap());
    assert!(h.move_key(0, b"b", 5).unwrap());
    assert_eq!(
        taken(&mut h),
        vec![
            ev(0, "b", KeyEvent::Created),
            ev(2, "c", KeyEvent::Created),
            ev(2, "c", KeyEvent::Created),
            ev(5, "b", KeyEvent::Created),
        ]
    );
}

#[test]
fn a_write_to_an_expired_key_expires_it_then_creates_it() {
    let seg = TempSegment::new("keylog-expire-write");
    let (store, clock) = seg.open_with_clock(4 * MB, T0);
    let mut h = store.handle().unwrap();
    h.set(0, b"k", b"v", &expiring_at(T0 + 10)).unwrap();
    h.set(0, b"gone", b"v", &expiring_at(T0 + 10)).unwrap();
    h.set_key_log(true, true);
    clock.store(T0 + 20, Ordering::Relaxed);
    put(&mut h, 0, b"k", b"w");
    assert!(!h.exists(0, b"gone").unwrap());
    assert_eq!(
        taken(&mut h),
        vec![
            ev(0, "k", KeyEvent::Expired),
            ev(0, "k", KeyEvent::Created),
            ev(0, "gone", KeyEvent::Expired),
        ]
    );
}

#[test]
fn expiry_reports_the_logical_db_after_swapdb() {
    let seg = TempSegment::new("keylog-swapdb");
    let (store, clock) = seg.open_with_clock(4 * MB, T0);
    let mut h = store.handle().unwrap();
    h.set(1, b"lazy", b"v", &expiring_at(T0 + 10)).unwrap();
    h.set(1, b"swept", b"v", &expiring_at(T0 + 10)).unwrap();
    h.swap_db(0, 1).unwrap();
    h.set_key_log(true, false);
    clock.store(T0 + 20, Ordering::Relaxed);
    assert_eq!(h.get(0, b"lazy").unwrap(), None);
    let mut visited = 0;
    while visited < store.bucket_count() {
        visited += h.sweep_expired(1024).unwrap().visited;
    }
    assert_eq!(
        taken(&mut h),
        vec![
            ev(0, "lazy", KeyEvent::Expired),
            ev(0, "swept", KeyEvent::Expired),
        ]
    );
    assert_eq!(stat(&store, "expired_keys"), 2);
}

#[test]
fn every_evicted_key_is_reported_once() {
    let seg = TempSegment::new("keylog-evict");
    let store = seg.open(4 * MB);
    store
        .set_eviction_policy(EvictionPolicy::AllKeysLru)
        .unwrap();
    store.set_maxmemory(MB).unwrap();
    let mut h = store.handle().unwrap();
    h.set_key_log(true, false);
    let value = vec![b'.'; 1000];
    let total = 3000u64;
    for i in 0..total {
        put(&mut h, 4, format!("k{i}").as_bytes(), &value);
    }
    let log = taken(&mut h);
    let evicted = stat(&store, "evicted_keys");
    assert!(evicted > 0, "1 MiB cannot hold 3 MB of values");
    assert_eq!(log.len() as u64, evicted);
    let mut keys = std::collections::HashSet::new();
    for (db, key, e) in &log {
        assert_eq!((*db, *e), (4, KeyEvent::Evicted));
        assert!(keys.insert(key.clone()), "{key:?} reported twice");
        assert!(
            !h.exists(4, key).unwrap(),
            "{key:?} reported but still there"
        );
    }
    assert_eq!(h.dbsize(4).unwrap() + evicted, total);
}

#[test]
fn a_flush_is_not_reported() {
    let seg = TempSegment::new("keylog-flush");
    let (store, clock) = seg.open_with_clock(4 * MB, T0);
    let mut h = store.handle().unwrap();
    h.set(0, b"k", b"v", &expiring_at(T0 + 10)).unwrap();
    put(&mut h, 0, b"p", b"v");
    h.set_key_log(true, true);
    clock.store(T0 + 20, Ordering::Relaxed);
    h.flushall().unwrap();
    assert!(taken(&mut h).is_empty());
}
