//! DUMP and RESTORE through the dispatcher: Redis 7.0's payload bytes,
//! replies and error texts (`tests/unit/dump.tcl`), and a decoder that
//! refuses every damaged payload without panicking.

mod common;

use std::borrow::Cow;

use common::*;
use engine::rdb::{self, fuzzing, PayloadError, Value};
use proptest::prelude::*;

const BUSY: &str = "BUSYKEY Target key name already exists.";
const BAD_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
const BAD_FORMAT: &str = "ERR Bad data format";
const SYNTAX: &str = "ERR syntax error";
const NOT_INT: &str = "ERR value is not an integer or out of range";

/// Runs a command with binary arguments; the reply's raw bytes.
fn raw(t: &mut TestEngine, args: &[&[u8]]) -> Vec<u8> {
    let args: Vec<Cow<[u8]>> = args.iter().map(|a| Cow::Borrowed(*a)).collect();
    let mut out = Vec::new();
    t.engine.begin_batch(&mut t.session);
    t.engine.execute(&mut t.session, &args, &mut out);
    t.engine.end_batch();
    out
}

/// DUMP's payload for `key` (the bulk string's contents).
fn dump(t: &mut TestEngine, key: &str) -> Vec<u8> {
    let out = raw(t, &[b"DUMP", key.as_bytes()]);
    assert_eq!(out[0], b'$', "{}", String::from_utf8_lossy(&out));
    let header_end = out.iter().position(|&b| b == b'\n').unwrap() + 1;
    let len: usize = std::str::from_utf8(&out[1..header_end - 2])
        .unwrap()
        .parse()
        .unwrap();
    out[header_end..header_end + len].to_vec()
}

/// RESTORE `key` `ttl` `payload` and options; the reply as text.
fn restore(t: &mut TestEngine, key: &str, ttl: &str, payload: &[u8], opts: &[&str]) -> String {
    let mut args: Vec<&[u8]> = vec![b"RESTORE", key.as_bytes(), ttl.as_bytes(), payload];
    args.extend(opts.iter().map(|o| o.as_bytes()));
    String::from_utf8_lossy(&raw(t, &args)).into_owned()
}

/// The payload Redis 7.0.15 returns for `SET foo bar` / `DUMP foo`.
const REDIS_BAR: &[u8] = b"\x00\x03bar\n\x00\xe6\xbeI`\xeef\xfd\x17";

#[test]
fn dump_of_a_string_is_redis_bytes() {
    let mut t = TestEngine::new();
    t.run(&["SET", "foo", "bar"]);
    let p = dump(&mut t, "foo");
    assert_eq!(p, REDIS_BAR);
    assert_eq!(t.run(&["DUMP", "nosuchkey"]), NIL);
    // An integer string is written as Redis's 8-bit integer encoding.
    t.run(&["SET", "n", "7"]);
    assert_eq!(&dump(&mut t, "n")[..3], b"\x00\xC0\x07");
}

#[test]
fn restore_reads_redis_bytes_and_round_trips() {
    let mut t = TestEngine::new();
    assert_eq!(restore(&mut t, "foo", "0", REDIS_BAR, &[]), OK);
    assert_eq!(t.run(&["GET", "foo"]), bulk("bar"));
    assert_eq!(t.run(&["TTL", "foo"]), int(-1));
    // Every type comes back as it was.
    t.run(&["RPUSH", "l", "a", "1", "-70000", "bb"]);
    t.run(&["SADD", "s", "1", "2", "-3"]);
    t.run(&["SADD", "s2", "x", "y"]);
    t.run(&["HSET", "h", "f", "v", "g", "12"]);
    t.run(&["ZADD", "z", "1.5", "a", "-2", "b", "inf", "c"]);
    let reads: &[(&str, &[&str])] = &[
        ("l", &["LRANGE", "l", "0", "-1"]),
        ("s", &["SMEMBERS", "s"]),
        ("s2", &["SMEMBERS", "s2"]),
        ("h", &["HGETALL", "h"]),
        ("z", &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
    ];
    for (key, read) in reads {
        let before = t.run(read);
        let p = dump(&mut t, key);
        t.run(&["DEL", key]);
        assert_eq!(restore(&mut t, key, "0", &p, &[]), OK, "{key}");
        assert_eq!(t.run(read), before, "{key}");
    }
}

#[test]
fn large_collections_round_trip() {
    let mut t = TestEngine::with_size(64 << 20);
    for i in 0..3000 {
        let item = format!("item-{i}");
        t.run(&["RPUSH", "l", &item]);
        t.run(&["HSET", "h", &item, &i.to_string()]);
        t.run(&["SADD", "s", &item]);
        t.run(&["ZADD", "z", &(i as f64 / 7.0).to_string(), &item]);
    }
    for (key, read) in [
        ("l", vec!["LRANGE", "l", "0", "-1"]),
        ("h", vec!["HLEN", "h"]),
        ("s", vec!["SCARD", "s"]),
        ("z", vec!["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
    ] {
        let before = t.run(&read);
        let p = dump(&mut t, key);
        assert_eq!(restore(&mut t, key, "0", &p, &["REPLACE"]), OK);
        assert_eq!(t.run(&read), before, "{key}");
    }
    assert_eq!(t.run(&["HGET", "h", "item-2999"]), bulk("2999"));
    assert_eq!(t.run(&["SISMEMBER", "s", "item-17"]), int(1));
}

#[test]
fn busy_key_and_replace() {
    let mut t = TestEngine::new();
    t.run(&["SET", "foo", "bar2"]);
    // BUSYKEY comes before the payload is looked at, as in Redis.
    assert_eq!(restore(&mut t, "foo", "0", b"...", &[]), err(BUSY));
    assert_eq!(restore(&mut t, "foo", "0", REDIS_BAR, &[]), err(BUSY));
    assert_eq!(restore(&mut t, "foo", "0", REDIS_BAR, &["REPLACE"]), OK);
    assert_eq!(t.run(&["GET", "foo"]), bulk("bar"));
    // REPLACE over another type.
    t.run(&["RPUSH", "l", "x"]);
    assert_eq!(restore(&mut t, "l", "0", REDIS_BAR, &["replace"]), OK);
    assert_eq!(t.run(&["TYPE", "l"]), "+string\r\n");
}

#[test]
fn ttl_relative_absolute_and_past() {
    let mut t = TestEngine::new();
    assert_eq!(restore(&mut t, "a", "5000", REDIS_BAR, &[]), OK);
    assert_eq!(t.run(&["PTTL", "a"]), int(5000));
    assert_eq!(restore(&mut t, "b", "2569591501", REDIS_BAR, &[]), OK);
    assert_eq!(t.run(&["PTTL", "b"]), int(2_569_591_501));
    let at = (T0 + 3000).to_string();
    assert_eq!(restore(&mut t, "c", &at, REDIS_BAR, &["ABSTTL"]), OK);
    assert_eq!(t.run(&["PTTL", "c"]), int(3000));
    // In the past: nothing is created, and REPLACE deletes the old key.
    let past = (T0 - 3000).to_string();
    assert_eq!(restore(&mut t, "d", &past, REDIS_BAR, &["ABSTTL"]), OK);
    assert_eq!(t.run(&["EXISTS", "d"]), int(0));
    t.run(&["SET", "e", "old"]);
    assert_eq!(
        restore(&mut t, "e", &past, REDIS_BAR, &["ABSTTL", "REPLACE"]),
        OK
    );
    assert_eq!(t.run(&["EXISTS", "e"]), int(0));
    // A restored key expires like any other.
    t.advance_ms(5001);
    assert_eq!(t.run(&["EXISTS", "a"]), int(0));
}

#[test]
fn idletime_and_freq() {
    let mut t = TestEngine::new();
    assert_eq!(
        restore(&mut t, "foo", "0", REDIS_BAR, &["IDLETIME", "1000"]),
        OK
    );
    assert_eq!(t.run(&["OBJECT", "IDLETIME", "foo"]), int(1000));
    t.run(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]);
    assert_eq!(restore(&mut t, "bar", "0", REDIS_BAR, &["FREQ", "100"]), OK);
    assert_eq!(t.run(&["OBJECT", "FREQ", "bar"]), int(100));
    // FREQ over an existing key sets the counter, not the inherited one.
    assert_eq!(
        restore(&mut t, "bar", "0", REDIS_BAR, &["REPLACE", "FREQ", "3"]),
        OK
    );
    assert_eq!(t.run(&["OBJECT", "FREQ", "bar"]), int(3));
}

#[test]
fn option_errors_as_redis() {
    let mut t = TestEngine::new();
    let cases: &[(&str, &[&str], &str)] = &[
        ("-1", &[], "ERR Invalid TTL value, must be >= 0"),
        ("x", &[], NOT_INT),
        (
            "0",
            &["IDLETIME", "-1"],
            "ERR Invalid IDLETIME value, must be >= 0",
        ),
        ("0", &["IDLETIME", "x"], NOT_INT),
        (
            "0",
            &["FREQ", "256"],
            "ERR Invalid FREQ value, must be >= 0 and <= 255",
        ),
        (
            "0",
            &["FREQ", "-1"],
            "ERR Invalid FREQ value, must be >= 0 and <= 255",
        ),
        // IDLETIME and FREQ exclude each other; a missing value is a syntax error.
        ("0", &["FREQ", "1", "IDLETIME", "1"], SYNTAX),
        ("0", &["IDLETIME", "1", "FREQ", "1"], SYNTAX),
        ("0", &["IDLETIME"], SYNTAX),
        ("0", &["invalid-option"], SYNTAX),
    ];
    for (ttl, opts, want) in cases {
        assert_eq!(
            restore(&mut t, "k", ttl, REDIS_BAR, opts),
            err(want),
            "{ttl} {opts:?}"
        );
    }
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
    assert_eq!(
        t.run(&["RESTORE", "k"]),
        err("ERR wrong number of arguments for 'restore' command")
    );
}

#[test]
fn damaged_payloads_are_refused() {
    let mut t = TestEngine::new();
    let mut flipped = REDIS_BAR.to_vec();
    flipped[2] ^= 1;
    assert_eq!(restore(&mut t, "k", "0", &flipped, &[]), err(BAD_PAYLOAD));
    assert_eq!(restore(&mut t, "k", "0", b"...", &[]), err(BAD_PAYLOAD));
    for cut in 0..REDIS_BAR.len() {
        assert_eq!(
            restore(&mut t, "k", "0", &REDIS_BAR[..cut], &[]),
            err(BAD_PAYLOAD),
            "cut at {cut}"
        );
    }
    // A newer RDB version (Redis 7.2's 11).
    let v11 = fuzzing::sealed_as(b"\x00\x03bar", 11);
    assert_eq!(restore(&mut t, "k", "0", &v11, &[]), err(BAD_PAYLOAD));
    // Good checksum, bad body: a truncated string, an empty list, a stream.
    for body in [&b"\x00\x0ebar"[..], b"\x12\x00", b"\x0f\x00", b""] {
        let p = fuzzing::sealed(body);
        assert_eq!(restore(&mut t, "k", "0", &p, &[]), err(BAD_FORMAT));
    }
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
}

#[test]
fn old_encodings_restore() {
    let mut t = TestEngine::new();
    // A list as a ziplist of "a" and 5 (RDB_TYPE_LIST_ZIPLIST).
    let zl = b"\x10\x00\x00\x00\x0d\x00\x00\x00\x02\x00\x00\x01a\x03\xf6\xff";
    let mut body = vec![10u8, zl.len() as u8];
    body.extend_from_slice(zl);
    assert_eq!(restore(&mut t, "l", "0", &fuzzing::sealed(&body), &[]), OK);
    assert_eq!(t.run(&["LRANGE", "l", "0", "-1"]), bulks(&["a", "5"]));
    // An intset of 1, 2, 3.
    let mut body = vec![11u8, 14];
    body.extend_from_slice(b"\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00");
    assert_eq!(restore(&mut t, "s", "0", &fuzzing::sealed(&body), &[]), OK);
    assert_eq!(t.run(&["SMEMBERS", "s"]), bulks(&["1", "2", "3"]));
}

#[test]
fn restore_signals_the_key_ready() {
    let mut t = TestEngine::new();
    t.engine.take_ready_keys();
    assert_eq!(restore(&mut t, "foo", "0", REDIS_BAR, &[]), OK);
    assert_eq!(t.engine.take_ready_keys(), vec![(0, b"foo".to_vec())]);
}

#[test]
fn command_table_entries() {
    let dump = engine::command::lookup(b"dump").unwrap();
    assert_eq!((dump.arity, dump.first_key, dump.group), (2, 1, "generic"));
    assert!(!dump.is_write());
    let restore = engine::command::lookup(b"restore").unwrap();
    assert_eq!((restore.arity, restore.first_key), (-4, 1));
    assert!(restore.is_write());
}

/// Payloads of every type from a small generated value.
fn value_strategy() -> impl Strategy<Value = Value> {
    let bytes = prop::collection::vec(any::<u8>(), 0..40);
    let item = prop_oneof![
        bytes.clone(),
        any::<i64>().prop_map(|i| i.to_string().into_bytes()),
        (0i64..200).prop_map(|i| i.to_string().into_bytes()),
    ];
    let score = prop_oneof![
        any::<f64>().prop_filter("no NaN", |s| !s.is_nan()),
        (-100i32..100).prop_map(|i| i as f64),
    ];
    prop_oneof![
        item.clone().prop_map(Value::String),
        prop::collection::vec(item.clone(), 1..300).prop_map(Value::List),
        prop::collection::hash_set(item.clone(), 1..200)
            .prop_map(|s| Value::Set(s.into_iter().collect())),
        prop::collection::hash_map(item.clone(), item.clone(), 1..200)
            .prop_map(|m| Value::Hash(m.into_iter().collect())),
        prop::collection::hash_map(item, score, 1..200)
            .prop_map(|m| Value::ZSet(m.into_iter().collect())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn encoded_values_decode_to_themselves(v in value_strategy()) {
        let p = rdb::encode(&v);
        let back = rdb::decode(&p).unwrap();
        prop_assert_eq!(fuzzing::normalized(&back), fuzzing::normalized(&v));
    }

    /// Truncated, bit-flipped and byte-replaced payloads, with the
    /// checksum left wrong and made right: refused or decoded, never a panic.
    #[test]
    fn damaged_payloads_never_panic(
        v in value_strategy(),
        cut in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let p = rdb::encode(&v);
        let body = &p[..p.len() - 10];
        let truncated = &p[..cut.index(p.len())];
        prop_assert_eq!(rdb::decode(truncated), Err(PayloadError::VersionOrChecksum));
        fuzzing::fuzz_value(&body[..cut.index(body.len() + 1)]);
        let mut mutated = body.to_vec();
        for (at, b) in &flips {
            let i = at.index(mutated.len());
            mutated[i] ^= b | 1;
        }
        fuzzing::fuzz_value(&mutated);
    }

    /// Arbitrary bytes as a sealed body.
    #[test]
    fn random_bodies_never_panic(body in prop::collection::vec(any::<u8>(), 0..600)) {
        fuzzing::fuzz_value(&body);
    }
}

#[test]
fn hostile_lengths_allocate_nothing_big() {
    // Counts and string lengths far past the payload, in every length form.
    for body in [
        &b"\x01\x81\x00\x00\x00\x10\x00\x00\x00\x00"[..],
        b"\x00\x81\xff\xff\xff\xff\xff\xff\xff\xff",
        b"\x00\x80\xff\xff\xff\xff",
        b"\x00\xC3\x01\x81\x00\x00\x10\x00\x00\x00\x00\x00\x00",
        b"\x12\x80\x7f\xff\xff\xff\x02\x01\x00",
        b"\x0b\x0c\x08\x00\x00\x00\xff\xff\xff\x7f\x00\x00\x00\x00",
    ] {
        assert_eq!(
            rdb::decode(&fuzzing::sealed(body)),
            Err(PayloadError::BadFormat),
            "{body:?}"
        );
    }
}

/// Every file of `fuzz/corpus/rdb_value/` through the fuzz target's
/// harness; the hand-named seeds (Redis 7.0.15's DUMP bodies of every
/// encoding it writes, and hand-built older encodings) must decode.
#[test]
fn the_fuzz_corpus_keeps_the_invariants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/rdb_value");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus dir") {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        fuzzing::fuzz_value(&data);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.contains('_') {
            let v = rdb::decode(&fuzzing::sealed(&data));
            assert!(v.is_ok(), "seed {name}: {v:?}");
            seeds += 1;
        }
    }
    assert!(seeds >= 18, "{seeds} seeds");
}

#[test]
fn debug_object_and_set_active_expire() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["DEBUG", "OBJECT", "foo"]), err("ERR no such key"));
    t.run(&["SET", "foo", "bar"]);
    let line = t.run(&["DEBUG", "OBJECT", "foo"]);
    assert!(
        line.starts_with("+Value at:0x0 refcount:1 encoding:embstr serializedlength:4 lru:"),
        "{line}"
    );
    // With the sweep off a key past its expiry stays until touched.
    assert_eq!(t.run(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), OK);
    t.run(&["PEXPIRE", "foo", "10"]);
    t.advance_ms(20);
    // A full sweep takes hz * 5 ticks.
    let swept: u64 = (0..100).map(|_| t.engine.tick()).sum();
    assert_eq!(swept, 0);
    assert_eq!(t.run(&["DBSIZE"]), int(1));
    assert_eq!(t.run(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), OK);
    let swept: u64 = (0..100).map(|_| t.engine.tick()).sum();
    assert_eq!(swept, 1);
    assert_eq!(t.run(&["DBSIZE"]), int(0));
}
