//! Memory limits and eviction policies on small segments: what a Redis user
//! expects of `maxmemory` and `maxmemory-policy`.

mod common;

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use common::{all_keys, expiring_at, put, stat, TempSegment};
use store::*;

const MB: u64 = 1 << 20;
const T0: u64 = 1_700_000_000_000;
const VAL: usize = 1_000;

/// The value written under key number `i`: recognisable and `len` bytes long.
fn val(i: u64, len: usize) -> Vec<u8> {
    let head = format!("value-{i}-");
    head.bytes()
        .chain(std::iter::repeat(b'.'))
        .take(len)
        .collect()
}

fn key(prefix: &str, i: u64) -> Vec<u8> {
    format!("{prefix}:{i}").into_bytes()
}

/// Rough number of VAL-sized keys the arena holds.
fn capacity_keys(store: &Store) -> u64 {
    store.arena_stats().unwrap().total_bytes / VAL as u64
}

/// Every surviving key of `db` holds the value it was written with.
fn assert_values_intact(h: &mut Handle, db: u8) -> Vec<Vec<u8>> {
    let keys = all_keys(h, db);
    for k in &keys {
        let s = std::str::from_utf8(k).unwrap();
        let i: u64 = s.rsplit(':').next().unwrap().parse().unwrap();
        let v = h
            .get(db, k)
            .unwrap()
            .unwrap_or_else(|| panic!("{s} vanished"));
        assert_eq!(v, val(i, VAL), "{s}");
    }
    keys
}

#[test]
fn policy_names_round_trip() {
    let seg = TempSegment::new("policy-names");
    let store = seg.open(2 * MB);
    assert_eq!(store.eviction_policy().unwrap(), EvictionPolicy::NoEviction);
    assert_eq!(store.info().unwrap().policy, EvictionPolicy::NoEviction);
    for p in [
        EvictionPolicy::NoEviction,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::VolatileLru,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::VolatileTtl,
        EvictionPolicy::AllKeysLfu,
        EvictionPolicy::VolatileLfu,
        EvictionPolicy::VolatileRandom,
    ] {
        assert_eq!(EvictionPolicy::from_name(p.name()), Some(p));
        assert_eq!(EvictionPolicy::from_name(&p.name().to_uppercase()), Some(p));
        store.set_eviction_policy(p).unwrap();
        assert_eq!(store.eviction_policy().unwrap(), p);
        assert_eq!(store.info().unwrap().policy, p);
    }
    assert_eq!(EvictionPolicy::from_name("allkeys-lfu-ish"), None);
    assert_eq!(EvictionPolicy::from_name("volatile"), None);
    assert_eq!(EvictionPolicy::from_name(""), None);
    // Every process attached to the segment sees the policy.
    store
        .set_eviction_policy(EvictionPolicy::VolatileTtl)
        .unwrap();
    let other = seg.open(2 * MB);
    assert_eq!(
        other.eviction_policy().unwrap(),
        EvictionPolicy::VolatileTtl
    );
}

#[test]
fn noeviction_refuses_writes_when_full_and_loses_nothing() {
    let seg = TempSegment::new("noeviction");
    let store = seg.open(2 * MB);
    let mut h = store.handle().unwrap();
    let mut n = 0u64;
    let err = loop {
        match h.set(0, &key("k", n), &val(n, VAL), &SetOptions::default()) {
            Ok(r) => assert!(r.written),
            Err(e) => break e,
        }
        n += 1;
        assert!(n < 100_000, "a 2 MB segment never filled up");
    };
    assert!(matches!(err, Error::OutOfMemory), "{err:?}");
    assert!(n > 100, "only {n} keys fit");
    // The failed key was not created; every written key is intact.
    assert!(!h.exists(0, &key("k", n)).unwrap());
    assert_eq!(h.dbsize(0).unwrap(), n);
    for i in 0..n {
        assert_eq!(h.get(0, &key("k", i)).unwrap(), Some(val(i, VAL)), "k:{i}");
    }
    assert_eq!(stat(&store, "evicted_keys"), 0);
    // Growing an existing key fails too, and leaves its old value.
    let r = h.set(
        0,
        &key("k", 0),
        &vec![b'x'; 200_000],
        &SetOptions::default(),
    );
    assert!(matches!(r, Err(Error::OutOfMemory)), "{r:?}");
    assert_eq!(h.get(0, &key("k", 0)).unwrap(), Some(val(0, VAL)));
    let r = h.append(0, &key("k", 1), &vec![b'x'; 200_000]);
    assert!(matches!(r, Err(Error::OutOfMemory)), "{r:?}");
    assert_eq!(h.get(0, &key("k", 1)).unwrap(), Some(val(1, VAL)));
    let r = h.set_range(0, &key("k", 2), 300_000, b"x");
    assert!(matches!(r, Err(Error::OutOfMemory)), "{r:?}");
    assert_eq!(h.get(0, &key("k", 2)).unwrap(), Some(val(2, VAL)));
    let r = h.rename(0, &key("k", 3), &key("k", 4), false);
    if let Err(e) = &r {
        assert!(matches!(e, Error::OutOfMemory), "{e:?}");
        assert_eq!(h.get(0, &key("k", 3)).unwrap(), Some(val(3, VAL)));
        assert_eq!(h.get(0, &key("k", 4)).unwrap(), Some(val(4, VAL)));
    }
    drop(h);
    store.check().unwrap();
    // Deleting makes room again.
    let mut h = store.handle().unwrap();
    for i in 10..20 {
        assert!(h.delete(0, &key("k", i)).unwrap());
    }
    put(&mut h, 0, &key("k", n), &val(n, VAL));
    assert_eq!(h.get(0, &key("k", n)).unwrap(), Some(val(n, VAL)));
    drop(h);
    store.check().unwrap();
}

/// Under an allkeys policy, 5x the capacity written: every write succeeds.
fn allkeys_policy_keeps_writing(policy: EvictionPolicy, tag: &str) {
    let seg = TempSegment::new(tag);
    let store = seg.open(2 * MB);
    store.set_eviction_policy(policy).unwrap();
    let cap = capacity_keys(&store);
    let total = cap * 5;
    let mut h = store.handle().unwrap();
    for i in 0..total {
        // Spread over a few dbs: eviction works across the whole segment.
        let db = (i % 3) as u8;
        let r = h.set(db, &key("k", i), &val(i, VAL), &SetOptions::default());
        assert!(r.is_ok(), "{tag}: write {i} of {total} failed: {r:?}");
        // The key just written is there.
        assert_eq!(h.get(db, &key("k", i)).unwrap(), Some(val(i, VAL)));
    }
    let size: u64 = (0..3).map(|db| h.dbsize(db).unwrap()).sum();
    let evicted = stat(&store, "evicted_keys");
    assert!(size <= cap, "{tag}: {size} keys in room for {cap}");
    assert!(size > cap / 4, "{tag}: only {size} keys left");
    assert_eq!(size + evicted, total, "{tag}: keys lost without eviction");
    let mut survivors = 0;
    for db in 0..3 {
        survivors += assert_values_intact(&mut h, db).len() as u64;
    }
    assert_eq!(survivors, size);
    drop(h);
    let report = store.check().unwrap();
    assert_eq!(report.keys, size);
}

#[test]
fn allkeys_lru_keeps_writes_succeeding() {
    allkeys_policy_keeps_writing(EvictionPolicy::AllKeysLru, "allkeys-lru");
}

#[test]
fn allkeys_random_keeps_writes_succeeding() {
    allkeys_policy_keeps_writing(EvictionPolicy::AllKeysRandom, "allkeys-random");
}

#[test]
fn allkeys_lfu_keeps_writes_succeeding() {
    allkeys_policy_keeps_writing(EvictionPolicy::AllKeysLfu, "allkeys-lfu");
}

#[test]
fn evicted_keys_stat_counts_only_evictions() {
    let seg = TempSegment::new("evicted-stat");
    let (store, clock) = seg.open_with_clock(2 * MB, T0);
    store
        .set_eviction_policy(EvictionPolicy::AllKeysRandom)
        .unwrap();
    let mut h = store.handle().unwrap();
    // Deletes and expiry are not evictions.
    put(&mut h, 0, b"d", b"v");
    h.delete(0, b"d").unwrap();
    h.set(0, b"e", b"v", &expiring_at(T0 + 1)).unwrap();
    // As Redis: alive at exactly its expiry time, gone one ms later.
    clock.store(T0 + 2, Ordering::Relaxed);
    assert_eq!(h.get(0, b"e").unwrap(), None);
    assert_eq!(stat(&store, "evicted_keys"), 0);
    assert_eq!(stat(&store, "expired_keys"), 1);
    let cap = capacity_keys(&store);
    let mut prev = 0;
    for i in 0..cap * 3 {
        h.set(0, &key("k", i), &val(i, VAL), &SetOptions::default())
            .unwrap();
        let now = stat(&store, "evicted_keys");
        assert!(now >= prev, "evicted_keys went backwards");
        prev = now;
    }
    assert!(
        prev > cap,
        "evicted only {prev} keys while writing 3x capacity"
    );
    assert_eq!(h.dbsize(0).unwrap() + prev, cap * 3);
    drop(h);
    store.check().unwrap();
}

/// Under a volatile policy only keys with a TTL go; when none is left, writes
/// fail with OutOfMemory.
fn volatile_policy_spares_persistent_keys(policy: EvictionPolicy, tag: &str) {
    let seg = TempSegment::new(tag);
    let (store, _clock) = seg.open_with_clock(2 * MB, T0);
    store.set_eviction_policy(policy).unwrap();
    let cap = capacity_keys(&store);
    let mut h = store.handle().unwrap();
    let persistent = cap / 5;
    for i in 0..persistent {
        put(&mut h, 0, &key("p", i), &val(i, VAL));
    }
    // Far more keys with a TTL than fit: all writes succeed.
    let volatile = cap * 3;
    for i in 0..volatile {
        let at = T0 + 3_600_000 + i * 1_000;
        let r = h.set(1, &key("v", i), &val(i, VAL), &expiring_at(at));
        assert!(r.is_ok(), "{tag}: volatile write {i} failed: {r:?}");
    }
    let evicted = stat(&store, "evicted_keys");
    assert!(evicted > 0, "{tag}: nothing evicted");
    assert_eq!(h.dbsize(1).unwrap() + evicted, volatile);
    assert_eq!(
        h.dbsize(0).unwrap(),
        persistent,
        "{tag}: a persistent key was evicted"
    );
    for i in 0..persistent {
        assert_eq!(h.get(0, &key("p", i)).unwrap(), Some(val(i, VAL)), "p:{i}");
    }
    // Now persistent writes push the volatile keys out, then fail.
    let mut n = 0u64;
    let err = loop {
        let i = persistent + n;
        match h.set(0, &key("p", i), &val(i, VAL), &SetOptions::default()) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
        assert!(n < cap * 2, "{tag}: persistent writes never failed");
    };
    assert!(matches!(err, Error::OutOfMemory), "{tag}: {err:?}");
    assert_eq!(h.expires_count(1).unwrap(), 0, "{tag}: volatile keys left");
    assert_eq!(h.dbsize(1).unwrap(), 0);
    assert_eq!(h.dbsize(0).unwrap(), persistent + n);
    assert_eq!(stat(&store, "evicted_keys"), volatile);
    let keys = assert_values_intact(&mut h, 0);
    assert_eq!(keys.len() as u64, persistent + n);
    drop(h);
    store.check().unwrap();
}

#[test]
fn volatile_lru_evicts_only_keys_with_a_ttl() {
    volatile_policy_spares_persistent_keys(EvictionPolicy::VolatileLru, "volatile-lru");
}

#[test]
fn volatile_ttl_evicts_only_keys_with_a_ttl() {
    volatile_policy_spares_persistent_keys(EvictionPolicy::VolatileTtl, "volatile-ttl");
}

#[test]
fn volatile_random_evicts_only_keys_with_a_ttl() {
    volatile_policy_spares_persistent_keys(EvictionPolicy::VolatileRandom, "volatile-random");
}

#[test]
fn volatile_lfu_evicts_only_keys_with_a_ttl() {
    volatile_policy_spares_persistent_keys(EvictionPolicy::VolatileLfu, "volatile-lfu");
}

#[test]
fn volatile_policy_with_no_volatile_keys_is_out_of_memory() {
    for policy in [
        EvictionPolicy::VolatileLru,
        EvictionPolicy::VolatileTtl,
        EvictionPolicy::VolatileRandom,
        EvictionPolicy::VolatileLfu,
    ] {
        let seg = TempSegment::new("volatile-none");
        let store = seg.open(2 * MB);
        store.set_eviction_policy(policy).unwrap();
        let mut h = store.handle().unwrap();
        let mut n = 0u64;
        let err = loop {
            match h.set(0, &key("k", n), &val(n, VAL), &SetOptions::default()) {
                Ok(_) => n += 1,
                Err(e) => break e,
            }
            assert!(n < 100_000);
        };
        assert!(matches!(err, Error::OutOfMemory), "{policy:?}: {err:?}");
        assert_eq!(h.dbsize(0).unwrap(), n);
        assert_eq!(stat(&store, "evicted_keys"), 0);
        drop(h);
        store.check().unwrap();
    }
}

#[test]
fn volatile_ttl_evicts_the_soonest_expiring_first() {
    let seg = TempSegment::new("volatile-ttl-order");
    let (store, _clock) = seg.open_with_clock(2 * MB, T0);
    store
        .set_eviction_policy(EvictionPolicy::VolatileTtl)
        .unwrap();
    store.set_eviction_samples(16).unwrap();
    let cap = capacity_keys(&store);
    let group = cap / 4;
    let mut h = store.handle().unwrap();
    for i in 0..group {
        h.set(
            0,
            &key("near", i),
            &val(i, VAL),
            &expiring_at(T0 + 60_000 + i),
        )
        .unwrap();
        h.set(
            0,
            &key("far", i),
            &val(i, VAL),
            &expiring_at(T0 + 86_400_000 + i),
        )
        .unwrap();
    }
    // Persistent writes until about one group had to go.
    fill_until_evicted(&store, &mut h, "p", group * 3 / 4, cap * 2);
    let near = surviving(&mut h, "near", group);
    let far = surviving(&mut h, "far", group);
    assert!(
        far * 10 >= group * 8,
        "only {far} of {group} far keys survived ({near} near ones did)"
    );
    assert!(near < far, "near {near} vs far {far}");
    drop(h);
    store.check().unwrap();
}

#[test]
fn allkeys_lru_prefers_keys_not_read_recently() {
    let seg = TempSegment::new("lru-order");
    let (store, clock) = seg.open_with_clock(2 * MB, T0);
    store
        .set_eviction_policy(EvictionPolicy::AllKeysLru)
        .unwrap();
    store.set_eviction_samples(16).unwrap();
    let cap = capacity_keys(&store);
    let group = cap / 4;
    let mut h = store.handle().unwrap();
    for i in 0..group {
        put(&mut h, 0, &key("a", i), &val(i, VAL));
        put(&mut h, 0, &key("b", i), &val(i, VAL));
    }
    // An hour later, group A is read; B is not.
    clock.fetch_add(3_600_000, Ordering::Relaxed);
    for i in 0..group {
        assert!(h.get(0, &key("a", i)).unwrap().is_some());
    }
    clock.fetch_add(10_000, Ordering::Relaxed);
    // New writes until about 3/4 of a group was evicted.
    fill_until_evicted(&store, &mut h, "n", group * 3 / 4, cap * 2);
    let a = surviving(&mut h, "a", group);
    let b = surviving(&mut h, "b", group);
    assert!(
        a * 10 >= group * 8,
        "only {a} of {group} recently read keys survived ({b} unread ones did)"
    );
    assert!(b < a, "unread {b} vs read {a}");
    drop(h);
    store.check().unwrap();
}

#[test]
fn allkeys_lfu_prefers_keys_read_often() {
    let seg = TempSegment::new("lfu-order");
    let (store, clock) = seg.open_with_clock(2 * MB, T0);
    store
        .set_eviction_policy(EvictionPolicy::AllKeysLfu)
        .unwrap();
    store.set_eviction_samples(16).unwrap();
    let cap = capacity_keys(&store);
    let group = cap / 4;
    let mut h = store.handle().unwrap();
    for i in 0..group {
        put(&mut h, 0, &key("a", i), &val(i, VAL));
        put(&mut h, 0, &key("b", i), &val(i, VAL));
    }
    // Ten idle minutes decay every counter to 0. Then, within one second
    // (recency cannot tell them apart), A is read 30 times (a counter of
    // about 8) and B once (1). The keys written next start at 5: B goes first.
    clock.fetch_add(10 * 60_000, Ordering::Relaxed);
    for _ in 0..30 {
        for i in 0..group {
            assert!(h.get(0, &key("a", i)).unwrap().is_some());
        }
    }
    for i in 0..group {
        assert!(h.get(0, &key("b", i)).unwrap().is_some());
    }
    fill_until_evicted(&store, &mut h, "n", group * 3 / 4, cap * 2);
    let a = surviving(&mut h, "a", group);
    let b = surviving(&mut h, "b", group);
    assert!(
        a * 10 >= group * 9,
        "only {a} of {group} often read keys survived ({b} rarely read ones did)"
    );
    assert!(b * 2 < a, "rarely read {b} vs often read {a}");
    drop(h);
    store.check().unwrap();
}

#[test]
fn volatile_lfu_counters_decay_with_lfu_decay_time() {
    let seg = TempSegment::new("lfu-decay");
    let (store, clock) = seg.open_with_clock(2 * MB, T0);
    store
        .set_eviction_policy(EvictionPolicy::VolatileLfu)
        .unwrap();
    store.set_eviction_samples(16).unwrap();
    let cap = capacity_keys(&store);
    let group = cap / 4;
    let mut h = store.handle().unwrap();
    let ttl = expiring_at(T0 + 86_400_000);
    for i in 0..group {
        h.set(0, &key("old", i), &val(i, VAL), &ttl).unwrap();
        h.set(0, &key("new", i), &val(i, VAL), &ttl).unwrap();
    }
    // lfu-log-factor 0 makes every read count: the counters are exact.
    store.set_lfu_log_factor(0).unwrap();
    // The old favourites were read a lot (counter 25), half an hour ago...
    for _ in 0..20 {
        for i in 0..group {
            assert!(h.get(0, &key("old", i)).unwrap().is_some());
        }
    }
    clock.fetch_add(30 * 60_000, Ordering::Relaxed);
    // ...the new ones a little, now: their counters (decayed to 0, then 3)
    // outrank the old ones' (25 decayed by one a minute to 0).
    for _ in 0..3 {
        for i in 0..group {
            assert!(h.get(0, &key("new", i)).unwrap().is_some());
        }
    }
    let mut buf = Vec::new();
    let now = clock.load(Ordering::Relaxed);
    let old = h.peek(0, &key("old", 0), 0, &mut buf).unwrap().unwrap();
    assert_eq!(old.freq(now, store.lfu_decay_time().unwrap()), 0);
    // With decay off, the old counters count again.
    store.set_lfu_decay_time(0).unwrap();
    assert_eq!(old.freq(now, store.lfu_decay_time().unwrap()), 25);
    store.set_lfu_decay_time(1).unwrap();
    // Keys with a TTL written until about half a group was evicted.
    let mut i = 0;
    while stat(&store, "evicted_keys") < group / 2 {
        h.set(1, &key("n", i), &val(i, VAL), &ttl).unwrap();
        i += 1;
        assert!(i < cap * 2, "no eviction happened");
    }
    let old = surviving(&mut h, "old", group);
    let new = surviving(&mut h, "new", group);
    assert!(
        new * 10 >= group * 9,
        "only {new} of {group} recently read keys survived ({old} decayed ones did)"
    );
    // Sampling runs of buckets, not single keys: once the decayed keys left
    // are few, a run may hold none. Most evictions still hit them.
    let gone = 2 * group - old - new;
    assert!(
        (group - old) * 10 >= gone * 8,
        "{} of {gone} evicted keys were decayed ones",
        group - old
    );
    drop(h);
    store.check().unwrap();
}

#[test]
fn lfu_counter_counts_reads_but_not_peeks() {
    let seg = TempSegment::new("lfu-touch");
    // On a minute boundary, so that the minute clock moves when we say.
    let (store, clock) = seg.open_with_clock(2 * MB, T0 - T0 % 60_000);
    assert_eq!(store.lfu_log_factor().unwrap(), DEFAULT_LFU_LOG_FACTOR);
    assert_eq!(store.lfu_decay_time().unwrap(), DEFAULT_LFU_DECAY_TIME);
    let mut h = store.handle().unwrap();
    let mut buf = Vec::new();
    let freq = |h: &mut Handle, k: &[u8]| {
        let now = clock.load(Ordering::Relaxed);
        let m = h.peek(0, k, 0, &mut Vec::new()).unwrap().unwrap();
        m.freq(now, store.lfu_decay_time().unwrap())
    };
    put(&mut h, 0, b"k", b"v");
    assert_eq!(freq(&mut h, b"k"), LFU_INIT_VAL);
    // Under an LRU policy reads do not count.
    store
        .set_eviction_policy(EvictionPolicy::AllKeysLru)
        .unwrap();
    h.get(0, b"k").unwrap();
    assert_eq!(freq(&mut h, b"k"), LFU_INIT_VAL);
    store
        .set_eviction_policy(EvictionPolicy::AllKeysLfu)
        .unwrap();
    // Up to the initial value every read counts; peeks, TTL and TYPE never.
    h.get(0, b"k").unwrap();
    assert_eq!(freq(&mut h, b"k"), LFU_INIT_VAL + 1);
    for _ in 0..10 {
        h.peek(0, b"k", 100, &mut buf).unwrap();
        h.ttl(0, b"k").unwrap();
        h.key_type(0, b"k").unwrap();
    }
    assert_eq!(freq(&mut h, b"k"), LFU_INIT_VAL + 1);
    // lfu-log-factor 0: every access counts.
    store.set_lfu_log_factor(0).unwrap();
    assert_eq!(store.lfu_log_factor().unwrap(), 0);
    for _ in 0..20 {
        h.get(0, b"k").unwrap();
    }
    assert_eq!(freq(&mut h, b"k"), LFU_INIT_VAL + 21);
    // A new value keeps the key's counter and counts as an access (Redis's
    // overwrite); RENAME keeps it; COPY makes a new key.
    put(&mut h, 0, b"k", b"w");
    assert_eq!(freq(&mut h, b"k"), LFU_INIT_VAL + 22);
    assert!(h.rename(0, b"k", b"r", false).unwrap());
    assert_eq!(freq(&mut h, b"r"), LFU_INIT_VAL + 22);
    assert!(h.copy(0, b"r", 0, b"c", false).unwrap());
    assert_eq!(freq(&mut h, b"c"), LFU_INIT_VAL);
    // Idle minutes decay it; the next access restamps the minute.
    clock.fetch_add(7 * 60_000, Ordering::Relaxed);
    assert_eq!(freq(&mut h, b"r"), LFU_INIT_VAL + 15);
    h.get(0, b"r").unwrap();
    assert_eq!(freq(&mut h, b"r"), LFU_INIT_VAL + 16);
    clock.fetch_add(59_000, Ordering::Relaxed);
    assert_eq!(freq(&mut h, b"r"), LFU_INIT_VAL + 16);
    // Idle time stays tracked under LFU too.
    let now = clock.load(Ordering::Relaxed);
    let m = h.peek(0, b"r", 0, &mut buf).unwrap().unwrap();
    assert_eq!(m.idle_seconds(now), 59);
    // Settings are shared by every process attached.
    let other = seg.open(2 * MB);
    assert_eq!(other.lfu_log_factor().unwrap(), 0);
    other.set_lfu_decay_time(i32::MAX as u32).unwrap();
    assert_eq!(store.lfu_decay_time().unwrap(), i32::MAX as u32);
    drop(h);
    store.check().unwrap();
}

#[test]
fn maxmemory_limits_the_arena_below_its_size() {
    let seg = TempSegment::new("maxmemory");
    let store = seg.open(8 * MB);
    let total = store.arena_stats().unwrap().total_bytes;
    let limit = 512 * 1024;
    assert!(total > 4 * limit);
    store.set_maxmemory(limit).unwrap();
    assert_eq!(store.info().unwrap().maxmemory, limit);
    let mut h = store.handle().unwrap();
    // noeviction: writes fail once the limit is reached, well before the arena
    // is full.
    let mut n = 0u64;
    let err = loop {
        match h.set(0, &key("k", n), &val(n, VAL), &SetOptions::default()) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 100_000);
    };
    assert!(matches!(err, Error::OutOfMemory), "{err:?}");
    let used = store.arena_stats().unwrap().used_bytes;
    assert!(used <= limit, "{used} bytes used over a limit of {limit}");
    assert!(n * VAL as u64 <= limit);
    assert!(
        n * VAL as u64 > limit / 2,
        "only {n} keys under {limit} bytes"
    );
    // An evicting policy keeps writing within the limit.
    store
        .set_eviction_policy(EvictionPolicy::AllKeysRandom)
        .unwrap();
    for i in n..n + 2_000 {
        h.set(0, &key("k", i), &val(i, VAL), &SetOptions::default())
            .unwrap();
        let used = store.arena_stats().unwrap().used_bytes;
        assert!(used <= limit, "{used} bytes used over a limit of {limit}");
    }
    assert!(stat(&store, "evicted_keys") >= 2_000 - 50);
    let size = h.dbsize(0).unwrap();
    assert!(size <= limit / VAL as u64);
    // Raising the limit (0 = the whole arena) makes room without evicting.
    store
        .set_eviction_policy(EvictionPolicy::NoEviction)
        .unwrap();
    store.set_maxmemory(0).unwrap();
    for i in 0..2_000 {
        put(&mut h, 1, &key("more", i), &val(i, VAL));
    }
    assert!(store.arena_stats().unwrap().used_bytes > limit);
    assert_eq!(h.dbsize(0).unwrap(), size);
    assert_values_intact(&mut h, 0);
    drop(h);
    store.check().unwrap();
}

#[test]
fn lowering_maxmemory_evicts_on_the_next_writes() {
    let seg = TempSegment::new("maxmemory-lower");
    let store = seg.open(8 * MB);
    store
        .set_eviction_policy(EvictionPolicy::AllKeysLru)
        .unwrap();
    let mut h = store.handle().unwrap();
    for i in 0..3_000 {
        put(&mut h, 0, &key("k", i), &val(i, VAL));
    }
    let limit = MB;
    store.set_maxmemory(limit).unwrap();
    put(&mut h, 0, &key("k", 3_000), &val(3_000, VAL));
    assert!(store.arena_stats().unwrap().used_bytes <= limit);
    let size = h.dbsize(0).unwrap();
    assert!(size <= limit / VAL as u64, "{size} keys left under 1 MB");
    assert_eq!(size + stat(&store, "evicted_keys"), 3_001);
    assert_eq!(h.get(0, &key("k", 3_000)).unwrap(), Some(val(3_000, VAL)));
    let keys: HashSet<_> = assert_values_intact(&mut h, 0).into_iter().collect();
    assert_eq!(keys.len() as u64, size);
    drop(h);
    store.check().unwrap();
}

/// A full 2 MB segment of persistent keys plus one key with a TTL, "only",
/// under volatile-lru: "only" is the sole eviction candidate.
fn full_but_one_volatile_key(seg: &TempSegment) -> (Store, Handle) {
    let (store, _clock) = seg.open_with_clock(2 * MB, T0);
    let mut h = store.handle().unwrap();
    h.set(0, b"only", &val(0, VAL), &expiring_at(T0 + 3_600_000))
        .unwrap();
    // Fill under noeviction, so the key with a TTL stays.
    let mut n = 0u64;
    while h
        .set(0, &key("p", n), &val(n, VAL), &SetOptions::default())
        .is_ok()
    {
        n += 1;
        assert!(n < 100_000);
    }
    assert!(h.exists(0, b"only").unwrap());
    store
        .set_eviction_policy(EvictionPolicy::VolatileLru)
        .unwrap();
    (store, h)
}

#[test]
fn set_of_the_only_volatile_key_when_full_evicts_it() {
    // Redis evicts before running the command, so the SET goes through.
    let seg = TempSegment::new("volatile-self-set");
    let (store, mut h) = full_but_one_volatile_key(&seg);
    // Same size as before: the block evicted is exactly the room needed.
    h.set(0, b"only", &val(1, VAL), &SetOptions::default())
        .unwrap();
    assert_eq!(h.get(0, b"only").unwrap(), Some(val(1, VAL)));
    assert_eq!(h.ttl(0, b"only").unwrap(), Ttl::Persistent);
    assert_eq!(stat(&store, "evicted_keys"), 1);
    drop(h);
    store.check().unwrap();
}

#[test]
fn append_to_the_only_volatile_key_when_full_answers_promptly() {
    // APPEND needs a bigger block while it holds the key's bucket, and the
    // only candidate for eviction is that key. Redis would evict it first;
    // the store must at least answer (OutOfMemory) rather than spin.
    let seg = TempSegment::new("volatile-self-append");
    let (store, mut h) = full_but_one_volatile_key(&seg);
    match h.append(0, b"only", &[b'!'; 4 * VAL]) {
        Ok(n) => assert_eq!(n, 5 * VAL as u64),
        Err(e) => {
            assert!(matches!(e, Error::OutOfMemory), "{e:?}");
            assert_eq!(h.get(0, b"only").unwrap(), Some(val(0, VAL)));
        }
    }
    drop(h);
    store.check().unwrap();
}

#[test]
fn append_to_a_big_value_succeeds_while_the_result_fits() {
    // A string of 42% of the arena plus 100 bytes fits in what is left
    // (58%); Redis appends them. (Twice the new length would not fit.)
    let seg = TempSegment::new("append-big");
    let store = seg.open(2 * MB);
    let total = store.arena_stats().unwrap().total_bytes;
    let big = vec![b'x'; (total * 42 / 100) as usize];
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"big", &big);
    let tail = [b'!'; 100];
    let r = h.append(0, b"big", &tail);
    assert_eq!(
        r.as_ref().ok(),
        Some(&(big.len() as u64 + 100)),
        "APPEND of 100 bytes: {r:?}"
    );
    let mut want = big.clone();
    want.extend_from_slice(&tail);
    assert_eq!(h.get(0, b"big").unwrap(), Some(want));
    drop(h);
    store.check().unwrap();
}

/// Writes fresh keys into db 1 until `evicted` keys have been evicted; fails
/// if that takes more than `limit` writes.
fn fill_until_evicted(store: &Store, h: &mut Handle, prefix: &str, evicted: u64, limit: u64) {
    let mut i = 0;
    while stat(store, "evicted_keys") < evicted {
        put(h, 1, &key(prefix, i), &val(i, VAL));
        i += 1;
        assert!(i < limit, "no eviction happened");
    }
}

/// How many of the keys `prefix0..prefix{n-1}` in db 0 still exist.
fn surviving(h: &mut Handle, prefix: &str, n: u64) -> u64 {
    (0..n)
        .filter(|i| h.exists(0, &key(prefix, *i)).unwrap())
        .count() as u64
}
