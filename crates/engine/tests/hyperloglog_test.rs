//! HyperLogLog commands through the dispatcher (`tests/unit/hyperloglog.tcl`),
//! against bytes, counts and error texts taken from redis-server 7.0.15.

mod common;

use std::borrow::Cow;

use common::*;
use engine::{command, Config, Engine, ServerInfo, Session};
use store::SetOptions;

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Runs a command with binary arguments.
fn run_bin(t: &mut TestEngine, args: &[&[u8]]) -> String {
    let args: Vec<Cow<[u8]>> = args.iter().map(|a| Cow::Borrowed(*a)).collect();
    t.run_bytes(&args).0
}

/// Runs a command whose arguments are `words` then `elements`.
fn run_with(t: &mut TestEngine, words: &[&str], elements: &[String]) -> String {
    let mut args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    args.extend(elements.iter().map(|e| e.as_bytes()));
    run_bin(t, &args)
}

/// The key's string value, read straight from the store.
fn raw_get(t: &TestEngine, key: &str) -> Vec<u8> {
    let mut h = t.engine.store().handle().expect("handle");
    h.get(0, key.as_bytes()).expect("get").expect("present")
}

/// Writes a string value straight into the store.
fn raw_set(t: &TestEngine, key: &str, value: &[u8]) {
    let mut h = t.engine.store().handle().expect("handle");
    h.set(0, key.as_bytes(), value, &SetOptions::default())
        .expect("set");
}

/// FNV-1a 64 of `bytes` (the fingerprints below are of Redis's bytes).
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn numbers(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[test]
fn table_entries_match_redis() {
    type Keys = (i32, i32, i32);
    let expect: &[(&str, i32, Keys, &[&str])] = &[
        ("pfadd", -2, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("pfcount", -2, (1, -1, 1), &["readonly"]),
        ("pfmerge", -2, (1, -1, 1), &["write", "denyoom"]),
        ("pfdebug", 3, (2, 2, 1), &["write", "denyoom", "admin"]),
        ("pfselftest", 1, (0, 0, 0), &["admin"]),
    ];
    for (name, arity, keys, flags) in expect {
        let c = command::lookup(name.as_bytes()).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(c.arity, *arity, "{name}");
        assert_eq!((c.first_key, c.last_key, c.step), *keys, "{name}");
        let names: Vec<&str> = command::flags::NAMES
            .iter()
            .filter(|(bit, _)| c.flags & bit != 0)
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(&names, flags, "{name}");
        assert_eq!(c.group, "hyperloglog");
    }
    // Several keys are one instant; PFCOUNT or PFMERGE of one key is not
    // worth an exclusive section.
    let pfcount = command::lookup(b"pfcount").unwrap();
    assert!(pfcount.needs_exclusive(3));
    assert!(!pfcount.needs_exclusive(2));
    assert!(command::lookup(b"pfmerge").unwrap().needs_exclusive(3));
    assert!(!command::lookup(b"pfadd").unwrap().needs_exclusive(5));
}

#[test]
fn pfadd_and_pfcount_basics() {
    let mut t = TestEngine::new();
    // PFADD without elements creates an empty HLL.
    assert_eq!(t.run(&["PFADD", "hll"]), int(1));
    assert_eq!(t.run(&["EXISTS", "hll"]), int(1));
    assert_eq!(t.run(&["PFCOUNT", "hll"]), int(0));
    assert_eq!(t.run(&["PFADD", "hll"]), int(0));
    assert_eq!(t.run(&["PFADD", "hll", "a", "b", "c"]), int(1));
    assert_eq!(t.run(&["PFADD", "hll", "a", "b", "c"]), int(0));
    assert_eq!(t.run(&["PFADD", "hll", ""]), int(1));
    assert_eq!(t.run(&["DEL", "hll"]), int(1));
    assert_eq!(t.run(&["PFADD", "hll", "1", "2", "3", "4", "5"]), int(1));
    assert_eq!(t.run(&["PFCOUNT", "hll"]), int(5));
    assert_eq!(
        t.run(&["PFADD", "hll", "6", "7", "8", "8", "9", "10"]),
        int(1)
    );
    assert_eq!(t.run(&["PFCOUNT", "hll"]), int(10));
    assert_eq!(t.run(&["PFCOUNT", "missing"]), int(0));
    assert_eq!(t.run(&["TYPE", "hll"]), "+string\r\n");
}

#[test]
fn bytes_are_redis_bytes() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["PFADD", "h", "a", "b", "c"]), int(1));
    // Redis 7.0.15: GET h after PFADD h a b c, then after PFCOUNT h.
    let regs = b"`\xf3\x80P\xb1\x84K\xfb\x80BZ";
    let mut want = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
    want.extend_from_slice(regs);
    assert_eq!(raw_get(&t, "h"), want);
    assert_eq!(
        t.run(&["PFDEBUG", "DECODE", "h"]),
        bulk("Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603")
    );
    assert_eq!(t.run(&["PFCOUNT", "h"]), int(3));
    let mut want = b"HYLL\x01\0\0\0\x03\0\0\0\0\0\0\0".to_vec();
    want.extend_from_slice(regs);
    assert_eq!(raw_get(&t, "h"), want);

    // Fingerprints of Redis's values after PFADD of these elements in one
    // call and a PFCOUNT: sparse, dense, and a merge of both.
    assert_eq!(
        run_with(&mut t, &["PFADD", "small"], &numbers("x", 200)),
        int(1)
    );
    assert_eq!(t.run(&["PFCOUNT", "small"]), int(198));
    assert_eq!(raw_get(&t, "small").len(), 498);
    assert_eq!(fnv(&raw_get(&t, "small")), 0x6367_afbb_27a3_cb01);
    assert_eq!(
        run_with(&mut t, &["PFADD", "mid"], &numbers("", 1000)),
        int(1)
    );
    assert_eq!(t.run(&["PFCOUNT", "mid"]), int(1001));
    assert_eq!(t.run(&["PFDEBUG", "ENCODING", "mid"]), "+sparse\r\n");
    assert_eq!(fnv(&raw_get(&t, "mid")), 0x5149_0756_a435_4f02);
    assert_eq!(
        run_with(&mut t, &["PFADD", "big"], &numbers("", 10000)),
        int(1)
    );
    assert_eq!(t.run(&["PFCOUNT", "big"]), int(9987));
    assert_eq!(t.run(&["PFDEBUG", "ENCODING", "big"]), "+dense\r\n");
    assert_eq!(fnv(&raw_get(&t, "big")), 0x99d4_9421_db1c_95c2);
    assert_eq!(t.run(&["PFCOUNT", "big", "mid"]), int(9987));
    assert_eq!(t.run(&["PFMERGE", "m", "mid", "big"]), OK);
    assert_eq!(t.run(&["PFCOUNT", "m"]), int(9987));
    assert_eq!(fnv(&raw_get(&t, "m")), 0x99d4_9421_db1c_95c2);
}

#[test]
fn an_hll_from_redis_counts_the_same() {
    let mut t = TestEngine::new();
    // Redis's bytes for PFADD h a b c, with a stale cache.
    let mut value = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
    value.extend_from_slice(b"`\xf3\x80P\xb1\x84K\xfb\x80BZ");
    raw_set(&t, "h", &value);
    assert_eq!(t.run(&["PFCOUNT", "h"]), int(3));
    assert_eq!(t.run(&["PFADD", "h", "a"]), int(0));
    assert_eq!(t.run(&["PFADD", "h", "d"]), int(1));
    assert_eq!(t.run(&["PFCOUNT", "h"]), int(4));
}

#[test]
fn sparse_turns_dense_past_the_limit() {
    let mut t = TestEngine::new();
    let mut n = 0;
    let mut batch = 0;
    while n < 20_000 {
        let elements = numbers(&format!("b{batch}-"), 100);
        batch += 1;
        n += 100;
        run_with(&mut t, &["PFADD", "hll"], &elements);
        let card: i64 = t.run(&["PFCOUNT", "hll"])[1..].trim().parse().unwrap();
        assert!((card - n).abs() < card / 20, "{card} for {n}");
        let encoding = t.run(&["PFDEBUG", "ENCODING", "hll"]);
        if n < 1000 {
            assert_eq!(encoding, "+sparse\r\n");
            assert!(raw_get(&t, "hll").len() <= 3000);
        } else if n > 10_000 {
            assert_eq!(encoding, "+dense\r\n");
            assert_eq!(raw_get(&t, "hll").len(), 12304);
        }
    }
}

#[test]
fn sparse_and_dense_count_the_same() {
    let mut t = TestEngine::new();
    for x in 0..100 {
        t.run(&["DEL", "hll1", "hll2"]);
        let elements = numbers(&format!("{x}-"), x * 7 % 100);
        t.run(&["PFADD", "hll2"]);
        assert_eq!(t.run(&["PFDEBUG", "TODENSE", "hll2"]), int(1));
        run_with(&mut t, &["PFADD", "hll1"], &elements);
        run_with(&mut t, &["PFADD", "hll2"], &elements);
        assert_eq!(t.run(&["PFDEBUG", "ENCODING", "hll1"]), "+sparse\r\n");
        assert_eq!(t.run(&["PFDEBUG", "ENCODING", "hll2"]), "+dense\r\n");
        assert_eq!(t.run(&["PFCOUNT", "hll1"]), t.run(&["PFCOUNT", "hll2"]));
        // GETREG makes hll1 dense too: then the bytes agree.
        t.run(&["PFDEBUG", "GETREG", "hll1"]);
        assert_eq!(raw_get(&t, "hll1"), raw_get(&t, "hll2"));
    }
}

#[test]
fn cache_invalidation_bit() {
    let mut t = TestEngine::new();
    t.run(&["PFADD", "hll", "a", "b", "c"]);
    t.run(&["PFCOUNT", "hll"]);
    assert_eq!(t.run(&["GETRANGE", "hll", "15", "15"]), bulk("\0"));
    t.run(&["PFADD", "hll", "a", "b", "c"]);
    assert_eq!(t.run(&["GETRANGE", "hll", "15", "15"]), bulk("\0"));
    t.run(&["PFADD", "hll", "1", "2", "3"]);
    assert_eq!(raw_get(&t, "hll")[15], 0x80);
    // A stale cache is refreshed by PFCOUNT of that key alone.
    t.run(&["PFCOUNT", "hll", "hll"]);
    assert_eq!(raw_get(&t, "hll")[15], 0x80);
    t.run(&["PFCOUNT", "hll"]);
    assert_eq!(raw_get(&t, "hll")[15], 0);
    // A valid cache is believed, whatever the registers say.
    let mut v = raw_get(&t, "hll");
    v[8] = 42;
    raw_set(&t, "hll", &v);
    assert_eq!(t.run(&["PFCOUNT", "hll"]), int(42));
}

#[test]
fn pfcount_refresh_keeps_the_ttl() {
    let mut t = TestEngine::new();
    t.run(&["PFADD", "hll", "a"]);
    t.run(&["EXPIRE", "hll", "100"]);
    assert_eq!(t.run(&["PFCOUNT", "hll"]), int(1));
    assert_eq!(t.run(&["TTL", "hll"]), int(100));
    t.run(&["PFADD", "hll", "b"]);
    assert_eq!(t.run(&["TTL", "hll"]), int(100));
}

#[test]
fn corrupted_hlls_are_detected() {
    let mut t = TestEngine::new();
    // Additional bytes at the tail.
    t.run(&["PFADD", "hll", "a", "b", "c"]);
    t.run(&["APPEND", "hll", "hello"]);
    assert_eq!(t.run(&["PFCOUNT", "hll"]), err(CORRUPT));
    assert_eq!(t.run(&["PFCOUNT", "hll", "hll"]), err(CORRUPT));
    assert_eq!(t.run(&["PFMERGE", "x", "hll"]), err(CORRUPT));
    assert_eq!(t.run(&["EXISTS", "x"]), int(0));
    assert_eq!(t.run(&["PFDEBUG", "GETREG", "hll"]), err(CORRUPT));
    assert_eq!(t.run(&["PFDEBUG", "TODENSE", "hll"]), err(CORRUPT));
    // Broken magic, unknown encoding, a dense HLL of the wrong length.
    for (pos, byte) in [("0", "0123"), ("4", "x"), ("4", "\0")] {
        t.run(&["DEL", "hll"]);
        t.run(&["PFADD", "hll", "a", "b", "c"]);
        t.run(&["SETRANGE", "hll", pos, byte]);
        assert_eq!(t.run(&["PFCOUNT", "hll"]), err(NOT_HLL), "{pos}");
        assert_eq!(t.run(&["PFADD", "hll", "x"]), err(NOT_HLL), "{pos}");
    }
    // Runs past the last register (CVE-2025-32023): XZERO, ZERO, VAL.
    let xzero = [0x7f, 0xff];
    for tail in [&[0x7f, 0xff, 0x00][..], &[0x00, 0xff][..], &[0x3f][..]] {
        let mut v = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
        v.extend_from_slice(&xzero);
        v.extend_from_slice(tail);
        raw_set(&t, "hll", &v);
        assert_eq!(t.run(&["PFCOUNT", "hll"]), err(CORRUPT));
        assert_eq!(t.run(&["PFCOUNT", "hll", "hll"]), err(CORRUPT));
        assert_eq!(t.run(&["PFDEBUG", "GETREG", "hll"]), err(CORRUPT));
    }
    // Too few registers: PFADD of an element beyond them fails, and what
    // the elements before it changed stays (Redis edits in place). "e0"
    // falls in register 1318, "hello" in 9216, "e8" in 3158.
    let mut v = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0".to_vec();
    v.extend_from_slice(&[0x5f, 0xff]); // XZERO:8192
    raw_set(&t, "hll", &v);
    assert_eq!(t.run(&["PFADD", "hll", "hello"]), err(CORRUPT));
    assert_eq!(raw_get(&t, "hll"), v);
    assert_eq!(t.run(&["PFADD", "hll", "e0", "hello"]), err(CORRUPT));
    // Redis 7.0.15's bytes after each step.
    assert_eq!(
        raw_get(&t, "hll"),
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80E%\x80Z\xd8"
    );
    assert_eq!(t.run(&["PFADD", "hll", "e8"]), int(1));
    assert_eq!(
        raw_get(&t, "hll"),
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80E%\x80G.\x84S\xa8"
    );
}

#[test]
fn type_errors() {
    let mut t = TestEngine::new();
    t.run(&["SET", "foo", "bar"]);
    t.run(&["RPUSH", "list", "x"]);
    t.run(&["PFADD", "h", "x"]);
    assert_eq!(t.run(&["PFADD", "foo", "1"]), err(NOT_HLL));
    assert_eq!(t.run(&["PFCOUNT", "foo"]), err(NOT_HLL));
    assert_eq!(t.run(&["PFMERGE", "bar", "foo"]), err(NOT_HLL));
    assert_eq!(t.run(&["PFMERGE", "foo", "bar"]), err(NOT_HLL));
    assert_eq!(t.run(&["EXISTS", "bar"]), int(0));
    assert_eq!(t.run(&["PFADD", "list", "1"]), err(WRONGTYPE));
    assert_eq!(t.run(&["PFCOUNT", "list"]), err(WRONGTYPE));
    assert_eq!(t.run(&["PFCOUNT", "h", "list"]), err(WRONGTYPE));
    assert_eq!(t.run(&["PFMERGE", "h", "list"]), err(WRONGTYPE));
    assert_eq!(t.run(&["PFDEBUG", "ENCODING", "list"]), err(WRONGTYPE));
    assert_eq!(t.run(&["PFDEBUG", "ENCODING", "foo"]), err(NOT_HLL));
    assert_eq!(
        t.run(&["PFADD"]),
        err("ERR wrong number of arguments for 'pfadd' command")
    );
    assert_eq!(
        t.run(&["PFDEBUG", "GETREG", "h", "x"]),
        err("ERR wrong number of arguments for 'pfdebug' command")
    );
    assert_eq!(
        t.run(&["PFSELFTEST", "x"]),
        err("ERR wrong number of arguments for 'pfselftest' command")
    );
}

#[test]
fn pfmerge_unions() {
    let mut t = TestEngine::new();
    t.run(&["PFADD", "hll1", "a", "b", "c"]);
    t.run(&["PFADD", "hll2", "b", "c", "d"]);
    t.run(&["PFADD", "hll3", "c", "d", "e"]);
    assert_eq!(t.run(&["PFMERGE", "hll", "hll1", "hll2", "hll3"]), OK);
    assert_eq!(t.run(&["PFCOUNT", "hll"]), int(5));
    assert_eq!(t.run(&["PFCOUNT", "hll1", "hll2", "hll3"]), int(5));
    assert_eq!(t.run(&["PFCOUNT", "hll1", "nothing"]), int(3));
    // The destination's own registers stay.
    assert_eq!(t.run(&["PFMERGE", "hll1", "hll3"]), OK);
    assert_eq!(t.run(&["PFCOUNT", "hll1"]), int(5));
    // A destination alone: created empty, or kept.
    assert_eq!(t.run(&["PFMERGE", "empty"]), OK);
    assert_eq!(t.run(&["PFCOUNT", "empty"]), int(0));
    assert_eq!(t.run(&["PFDEBUG", "DECODE", "empty"]), bulk("Z:16384"));
    // A dense source makes the destination dense.
    t.run(&["PFADD", "dense", "z"]);
    t.run(&["PFDEBUG", "TODENSE", "dense"]);
    assert_eq!(t.run(&["PFMERGE", "hll2", "dense"]), OK);
    assert_eq!(t.run(&["PFDEBUG", "ENCODING", "hll2"]), "+dense\r\n");
    assert_eq!(t.run(&["PFCOUNT", "hll2"]), int(4));
}

#[test]
fn union_count_of_many() {
    let mut t = TestEngine::new();
    for x in 1..1200 {
        for (k, p) in [("hll1", "foo"), ("hll2", "bar"), ("hll3", "zap")] {
            t.run(&["PFADD", k, &format!("{p}-{x}")]);
        }
        if x % 100 == 0 {
            let card: i64 = t.run(&["PFCOUNT", "hll1", "hll2", "hll3"])[1..]
                .trim()
                .parse()
                .unwrap();
            let real = x * 3;
            assert!((card - real).abs() < card / 20, "{card} for {real}");
        }
    }
}

#[test]
fn pfdebug_subcommands() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["PFDEBUG", "GETREG", "nokey"]),
        err("ERR The specified key does not exist")
    );
    // The key is looked up before the subcommand is.
    assert_eq!(
        t.run(&["PFDEBUG", "NOPE", "nokey"]),
        err("ERR The specified key does not exist")
    );
    t.run(&["PFADD", "hll", "1", "2", "3"]);
    assert_eq!(
        t.run(&["PFDEBUG", "NOPE", "hll"]),
        err("ERR Unknown PFDEBUG subcommand 'NOPE'")
    );
    assert_eq!(
        run_bin(&mut t, &[b"PFDEBUG", b"a\r\nb\0c", b"hll"]),
        err("ERR Unknown PFDEBUG subcommand 'a  b'")
    );
    assert_eq!(t.run(&["PFDEBUG", "encoding", "hll"]), "+sparse\r\n");
    let regs = t.run(&["PFDEBUG", "GETREG", "hll"]);
    assert!(regs.starts_with("*16384\r\n"));
    assert_eq!(regs.matches(":0\r\n").count(), 16384 - 3);
    // GETREG left the value dense, as in Redis.
    assert_eq!(t.run(&["PFDEBUG", "ENCODING", "hll"]), "+dense\r\n");
    assert_eq!(
        t.run(&["PFDEBUG", "DECODE", "hll"]),
        err("ERR HLL encoding is not sparse")
    );
    assert_eq!(t.run(&["PFDEBUG", "TODENSE", "hll"]), int(0));
    assert_eq!(t.run(&["PFCOUNT", "hll"]), int(3));
}

// Ten million hashes take half a minute unoptimised; tests/test_hyperloglog.py
// runs PFSELFTEST on the release binary.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "slow without optimisation: run with --release"
)]
fn selftest_passes() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["PFSELFTEST"]), OK);
}

#[test]
fn handmade_dense_registers() {
    let mut t = TestEngine::new();
    // Redis 7.0.15's counts for dense HLLs whose every byte is `fill`, and
    // the cache it leaves. All registers at 63 make the estimate infinite:
    // Redis's llroundl gives i64::MIN, which also marks the cache stale.
    let cases: &[(u8, i64, u64)] = &[
        (0x00, 0, 0),
        (0xff, i64::MIN, 1 << 63),
        (0x41, 88984, 88984),
        (0x10, 25637, 25637),
        (0xc3, 378_102, 378_102),
    ];
    for &(fill, want, cache) in cases {
        let mut v = b"HYLL\0\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
        v.resize(12304, fill);
        raw_set(&t, "d", &v);
        assert_eq!(t.run(&["PFCOUNT", "d"]), int(want), "{fill:#x}");
        let stored = raw_get(&t, "d");
        assert_eq!(stored[8..16], cache.to_le_bytes(), "{fill:#x}");
        assert_eq!(t.run(&["PFCOUNT", "d", "d"]), int(want), "{fill:#x}");
    }
}

#[test]
fn concurrent_pfadds_lose_nothing() {
    // Two engines (as two workers) add disjoint elements to one key at once;
    // every register must end up where one engine alone puts it.
    let mut t = TestEngine::new();
    let store = t.engine.store().clone();
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut e = Engine::new(store, Config::default(), ServerInfo::default()).unwrap();
                let mut s = Session::new(10 + w, 0);
                let mut out = Vec::new();
                for i in 0..3000 {
                    let ele = format!("w{w}-{i}");
                    let args = [
                        Cow::Borrowed(&b"PFADD"[..]),
                        Cow::Borrowed(&b"hll"[..]),
                        Cow::Owned(ele.into_bytes()),
                    ];
                    e.execute(&mut s, &args, &mut out);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    for w in 0..2 {
        run_with(
            &mut t,
            &["PFADD", "serial"],
            &numbers(&format!("w{w}-"), 3000),
        );
    }
    t.run(&["PFDEBUG", "TODENSE", "hll"]);
    t.run(&["PFDEBUG", "TODENSE", "serial"]);
    assert_eq!(raw_get(&t, "hll")[16..], raw_get(&t, "serial")[16..]);
}
