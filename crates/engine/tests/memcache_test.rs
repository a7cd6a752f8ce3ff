//! memcached semantics (engine::memcache) against memcached 1.6's rules,
//! and their meeting point with Redis commands on the same keys.

mod common;

use common::*;
use engine::memcache::{McArith, McDeleted, McError, McStore, McStored};

fn get(t: &mut TestEngine, key: &str) -> Option<(Vec<u8>, u32, u64)> {
    let mut value = Vec::new();
    t.engine
        .mc_get(key.as_bytes(), None, &mut value)
        .expect("get")
        .map(|item| (value, item.flags, item.cas))
}

fn set(t: &mut TestEngine, mode: McStore, key: &str, value: &str, flags: u32) -> McStored {
    t.engine
        .mc_store(mode, key.as_bytes(), value.as_bytes(), flags, 0, None)
        .expect("store")
}

#[test]
fn set_get_keeps_flags_and_gives_a_new_cas_per_write() {
    let mut t = TestEngine::new();
    let McStored::Stored { cas: c1 } = set(&mut t, McStore::Set, "k", "v1", u32::MAX) else {
        panic!("not stored")
    };
    let (v, flags, cas) = get(&mut t, "k").expect("hit");
    assert_eq!((v.as_slice(), flags, cas), (&b"v1"[..], u32::MAX, c1));
    let McStored::Stored { cas: c2 } = set(&mut t, McStore::Set, "k", "v2", 7) else {
        panic!("not stored")
    };
    assert!(c2 > c1);
    assert_eq!(get(&mut t, "k").map(|g| (g.1, g.2)), Some((7, c2)));
    assert_eq!(get(&mut t, "missing"), None);
}

#[test]
fn add_replace_append_prepend() {
    let mut t = TestEngine::new();
    assert_eq!(
        set(&mut t, McStore::Replace, "k", "x", 0),
        McStored::NotStored
    );
    assert_eq!(
        set(&mut t, McStore::Append, "k", "x", 0),
        McStored::NotStored
    );
    assert!(matches!(
        set(&mut t, McStore::Add, "k", "mid", 5),
        McStored::Stored { .. }
    ));
    assert_eq!(
        set(&mut t, McStore::Add, "k", "again", 0),
        McStored::NotStored
    );
    set(&mut t, McStore::Append, "k", "-end", 9);
    set(&mut t, McStore::Prepend, "k", "start-", 9);
    // append/prepend keep the item's flags.
    assert_eq!(
        get(&mut t, "k").map(|g| (g.0, g.1)),
        Some((b"start-mid-end".to_vec(), 5))
    );
    assert!(matches!(
        set(&mut t, McStore::Replace, "k", "new", 1),
        McStored::Stored { .. }
    ));
    assert_eq!(t.run(&["GET", "k"]), bulk("new"));
}

#[test]
fn cas_compares_the_version() {
    let mut t = TestEngine::new();
    let e = &mut t.engine;
    assert_eq!(
        e.mc_store(McStore::Set, b"k", b"v", 0, 0, Some(1)).unwrap(),
        McStored::NotFound
    );
    let McStored::Stored { cas } = e.mc_store(McStore::Set, b"k", b"v", 0, 0, None).unwrap() else {
        panic!()
    };
    assert_eq!(
        e.mc_store(McStore::Set, b"k", b"w", 0, 0, Some(cas + 1000))
            .unwrap(),
        McStored::Exists
    );
    let McStored::Stored { cas: next } = e
        .mc_store(McStore::Set, b"k", b"w", 3, 0, Some(cas))
        .unwrap()
    else {
        panic!()
    };
    assert_ne!(next, cas);
    // The old CAS value is spent.
    assert_eq!(
        e.mc_store(McStore::Set, b"k", b"x", 0, 0, Some(cas))
            .unwrap(),
        McStored::Exists
    );
    assert_eq!(e.mc_delete(b"k", Some(cas)).unwrap(), McDeleted::Exists);
    assert_eq!(e.mc_delete(b"k", Some(next)).unwrap(), McDeleted::Deleted);
    assert_eq!(e.mc_delete(b"k", None).unwrap(), McDeleted::NotFound);
    let stats = e.mc_stats("").unwrap();
    let stat = |n: &str| stats.iter().find(|(k, _)| k == n).unwrap().1.clone();
    assert_eq!(stat("cas_misses"), "1");
    assert_eq!(stat("cas_badval"), "2");
    assert_eq!(stat("cas_hits"), "1");
    assert_eq!(stat("delete_hits"), "1");
    assert_eq!(stat("delete_misses"), "1");
}

#[test]
fn incr_wraps_and_decr_stops_at_zero() {
    let mut t = TestEngine::new();
    let e = &mut t.engine;
    assert_eq!(
        e.mc_arith(b"n", true, 1, None, None, None).unwrap(),
        McArith::NotFound
    );
    e.mc_store(McStore::Set, b"n", b"18446744073709551614", 0, 0, None)
        .unwrap();
    let value = |r: McArith| match r {
        McArith::Value { value, .. } => value,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        value(e.mc_arith(b"n", true, 1, None, None, None).unwrap()),
        u64::MAX
    );
    assert_eq!(
        value(e.mc_arith(b"n", true, 2, None, None, None).unwrap()),
        1
    );
    assert_eq!(
        value(e.mc_arith(b"n", false, 5, None, None, None).unwrap()),
        0
    );
    e.mc_store(McStore::Set, b"s", b"abc", 0, 0, None).unwrap();
    assert_eq!(
        e.mc_arith(b"s", true, 1, None, None, None),
        Err(McError::NonNumeric)
    );
    // ma's auto-vivify.
    assert_eq!(
        value(
            e.mc_arith(b"v", true, 1, None, Some((40, 0)), None)
                .unwrap()
        ),
        40
    );
    assert_eq!(t.run(&["GET", "v"]), bulk("40"));
}

#[test]
fn exptime_relative_absolute_and_negative() {
    let mut t = TestEngine::new();
    let now_s = (t.now_ms() / 1000) as i64;
    t.engine
        .mc_store(McStore::Set, b"rel", b"v", 0, 100, None)
        .unwrap();
    t.engine
        .mc_store(McStore::Set, b"abs", b"v", 0, now_s + 100, None)
        .unwrap();
    t.engine
        .mc_store(McStore::Set, b"neg", b"v", 0, -1, None)
        .unwrap();
    assert_eq!(get(&mut t, "neg"), None);
    let ttl = |t: &mut TestEngine, k: &str| t.run(&["TTL", k]);
    assert_eq!(ttl(&mut t, "rel"), int(100));
    assert!(matches!(
        ttl(&mut t, "abs").as_str(),
        ":99\r\n" | ":100\r\n"
    ));
    t.advance_ms(101_000);
    assert_eq!(get(&mut t, "rel"), None);
    assert_eq!(get(&mut t, "abs"), None);
}

#[test]
fn touch_and_gat_change_the_time_to_live() {
    let mut t = TestEngine::new();
    assert_eq!(t.engine.mc_touch(b"k", 10).unwrap(), None);
    t.engine
        .mc_store(McStore::Set, b"k", b"v", 0, 0, None)
        .unwrap();
    let cas = get(&mut t, "k").unwrap().2;
    // A touch keeps the CAS value, as memcached's does.
    assert_eq!(
        t.engine.mc_touch(b"k", 10).unwrap().map(|i| i.cas),
        Some(cas)
    );
    assert_eq!(t.run(&["TTL", "k"]), int(10));
    assert!(matches!(
        t.engine
            .mc_store(McStore::Set, b"k", b"w", 0, 10, Some(cas)),
        Ok(McStored::Stored { .. })
    ));
    let mut value = Vec::new();
    let item = t.engine.mc_get(b"k", Some(0), &mut value).unwrap().unwrap();
    assert_eq!((value.as_slice(), item.expire_at_ms), (&b"w"[..], None));
    assert_eq!(t.run(&["TTL", "k"]), int(-1));
}

#[test]
fn redis_types_other_than_strings_are_misses() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "a"]);
    assert_eq!(get(&mut t, "l"), None);
    assert_eq!(t.engine.mc_touch(b"l", 5).unwrap(), None);
    assert_eq!(set(&mut t, McStore::Add, "l", "x", 0), McStored::NotStored);
    assert_eq!(
        set(&mut t, McStore::Append, "l", "x", 0),
        McStored::NotStored
    );
    // set replaces any type, as Redis's SET does.
    set(&mut t, McStore::Set, "l", "x", 0);
    assert_eq!(t.run(&["TYPE", "l"]), "+string\r\n");
}

#[test]
fn too_large_items_are_refused_and_set_drops_the_old_one() {
    let mut t = TestEngine::new();
    let max = t.engine.mc_item_size_max() as usize;
    set(&mut t, McStore::Set, "k", "old", 0);
    let big = vec![b'x'; max + 1];
    assert_eq!(
        t.engine.mc_store(McStore::Add, b"k", &big, 0, 0, None),
        Err(McError::TooLarge)
    );
    assert!(get(&mut t, "k").is_some());
    assert_eq!(
        t.engine.mc_store(McStore::Set, b"k", &big, 0, 0, None),
        Err(McError::TooLarge)
    );
    assert_eq!(get(&mut t, "k"), None);
    set(&mut t, McStore::Set, "k", "x", 0);
    // An item that would grow past the limit: memcached cannot allocate it.
    assert_eq!(
        t.engine
            .mc_store(McStore::Append, b"k", &big[..max], 0, 0, None),
        Ok(McStored::NotStored)
    );
    assert_eq!(get(&mut t, "k").map(|g| g.0), Some(b"x".to_vec()));
}

#[test]
fn flush_all_now_and_later() {
    let mut t = TestEngine::new();
    set(&mut t, McStore::Set, "a", "1", 0);
    t.engine.mc_flush_all(0).unwrap();
    assert_eq!(get(&mut t, "a"), None);
    set(&mut t, McStore::Set, "b", "1", 0);
    t.engine.mc_flush_all(2).unwrap();
    assert!(get(&mut t, "b").is_some());
    t.advance_ms(2_001);
    // The due flush runs before the next batch of requests, on any worker.
    t.engine.begin_batch(&mut t.session);
    t.engine.end_batch();
    assert_eq!(get(&mut t, "b"), None);
    // Written after the deadline: stays.
    set(&mut t, McStore::Set, "c", "1", 0);
    assert!(get(&mut t, "c").is_some());
}

#[test]
fn stats_groups() {
    let mut t = TestEngine::new();
    set(&mut t, McStore::Set, "a", "1", 0);
    get(&mut t, "a");
    get(&mut t, "b");
    let general = t.engine.mc_stats("").unwrap();
    let stat = |n: &str| general.iter().find(|(k, _)| k == n).unwrap().1.clone();
    assert_eq!(stat("cmd_get"), "2");
    assert_eq!(stat("get_hits"), "1");
    assert_eq!(stat("get_misses"), "1");
    assert_eq!(stat("cmd_set"), "1");
    assert_eq!(stat("curr_items"), "1");
    for group in ["items", "slabs", "settings"] {
        assert!(t.engine.mc_stats(group).is_some_and(|s| !s.is_empty()));
    }
    assert_eq!(t.engine.mc_stats("nonsense"), None);
}
