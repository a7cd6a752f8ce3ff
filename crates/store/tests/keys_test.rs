//! Key-space operations through the embedded API: DEL, EXISTS, TYPE, expiry
//! (lazy and swept), EXPIRE and its conditions, TTL, PERSIST, RENAME, DBSIZE,
//! FLUSHDB/FLUSHALL and SCAN. Time moves only by the manual clock.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use common::{all_keys, expiring_at, put, stat, TempSegment};
use store::*;

const MB: u64 = 1 << 20;
const T0: u64 = 1_700_000_000_000;

fn advance(clock: &AtomicU64, ms: u64) {
    clock.fetch_add(ms, Ordering::Relaxed);
}

fn list_value(h: &mut Handle, db: u8, key: &[u8], bytes: &[u8]) {
    h.write_value(db, key, ValueType::List, bytes, &SetOptions::default())
        .unwrap();
}

fn put_at(h: &mut Handle, db: u8, key: &[u8], value: &[u8], at: u64) {
    assert!(h.set(db, key, value, &expiring_at(at)).unwrap().written);
}

/// Every key of a full SCAN, in the order returned (duplicates kept).
fn scan_all(
    h: &mut Handle,
    db: u8,
    pattern: Option<&[u8]>,
    count: usize,
    vtype: Option<ValueType>,
) -> (Vec<Vec<u8>>, usize) {
    let mut keys = Vec::new();
    let mut cursor = 0;
    let mut calls = 0;
    loop {
        let page = h.scan(db, cursor, pattern, count, vtype).unwrap();
        calls += 1;
        assert!(calls < 1_000_000, "SCAN does not terminate");
        keys.extend(page.keys);
        cursor = page.cursor;
        if cursor == 0 {
            return (keys, calls);
        }
    }
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

fn bset(keys: &[&[u8]]) -> BTreeSet<Vec<u8>> {
    keys.iter().map(|k| k.to_vec()).collect()
}

// ---------- DEL / EXISTS / TYPE ----------

#[test]
fn delete_exists_and_type() {
    let seg = TempSegment::new("del-exists-type");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    assert!(!h.exists(0, b"s").unwrap());
    assert_eq!(h.key_type(0, b"s").unwrap(), None);
    assert!(!h.delete(0, b"s").unwrap());
    put(&mut h, 0, b"s", b"v");
    list_value(&mut h, 0, b"l", b"bytes");
    for (t, name) in [
        (ValueType::Hash, "hash"),
        (ValueType::Set, "set"),
        (ValueType::ZSet, "zset"),
        (ValueType::Stream, "stream"),
    ] {
        h.write_value(0, name.as_bytes(), t, b"x", &SetOptions::default())
            .unwrap();
        assert_eq!(h.key_type(0, name.as_bytes()).unwrap(), Some(t));
        assert_eq!(t.name(), name);
        assert_eq!(
            ValueType::from_name(name.to_uppercase().as_bytes()),
            Some(t)
        );
    }
    assert!(h.exists(0, b"s").unwrap());
    assert!(h.exists(0, b"l").unwrap());
    assert_eq!(h.key_type(0, b"s").unwrap(), Some(ValueType::String));
    assert_eq!(h.key_type(0, b"l").unwrap(), Some(ValueType::List));
    assert_eq!(ValueType::String.name(), "string");
    assert_eq!(ValueType::List.name(), "list");
    assert_eq!(ValueType::from_name(b"nosuchtype"), None);
    assert_eq!(h.dbsize(0).unwrap(), 6);
    assert!(h.delete(0, b"l").unwrap());
    assert!(!h.exists(0, b"l").unwrap());
    assert_eq!(h.key_type(0, b"l").unwrap(), None);
    assert!(!h.delete(0, b"l").unwrap());
    assert_eq!(h.dbsize(0).unwrap(), 5);
    drop(h);
    store.check().unwrap();
}

#[test]
fn many_keys_written_and_deleted_keep_the_accounting_right() {
    let seg = TempSegment::new("many-keys");
    let (store, _clock) = seg.open_with_clock(16 * MB, T0);
    let mut h = store.handle().unwrap();
    let mut model: HashMap<Vec<u8>, (Vec<u8>, bool)> = HashMap::new();
    let mut x: u64 = 99;
    for i in 0..20_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = format!("key:{}", x % 3_000).into_bytes();
        match x % 5 {
            0 => {
                assert_eq!(h.delete(0, &key).unwrap(), model.remove(&key).is_some());
            }
            1 => {
                let v = format!("ttl{i}").into_bytes();
                put_at(&mut h, 0, &key, &v, T0 + 1_000_000);
                model.insert(key, (v, true));
            }
            _ => {
                let v = vec![b'v'; (x >> 32) as usize % 300];
                put(&mut h, 0, &key, &v);
                model.insert(key, (v, false));
            }
        }
    }
    assert_eq!(h.dbsize(0).unwrap(), model.len() as u64);
    let expires = model.values().filter(|(_, t)| *t).count() as u64;
    assert_eq!(h.expires_count(0).unwrap(), expires);
    for (k, (v, _)) in &model {
        assert_eq!(h.get(0, k).unwrap().as_ref(), Some(v));
    }
    drop(h);
    let report = store.check().unwrap();
    assert_eq!(report.keys, model.len() as u64);
}

// ---------- lazy expiry, TTL ----------

#[test]
fn ttl_reports_missing_persistent_and_remaining_ms() {
    let seg = TempSegment::new("ttl");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    assert_eq!(h.ttl(0, b"nope").unwrap(), Ttl::Missing);
    put(&mut h, 0, b"p", b"v");
    assert_eq!(h.ttl(0, b"p").unwrap(), Ttl::Persistent);
    put_at(&mut h, 0, b"t", b"v", T0 + 90_000);
    assert_eq!(h.ttl(0, b"t").unwrap(), Ttl::Ms(90_000));
    advance(&clock, 30_000);
    assert_eq!(h.ttl(0, b"t").unwrap(), Ttl::Ms(60_000));
    advance(&clock, 59_999);
    assert_eq!(h.ttl(0, b"t").unwrap(), Ttl::Ms(1));
    advance(&clock, 2);
    assert_eq!(h.ttl(0, b"t").unwrap(), Ttl::Missing);
    assert_eq!(h.ttl(0, b"p").unwrap(), Ttl::Persistent);
    drop(h);
    store.check().unwrap();
}

#[test]
fn lazy_expiry_hides_and_removes_keys_on_access() {
    let seg = TempSegment::new("lazy");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    put_at(&mut h, 0, b"a", b"1", T0 + 100);
    put_at(&mut h, 0, b"b", b"2", T0 + 100);
    put_at(&mut h, 0, b"c", b"3", T0 + 100);
    h.write_value(0, b"l", ValueType::List, b"x", &expiring_at(T0 + 100))
        .unwrap();
    put_at(&mut h, 0, b"later", b"4", T0 + 10_000);
    put(&mut h, 0, b"p", b"5");
    assert_eq!(h.dbsize(0).unwrap(), 6);
    assert_eq!(h.expires_count(0).unwrap(), 5);
    let expired_before = stat(&store, "expired_keys");
    advance(&clock, 100);
    // At exactly the expiry time the keys are still alive (Redis 7.0: a key
    // is expired only once now > T), with PTTL 0.
    assert_eq!(h.ttl(0, b"c").unwrap(), Ttl::Ms(0));
    assert_eq!(h.get(0, b"a").unwrap(), Some(b"1".to_vec()));
    assert!(h.exists(0, b"b").unwrap());
    assert_eq!(h.key_type(0, b"l").unwrap(), Some(ValueType::List));
    assert_eq!(h.dbsize(0).unwrap(), 6);
    assert_eq!(h.expires_count(0).unwrap(), 5);
    assert_eq!(stat(&store, "expired_keys"), expired_before);
    advance(&clock, 1);
    // Each kind of access sees the key as gone and removes it.
    assert_eq!(h.get(0, b"a").unwrap(), None);
    assert!(!h.exists(0, b"b").unwrap());
    assert_eq!(h.ttl(0, b"c").unwrap(), Ttl::Missing);
    assert_eq!(h.key_type(0, b"l").unwrap(), None);
    assert_eq!(h.dbsize(0).unwrap(), 2);
    assert_eq!(h.expires_count(0).unwrap(), 1);
    assert_eq!(stat(&store, "expired_keys") - expired_before, 4);
    // Writes treat them as missing too.
    assert!(!h.delete(0, b"a").unwrap());
    assert_eq!(h.get(0, b"later").unwrap(), Some(b"4".to_vec()));
    assert_eq!(h.get(0, b"p").unwrap(), Some(b"5".to_vec()));
    assert_eq!(h.get_range(0, b"a", 0, -1).unwrap(), Vec::<u8>::new());
    assert_eq!(h.meta(0, b"a").unwrap(), None);
    assert_eq!(h.append(0, b"b", b"new").unwrap(), 3);
    assert_eq!(h.ttl(0, b"b").unwrap(), Ttl::Persistent);
    advance(&clock, 10_000);
    assert_eq!(h.set_range(0, b"later", 2, b"x").unwrap(), 3);
    assert_eq!(h.get(0, b"later").unwrap(), Some(b"\0\0x".to_vec()));
    assert_eq!(h.ttl(0, b"later").unwrap(), Ttl::Persistent);
    assert_eq!(h.dbsize(0).unwrap(), 3);
    assert_eq!(h.expires_count(0).unwrap(), 0);
    drop(h);
    store.check().unwrap();
}

#[test]
fn sweep_removes_expired_keys_nobody_reads() {
    let seg = TempSegment::new("sweep");
    let (store, clock) = seg.open_with_clock(16 * MB, T0);
    let mut h = store.handle().unwrap();
    for i in 0..1_000 {
        put_at(&mut h, 0, format!("soon:{i}").as_bytes(), b"v", T0 + 100);
    }
    for i in 0..200 {
        put_at(&mut h, 1, format!("soon:{i}").as_bytes(), b"v", T0 + 100);
    }
    for i in 0..300 {
        put_at(
            &mut h,
            0,
            format!("far:{i}").as_bytes(),
            b"v",
            T0 + 1_000_000,
        );
    }
    for i in 0..500 {
        put(&mut h, 0, format!("p:{i}").as_bytes(), b"v");
    }
    assert_eq!(h.dbsize(0).unwrap(), 1_800);
    assert_eq!(h.expires_count(0).unwrap(), 1_300);
    assert_eq!(h.expires_count(1).unwrap(), 200);
    // Before the time comes the sweeper removes nothing.
    let buckets = store.info().unwrap().buckets;
    let s = h.sweep_expired(buckets).unwrap();
    assert_eq!(
        s,
        Sweep {
            visited: buckets,
            expired: 0
        }
    );
    advance(&clock, 100);
    // At exactly the expiry time the keys are still alive: nothing to sweep.
    assert_eq!(
        h.sweep_expired(buckets).unwrap(),
        Sweep {
            visited: buckets,
            expired: 0
        }
    );
    assert_eq!(h.expires_count(0).unwrap(), 1_300);
    assert_eq!(h.expires_count(1).unwrap(), 200);
    advance(&clock, 1);
    // Like Redis, DBSIZE still counts expired keys nobody touched.
    assert_eq!(h.dbsize(0).unwrap(), 1_800);
    let before = stat(&store, "expired_keys");
    // Sweep in slices until every bucket was visited once.
    let mut visited = 0;
    let mut expired = 0;
    while visited < buckets {
        let s = h.sweep_expired(97.min(buckets - visited)).unwrap();
        visited += s.visited;
        expired += s.expired;
    }
    assert_eq!(visited, buckets);
    assert_eq!(expired, 1_200);
    assert_eq!(stat(&store, "expired_keys") - before, 1_200);
    assert_eq!(h.dbsize(0).unwrap(), 800);
    assert_eq!(h.dbsize(1).unwrap(), 0);
    assert_eq!(h.expires_count(0).unwrap(), 300);
    assert_eq!(h.expires_count(1).unwrap(), 0);
    for i in 0..300 {
        assert!(h.exists(0, format!("far:{i}").as_bytes()).unwrap());
    }
    for i in 0..500 {
        assert!(h.exists(0, format!("p:{i}").as_bytes()).unwrap());
    }
    // A second full sweep finds nothing more.
    assert_eq!(h.sweep_expired(buckets).unwrap().expired, 0);
    drop(h);
    let report = store.check().unwrap();
    assert_eq!(report.keys, 800);
}

// ---------- EXPIRE family ----------

#[test]
fn expire_conditions_follow_redis_7() {
    use ExpireCondition::*;
    let seg = TempSegment::new("expire-cond");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    let cur = T0 + 10_000;
    let less = (T0 + 5_000) as i64;
    let equal = cur as i64;
    let greater = (T0 + 20_000) as i64;
    // (condition, key has a TTL, new time, set?)
    let cases = [
        (Always, false, less, true),
        (Always, true, greater, true),
        (Always, true, less, true),
        (IfNone, false, less, true),
        (IfNone, true, greater, false),
        (IfNone, true, less, false),
        (IfSome, false, less, false),
        (IfSome, true, less, true),
        (IfSome, true, greater, true),
        // GT: no TTL counts as infinite, so GT never applies to it.
        (IfGreater, false, greater, false),
        (IfGreater, true, greater, true),
        (IfGreater, true, equal, false),
        (IfGreater, true, less, false),
        // LT: no TTL counts as infinite, so any time is less.
        (IfLess, false, greater, true),
        (IfLess, true, less, true),
        (IfLess, true, equal, false),
        (IfLess, true, greater, false),
    ];
    for (i, (c, has_ttl, at, set)) in cases.into_iter().enumerate() {
        let key = format!("k{i}");
        let key = key.as_bytes();
        if has_ttl {
            put_at(&mut h, 0, key, b"v", cur);
        } else {
            put(&mut h, 0, key, b"v");
        }
        let r = h.expire_at(0, key, at, c).unwrap();
        assert_eq!(r, set, "case {i}: {c:?} has_ttl={has_ttl} at={at}");
        let want = if set {
            Ttl::Ms(at as u64 - T0)
        } else if has_ttl {
            Ttl::Ms(cur - T0)
        } else {
            Ttl::Persistent
        };
        assert_eq!(h.ttl(0, key).unwrap(), want, "case {i}: {c:?}");
        assert_eq!(h.get(0, key).unwrap(), Some(b"v".to_vec()));
    }
    let with_ttl = cases.len() as u64 - 2; // the two refused on persistent keys
    assert_eq!(h.expires_count(0).unwrap(), with_ttl);
    // Every condition on a missing key: 0, and no key appears.
    for c in [Always, IfNone, IfSome, IfGreater, IfLess] {
        assert!(!h.expire_at(0, b"missing", greater, c).unwrap());
        assert_eq!(h.expire(0, b"missing", 10, c).unwrap(), Some(false));
        assert_eq!(h.pexpire(0, b"missing", 10, c).unwrap(), Some(false));
    }
    assert!(!h.exists(0, b"missing").unwrap());
    drop(h);
    store.check().unwrap();
}

#[test]
fn expire_and_pexpire_are_relative_to_now() {
    use ExpireCondition::*;
    let seg = TempSegment::new("expire-rel");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"s", b"v");
    put(&mut h, 0, b"p", b"v");
    assert_eq!(h.expire(0, b"s", 100, Always).unwrap(), Some(true));
    assert_eq!(h.ttl(0, b"s").unwrap(), Ttl::Ms(100_000));
    assert_eq!(
        h.meta(0, b"s").unwrap().unwrap().expire_at_ms,
        Some(T0 + 100_000)
    );
    assert_eq!(h.pexpire(0, b"p", 1_500, Always).unwrap(), Some(true));
    assert_eq!(h.ttl(0, b"p").unwrap(), Ttl::Ms(1_500));
    advance(&clock, 1_000);
    // GT with a relative time is compared with the absolute expiry.
    assert_eq!(h.pexpire(0, b"p", 400, IfGreater).unwrap(), Some(false));
    assert_eq!(h.pexpire(0, b"p", 600, IfGreater).unwrap(), Some(true));
    assert_eq!(h.ttl(0, b"p").unwrap(), Ttl::Ms(600));
    assert_eq!(h.expire(0, b"s", 200, IfLess).unwrap(), Some(false));
    assert_eq!(h.expire(0, b"s", 50, IfLess).unwrap(), Some(true));
    assert_eq!(h.ttl(0, b"s").unwrap(), Ttl::Ms(50_000));
    advance(&clock, 600);
    // Alive at exactly its expiry time, gone 1 ms later.
    assert_eq!(h.ttl(0, b"p").unwrap(), Ttl::Ms(0));
    assert!(h.exists(0, b"p").unwrap());
    advance(&clock, 1);
    assert!(!h.exists(0, b"p").unwrap());
    assert!(h.exists(0, b"s").unwrap());
    // Overflowing times are refused ("invalid expire time") and change nothing.
    assert_eq!(h.expire(0, b"s", i64::MAX, Always).unwrap(), None);
    assert_eq!(h.expire(0, b"s", i64::MAX / 1000, Always).unwrap(), None);
    assert_eq!(h.pexpire(0, b"s", i64::MAX, Always).unwrap(), None);
    assert_eq!(h.ttl(0, b"s").unwrap(), Ttl::Ms(49_399));
    drop(h);
    store.check().unwrap();
}

#[test]
fn expire_in_the_past_deletes_the_key() {
    use ExpireCondition::*;
    let seg = TempSegment::new("expire-past");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    for k in [&b"a"[..], b"b", b"c", b"d", b"e"] {
        put(&mut h, 0, k, b"v");
    }
    list_value(&mut h, 0, b"l", b"x");
    assert_eq!(h.expire(0, b"a", 0, Always).unwrap(), Some(true));
    assert_eq!(h.expire(0, b"b", -10, Always).unwrap(), Some(true));
    assert_eq!(h.pexpire(0, b"c", -1, Always).unwrap(), Some(true));
    assert!(h.expire_at(0, b"d", T0 as i64, Always).unwrap());
    assert!(h.expire_at(0, b"e", -5, Always).unwrap());
    assert!(h.expire_at(0, b"l", 1, Always).unwrap());
    for k in [&b"a"[..], b"b", b"c", b"d", b"e", b"l"] {
        assert!(!h.exists(0, k).unwrap(), "{k:?}");
    }
    assert_eq!(h.dbsize(0).unwrap(), 0);
    // A condition that refuses leaves the key alone even with a past time.
    put(&mut h, 0, b"p", b"v");
    put_at(&mut h, 0, b"t", b"v", T0 + 1_000);
    assert!(!h.expire_at(0, b"p", 1, IfGreater).unwrap());
    assert!(!h.expire_at(0, b"p", 1, IfSome).unwrap());
    assert!(!h.expire_at(0, b"t", 1, IfNone).unwrap());
    assert!(h.exists(0, b"p").unwrap());
    assert!(h.exists(0, b"t").unwrap());
    // One that allows deletes.
    assert!(h.expire_at(0, b"p", 1, IfLess).unwrap());
    assert!(h.expire_at(0, b"t", 1, IfLess).unwrap());
    assert_eq!(h.dbsize(0).unwrap(), 0);
    assert_eq!(h.expires_count(0).unwrap(), 0);
    drop(h);
    store.check().unwrap();
}

#[test]
fn persist_removes_only_an_existing_ttl() {
    let seg = TempSegment::new("persist");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    assert!(!h.persist(0, b"missing").unwrap());
    put(&mut h, 0, b"p", b"v");
    assert!(!h.persist(0, b"p").unwrap());
    put_at(&mut h, 0, b"t", b"v", T0 + 1_000);
    assert_eq!(h.expires_count(0).unwrap(), 1);
    assert!(h.persist(0, b"t").unwrap());
    assert_eq!(h.ttl(0, b"t").unwrap(), Ttl::Persistent);
    assert!(!h.persist(0, b"t").unwrap());
    assert_eq!(h.expires_count(0).unwrap(), 0);
    advance(&clock, 5_000);
    assert_eq!(h.get(0, b"t").unwrap(), Some(b"v".to_vec()));
    // PERSIST on a key that has already expired: 0, and the key is gone.
    put_at(&mut h, 0, b"gone", b"v", T0 + 5_500);
    advance(&clock, 1_000);
    assert!(!h.persist(0, b"gone").unwrap());
    assert!(!h.exists(0, b"gone").unwrap());
    // PERSIST works on other types.
    h.write_value(0, b"l", ValueType::List, b"x", &expiring_at(T0 + 60_000))
        .unwrap();
    assert!(h.persist(0, b"l").unwrap());
    assert_eq!(h.ttl(0, b"l").unwrap(), Ttl::Persistent);
    assert_eq!(h.dbsize(0).unwrap(), 3);
    drop(h);
    store.check().unwrap();
}

// ---------- RENAME ----------

#[test]
fn rename_moves_value_type_and_ttl() {
    let seg = TempSegment::new("rename");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    put_at(&mut h, 0, b"src", b"value", T0 + 7_000);
    assert!(h.rename(0, b"src", b"dst", false).unwrap());
    assert!(!h.exists(0, b"src").unwrap());
    assert_eq!(h.get(0, b"dst").unwrap(), Some(b"value".to_vec()));
    assert_eq!(h.ttl(0, b"dst").unwrap(), Ttl::Ms(7_000));
    assert_eq!(h.dbsize(0).unwrap(), 1);
    assert_eq!(h.expires_count(0).unwrap(), 1);
    // A list keeps its type and bytes.
    list_value(&mut h, 0, b"l", b"\x00list\xff");
    assert!(h.rename(0, b"l", b"l2", true).unwrap());
    let mut out = Vec::new();
    let meta = h.get_into(0, b"l2", &mut out).unwrap().unwrap();
    assert_eq!(meta.vtype, ValueType::List);
    assert_eq!(out, b"\x00list\xff");
    assert_eq!(h.ttl(0, b"l2").unwrap(), Ttl::Persistent);
    // A big value.
    let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
    put(&mut h, 0, b"big", &big);
    assert!(h.rename(0, b"big", b"big2", false).unwrap());
    assert_eq!(h.get(0, b"big2").unwrap(), Some(big));
    assert_eq!(h.dbsize(0).unwrap(), 3);
    drop(h);
    store.check().unwrap();
}

#[test]
fn rename_onto_an_existing_key_replaces_it_and_its_ttl() {
    let seg = TempSegment::new("rename-over");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    // Persistent source over a destination with a TTL: the TTL goes.
    put(&mut h, 0, b"a", b"A");
    put_at(&mut h, 0, b"b", b"B", T0 + 1_000);
    assert!(h.rename(0, b"a", b"b", false).unwrap());
    assert_eq!(h.get(0, b"b").unwrap(), Some(b"A".to_vec()));
    assert_eq!(h.ttl(0, b"b").unwrap(), Ttl::Persistent);
    assert!(!h.exists(0, b"a").unwrap());
    assert_eq!(h.expires_count(0).unwrap(), 0);
    // Source with a TTL over a persistent destination of another type.
    put_at(&mut h, 0, b"c", b"C", T0 + 2_000);
    list_value(&mut h, 0, b"d", b"list");
    assert!(h.rename(0, b"c", b"d", false).unwrap());
    assert_eq!(h.get(0, b"d").unwrap(), Some(b"C".to_vec()));
    assert_eq!(h.ttl(0, b"d").unwrap(), Ttl::Ms(2_000));
    assert_eq!(h.dbsize(0).unwrap(), 2);
    assert_eq!(h.expires_count(0).unwrap(), 1);
    drop(h);
    store.check().unwrap();
}

#[test]
fn renamenx_refuses_an_existing_destination() {
    let seg = TempSegment::new("renamenx");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"a", b"A");
    put_at(&mut h, 0, b"b", b"B", T0 + 1_000);
    assert!(!h.rename(0, b"a", b"b", true).unwrap());
    assert_eq!(h.get(0, b"a").unwrap(), Some(b"A".to_vec()));
    assert_eq!(h.get(0, b"b").unwrap(), Some(b"B".to_vec()));
    assert_eq!(h.ttl(0, b"b").unwrap(), Ttl::Ms(1_000));
    // At exactly its expiry time the destination still exists.
    advance(&clock, 1_000);
    assert!(!h.rename(0, b"a", b"b", true).unwrap());
    assert_eq!(h.get(0, b"b").unwrap(), Some(b"B".to_vec()));
    assert_eq!(h.ttl(0, b"b").unwrap(), Ttl::Ms(0));
    // Once the destination has expired it no longer exists.
    advance(&clock, 1);
    assert!(h.rename(0, b"a", b"b", true).unwrap());
    assert_eq!(h.get(0, b"b").unwrap(), Some(b"A".to_vec()));
    assert_eq!(h.ttl(0, b"b").unwrap(), Ttl::Persistent);
    assert!(!h.exists(0, b"a").unwrap());
    assert_eq!(h.dbsize(0).unwrap(), 1);
    assert_eq!(h.expires_count(0).unwrap(), 0);
    drop(h);
    store.check().unwrap();
}

#[test]
fn rename_of_a_missing_or_expired_source_is_no_such_key() {
    let seg = TempSegment::new("rename-missing");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"dst", b"D");
    for nx in [false, true] {
        assert!(matches!(
            h.rename(0, b"nope", b"dst", nx),
            Err(Error::NoSuchKey)
        ));
        // Same key, missing: also an error.
        assert!(matches!(
            h.rename(0, b"nope", b"nope", nx),
            Err(Error::NoSuchKey)
        ));
    }
    put_at(&mut h, 0, b"old", b"O", T0 + 10);
    advance(&clock, 10);
    assert_eq!(h.ttl(0, b"old").unwrap(), Ttl::Ms(0));
    advance(&clock, 1);
    assert!(matches!(
        h.rename(0, b"old", b"dst", false),
        Err(Error::NoSuchKey)
    ));
    assert_eq!(h.get(0, b"dst").unwrap(), Some(b"D".to_vec()));
    // The key exists in another db only.
    put(&mut h, 1, b"other", b"1");
    assert!(matches!(
        h.rename(0, b"other", b"x", false),
        Err(Error::NoSuchKey)
    ));
    assert_eq!(h.dbsize(0).unwrap(), 1);
    assert_eq!(h.dbsize(1).unwrap(), 1);
    drop(h);
    store.check().unwrap();
}

#[test]
fn rename_onto_itself() {
    // Redis 7.0: RENAME k k is OK, RENAMENX k k is 0; the key is unchanged.
    let seg = TempSegment::new("rename-same");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    put_at(&mut h, 0, b"k", b"v", T0 + 3_000);
    assert!(h.rename(0, b"k", b"k", false).unwrap());
    assert!(!h.rename(0, b"k", b"k", true).unwrap());
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Ms(3_000));
    assert_eq!(h.dbsize(0).unwrap(), 1);
    drop(h);
    store.check().unwrap();
}

#[test]
fn rename_chains_keep_the_index_consistent() {
    let seg = TempSegment::new("rename-chain");
    let (store, _clock) = seg.open_with_clock(16 * MB, T0);
    let mut h = store.handle().unwrap();
    for i in 0..2_000 {
        let k = format!("k{i}");
        if i % 3 == 0 {
            put_at(&mut h, 2, k.as_bytes(), k.as_bytes(), T0 + 100_000 + i);
        } else {
            put(&mut h, 2, k.as_bytes(), k.as_bytes());
        }
    }
    // Rotate every key through new names, some onto existing keys.
    for i in 0..2_000u64 {
        let from = format!("k{i}");
        let to = format!("r{}", i % 1_500);
        assert!(h.rename(2, from.as_bytes(), to.as_bytes(), false).unwrap());
    }
    assert_eq!(h.dbsize(2).unwrap(), 1_500);
    for j in 0..1_500u64 {
        // The last source renamed onto r{j} wins.
        let i = if j + 1_500 < 2_000 { j + 1_500 } else { j };
        let want = format!("k{i}").into_bytes();
        let to = format!("r{j}");
        assert_eq!(h.get(2, to.as_bytes()).unwrap(), Some(want), "r{j}");
        let ttl = h.ttl(2, to.as_bytes()).unwrap();
        if i % 3 == 0 {
            assert_eq!(ttl, Ttl::Ms(100_000 + i));
        } else {
            assert_eq!(ttl, Ttl::Persistent);
        }
    }
    let expect_expires = (0..1_500u64)
        .map(|j| if j + 1_500 < 2_000 { j + 1_500 } else { j })
        .filter(|i| i % 3 == 0)
        .count() as u64;
    assert_eq!(h.expires_count(2).unwrap(), expect_expires);
    assert_eq!(h.dbsize(0).unwrap(), 0);
    drop(h);
    let report = store.check().unwrap();
    assert_eq!(report.keys, 1_500);
}

// ---------- DBSIZE / FLUSHDB / FLUSHALL ----------

#[test]
fn flushdb_empties_one_db_and_flushall_every_db() {
    let seg = TempSegment::new("flush");
    let (store, _clock) = seg.open_with_clock(16 * MB, T0);
    let mut h = store.handle().unwrap();
    for db in 0..16u8 {
        for i in 0..100 {
            let k = format!("k{i}");
            if i % 2 == 0 {
                put_at(&mut h, db, k.as_bytes(), b"v", T0 + 60_000);
            } else {
                put(&mut h, db, k.as_bytes(), b"v");
            }
        }
    }
    h.flushdb(3).unwrap();
    assert_eq!(h.dbsize(3).unwrap(), 0);
    assert_eq!(h.expires_count(3).unwrap(), 0);
    assert_eq!(h.get(3, b"k1").unwrap(), None);
    for db in (0..16u8).filter(|d| *d != 3) {
        assert_eq!(h.dbsize(db).unwrap(), 100, "db {db}");
        assert_eq!(h.expires_count(db).unwrap(), 50, "db {db}");
        assert_eq!(h.get(db, b"k1").unwrap(), Some(b"v".to_vec()));
    }
    // Flushing an empty db is fine.
    h.flushdb(3).unwrap();
    // The db is usable again.
    put(&mut h, 3, b"again", b"v");
    assert_eq!(h.dbsize(3).unwrap(), 1);
    drop(h);
    let report = store.check().unwrap();
    assert_eq!(report.keys, 15 * 100 + 1);
    let mut h = store.handle().unwrap();
    h.flushall().unwrap();
    for db in 0..16u8 {
        assert_eq!(h.dbsize(db).unwrap(), 0);
        assert_eq!(h.expires_count(db).unwrap(), 0);
    }
    put(&mut h, 0, b"after", b"v");
    assert_eq!(h.get(0, b"after").unwrap(), Some(b"v".to_vec()));
    drop(h);
    let report = store.check().unwrap();
    assert_eq!(report.keys, 1);
    assert_eq!(report.nodes, 0);
}

#[test]
fn flush_returns_memory_to_the_arena() {
    let seg = TempSegment::new("flush-mem");
    let store = seg.open(8 * MB);
    let empty = store.arena_stats().unwrap();
    let mut h = store.handle().unwrap();
    for i in 0..3_000 {
        put(
            &mut h,
            (i % 16) as u8,
            format!("key{i}").as_bytes(),
            &[7u8; 200],
        );
    }
    assert!(store.arena_stats().unwrap().used_bytes > empty.used_bytes + 3_000 * 200);
    h.flushall().unwrap();
    drop(h);
    store.check().unwrap();
    let after = store.arena_stats().unwrap();
    assert_eq!(after.used_bytes, empty.used_bytes);
    assert_eq!(after.used_blocks, empty.used_blocks);
}

// ---------- SCAN ----------

#[test]
fn scan_returns_every_key_exactly_once() {
    let seg = TempSegment::new("scan-full");
    let store = seg.open(16 * MB);
    let mut h = store.handle().unwrap();
    let mut want = BTreeSet::new();
    for i in 0..5_000 {
        let k = format!("key:{i}").into_bytes();
        put(&mut h, 0, &k, b"v");
        want.insert(k);
    }
    for i in 0..300 {
        put(&mut h, 1, format!("other:{i}").as_bytes(), b"v");
    }
    for count in [1, 10, 100, 10_000] {
        let (keys, _) = scan_all(&mut h, 0, None, count, None);
        assert_eq!(keys.len(), 5_000, "COUNT {count}: duplicates or misses");
        let got: BTreeSet<_> = keys.into_iter().collect();
        assert_eq!(got, want, "COUNT {count}");
    }
    let (other, _) = scan_all(&mut h, 1, None, 10, None);
    assert_eq!(other.len(), 300);
    assert!(other.iter().all(|k| k.starts_with(b"other:")));
    let (none, _) = scan_all(&mut h, 2, None, 10, None);
    assert!(none.is_empty());
    drop(h);
    store.check().unwrap();
}

#[test]
fn scan_count_is_a_hint_for_the_page_size() {
    let seg = TempSegment::new("scan-count");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    for i in 0..2_000 {
        put(&mut h, 0, format!("k{i}").as_bytes(), b"v");
    }
    let (_, calls_small) = scan_all(&mut h, 0, None, 10, None);
    let (_, calls_big) = scan_all(&mut h, 0, None, 1_000, None);
    assert!(
        calls_small > calls_big,
        "COUNT 10 took {calls_small} calls, COUNT 1000 took {calls_big}"
    );
    assert!(calls_small >= 2_000 / 20);
    // Pages stay near COUNT (a whole bucket chain may spill over).
    let mut cursor = 0;
    loop {
        let page = h.scan(0, cursor, None, 10, None).unwrap();
        assert!(page.keys.len() <= 10 + 32, "page of {}", page.keys.len());
        cursor = page.cursor;
        if cursor == 0 {
            break;
        }
    }
    // COUNT 0 is treated as 1 rather than looping forever.
    let (keys, _) = scan_all(&mut h, 0, None, 0, None);
    assert_eq!(keys.len(), 2_000);
    drop(h);
    store.check().unwrap();
}

#[test]
fn scan_match_filters_by_glob_pattern() {
    let seg = TempSegment::new("scan-match");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    for i in 0..100 {
        put(&mut h, 0, format!("user:{i}").as_bytes(), b"v");
    }
    for i in 0..50 {
        put(&mut h, 0, format!("item:{i}").as_bytes(), b"v");
    }
    for k in [
        &b"a*b"[..],
        b"axb",
        b"hello",
        b"hallo",
        b"hxllo",
        b"heeeello",
        b"hllo",
    ] {
        put(&mut h, 0, k, b"v");
    }
    let m = |h: &mut Handle, p: &[u8]| -> BTreeSet<Vec<u8>> {
        let (keys, _) = scan_all(h, 0, Some(p), 7, None);
        let n = keys.len();
        let set: BTreeSet<_> = keys.into_iter().collect();
        assert_eq!(set.len(), n, "duplicates for {p:?}");
        set
    };
    assert_eq!(m(&mut h, b"user:*").len(), 100);
    assert_eq!(m(&mut h, b"item:*").len(), 50);
    assert_eq!(m(&mut h, b"user:?").len(), 10);
    assert_eq!(m(&mut h, b"user:??").len(), 90);
    assert_eq!(m(&mut h, b"*:1?").len(), 20);
    assert_eq!(
        m(&mut h, b"item:[1-3]"),
        bset(&[b"item:1", b"item:2", b"item:3"])
    );
    assert_eq!(m(&mut h, b"item:[^0-3]").len(), 6);
    assert_eq!(m(&mut h, b"h?llo"), bset(&[b"hello", b"hallo", b"hxllo"]));
    assert_eq!(
        m(&mut h, b"h*llo"),
        bset(&[b"hello", b"hallo", b"hxllo", b"heeeello", b"hllo"])
    );
    assert_eq!(m(&mut h, b"h[ae]llo"), bset(&[b"hello", b"hallo"]));
    assert_eq!(m(&mut h, b"a\\*b"), bset(&[b"a*b"]));
    assert_eq!(m(&mut h, b"a*b"), bset(&[b"a*b", b"axb"]));
    assert_eq!(m(&mut h, b"nomatch*"), BTreeSet::new());
    assert_eq!(
        m(&mut h, b"USER:1"),
        BTreeSet::new(),
        "MATCH is case-sensitive"
    );
    assert_eq!(m(&mut h, b"*").len(), 157);
    drop(h);
    store.check().unwrap();
}

#[test]
fn scan_match_star_returns_the_empty_key() {
    // Redis treats MATCH * as no pattern at all, so SCAN 0 MATCH * returns
    // every key, the empty key included.
    let seg = TempSegment::new("scan-empty-key");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"", b"v");
    put(&mut h, 0, b"a", b"v");
    let (all, _) = scan_all(&mut h, 0, None, 10, None);
    assert_eq!(sorted(all), vec![b"".to_vec(), b"a".to_vec()]);
    let (star, _) = scan_all(&mut h, 0, Some(b"*"), 10, None);
    assert_eq!(sorted(star), vec![b"".to_vec(), b"a".to_vec()]);
    drop(h);
    store.check().unwrap();
}

#[test]
fn scan_type_filter_and_expired_keys() {
    let seg = TempSegment::new("scan-type");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    for i in 0..200 {
        put(&mut h, 0, format!("s{i}").as_bytes(), b"v");
        list_value(&mut h, 0, format!("l{i}").as_bytes(), b"x");
    }
    for i in 0..30 {
        h.write_value(
            0,
            format!("h{i}").as_bytes(),
            ValueType::Hash,
            b"x",
            &SetOptions::default(),
        )
        .unwrap();
    }
    let (strings, _) = scan_all(&mut h, 0, None, 10, Some(ValueType::String));
    assert_eq!(strings.len(), 200);
    assert!(strings.iter().all(|k| k[0] == b's'));
    let (lists, _) = scan_all(&mut h, 0, None, 10, Some(ValueType::List));
    assert_eq!(lists.len(), 200);
    assert!(lists.iter().all(|k| k[0] == b'l'));
    let (hashes, _) = scan_all(&mut h, 0, Some(b"h1*"), 10, Some(ValueType::Hash));
    assert_eq!(hashes.len(), 11);
    let (sets, _) = scan_all(&mut h, 0, None, 10, Some(ValueType::Set));
    assert!(sets.is_empty());
    // Keys past their time are not returned, even before anyone removes them.
    for i in 0..50 {
        put_at(&mut h, 0, format!("e{i}").as_bytes(), b"v", T0 + 10);
    }
    assert_eq!(scan_all(&mut h, 0, Some(b"e*"), 10, None).0.len(), 50);
    advance(&clock, 10);
    // At exactly their expiry time the keys are still alive.
    assert_eq!(scan_all(&mut h, 0, Some(b"e*"), 10, None).0.len(), 50);
    advance(&clock, 1);
    assert!(scan_all(&mut h, 0, Some(b"e*"), 10, None).0.is_empty());
    assert_eq!(all_keys(&mut h, 0).len(), 430);
    drop(h);
    store.check().unwrap();
}

#[test]
fn a_db_of_no_more_than_count_keys_is_scanned_in_one_call() {
    // 256 MiB: 262,144 buckets, more than one call passes over when the db
    // holds more keys than COUNT.
    let seg = TempSegment::new("scan-small");
    let store = seg.open(256 * MB);
    let mut h = store.handle().unwrap();
    for i in 0..20 {
        put(&mut h, 0, format!("k{i}").as_bytes(), b"v");
    }
    put(&mut h, 1, b"other-db", b"v");
    let page = h.scan(0, 0, None, 20, None).unwrap();
    assert_eq!(page.cursor, 0);
    assert_eq!(page.keys.len(), 20);
    // With a MATCH that keeps one key, still one call.
    let page = h.scan(0, 0, Some(b"k7"), 20, None).unwrap();
    assert_eq!((page.cursor, page.keys), (0, vec![b"k7".to_vec()]));
    // More keys than COUNT: paged, and every key returned once in all.
    let (keys, calls) = scan_all(&mut h, 0, None, 5, None);
    assert!(calls > 1);
    assert_eq!(keys.iter().collect::<BTreeSet<_>>().len(), 20);
    assert_eq!(keys.len(), 20);
    drop(h);
    store.check().unwrap();
}

#[test]
fn scan_with_a_cursor_past_the_end_finishes() {
    let seg = TempSegment::new("scan-cursor");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"k", b"v");
    let page = h.scan(0, u64::MAX, None, 10, None).unwrap();
    assert_eq!(page.cursor, 0);
    assert!(page.keys.is_empty());
    drop(h);
    store.check().unwrap();
}

#[test]
fn keys_written_during_a_scan_do_not_break_it() {
    // Keys present for the whole scan are returned exactly once, whatever is
    // written or deleted meanwhile.
    let seg = TempSegment::new("scan-mutate");
    let store = seg.open(16 * MB);
    let mut h = store.handle().unwrap();
    for i in 0..3_000 {
        put(&mut h, 0, format!("stable:{i}").as_bytes(), b"v");
    }
    for i in 0..1_000 {
        put(&mut h, 0, format!("gone:{i}").as_bytes(), b"v");
    }
    let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
    let mut cursor = 0;
    let mut step = 0;
    loop {
        let page = h.scan(0, cursor, None, 25, None).unwrap();
        for k in page.keys {
            *seen.entry(k).or_default() += 1;
        }
        // Churn between calls.
        for j in 0..5 {
            let n = step * 5 + j;
            put(&mut h, 0, format!("new:{n}").as_bytes(), b"v");
            if n < 1_000 {
                h.delete(0, format!("gone:{n}").as_bytes()).unwrap();
            }
        }
        step += 1;
        cursor = page.cursor;
        if cursor == 0 {
            break;
        }
    }
    for i in 0..3_000 {
        let k = format!("stable:{i}").into_bytes();
        assert_eq!(seen.get(&k), Some(&1), "stable:{i}");
    }
    assert!(seen.values().all(|n| *n == 1), "a key was returned twice");
    drop(h);
    store.check().unwrap();
}

#[test]
fn dense_buckets_with_overflow_nodes_stay_consistent() {
    // Five keys per bucket of six slots: many chains need overflow nodes.
    let seg = TempSegment::new("dense");
    let mut opts = seg.options(8 * MB);
    opts.contexts = 8;
    let store = Store::open(&opts).unwrap();
    let buckets = store.info().unwrap().buckets;
    let n = buckets * 5;
    let mut h = store.handle().unwrap();
    for i in 0..n {
        put(&mut h, 0, format!("{i}").as_bytes(), b"");
    }
    assert_eq!(h.dbsize(0).unwrap(), n);
    let (keys, _) = scan_all(&mut h, 0, None, 50, None);
    assert_eq!(keys.len() as u64, n);
    assert_eq!(keys.iter().collect::<BTreeSet<_>>().len() as u64, n);
    drop(h);
    let report = store.check().unwrap();
    assert_eq!(report.keys, n);
    assert!(report.nodes > 0, "no overflow node was needed");
    // Delete two thirds, rename some survivors onto each other.
    let mut h = store.handle().unwrap();
    for i in (0..n).filter(|i| i % 3 != 0) {
        assert!(h.delete(0, format!("{i}").as_bytes()).unwrap());
    }
    for i in (0..n).filter(|i| i % 3 == 0).take(5_000) {
        let to = format!("r{}", i % 1_000);
        assert!(h
            .rename(0, format!("{i}").as_bytes(), to.as_bytes(), false)
            .unwrap());
    }
    let left = n.div_ceil(3) - 5_000 + 1_000;
    assert_eq!(h.dbsize(0).unwrap(), left);
    let (keys, _) = scan_all(&mut h, 0, None, 50, None);
    assert_eq!(keys.len() as u64, left);
    drop(h);
    let report = store.check().unwrap();
    assert_eq!(report.keys, left);
    // Emptying the table frees every overflow node.
    let mut h = store.handle().unwrap();
    h.flushdb(0).unwrap();
    drop(h);
    let report = store.check().unwrap();
    assert_eq!(report.keys, 0);
    assert_eq!(report.nodes, 0);
    assert_eq!(report.used_blocks, 0);
}

#[test]
fn expire_and_persist_on_an_expired_key_see_no_key() {
    use ExpireCondition::*;
    let seg = TempSegment::new("expire-expired");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    put_at(&mut h, 0, b"k", b"v", T0 + 10);
    advance(&clock, 10);
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Ms(0));
    advance(&clock, 1);
    assert!(!h.expire_at(0, b"k", (T0 + 100_000) as i64, Always).unwrap());
    assert!(!h.exists(0, b"k").unwrap());
    assert_eq!(h.dbsize(0).unwrap(), 0);
    assert_eq!(h.expires_count(0).unwrap(), 0);
    drop(h);
    store.check().unwrap();
}

// ---------- GETDEL, GETEX, COPY, MOVE, RANDOMKEY ----------

#[test]
fn get_del_returns_and_removes_only_strings() {
    let seg = TempSegment::new("getdel");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"k", b"v");
    h.set(0, b"e", b"x", &expiring_at(u64::MAX / 2)).unwrap();
    h.write_value(0, b"l", ValueType::List, b"opaque", &SetOptions::default())
        .unwrap();
    assert_eq!(h.get_del(0, b"k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(h.get_del(0, b"k").unwrap(), None);
    assert!(!h.exists(0, b"k").unwrap());
    assert_eq!(h.get_del(0, b"e").unwrap(), Some(b"x".to_vec()));
    assert_eq!(h.expires_count(0).unwrap(), 0);
    assert!(matches!(h.get_del(0, b"l"), Err(Error::WrongType)));
    assert!(h.exists(0, b"l").unwrap(), "a failed GETDEL keeps the key");
    assert_eq!(h.dbsize(0).unwrap(), 1);
    drop(h);
    store.check().unwrap();
}

#[test]
fn get_ex_changes_the_expiry_in_the_same_step() {
    let seg = TempSegment::new("getex");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"k", b"v");
    assert_eq!(
        h.get_ex(0, b"k", Expiry::Keep).unwrap(),
        Some(b"v".to_vec())
    );
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Persistent);
    assert_eq!(
        h.get_ex(0, b"k", Expiry::At(T0 + 5_000)).unwrap(),
        Some(b"v".to_vec())
    );
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Ms(5_000));
    assert_eq!(h.expires_count(0).unwrap(), 1);
    assert_eq!(
        h.get_ex(0, b"k", Expiry::Persist).unwrap(),
        Some(b"v".to_vec())
    );
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Persistent);
    assert_eq!(h.expires_count(0).unwrap(), 0);
    // A time not in the future: the value is returned and the key is gone.
    assert_eq!(
        h.get_ex(0, b"k", Expiry::At(T0)).unwrap(),
        Some(b"v".to_vec())
    );
    assert!(!h.exists(0, b"k").unwrap());
    assert_eq!(h.get_ex(0, b"missing", Expiry::Persist).unwrap(), None);
    h.write_value(0, b"l", ValueType::List, b"opaque", &SetOptions::default())
        .unwrap();
    assert!(matches!(
        h.get_ex(0, b"l", Expiry::Persist),
        Err(Error::WrongType)
    ));
    clock.store(T0 + 1, Ordering::Relaxed);
    drop(h);
    store.check().unwrap();
}

#[test]
fn copy_between_dbs_keeps_type_and_ttl() {
    let seg = TempSegment::new("copy");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    h.set(0, b"src", b"value", &expiring_at(T0 + 9_000))
        .unwrap();
    h.write_value(
        0,
        b"list",
        ValueType::List,
        b"opaque",
        &SetOptions::default(),
    )
    .unwrap();
    assert!(h.copy(0, b"src", 3, b"dst", false).unwrap());
    assert_eq!(h.get(3, b"dst").unwrap(), Some(b"value".to_vec()));
    assert_eq!(h.ttl(3, b"dst").unwrap(), Ttl::Ms(9_000));
    assert_eq!(
        h.get(0, b"src").unwrap(),
        Some(b"value".to_vec()),
        "COPY keeps the source"
    );
    // An existing destination blocks COPY unless REPLACE.
    put(&mut h, 0, b"other", b"old");
    assert!(!h.copy(0, b"src", 0, b"other", false).unwrap());
    assert_eq!(h.get(0, b"other").unwrap(), Some(b"old".to_vec()));
    assert!(h.copy(0, b"src", 0, b"other", true).unwrap());
    assert_eq!(h.get(0, b"other").unwrap(), Some(b"value".to_vec()));
    assert!(h.copy(0, b"list", 1, b"list", false).unwrap());
    assert_eq!(h.key_type(1, b"list").unwrap(), Some(ValueType::List));
    assert!(!h.copy(0, b"missing", 0, b"x", true).unwrap());
    assert!(matches!(
        h.copy(0, b"src", 0, b"src", true),
        Err(Error::SameObject)
    ));
    assert_eq!(
        (
            h.dbsize(0).unwrap(),
            h.dbsize(1).unwrap(),
            h.dbsize(3).unwrap()
        ),
        (3, 1, 1)
    );
    assert_eq!(h.expires_count(0).unwrap(), 2);
    drop(h);
    store.check().unwrap();
}

#[test]
fn move_key_only_when_the_destination_db_lacks_it() {
    let seg = TempSegment::new("move");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"k", b"zero");
    assert!(h.move_key(0, b"k", 5).unwrap());
    assert!(!h.exists(0, b"k").unwrap());
    assert_eq!(h.get(5, b"k").unwrap(), Some(b"zero".to_vec()));
    put(&mut h, 0, b"k", b"again");
    assert!(!h.move_key(0, b"k", 5).unwrap(), "the destination has it");
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"again".to_vec()));
    assert_eq!(h.get(5, b"k").unwrap(), Some(b"zero".to_vec()));
    assert!(!h.move_key(0, b"missing", 5).unwrap());
    assert!(matches!(h.move_key(0, b"k", 0), Err(Error::SameObject)));
    assert!(matches!(h.move_key(0, b"k", 16), Err(Error::BadDb)));
    assert_eq!((h.dbsize(0).unwrap(), h.dbsize(5).unwrap()), (1, 1));
    drop(h);
    store.check().unwrap();
}

#[test]
fn random_key_returns_live_keys_of_its_db() {
    let seg = TempSegment::new("randomkey");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    assert_eq!(h.random_key(0).unwrap(), None);
    for i in 0..50u32 {
        h.set(
            0,
            format!("dying{i}").as_bytes(),
            b"v",
            &expiring_at(T0 + 10),
        )
        .unwrap();
    }
    put(&mut h, 0, b"survivor", b"v");
    put(&mut h, 1, b"elsewhere", b"v");
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        let k = h.random_key(0).unwrap().unwrap();
        assert!(k.starts_with(b"dying") || k == b"survivor");
        seen.insert(k);
    }
    assert!(
        seen.len() > 10,
        "random keys come from all over: {}",
        seen.len()
    );
    clock.store(T0 + 11, Ordering::Relaxed);
    for _ in 0..20 {
        assert_eq!(h.random_key(0).unwrap(), Some(b"survivor".to_vec()));
    }
    assert_eq!(h.random_key(1).unwrap(), Some(b"elsewhere".to_vec()));
    assert_eq!(h.random_key(2).unwrap(), None);
    drop(h);
    store.check().unwrap();
}

/// Each key is about equally likely, however the keys fall in the index:
/// with two keys, a draw that took the first key after a random bucket
/// favoured one in proportion to the empty run before it.
#[test]
fn random_key_draws_every_key_about_equally() {
    let seg = TempSegment::new("randomfair");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    for keys in [2u32, 5, 3000] {
        h.flushdb(0).unwrap();
        for i in 0..keys {
            put(&mut h, 0, format!("k{i}").as_bytes(), b"v");
        }
        let draws = 400 * keys.min(5);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..draws {
            *counts
                .entry(h.random_key(0).unwrap().unwrap())
                .or_insert(0u32) += 1;
        }
        if keys <= 5 {
            // Expected 400 each; below 250 is more than 7 standard deviations off.
            assert_eq!(counts.len(), keys as usize);
            assert!(counts.values().all(|&n| n > 250), "{keys} keys: {counts:?}");
        } else {
            assert!(counts.len() > 1000, "{keys} keys: {} drawn", counts.len());
        }
    }
    drop(h);
    store.check().unwrap();
}

#[test]
fn swap_db_exchanges_keys_expiries_and_counters() {
    let seg = TempSegment::new("swapdb");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"a", b"zero");
    put_at(&mut h, 0, b"b", b"zero-ttl", T0 + 5_000);
    put(&mut h, 1, b"a", b"one");
    put(&mut h, 2, b"c", b"two");
    h.swap_db(0, 1).unwrap();
    assert_eq!(h.get(0, b"a").unwrap(), Some(b"one".to_vec()));
    assert_eq!(h.get(1, b"a").unwrap(), Some(b"zero".to_vec()));
    assert_eq!(h.ttl(1, b"b").unwrap(), Ttl::Ms(5_000));
    assert!(!h.exists(0, b"b").unwrap());
    assert_eq!((h.dbsize(0).unwrap(), h.dbsize(1).unwrap()), (1, 2));
    assert_eq!(
        (h.expires_count(0).unwrap(), h.expires_count(1).unwrap()),
        (0, 1)
    );
    let info = store.info().unwrap();
    assert_eq!(&info.keyspace[..3], &[(1, 0), (2, 1), (1, 0)]);
    // Every operation follows the map: writes, scans, flushes, copies.
    put(&mut h, 0, b"new", b"in-logical-0");
    assert_eq!(
        sorted(scan_all(&mut h, 0, None, 10, None).0),
        vec![b"a".to_vec(), b"new".to_vec()]
    );
    assert!(h.copy(1, b"a", 2, b"copied", false).unwrap());
    assert!(h.move_key(2, b"c", 0).unwrap());
    assert!(h.rename(1, b"a", b"renamed", false).unwrap());
    assert_eq!(h.get(1, b"renamed").unwrap(), Some(b"zero".to_vec()));
    assert!(h.random_key(1).unwrap().is_some());
    // Swapping with itself is a no-op; out of range is BadDb.
    h.swap_db(3, 3).unwrap();
    assert!(matches!(h.swap_db(0, 16), Err(Error::BadDb)));
    // Another handle (and a later attach) sees the same map.
    let mut h2 = store.handle().unwrap();
    assert_eq!(h2.get(0, b"c").unwrap(), Some(b"two".to_vec()));
    h2.swap_db(1, 2).unwrap();
    assert_eq!(h.get(2, b"renamed").unwrap(), Some(b"zero".to_vec()));
    assert_eq!(h.get(1, b"copied").unwrap(), Some(b"zero".to_vec()));
    h.flushdb(2).unwrap();
    assert_eq!(h.dbsize(2).unwrap(), 0);
    assert_eq!(h.dbsize(1).unwrap(), 1);
    assert_eq!(h.dbsize(0).unwrap(), 3);
    drop((h, h2));
    store.check().unwrap();
    drop(store);
    let again = seg.open(8 * MB);
    let mut h = again.handle().unwrap();
    assert_eq!(h.get(1, b"copied").unwrap(), Some(b"zero".to_vec()));
    assert_eq!(h.get(0, b"a").unwrap(), Some(b"one".to_vec()));
    drop(h);
    again.check().unwrap();
}

#[test]
fn swap_db_twice_restores_and_counts_survive_many_swaps() {
    let seg = TempSegment::new("swapdb-many");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    for db in 0..NUM_DBS as u8 {
        for i in 0..=db as u32 {
            put(&mut h, db, format!("k{i}").as_bytes(), &[db]);
        }
    }
    // A fixed pseudo-random sequence of swaps, tracked by a model permutation.
    let mut model: Vec<u8> = (0..NUM_DBS as u8).collect();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..200 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (a, b) = ((x % 16) as u8, ((x >> 8) % 16) as u8);
        h.swap_db(a, b).unwrap();
        model.swap(a as usize, b as usize);
    }
    for db in 0..NUM_DBS as u8 {
        let orig = model[db as usize];
        assert_eq!(h.dbsize(db).unwrap(), orig as u64 + 1);
        assert_eq!(h.get(db, b"k0").unwrap(), Some(vec![orig]));
    }
    drop(h);
    store.check().unwrap();
}

#[test]
fn swap_db_races_with_writers_and_readers_without_losing_a_write() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let seg = TempSegment::new("swapdb-race");
    let store = seg.open(16 * MB);
    let stop = Arc::new(AtomicBool::new(false));
    // The writers start once the swapper has swapped: on a busy machine they
    // could otherwise finish before it runs at all.
    let swapping = Arc::new(AtomicBool::new(false));
    // Before any thread starts: the reader asserts the marker is there.
    {
        let mut h = store.handle().unwrap();
        put(&mut h, 7, b"marker", b"seven");
    }
    let writers: Vec<_> = (0..3u8)
        .map(|t| {
            let store = store.clone();
            let swapping = swapping.clone();
            std::thread::spawn(move || {
                let mut h = store.handle().unwrap();
                while !swapping.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                let key = format!("counter{t}");
                let mut done = 0u64;
                for i in 0..3_000u64 {
                    let db = (i % 2) as u8;
                    h.incr_by(db, key.as_bytes(), 1).unwrap();
                    let scratch = format!("s{t}-{}", i % 50);
                    h.set(db, scratch.as_bytes(), b"x", &SetOptions::default())
                        .unwrap();
                    if i % 3 == 0 {
                        h.delete(1 - db, scratch.as_bytes()).unwrap();
                    }
                    if i % 7 == 0 {
                        h.copy(db, key.as_bytes(), 5, key.as_bytes(), true).unwrap();
                    }
                    done += 1;
                }
                done
            })
        })
        .collect();
    let reader = {
        let store = store.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut h = store.handle().unwrap();
            while !stop.load(Ordering::Relaxed) {
                // Logical db 7 is never swapped: it always holds its marker.
                assert_eq!(h.get(7, b"marker").unwrap(), Some(b"seven".to_vec()));
                let _ = h.scan(0, 0, None, 10, None).unwrap();
                let _ = h.dbsize(1).unwrap();
            }
        })
    };
    let swapper = {
        let store = store.clone();
        let stop = stop.clone();
        let swapping = swapping.clone();
        std::thread::spawn(move || {
            let mut h = store.handle().unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                h.swap_db(0, 1).unwrap();
                swapping.store(true, Ordering::Release);
                if n.is_multiple_of(5) {
                    h.swap_db(0, 6).unwrap();
                    h.swap_db(0, 6).unwrap();
                }
                n += 1;
                std::thread::yield_now();
            }
            n
        })
    };
    let total: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    reader.join().unwrap();
    assert!(swaps > 0);
    let mut h = store.handle().unwrap();
    let mut sum = 0;
    for t in 0..3 {
        let key = format!("counter{t}");
        // Writes between the two swaps with db 6 stay in (logical) db 6.
        for db in [0u8, 1, 6] {
            if let Some(v) = h.get(db, key.as_bytes()).unwrap() {
                sum += std::str::from_utf8(&v).unwrap().parse::<u64>().unwrap();
            }
        }
    }
    assert_eq!(sum, total, "every INCR landed in db 0, 1 or 6");
    drop(h);
    store.check().unwrap();
}

#[test]
fn peek_leaves_the_lru_clock_and_xx_lt_needs_an_expiry() {
    let seg = TempSegment::new("peek");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"k", b"12345");
    advance(&clock, 7_000);
    let mut v = Vec::new();
    let m = h.peek(0, b"k", 20, &mut v).unwrap().unwrap();
    assert_eq!(v, b"12345");
    assert_eq!(m.lru as u64, T0 / 1000);
    let m = h.peek(0, b"k", 2, &mut v).unwrap().unwrap();
    assert!(v.is_empty(), "longer than max_len: not copied");
    assert_eq!(m.lru as u64, T0 / 1000, "peek does not touch");
    assert!(h.exists(0, b"k").unwrap());
    let m = h.peek(0, b"k", 0, &mut v).unwrap().unwrap();
    assert_eq!(m.lru as u64, (T0 + 7_000) / 1000, "a read touches");
    assert_eq!(h.peek(0, b"missing", 20, &mut v).unwrap(), None);
    let at = (T0 + 60_000) as i64;
    use ExpireCondition::IfSomeAndLess;
    assert!(!h.expire_at(0, b"k", at, IfSomeAndLess).unwrap());
    assert!(h.expire_at(0, b"k", at, ExpireCondition::Always).unwrap());
    assert!(!h.expire_at(0, b"k", at + 1, IfSomeAndLess).unwrap());
    assert!(h.expire_at(0, b"k", at - 1, IfSomeAndLess).unwrap());
    assert_eq!(
        h.peek(0, b"k", 0, &mut v).unwrap().unwrap().expire_at_ms,
        Some(at as u64 - 1)
    );
    drop(h);
    store.check().unwrap();
}
