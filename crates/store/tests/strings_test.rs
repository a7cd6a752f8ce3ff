//! String and key operations through the embedded API, one behaviour per test.

mod common;

use common::{expiring_at, put, TempSegment};
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

const T0: u64 = 1_700_000_000_000;

fn cond(condition: SetCondition, get: bool) -> SetOptions {
    SetOptions {
        condition,
        get,
        ..SetOptions::default()
    }
}

fn list_value(h: &mut Handle, db: u8, key: &[u8], bytes: &[u8]) {
    h.write_value(db, key, ValueType::List, bytes, &SetOptions::default())
        .unwrap();
}

/// The raw bytes and type of a key of any type.
fn raw(h: &mut Handle, db: u8, key: &[u8]) -> Option<(ValueType, Vec<u8>)> {
    let mut out = Vec::new();
    h.get_into(db, key, &mut out)
        .unwrap()
        .map(|m| (m.vtype, out))
}

// ---------- SET options ----------

#[test]
fn set_nx_writes_only_when_absent() {
    let seg = TempSegment::new("set-nx");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    let nx = cond(SetCondition::IfAbsent, false);
    let r = h.set(0, b"k", b"first", &nx).unwrap();
    assert_eq!(written_old(r), (true, None));
    let r = h.set(0, b"k", b"second", &nx).unwrap();
    assert_eq!(written_old(r), (false, None));
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"first".to_vec()));
    // NX on a key holding another type also refuses (the key exists).
    list_value(&mut h, 0, b"l", b"\x01\x02");
    assert!(!h.set(0, b"l", b"x", &nx).unwrap().written);
    assert_eq!(h.key_type(0, b"l").unwrap(), Some(ValueType::List));
    assert_eq!(h.dbsize(0).unwrap(), 2);
    drop(h);
    store.check().unwrap();
}

#[test]
fn set_xx_writes_only_when_present() {
    let seg = TempSegment::new("set-xx");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    let xx = cond(SetCondition::IfPresent, false);
    let r = h.set(0, b"k", b"v", &xx).unwrap();
    assert_eq!(written_old(r), (false, None));
    assert_eq!(h.get(0, b"k").unwrap(), None);
    assert!(!h.exists(0, b"k").unwrap());
    assert_eq!(h.dbsize(0).unwrap(), 0);
    put(&mut h, 0, b"k", b"v1");
    assert!(h.set(0, b"k", b"v2", &xx).unwrap().written);
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"v2".to_vec()));
    // XX replaces a key of another type (SET overwrites any type).
    list_value(&mut h, 0, b"l", b"abc");
    assert!(h.set(0, b"l", b"s", &xx).unwrap().written);
    assert_eq!(h.key_type(0, b"l").unwrap(), Some(ValueType::String));
    assert_eq!(h.get(0, b"l").unwrap(), Some(b"s".to_vec()));
    drop(h);
    store.check().unwrap();
}

#[test]
fn set_get_returns_the_old_value() {
    let seg = TempSegment::new("set-get");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    let get = cond(SetCondition::Always, true);
    // Missing key: nil, but the write happens.
    let r = h.set(0, b"k", b"one", &get).unwrap();
    assert_eq!(written_old(r), (true, None));
    let r = h.set(0, b"k", b"two", &get).unwrap();
    assert_eq!(written_old(r), (true, Some(b"one".to_vec())));
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"two".to_vec()));
    // Empty old value is an empty string, not nil.
    put(&mut h, 0, b"e", b"");
    let r = h.set(0, b"e", b"x", &get).unwrap();
    assert_eq!(r.old, Some(Vec::new()));
    drop(h);
    store.check().unwrap();
}

#[test]
fn set_nx_get_and_xx_get() {
    // Redis 7.0 allows NX together with GET.
    let seg = TempSegment::new("set-nx-get");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    let nx_get = cond(SetCondition::IfAbsent, true);
    let xx_get = cond(SetCondition::IfPresent, true);
    // XX GET on a missing key: nil, nothing written.
    assert_eq!(
        written_old(h.set(0, b"k", b"v", &xx_get).unwrap()),
        (false, None)
    );
    assert!(!h.exists(0, b"k").unwrap());
    // NX GET on a missing key: nil, written.
    assert_eq!(
        written_old(h.set(0, b"k", b"v1", &nx_get).unwrap()),
        (true, None)
    );
    // NX GET on an existing key: the old value, not written.
    assert_eq!(
        written_old(h.set(0, b"k", b"v2", &nx_get).unwrap()),
        (false, Some(b"v1".to_vec()))
    );
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"v1".to_vec()));
    // XX GET on an existing key: the old value, written.
    assert_eq!(
        written_old(h.set(0, b"k", b"v3", &xx_get).unwrap()),
        (true, Some(b"v1".to_vec()))
    );
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"v3".to_vec()));
    drop(h);
    store.check().unwrap();
}

#[test]
fn set_get_on_a_non_string_is_wrongtype_and_writes_nothing() {
    let seg = TempSegment::new("set-get-wrongtype");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    list_value(&mut h, 0, b"l", b"list-bytes");
    for c in [
        SetCondition::Always,
        SetCondition::IfAbsent,
        SetCondition::IfPresent,
    ] {
        let r = h.set(0, b"l", b"str", &cond(c, true));
        assert!(matches!(r, Err(Error::WrongType)), "{c:?}: {r:?}");
        assert_eq!(
            raw(&mut h, 0, b"l"),
            Some((ValueType::List, b"list-bytes".to_vec()))
        );
    }
    // Without GET, SET simply replaces the list.
    put(&mut h, 0, b"l", b"str");
    assert_eq!(h.get(0, b"l").unwrap(), Some(b"str".to_vec()));
    assert_eq!(h.dbsize(0).unwrap(), 1);
    drop(h);
    store.check().unwrap();
}

#[test]
fn plain_set_clears_ttl_and_keepttl_keeps_it() {
    let seg = TempSegment::new("set-keepttl");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    h.set(0, b"k", b"v", &expiring_at(T0 + 10_000)).unwrap();
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Ms(10_000));
    assert_eq!(h.expires_count(0).unwrap(), 1);
    let keep = SetOptions {
        expiry: Expiry::Keep,
        ..SetOptions::default()
    };
    assert!(h.set(0, b"k", b"v2", &keep).unwrap().written);
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Ms(10_000));
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"v2".to_vec()));
    assert_eq!(h.expires_count(0).unwrap(), 1);
    // KEEPTTL with XX and GET together.
    let keep_xx_get = SetOptions {
        expiry: Expiry::Keep,
        condition: SetCondition::IfPresent,
        get: true,
        ..SetOptions::default()
    };
    let r = h.set(0, b"k", b"v3", &keep_xx_get).unwrap();
    assert_eq!(written_old(r), (true, Some(b"v2".to_vec())));
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Ms(10_000));
    // A plain SET drops the TTL.
    put(&mut h, 0, b"k", b"v4");
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Persistent);
    assert_eq!(h.expires_count(0).unwrap(), 0);
    // KEEPTTL on a missing key or a persistent key: no TTL.
    h.set(0, b"new", b"v", &keep).unwrap();
    assert_eq!(h.ttl(0, b"new").unwrap(), Ttl::Persistent);
    h.set(0, b"k", b"v5", &keep).unwrap();
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Persistent);
    assert_eq!(h.expires_count(0).unwrap(), 0);
    drop(h);
    store.check().unwrap();
}

#[test]
fn set_with_expiry_at_expires_the_key_when_time_passes() {
    let seg = TempSegment::new("set-at");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    let r = h.set(0, b"k", b"v", &expiring_at(T0 + 1_500)).unwrap();
    assert!(r.written);
    let meta = h.meta(0, b"k").unwrap().unwrap();
    assert_eq!(meta.expire_at_ms, Some(T0 + 1_500));
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Ms(1_500));
    clock.store(T0 + 1_499, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Ms(1));
    clock.store(T0 + 1_501, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(h.get(0, b"k").unwrap(), None);
    assert_eq!(h.ttl(0, b"k").unwrap(), Ttl::Missing);
    assert_eq!(h.dbsize(0).unwrap(), 0);
    assert_eq!(h.expires_count(0).unwrap(), 0);
    // SET NX succeeds on an expired key: it no longer exists.
    h.set(0, b"e", b"old", &expiring_at(T0 + 2_000)).unwrap();
    clock.store(T0 + 2_001, std::sync::atomic::Ordering::Relaxed);
    let r = h
        .set(0, b"e", b"new", &cond(SetCondition::IfAbsent, true))
        .unwrap();
    assert_eq!(written_old(r), (true, None));
    assert_eq!(h.get(0, b"e").unwrap(), Some(b"new".to_vec()));
    assert_eq!(h.ttl(0, b"e").unwrap(), Ttl::Persistent);
    drop(h);
    store.check().unwrap();
}

#[test]
fn set_with_expiry_in_the_past_deletes_the_key() {
    let seg = TempSegment::new("set-past");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    // On a missing key: nothing is left.
    let r = h.set(0, b"a", b"v", &expiring_at(T0 - 1)).unwrap();
    assert!(r.written);
    assert_eq!(h.get(0, b"a").unwrap(), None);
    // On an existing string and on a list.
    put(&mut h, 0, b"s", b"v");
    list_value(&mut h, 0, b"l", b"x");
    h.set(0, b"s", b"w", &expiring_at(T0)).unwrap();
    h.set(0, b"l", b"w", &expiring_at(1)).unwrap();
    assert!(!h.exists(0, b"s").unwrap());
    assert!(!h.exists(0, b"l").unwrap());
    // With GET: the old value comes back and the key is gone.
    put(&mut h, 0, b"g", b"old");
    let r = h
        .set(
            0,
            b"g",
            b"new",
            &SetOptions {
                get: true,
                ..expiring_at(T0 - 5)
            },
        )
        .unwrap();
    assert_eq!(r.old, Some(b"old".to_vec()));
    assert!(!h.exists(0, b"g").unwrap());
    // NX refused on an existing key: the key is untouched.
    put(&mut h, 0, b"n", b"keep");
    let r = h
        .set(
            0,
            b"n",
            b"new",
            &SetOptions {
                condition: SetCondition::IfAbsent,
                ..expiring_at(T0 - 5)
            },
        )
        .unwrap();
    assert!(!r.written);
    assert_eq!(h.get(0, b"n").unwrap(), Some(b"keep".to_vec()));
    assert_eq!(h.ttl(0, b"n").unwrap(), Ttl::Persistent);
    assert_eq!(h.dbsize(0).unwrap(), 1);
    assert_eq!(h.expires_count(0).unwrap(), 0);
    drop(h);
    store.check().unwrap();
}

// ---------- wrong type ----------

#[test]
fn string_commands_on_a_list_are_wrongtype_and_change_nothing() {
    let seg = TempSegment::new("wrongtype");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    list_value(&mut h, 0, b"l", b"12");
    assert!(matches!(h.get(0, b"l"), Err(Error::WrongType)));
    assert!(matches!(h.incr_by(0, b"l", 1), Err(Error::WrongType)));
    assert!(matches!(h.incr_by(0, b"l", -1), Err(Error::WrongType)));
    assert!(matches!(h.append(0, b"l", b"x"), Err(Error::WrongType)));
    assert!(matches!(h.append(0, b"l", b""), Err(Error::WrongType)));
    assert!(matches!(h.get_range(0, b"l", 0, -1), Err(Error::WrongType)));
    assert!(matches!(
        h.set_range(0, b"l", 0, b"x"),
        Err(Error::WrongType)
    ));
    // SETRANGE with an empty value still checks the type first.
    assert!(matches!(
        h.set_range(0, b"l", 0, b""),
        Err(Error::WrongType)
    ));
    assert_eq!(
        raw(&mut h, 0, b"l"),
        Some((ValueType::List, b"12".to_vec()))
    );
    // Type-agnostic commands work.
    assert!(h.exists(0, b"l").unwrap());
    assert_eq!(h.key_type(0, b"l").unwrap(), Some(ValueType::List));
    assert_eq!(h.dbsize(0).unwrap(), 1);
    assert!(h.delete(0, b"l").unwrap());
    drop(h);
    store.check().unwrap();
}

// ---------- INCR / DECR ----------

#[test]
fn incr_on_missing_key_starts_at_zero() {
    let seg = TempSegment::new("incr-missing");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    assert_eq!(h.incr_by(0, b"a", 1).unwrap(), 1);
    assert_eq!(h.incr_by(0, b"b", -1).unwrap(), -1);
    assert_eq!(h.incr_by(0, b"c", 0).unwrap(), 0);
    assert_eq!(h.incr_by(0, b"d", i64::MIN).unwrap(), i64::MIN);
    assert_eq!(h.get(0, b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(h.get(0, b"b").unwrap(), Some(b"-1".to_vec()));
    assert_eq!(h.get(0, b"c").unwrap(), Some(b"0".to_vec()));
    assert_eq!(
        h.get(0, b"d").unwrap(),
        Some(b"-9223372036854775808".to_vec())
    );
    assert_eq!(h.key_type(0, b"c").unwrap(), Some(ValueType::String));
    drop(h);
    store.check().unwrap();
}

#[test]
fn incr_decr_sequence_matches_a_model() {
    let seg = TempSegment::new("incr-model");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    let mut model: i64 = 0;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..5_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delta = (x % 2_001) as i64 - 1_000;
        model += delta;
        assert_eq!(h.incr_by(0, b"n", delta).unwrap(), model);
    }
    assert_eq!(
        h.get(0, b"n").unwrap(),
        Some(model.to_string().into_bytes())
    );
    // Values written by SET count too.
    put(&mut h, 0, b"s", b"41");
    assert_eq!(h.incr_by(0, b"s", 1).unwrap(), 42);
    put(&mut h, 0, b"s", b"-41");
    assert_eq!(h.incr_by(0, b"s", -1).unwrap(), -42);
    put(&mut h, 0, b"s", b"0");
    assert_eq!(h.incr_by(0, b"s", 7).unwrap(), 7);
    drop(h);
    store.check().unwrap();
}

#[test]
fn incr_rejects_what_redis_string2ll_rejects_and_keeps_the_value() {
    let seg = TempSegment::new("incr-notint");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    let bad: &[&[u8]] = &[
        b"",
        b" 1",
        b"1 ",
        b"+1",
        b"01",
        b"00",
        b"-0",
        b"-",
        b"--1",
        b"1.0",
        b"1e3",
        b"0x10",
        b"abc",
        b"1\0",
        b"\xff",
        b"99999999999999999999",    // 20 digits, > i64::MAX
        b"9223372036854775808",     // i64::MAX + 1
        b"-9223372036854775809",    // i64::MIN - 1
        b"123456789012345678901",   // 21 digits
        b"00000000000000000000001", // long, leading zeros
    ];
    for v in bad {
        put(&mut h, 0, b"k", v);
        for delta in [1, -1, 0] {
            let r = h.incr_by(0, b"k", delta);
            assert!(
                matches!(r, Err(Error::NotInteger)),
                "INCRBY {delta} on {:?}: {r:?}",
                String::from_utf8_lossy(v)
            );
            assert_eq!(h.get(0, b"k").unwrap(), Some(v.to_vec()));
        }
    }
    let good: &[(&[u8], i64)] = &[
        (b"0", 0),
        (b"-1", -1),
        (b"10", 10),
        (b"9223372036854775806", i64::MAX - 1),
        (b"-9223372036854775807", i64::MIN + 1),
    ];
    for (v, n) in good {
        put(&mut h, 0, b"k", v);
        assert_eq!(h.incr_by(0, b"k", 1).unwrap(), n + 1, "{v:?}");
    }
    drop(h);
    store.check().unwrap();
}

#[test]
fn incr_overflow_is_an_error_and_keeps_the_value() {
    let seg = TempSegment::new("incr-overflow");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"max", i64::MAX.to_string().as_bytes());
    assert!(matches!(h.incr_by(0, b"max", 1), Err(Error::Overflow)));
    assert!(matches!(
        h.incr_by(0, b"max", i64::MAX),
        Err(Error::Overflow)
    ));
    assert_eq!(
        h.get(0, b"max").unwrap(),
        Some(b"9223372036854775807".to_vec())
    );
    assert_eq!(h.incr_by(0, b"max", 0).unwrap(), i64::MAX);
    assert_eq!(h.incr_by(0, b"max", -1).unwrap(), i64::MAX - 1);

    put(&mut h, 0, b"min", i64::MIN.to_string().as_bytes());
    assert!(matches!(h.incr_by(0, b"min", -1), Err(Error::Overflow)));
    assert!(matches!(
        h.incr_by(0, b"min", i64::MIN),
        Err(Error::Overflow)
    ));
    assert_eq!(
        h.get(0, b"min").unwrap(),
        Some(b"-9223372036854775808".to_vec())
    );
    assert_eq!(h.incr_by(0, b"min", 1).unwrap(), i64::MIN + 1);

    put(&mut h, 0, b"neg", b"-1");
    assert_eq!(h.incr_by(0, b"neg", i64::MIN + 1).unwrap(), i64::MIN);
    assert!(matches!(h.incr_by(0, b"neg", -1), Err(Error::Overflow)));
    drop(h);
    store.check().unwrap();
}

#[test]
fn incr_keeps_the_ttl() {
    let seg = TempSegment::new("incr-ttl");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    h.set(0, b"n", b"5", &expiring_at(T0 + 60_000)).unwrap();
    assert_eq!(h.incr_by(0, b"n", 3).unwrap(), 8);
    assert_eq!(h.ttl(0, b"n").unwrap(), Ttl::Ms(60_000));
    assert_eq!(h.expires_count(0).unwrap(), 1);
    drop(h);
    store.check().unwrap();
}

#[test]
fn incr_on_an_expired_key_starts_again_without_ttl() {
    let seg = TempSegment::new("incr-expired");
    let (store, clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    h.set(0, b"n", b"100", &expiring_at(T0 + 10)).unwrap();
    clock.store(T0 + 11, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(h.incr_by(0, b"n", 1).unwrap(), 1);
    assert_eq!(h.ttl(0, b"n").unwrap(), Ttl::Persistent);
    assert_eq!(h.dbsize(0).unwrap(), 1);
    assert_eq!(h.expires_count(0).unwrap(), 0);
    drop(h);
    store.check().unwrap();
}

#[test]
fn parse_i64_matches_string2ll() {
    assert_eq!(parse_i64(b"0"), Some(0));
    assert_eq!(parse_i64(b"-1"), Some(-1));
    assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
    assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    for bad in [
        &b""[..],
        b"-",
        b"-0",
        b"+1",
        b"01",
        b" 1",
        b"1 ",
        b"9223372036854775808",
        b"-9223372036854775809",
        b"99999999999999999999",
        b"18446744073709551616",
        b"1a",
    ] {
        assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
    }
}

// ---------- APPEND ----------

#[test]
fn append_creates_grows_and_returns_the_length() {
    let seg = TempSegment::new("append-basic");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    assert_eq!(h.append(0, b"k", b"Hello").unwrap(), 5);
    assert_eq!(h.append(0, b"k", b" World").unwrap(), 11);
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"Hello World".to_vec()));
    assert_eq!(h.append(0, b"k", b"").unwrap(), 11);
    // APPEND of "" to a missing key creates an empty string.
    assert_eq!(h.append(0, b"e", b"").unwrap(), 0);
    assert!(h.exists(0, b"e").unwrap());
    assert_eq!(h.get(0, b"e").unwrap(), Some(Vec::new()));
    // APPEND keeps the TTL, whether it grows in place or moves.
    h.set(0, b"t", b"x", &expiring_at(T0 + 5_000)).unwrap();
    for i in 0..200 {
        h.append(0, b"t", &vec![b'y'; i]).unwrap();
        assert_eq!(h.ttl(0, b"t").unwrap(), Ttl::Ms(5_000));
    }
    assert_eq!(h.expires_count(0).unwrap(), 1);
    // INCR after APPEND sees the appended digits.
    put(&mut h, 0, b"n", b"1");
    h.append(0, b"n", b"23").unwrap();
    assert_eq!(h.incr_by(0, b"n", 1).unwrap(), 124);
    assert_eq!(h.dbsize(0).unwrap(), 4);
    drop(h);
    store.check().unwrap();
}

#[test]
fn ten_thousand_appends_match_a_vec_model() {
    let seg = TempSegment::new("append-model");
    let store = seg.open(64 * MB);
    let mut h = store.handle().unwrap();
    let mut models: Vec<Vec<u8>> = vec![Vec::new(); 4];
    let mut x: u64 = 12345;
    for i in 0..10_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = (x % 4) as usize;
        // Mostly small, sometimes big tails, sometimes empty.
        let len = match x % 50 {
            0 => 0,
            1 => 3_000 + (x >> 8) as usize % 2_000,
            _ => (x >> 16) as usize % 40,
        };
        let tail: Vec<u8> = (0..len).map(|j| (i as usize + j) as u8).collect();
        let key = format!("k{k}");
        let n = h.append(0, key.as_bytes(), &tail).unwrap();
        models[k].extend_from_slice(&tail);
        assert_eq!(n, models[k].len() as u64);
        if i % 997 == 0 {
            assert_eq!(h.get(0, key.as_bytes()).unwrap().unwrap(), models[k]);
        }
    }
    for (k, m) in models.iter().enumerate() {
        let key = format!("k{k}");
        assert_eq!(&h.get(0, key.as_bytes()).unwrap().unwrap(), m);
        assert_eq!(
            h.meta(0, key.as_bytes()).unwrap().unwrap().len,
            m.len() as u64
        );
    }
    drop(h);
    let report = store.check().unwrap();
    assert_eq!(report.keys, 4);
}

// ---------- GETRANGE ----------

#[test]
fn getrange_follows_redis_index_rules() {
    let seg = TempSegment::new("getrange");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"k", b"This is a string");
    let cases: &[(i64, i64, &[u8])] = &[
        (0, 3, b"This"),
        (-3, -1, b"ing"),
        (0, -1, b"This is a string"),
        (10, 100, b"string"),
        (5, 3, b""),
        (15, 15, b"g"),
        (16, 20, b""),
        (100, 200, b""),
        (-1, -1, b"g"),
        (-1, -5, b""),
        (-100, -1, b"This is a string"),
        (0, -100, b"T"),   // end clamps to 0
        (-100, -50, b"T"), // Redis 7.0: both clamp to 0
        (-16, -16, b"T"),
        (-17, 0, b"T"),
        (i64::MIN, i64::MAX, b"This is a string"),
        (i64::MAX, i64::MAX, b""),
        (i64::MIN, i64::MIN, b"T"),
    ];
    for (s, e, want) in cases {
        assert_eq!(
            h.get_range(0, b"k", *s, *e).unwrap(),
            want.to_vec(),
            "GETRANGE k {s} {e}"
        );
    }
    // Missing key and empty value: "".
    assert_eq!(h.get_range(0, b"missing", 0, -1).unwrap(), Vec::<u8>::new());
    put(&mut h, 0, b"empty", b"");
    assert_eq!(h.get_range(0, b"empty", 0, -1).unwrap(), Vec::<u8>::new());
    assert_eq!(h.get_range(0, b"empty", -1, 0).unwrap(), Vec::<u8>::new());
    // GETRANGE of an integer written by INCR sees its decimal text.
    h.incr_by(0, b"n", 1234).unwrap();
    assert_eq!(h.get_range(0, b"n", 1, 2).unwrap(), b"23".to_vec());
    assert!(!h.exists(0, b"missing").unwrap());
    drop(h);
    store.check().unwrap();
}

#[test]
fn resolve_range_agrees_with_getrange() {
    assert_eq!(resolve_range(0, -1, 0), None);
    assert_eq!(resolve_range(0, -1, 5), Some((0, 4)));
    assert_eq!(resolve_range(-100, -50, 5), Some((0, 0)));
    assert_eq!(resolve_range(3, 1, 5), None);
    assert_eq!(resolve_range(5, 10, 5), None);
    assert_eq!(resolve_range(2, 100, 5), Some((2, 4)));
}

// ---------- SETRANGE ----------

#[test]
fn setrange_pads_with_zeros_and_returns_the_length() {
    let seg = TempSegment::new("setrange");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    // Missing key, empty value: 0 and no key is created.
    assert_eq!(h.set_range(0, b"m", 0, b"").unwrap(), 0);
    assert_eq!(h.set_range(0, b"m", 100, b"").unwrap(), 0);
    assert!(!h.exists(0, b"m").unwrap());
    assert_eq!(h.dbsize(0).unwrap(), 0);
    // Missing key: zero padding before the offset.
    assert_eq!(h.set_range(0, b"m", 5, b"xy").unwrap(), 7);
    assert_eq!(h.get(0, b"m").unwrap(), Some(b"\0\0\0\0\0xy".to_vec()));
    // Overwrite in the middle.
    put(&mut h, 0, b"k", b"Hello World");
    assert_eq!(h.set_range(0, b"k", 6, b"Redis").unwrap(), 11);
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"Hello Redis".to_vec()));
    // Overlapping the end extends.
    assert_eq!(h.set_range(0, b"k", 9, b"ssssss").unwrap(), 15);
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"Hello Redssssss".to_vec()));
    // Past the end pads with zeros.
    assert_eq!(h.set_range(0, b"k", 17, b"!").unwrap(), 18);
    assert_eq!(
        h.get(0, b"k").unwrap(),
        Some(b"Hello Redssssss\0\0!".to_vec())
    );
    // Empty value on an existing key: the length, nothing changes.
    assert_eq!(h.set_range(0, b"k", 1000, b"").unwrap(), 18);
    assert_eq!(h.meta(0, b"k").unwrap().unwrap().len, 18);
    // At offset 0 on an empty string.
    put(&mut h, 0, b"e", b"");
    assert_eq!(h.set_range(0, b"e", 0, b"abc").unwrap(), 3);
    assert_eq!(h.get(0, b"e").unwrap(), Some(b"abc".to_vec()));
    // SETRANGE keeps the TTL.
    h.set(0, b"t", b"abc", &expiring_at(T0 + 9_000)).unwrap();
    assert_eq!(h.set_range(0, b"t", 1, b"ZZZZ").unwrap(), 5);
    assert_eq!(h.get(0, b"t").unwrap(), Some(b"aZZZZ".to_vec()));
    assert_eq!(h.ttl(0, b"t").unwrap(), Ttl::Ms(9_000));
    assert_eq!(h.expires_count(0).unwrap(), 1);
    drop(h);
    store.check().unwrap();
}

#[test]
fn setrange_past_the_maximum_size_is_too_large() {
    let seg = TempSegment::new("setrange-big");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"k", b"abc");
    assert!(matches!(
        h.set_range(0, b"k", MAX_VALUE_LEN, b"x"),
        Err(Error::TooLarge)
    ));
    assert!(matches!(
        h.set_range(0, b"missing", MAX_VALUE_LEN - 1, b"xy"),
        Err(Error::TooLarge)
    ));
    assert!(matches!(
        h.set_range(0, b"k", u64::MAX, b"x"),
        Err(Error::TooLarge)
    ));
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"abc".to_vec()));
    assert!(!h.exists(0, b"missing").unwrap());
    // A size the store accepts but the segment cannot hold: out of memory,
    // and nothing changes.
    assert!(matches!(
        h.set_range(0, b"k", 64 * MB, b"x"),
        Err(Error::OutOfMemory)
    ));
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"abc".to_vec()));
    drop(h);
    store.check().unwrap();
}

#[test]
fn setrange_then_getrange_match_a_model() {
    let seg = TempSegment::new("setrange-model");
    let store = seg.open(16 * MB);
    let mut h = store.handle().unwrap();
    let mut model: Vec<u8> = Vec::new();
    let mut x: u64 = 777;
    for _ in 0..2_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % 3_000) as usize;
        let len = (x >> 20) as usize % 20;
        let bytes: Vec<u8> = (0..len).map(|j| (x as usize + j) as u8).collect();
        let n = h.set_range(0, b"s", off as u64, &bytes).unwrap();
        if !bytes.is_empty() {
            if model.len() < off + len {
                model.resize(off + len, 0);
            }
            model[off..off + len].copy_from_slice(&bytes);
        }
        assert_eq!(n, model.len() as u64);
        let s = (x >> 32) as i64 % 4_000 - 2_000;
        let e = (x >> 40) as i64 % 4_000 - 2_000;
        let want = match resolve_range(s, e, model.len() as u64) {
            Some((a, b)) => model[a as usize..=b as usize].to_vec(),
            None => Vec::new(),
        };
        assert_eq!(h.get_range(0, b"s", s, e).unwrap(), want);
    }
    assert_eq!(h.get(0, b"s").unwrap().unwrap_or_default(), model);
    drop(h);
    store.check().unwrap();
}

// ---------- binary safety ----------

#[test]
fn keys_and_values_are_binary_safe() {
    let seg = TempSegment::new("binary");
    let store = seg.open(16 * MB);
    let mut h = store.handle().unwrap();
    // Empty key and empty value are both legal and distinct from missing.
    put(&mut h, 0, b"", b"empty-key");
    put(&mut h, 0, b"empty-value", b"");
    assert_eq!(h.get(0, b"").unwrap(), Some(b"empty-key".to_vec()));
    assert_eq!(h.get(0, b"empty-value").unwrap(), Some(Vec::new()));
    assert!(h.exists(0, b"").unwrap());
    assert_eq!(h.ttl(0, b"").unwrap(), Ttl::Persistent);
    // NUL bytes: keys that differ only after a NUL are different keys.
    put(&mut h, 0, b"a\0b", b"1\x002");
    put(&mut h, 0, b"a\0c", b"\0\0\0");
    put(&mut h, 0, b"a", b"plain");
    assert_eq!(h.get(0, b"a\0b").unwrap(), Some(b"1\x002".to_vec()));
    assert_eq!(h.get(0, b"a\0c").unwrap(), Some(b"\0\0\0".to_vec()));
    assert_eq!(h.get(0, b"a").unwrap(), Some(b"plain".to_vec()));
    assert_eq!(h.get(0, b"a\0").unwrap(), None);
    // Every byte value, in key and value.
    let all: Vec<u8> = (0..=255u8).collect();
    put(&mut h, 0, &all, &all);
    assert_eq!(h.get(0, &all).unwrap(), Some(all.clone()));
    let rev: Vec<u8> = all.iter().rev().copied().collect();
    put(&mut h, 0, &rev, b"rev");
    assert_eq!(h.get(0, &rev).unwrap(), Some(b"rev".to_vec()));
    // A 1 MB value of varied bytes, then GETRANGE inside it.
    let big: Vec<u8> = (0..MB as usize).map(|i| (i * 31 % 251) as u8).collect();
    put(&mut h, 0, b"big", &big);
    assert_eq!(h.get(0, b"big").unwrap(), Some(big.clone()));
    assert_eq!(
        h.get_range(0, b"big", 500_000, 500_099).unwrap(),
        big[500_000..500_100].to_vec()
    );
    assert_eq!(h.meta(0, b"big").unwrap().unwrap().len, MB);
    // A large key.
    let long_key = vec![b'k'; 100_000];
    put(&mut h, 0, &long_key, b"long");
    assert_eq!(h.get(0, &long_key).unwrap(), Some(b"long".to_vec()));
    assert_eq!(h.dbsize(0).unwrap(), 9);
    // Renaming and deleting binary keys.
    assert!(h.rename(0, b"", b"\0", false).unwrap());
    assert_eq!(h.get(0, b"\0").unwrap(), Some(b"empty-key".to_vec()));
    assert!(!h.exists(0, b"").unwrap());
    assert!(h.delete(0, b"big").unwrap());
    assert!(h.delete(0, &all).unwrap());
    assert_eq!(h.dbsize(0).unwrap(), 7);
    drop(h);
    store.check().unwrap();
}

// ---------- databases ----------

#[test]
fn sixteen_databases_are_isolated() {
    let seg = TempSegment::new("dbs");
    let (store, _clock) = seg.open_with_clock(8 * MB, T0);
    let mut h = store.handle().unwrap();
    assert_eq!(NUM_DBS, 16);
    for db in 0..16u8 {
        put(&mut h, db, b"k", format!("v{db}").as_bytes());
        for i in 0..db as u32 {
            put(&mut h, db, format!("x{i}").as_bytes(), b"");
        }
    }
    for db in 0..16u8 {
        assert_eq!(
            h.get(db, b"k").unwrap(),
            Some(format!("v{db}").into_bytes())
        );
        assert_eq!(h.dbsize(db).unwrap(), 1 + db as u64);
    }
    // Writes in one db leave the others alone.
    assert_eq!(h.incr_by(3, b"counter", 1).unwrap(), 1);
    assert_eq!(h.get(4, b"counter").unwrap(), None);
    h.append(5, b"k", b"!").unwrap();
    assert_eq!(h.get(5, b"k").unwrap(), Some(b"v5!".to_vec()));
    assert_eq!(h.get(6, b"k").unwrap(), Some(b"v6".to_vec()));
    h.expire_at(7, b"k", (T0 + 1_000) as i64, ExpireCondition::Always)
        .unwrap();
    assert_eq!(h.ttl(7, b"k").unwrap(), Ttl::Ms(1_000));
    assert_eq!(h.ttl(8, b"k").unwrap(), Ttl::Persistent);
    assert_eq!(h.expires_count(7).unwrap(), 1);
    assert_eq!(h.expires_count(8).unwrap(), 0);
    assert!(h.delete(9, b"k").unwrap());
    assert_eq!(h.get(9, b"k").unwrap(), None);
    assert_eq!(h.get(10, b"k").unwrap(), Some(b"v10".to_vec()));
    list_value(&mut h, 11, b"k", b"list");
    assert_eq!(h.key_type(11, b"k").unwrap(), Some(ValueType::List));
    assert_eq!(h.key_type(12, b"k").unwrap(), Some(ValueType::String));
    assert_eq!(h.dbsize(9).unwrap(), 9);
    assert_eq!(h.dbsize(3).unwrap(), 5);
    let info = store.info().unwrap();
    assert_eq!(info.keyspace.len(), 16);
    assert_eq!(info.keyspace[15].0, 16);
    drop(h);
    // 136 keys written, plus "counter", minus the "k" deleted from db 9.
    let report = store.check().unwrap();
    assert_eq!(report.keys, 136);
}

#[test]
fn db_16_is_rejected_everywhere() {
    let seg = TempSegment::new("baddb");
    let store = seg.open(8 * MB);
    let mut h = store.handle().unwrap();
    let o = SetOptions::default();
    for db in [16u8, 17, 255] {
        assert!(matches!(h.get(db, b"k"), Err(Error::BadDb)));
        assert!(matches!(h.set(db, b"k", b"v", &o), Err(Error::BadDb)));
        assert!(matches!(
            h.write_value(db, b"k", ValueType::List, b"v", &o),
            Err(Error::BadDb)
        ));
        assert!(matches!(h.incr_by(db, b"k", 1), Err(Error::BadDb)));
        assert!(matches!(h.append(db, b"k", b"v"), Err(Error::BadDb)));
        assert!(matches!(h.get_range(db, b"k", 0, -1), Err(Error::BadDb)));
        assert!(matches!(h.set_range(db, b"k", 0, b"v"), Err(Error::BadDb)));
        assert!(matches!(h.delete(db, b"k"), Err(Error::BadDb)));
        assert!(matches!(h.exists(db, b"k"), Err(Error::BadDb)));
        assert!(matches!(h.key_type(db, b"k"), Err(Error::BadDb)));
        assert!(matches!(h.ttl(db, b"k"), Err(Error::BadDb)));
        assert!(matches!(h.persist(db, b"k"), Err(Error::BadDb)));
        assert!(matches!(
            h.expire(db, b"k", 10, ExpireCondition::Always),
            Err(Error::BadDb)
        ));
        assert!(matches!(
            h.expire_at(db, b"k", 10, ExpireCondition::Always),
            Err(Error::BadDb)
        ));
        assert!(matches!(h.rename(db, b"k", b"j", false), Err(Error::BadDb)));
        assert!(matches!(h.dbsize(db), Err(Error::BadDb)));
        assert!(matches!(h.expires_count(db), Err(Error::BadDb)));
        assert!(matches!(h.flushdb(db), Err(Error::BadDb)));
        assert!(matches!(h.scan(db, 0, None, 10, None), Err(Error::BadDb)));
    }
    assert_eq!(Error::BadDb.to_string(), "DB index is out of range");
    // Nothing was written anywhere.
    for db in 0..16 {
        assert_eq!(h.dbsize(db).unwrap(), 0);
    }
    drop(h);
    let report = store.check().unwrap();
    assert_eq!(report.keys, 0);
}

// ---------- mixed operations against a model ----------

#[derive(Clone, Debug)]
struct ModelKey {
    value: Vec<u8>,
    expire: Option<u64>,
}

#[test]
fn mixed_string_ops_match_a_model() {
    use std::collections::HashMap;
    use std::sync::atomic::Ordering;
    let seg = TempSegment::new("mixed-model");
    let (store, clock) = seg.open_with_clock(32 * MB, T0);
    let mut h = store.handle().unwrap();
    let mut model: HashMap<Vec<u8>, ModelKey> = HashMap::new();
    let mut x: u64 = 0xDEAD_BEEF;
    let mut now = T0;
    for step in 0..30_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = format!("k{}", x % 64).into_bytes();
        // Drop what has expired from the model (the store does it lazily).
        // Like Redis 7.0, a key is expired only once now > its expiry time.
        model.retain(|_, m| m.expire.is_none_or(|e| e >= now));
        let arg = (x >> 16) as usize;
        match (x >> 8) % 10 {
            0 => {
                let v = vec![(step % 251) as u8; arg % 100];
                put(&mut h, 0, &key, &v);
                model.insert(
                    key.clone(),
                    ModelKey {
                        value: v,
                        expire: None,
                    },
                );
            }
            1 => {
                let at = now + 1 + (arg % 5_000) as u64;
                let v = format!("{}", arg % 1000).into_bytes();
                h.set(0, &key, &v, &expiring_at(at)).unwrap();
                model.insert(
                    key.clone(),
                    ModelKey {
                        value: v,
                        expire: Some(at),
                    },
                );
            }
            2 => {
                let tail = vec![b'a' + (step % 26) as u8; arg % 300];
                let n = h.append(0, &key, &tail).unwrap();
                let m = model.entry(key.clone()).or_insert(ModelKey {
                    value: Vec::new(),
                    expire: None,
                });
                m.value.extend_from_slice(&tail);
                assert_eq!(n, m.value.len() as u64);
            }
            3 => {
                let off = (arg % 400) as u64;
                let bytes = vec![b'#'; (arg >> 10) % 8];
                let n = h.set_range(0, &key, off, &bytes).unwrap();
                if bytes.is_empty() {
                    let len = model.get(&key).map_or(0, |m| m.value.len());
                    assert_eq!(n, len as u64);
                } else {
                    let m = model.entry(key.clone()).or_insert(ModelKey {
                        value: Vec::new(),
                        expire: None,
                    });
                    let end = off as usize + bytes.len();
                    if m.value.len() < end {
                        m.value.resize(end, 0);
                    }
                    m.value[off as usize..end].copy_from_slice(&bytes);
                    assert_eq!(n, m.value.len() as u64);
                }
            }
            4 => {
                let delta = (arg % 21) as i64 - 10;
                let r = h.incr_by(0, &key, delta);
                let cur = model.get(&key).map(|m| m.value.clone());
                let parsed = match &cur {
                    None => Some(0),
                    Some(v) => parse_i64(v),
                };
                match parsed {
                    Some(n) => {
                        let new = n + delta;
                        assert_eq!(r.unwrap(), new);
                        let m = model.entry(key.clone()).or_insert(ModelKey {
                            value: Vec::new(),
                            expire: None,
                        });
                        m.value = new.to_string().into_bytes();
                    }
                    None => assert!(matches!(r, Err(Error::NotInteger)), "{r:?}"),
                }
            }
            5 => {
                assert_eq!(h.delete(0, &key).unwrap(), model.remove(&key).is_some());
            }
            6 => {
                let at = now + (arg % 3_000) as u64;
                let r = h
                    .expire_at(0, &key, at as i64, ExpireCondition::Always)
                    .unwrap();
                assert_eq!(r, model.contains_key(&key));
                if r {
                    if at <= now {
                        model.remove(&key);
                    } else {
                        model.get_mut(&key).unwrap().expire = Some(at);
                    }
                }
            }
            7 => {
                let r = h.persist(0, &key).unwrap();
                let had = model.get_mut(&key).and_then(|m| m.expire.take());
                assert_eq!(r, had.is_some());
            }
            8 => {
                let dst = format!("k{}", arg % 64).into_bytes();
                let r = h.rename(0, &key, &dst, false);
                match model.remove(&key) {
                    None => assert!(matches!(r, Err(Error::NoSuchKey)), "{r:?}"),
                    Some(m) => {
                        assert!(r.unwrap());
                        model.insert(dst, m);
                    }
                }
            }
            _ => {
                now += (arg % 200) as u64;
                clock.store(now, Ordering::Relaxed);
            }
        }
        // Check the key just touched, and now and then everything.
        model.retain(|_, m| m.expire.is_none_or(|e| e >= now));
        let want = model.get(&key).map(|m| m.value.clone());
        assert_eq!(h.get(0, &key).unwrap(), want, "step {step}");
        if step % 1_000 == 0 {
            for (k, m) in &model {
                assert_eq!(h.get(0, k).unwrap().as_ref(), Some(&m.value), "step {step}");
                let ttl = h.ttl(0, k).unwrap();
                match m.expire {
                    None => assert_eq!(ttl, Ttl::Persistent),
                    Some(e) => assert_eq!(ttl, Ttl::Ms(e - now)),
                }
            }
            // DBSIZE counts expired keys nobody removed yet: sweep first.
            let buckets = store.info().unwrap().buckets;
            h.sweep_expired(buckets).unwrap();
            assert_eq!(h.dbsize(0).unwrap(), model.len() as u64, "step {step}");
            let expires = model.values().filter(|m| m.expire.is_some()).count() as u64;
            assert_eq!(h.expires_count(0).unwrap(), expires, "step {step}");
        }
    }
    drop(h);
    store.check().unwrap();
}

// ---------- concurrency ----------

#[test]
fn concurrent_incr_and_append_lose_no_update() {
    let seg = TempSegment::new("concurrent");
    let store = seg.open(32 * MB);
    let threads = 4;
    let per = 2_000;
    std::thread::scope(|s| {
        for t in 0..threads {
            let store = store.clone();
            s.spawn(move || {
                let mut h = store.handle().unwrap();
                for i in 0..per {
                    h.incr_by(0, b"counter", 1).unwrap();
                    h.incr_by(0, b"down", -2).unwrap();
                    h.append(0, b"log", &[b'a' + t as u8]).unwrap();
                    put(&mut h, 1, format!("t{t}:{i}").as_bytes(), b"v");
                }
            });
        }
    });
    let mut h = store.handle().unwrap();
    let total = threads * per;
    assert_eq!(
        h.get(0, b"counter").unwrap(),
        Some(total.to_string().into_bytes())
    );
    assert_eq!(
        h.get(0, b"down").unwrap(),
        Some((-2 * total as i64).to_string().into_bytes())
    );
    let log = h.get(0, b"log").unwrap().unwrap();
    assert_eq!(log.len(), total);
    for t in 0..threads {
        let n = log.iter().filter(|b| **b == b'a' + t as u8).count();
        assert_eq!(n, per);
    }
    assert_eq!(h.dbsize(1).unwrap(), total as u64);
    drop(h);
    store.check().unwrap();
}

#[test]
fn errors_read_like_redis_replies() {
    assert_eq!(
        Error::WrongType.to_string(),
        "Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        Error::NotInteger.to_string(),
        "value is not an integer or out of range"
    );
    assert_eq!(
        Error::Overflow.to_string(),
        "increment or decrement would overflow"
    );
    assert_eq!(Error::NoSuchKey.to_string(), "no such key");
    assert!(Error::TooLarge
        .to_string()
        .contains("string exceeds maximum allowed size"));
}

// ---------- modify: read-modify-write under the key's lock ----------

#[test]
fn modify_writes_deletes_or_keeps_in_one_step() {
    let seg = TempSegment::new("modify");
    let (store, _clock) = seg.open_with_clock(8 * MB, 1_700_000_000_000);
    let mut h = store.handle().unwrap();
    // Missing key: the closure sees None and may create it.
    let created = h
        .modify(0, b"bits", |old| {
            assert!(old.is_none());
            Ok((
                Modify::Write(ValueType::String, vec![0b1000_0000]),
                "created",
            ))
        })
        .unwrap();
    assert_eq!(created, "created");
    assert_eq!(h.get(0, b"bits").unwrap(), Some(vec![0b1000_0000]));
    // The expiry survives a rewrite; the closure sees the metadata.
    assert!(h
        .pexpire(0, b"bits", 60_000, ExpireCondition::Always)
        .unwrap()
        .unwrap());
    h.modify(0, b"bits", |old| {
        let (v, meta) = old.unwrap();
        assert_eq!(meta.vtype, ValueType::String);
        assert!(meta.expire_at_ms.is_some());
        let mut v = v.to_vec();
        v.push(0xFF);
        Ok((Modify::Write(ValueType::String, v), ()))
    })
    .unwrap();
    assert_eq!(h.get(0, b"bits").unwrap(), Some(vec![0b1000_0000, 0xFF]));
    assert!(matches!(h.ttl(0, b"bits").unwrap(), Ttl::Ms(ms) if ms > 0));
    // Keep changes nothing; an error from the closure changes nothing either.
    h.modify(0, b"bits", |_| Ok((Modify::Keep, ()))).unwrap();
    let err = h.modify(0, b"bits", |_| -> Result<(Modify, ())> {
        Err(Error::NotInteger)
    });
    assert!(matches!(err, Err(Error::NotInteger)));
    assert_eq!(h.get(0, b"bits").unwrap(), Some(vec![0b1000_0000, 0xFF]));
    // Delete removes it, and a type change is possible.
    h.modify(0, b"bits", |_| Ok((Modify::Delete, ()))).unwrap();
    assert!(!h.exists(0, b"bits").unwrap());
    h.modify(0, b"l", |_| {
        Ok((Modify::Write(ValueType::List, b"encoded".to_vec()), ()))
    })
    .unwrap();
    assert_eq!(h.key_type(0, b"l").unwrap(), Some(ValueType::List));
    assert_eq!(h.dbsize(0).unwrap(), 1);
    drop(h);
    store.check().unwrap();
}

#[test]
fn concurrent_modify_loses_no_update() {
    let seg = TempSegment::new("modify-threads");
    let store = seg.open(8 * MB);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut h = store.handle().unwrap();
                for _ in 0..1000 {
                    h.modify(0, b"n", |old| {
                        let n = old.map_or(0, |(v, _)| u64::from_le_bytes(v.try_into().unwrap()));
                        Ok((
                            Modify::Write(ValueType::String, (n + 1).to_le_bytes().to_vec()),
                            (),
                        ))
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut h = store.handle().unwrap();
    assert_eq!(
        h.get(0, b"n").unwrap(),
        Some(4000u64.to_le_bytes().to_vec())
    );
    drop(h);
    store.check().unwrap();
}

/// What a SET did, without the version it stamped (which varies).
fn written_old(r: SetResult) -> (bool, Option<Vec<u8>>) {
    (r.written, r.old)
}
