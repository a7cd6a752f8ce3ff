//! Hash commands through the dispatcher, against Redis 7.0's replies and
//! error texts (`tests/unit/type/hash.tcl`).

mod common;
#[path = "common/resp.rs"]
mod resp;

use std::borrow::Cow;
use std::collections::HashSet;

use common::*;
use engine::command;
use resp::{parse, Reply};
use store::Ttl;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";
const OUT_OF_RANGE: &str = "ERR value is out of range";
const EMPTY_SCAN: &str = "*2\r\n$1\r\n0\r\n*0\r\n";

/// Runs a command with binary arguments.
fn run_bin(t: &mut TestEngine, args: &[&[u8]]) -> String {
    let args: Vec<Cow<[u8]>> = args.iter().map(|a| Cow::Borrowed(*a)).collect();
    t.run_bytes(&args).0
}

/// Runs a command given as owned words.
fn run_owned(t: &mut TestEngine, words: &[String]) -> String {
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    t.run(&words)
}

/// A hash `h` with fields a=1, b=2, c=3 (in that order).
fn abc() -> TestEngine {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["HSET", "h", "a", "1", "b", "2", "c", "3"]), int(3));
    t
}

/// A hash `h` with fields f0..f{n-1} holding v0..v{n-1}.
fn numbered(t: &mut TestEngine, n: usize) {
    let mut args: Vec<String> = vec!["HSET".into(), "h".into()];
    for i in 0..n {
        args.push(format!("f{i}"));
        args.push(format!("v{i}"));
    }
    assert_eq!(run_owned(t, &args), int(n as i64));
}

/// A page of HSCAN: cursor 0 and these items.
fn page(items: &[&str]) -> String {
    format!("*2\r\n{}{}", bulk("0"), bulks(items))
}

/// The ttl of `key` in db 0.
fn ttl(t: &TestEngine, key: &str) -> Ttl {
    let mut h = t.engine.store().handle().expect("handle");
    h.ttl(0, key.as_bytes()).expect("ttl")
}

/// First key, last key, step.
type Keys = (i32, i32, i32);

#[test]
fn table_entries_match_redis() {
    let expect: &[(&str, i32, Keys, &[&str])] = &[
        ("hset", -4, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("hsetnx", 4, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("hget", 3, (1, 1, 1), &["readonly", "fast"]),
        ("hmget", -3, (1, 1, 1), &["readonly", "fast"]),
        ("hmset", -4, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("hdel", -3, (1, 1, 1), &["write", "fast"]),
        ("hlen", 2, (1, 1, 1), &["readonly", "fast"]),
        ("hstrlen", 3, (1, 1, 1), &["readonly", "fast"]),
        ("hexists", 3, (1, 1, 1), &["readonly", "fast"]),
        ("hkeys", 2, (1, 1, 1), &["readonly"]),
        ("hvals", 2, (1, 1, 1), &["readonly"]),
        ("hgetall", 2, (1, 1, 1), &["readonly"]),
        ("hincrby", 4, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("hincrbyfloat", 4, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("hrandfield", -2, (1, 1, 1), &["readonly"]),
        ("hscan", -3, (1, 1, 1), &["readonly"]),
    ];
    for (name, arity, keys, flags) in expect {
        let c = command::lookup(name.as_bytes()).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(c.arity, *arity, "{name}");
        assert_eq!((c.first_key, c.last_key, c.step), *keys, "{name}");
        assert_eq!(c.group, "hash", "{name}");
        assert_eq!(c.flags & command::flags::ATOMIC, 0, "{name}");
        let names: Vec<&str> = command::flags::NAMES
            .iter()
            .filter(|(bit, _)| c.flags & bit != 0)
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(&names, flags, "{name}");
    }
}

#[test]
fn hset_counts_new_fields_and_hmset_says_ok() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["HSET", "h", "a", "1"]), int(1));
    assert_eq!(t.run(&["HSET", "h", "a", "2", "b", "3"]), int(1));
    // A field named twice in one call counts once; the last value wins.
    assert_eq!(t.run(&["HSET", "h", "c", "x", "c", "y"]), int(1));
    assert_eq!(t.run(&["HGET", "h", "c"]), bulk("y"));
    assert_eq!(t.run(&["HMSET", "h", "a", "9", "d", "4"]), OK);
    assert_eq!(
        t.run(&["HGETALL", "h"]),
        bulks(&["a", "9", "b", "3", "c", "y", "d", "4"])
    );
    for (cmd, name) in [("HSET", "hset"), ("HMSET", "hmset")] {
        let arity = err(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        assert_eq!(t.run(&[cmd, "h", "a", "1", "b"]), arity);
        assert_eq!(t.run(&[cmd, "h", "a"]), arity);
        assert_eq!(t.run(&[cmd, "h"]), arity);
    }
    assert_eq!(t.run(&["SET", "s", "v"]), OK);
    assert_eq!(t.run(&["HSET", "s", "a", "1"]), err(WRONGTYPE));
    assert_eq!(t.run(&["HMSET", "s", "a", "1"]), err(WRONGTYPE));
}

#[test]
fn hset_is_binary_safe_and_keeps_the_ttl() {
    let mut t = TestEngine::new();
    let field: &[u8] = b"f\x00\xff\r\n";
    assert_eq!(
        run_bin(&mut t, &[b"HSET", b"h", field, b"\x00v\r\n"]),
        int(1)
    );
    assert_eq!(run_bin(&mut t, &[b"HSTRLEN", b"h", field]), int(4));
    assert_eq!(run_bin(&mut t, &[b"HEXISTS", b"h", b"f"]), int(0));
    // The empty field and value are a field like any other.
    assert_eq!(run_bin(&mut t, &[b"HSET", b"h", b"", b""]), int(1));
    assert_eq!(run_bin(&mut t, &[b"HEXISTS", b"h", b""]), int(1));
    assert_eq!(run_bin(&mut t, &[b"HGET", b"h", b""]), bulk(""));

    assert_eq!(t.run(&["EXPIRE", "h", "100"]), int(1));
    assert_eq!(t.run(&["HSET", "h", "x", "y"]), int(1));
    assert_eq!(t.run(&["HDEL", "h", "x"]), int(1));
    assert_eq!(t.run(&["HINCRBY", "h", "n", "1"]), int(1));
    assert_eq!(t.run(&["HINCRBYFLOAT", "h", "n", "1.5"]), bulk("2.5"));
    assert_eq!(ttl(&t, "h"), Ttl::Ms(100_000));
}

#[test]
fn hsetnx_sets_only_missing_fields() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["HSETNX", "h", "a", "1"]), int(1));
    assert_eq!(t.run(&["HSETNX", "h", "a", "2"]), int(0));
    assert_eq!(t.run(&["HGET", "h", "a"]), bulk("1"));
    assert_eq!(t.run(&["HSETNX", "h", "b", "2"]), int(1));
    assert_eq!(t.run(&["HLEN", "h"]), int(2));
    assert_eq!(t.run(&["SET", "s", "v"]), OK);
    assert_eq!(t.run(&["HSETNX", "s", "a", "1"]), err(WRONGTYPE));
}

#[test]
fn hget_and_hmget() {
    let mut t = abc();
    assert_eq!(t.run(&["HGET", "h", "b"]), bulk("2"));
    assert_eq!(t.run(&["HGET", "h", "zz"]), NIL);
    assert_eq!(t.run(&["HGET", "nokey", "a"]), NIL);
    assert_eq!(
        t.run(&["HMGET", "h", "c", "zz", "a", "a"]),
        format!("*4\r\n{}{NIL}{}{}", bulk("3"), bulk("1"), bulk("1"))
    );
    assert_eq!(
        t.run(&["HMGET", "nokey", "a", "b"]),
        format!("*2\r\n{NIL}{NIL}")
    );
    t.resp3();
    assert_eq!(t.run(&["HGET", "h", "zz"]), "_\r\n");
    assert_eq!(
        t.run(&["HMGET", "h", "zz", "a"]),
        format!("*2\r\n_\r\n{}", bulk("1"))
    );
    assert_eq!(t.run(&["SET", "s", "v"]), OK);
    assert_eq!(t.run(&["HGET", "s", "a"]), err(WRONGTYPE));
    // Unlike MGET, HMGET of another type is an error, not nils.
    assert_eq!(t.run(&["HMGET", "s", "a"]), err(WRONGTYPE));
}

#[test]
fn hdel_removes_fields_and_the_emptied_key() {
    let mut t = abc();
    assert_eq!(t.run(&["HDEL", "h", "zz"]), int(0));
    assert_eq!(t.run(&["HDEL", "h", "a", "zz", "a"]), int(1));
    assert_eq!(t.run(&["HKEYS", "h"]), bulks(&["b", "c"]));
    assert_eq!(t.run(&["HDEL", "h", "b", "c"]), int(2));
    assert_eq!(t.run(&["EXISTS", "h"]), int(0));
    assert_eq!(t.run(&["HDEL", "nokey", "a"]), int(0));
    assert_eq!(
        t.run(&["HDEL", "h"]),
        err("ERR wrong number of arguments for 'hdel' command")
    );
    assert_eq!(t.run(&["SET", "s", "v"]), OK);
    assert_eq!(t.run(&["HDEL", "s", "a"]), err(WRONGTYPE));
}

#[test]
fn hdel_of_many_fields_of_a_large_hash() {
    let mut t = TestEngine::new();
    numbered(&mut t, 2000);
    let mut del: Vec<String> = vec!["HDEL".into(), "h".into()];
    del.extend((0..2000).step_by(2).map(|i| format!("f{i}")));
    assert_eq!(run_owned(&mut t, &del), int(1000));
    assert_eq!(t.run(&["HLEN", "h"]), int(1000));
    assert_eq!(t.run(&["HGET", "h", "f1"]), bulk("v1"));
    assert_eq!(t.run(&["HGET", "h", "f2"]), NIL);
    // A hash this large is a hashtable: its order is its own, as in Redis.
    let mut keys = parse(&t.run(&["HKEYS", "h"])).texts();
    keys.sort();
    let mut expect: Vec<String> = (1..2000).step_by(2).map(|i| format!("f{i}")).collect();
    expect.sort();
    assert_eq!(keys, expect);
}

#[test]
fn hlen_hstrlen_hexists() {
    let mut t = abc();
    assert_eq!(t.run(&["HSET", "h", "long", "hello world"]), int(1));
    assert_eq!(t.run(&["HLEN", "h"]), int(4));
    assert_eq!(t.run(&["HLEN", "nokey"]), int(0));
    assert_eq!(t.run(&["HSTRLEN", "h", "long"]), int(11));
    assert_eq!(t.run(&["HSTRLEN", "h", "zz"]), int(0));
    assert_eq!(t.run(&["HSTRLEN", "nokey", "a"]), int(0));
    assert_eq!(t.run(&["HEXISTS", "h", "a"]), int(1));
    assert_eq!(t.run(&["HEXISTS", "h", "zz"]), int(0));
    assert_eq!(t.run(&["HEXISTS", "nokey", "a"]), int(0));
    assert_eq!(t.run(&["SET", "s", "v"]), OK);
    for cmd in [
        &["HLEN", "s"][..],
        &["HSTRLEN", "s", "a"],
        &["HEXISTS", "s", "a"],
    ] {
        assert_eq!(t.run(cmd), err(WRONGTYPE), "{cmd:?}");
    }
}

#[test]
fn hkeys_hvals_hgetall_in_insertion_order() {
    let mut t = abc();
    assert_eq!(t.run(&["HKEYS", "h"]), bulks(&["a", "b", "c"]));
    assert_eq!(t.run(&["HVALS", "h"]), bulks(&["1", "2", "3"]));
    assert_eq!(
        t.run(&["HGETALL", "h"]),
        bulks(&["a", "1", "b", "2", "c", "3"])
    );
    for cmd in ["HKEYS", "HVALS", "HGETALL"] {
        assert_eq!(t.run(&[cmd, "nokey"]), "*0\r\n", "{cmd}");
    }
    t.resp3();
    let all = t.run(&["HGETALL", "h"]);
    assert!(all.starts_with("%3\r\n"), "{all}");
    assert_eq!(parse(&all).texts(), ["a", "1", "b", "2", "c", "3"]);
    assert_eq!(t.run(&["HGETALL", "nokey"]), "%0\r\n");
    assert_eq!(t.run(&["HKEYS", "nokey"]), "*0\r\n");
    assert_eq!(t.run(&["HKEYS", "h"]), bulks(&["a", "b", "c"]));
    assert_eq!(t.run(&["SET", "s", "v"]), OK);
    for cmd in ["HKEYS", "HVALS", "HGETALL"] {
        assert_eq!(t.run(&[cmd, "s"]), err(WRONGTYPE), "{cmd}");
    }
}

#[test]
fn hincrby_adds_to_integers() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["HINCRBY", "h", "n", "5"]), int(5));
    assert_eq!(t.run(&["HINCRBY", "h", "n", "-7"]), int(-2));
    assert_eq!(t.run(&["HINCRBY", "h", "n", "0"]), int(-2));
    assert_eq!(t.run(&["HGET", "h", "n"]), bulk("-2"));
    assert_eq!(
        t.run(&["HINCRBY", "h", "m", "9223372036854775807"]),
        int(i64::MAX)
    );
    let overflow = err("ERR increment or decrement would overflow");
    assert_eq!(t.run(&["HINCRBY", "h", "m", "1"]), overflow);
    assert_eq!(t.run(&["HINCRBY", "h", "m", "-1"]), int(i64::MAX - 1));
    assert_eq!(t.run(&["HSET", "h", "low", "-9223372036854775808"]), int(1));
    assert_eq!(t.run(&["HINCRBY", "h", "low", "-1"]), overflow);
    assert_eq!(t.run(&["HGET", "h", "low"]), bulk("-9223372036854775808"));
    for bad in ["1.5", " 1", "abc", "", "01", "99999999999999999999"] {
        run_bin(&mut t, &[b"HSET", b"h", b"bad", bad.as_bytes()]);
        assert_eq!(
            t.run(&["HINCRBY", "h", "bad", "1"]),
            err("ERR hash value is not an integer"),
            "{bad:?}"
        );
        assert_eq!(t.run(&["HGET", "h", "bad"]), bulk(bad));
    }
    assert_eq!(t.run(&["HINCRBY", "h", "n", "x"]), err(NOT_INT));
    assert_eq!(t.run(&["HINCRBY", "h", "n", "1.0"]), err(NOT_INT));
    // A failed increment of a missing key creates nothing.
    assert_eq!(t.run(&["HINCRBY", "new", "n", "x"]), err(NOT_INT));
    assert_eq!(t.run(&["EXISTS", "new"]), int(0));
    assert_eq!(t.run(&["SET", "s", "v"]), OK);
    assert_eq!(t.run(&["HINCRBY", "s", "n", "1"]), err(WRONGTYPE));
    // The increment is checked before the type.
    assert_eq!(t.run(&["HINCRBY", "s", "n", "x"]), err(NOT_INT));
}

#[test]
fn hincrbyfloat_adds_exactly() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["HINCRBYFLOAT", "h", "f", "10.5"]), bulk("10.5"));
    assert_eq!(t.run(&["HINCRBYFLOAT", "h", "f", "0.1"]), bulk("10.6"));
    assert_eq!(t.run(&["HINCRBYFLOAT", "h", "f", "-10.6"]), bulk("0"));
    assert_eq!(t.run(&["HINCRBYFLOAT", "h", "g", "5.0e3"]), bulk("5000"));
    assert_eq!(t.run(&["HINCRBYFLOAT", "h", "g", "-.5"]), bulk("4999.5"));
    assert_eq!(t.run(&["HGET", "h", "g"]), bulk("4999.5"));
    assert_eq!(t.run(&["HSET", "h", "i", "7"]), int(1));
    assert_eq!(t.run(&["HINCRBYFLOAT", "h", "i", "1.25"]), bulk("8.25"));
    assert_eq!(t.run(&["HSET", "h", "e", "1e3"]), int(1));
    assert_eq!(t.run(&["HINCRBYFLOAT", "h", "e", "1"]), bulk("1001"));

    for bad in ["abc", " 1", "1e", "", "nan"] {
        run_bin(&mut t, &[b"HSET", b"h", b"bad", bad.as_bytes()]);
        assert_eq!(
            t.run(&["HINCRBYFLOAT", "h", "bad", "1"]),
            err("ERR hash value is not a float"),
            "{bad:?}"
        );
    }
    for bad in ["abc", "1e", "", " 1", "nan"] {
        assert_eq!(
            t.run(&["HINCRBYFLOAT", "h", "f", bad]),
            err(NOT_FLOAT),
            "{bad:?}"
        );
    }
    for inf in ["inf", "-inf", "+Infinity"] {
        assert_eq!(
            t.run(&["HINCRBYFLOAT", "h", "f", inf]),
            err("ERR value is NaN or Infinity")
        );
    }
    assert_eq!(t.run(&["HSET", "h", "huge", "9e6144"]), int(1));
    assert_eq!(
        t.run(&["HINCRBYFLOAT", "h", "huge", "9e6144"]),
        err("ERR increment would produce NaN or Infinity")
    );
    assert_eq!(t.run(&["HGET", "h", "huge"]), bulk("9e6144"));
    assert_eq!(t.run(&["HINCRBYFLOAT", "new", "f", "x"]), err(NOT_FLOAT));
    assert_eq!(t.run(&["EXISTS", "new"]), int(0));
    assert_eq!(t.run(&["SET", "s", "v"]), OK);
    assert_eq!(t.run(&["HINCRBYFLOAT", "s", "f", "1"]), err(WRONGTYPE));
    // The increment is checked before the key.
    assert_eq!(t.run(&["HINCRBYFLOAT", "s", "f", "x"]), err(NOT_FLOAT));
    assert_eq!(
        t.run(&["HINCRBYFLOAT", "s", "f", "inf"]),
        err("ERR value is NaN or Infinity")
    );
}

#[test]
fn hrandfield_without_a_count() {
    let mut t = abc();
    let mut seen = HashSet::new();
    for _ in 0..100 {
        let r = parse(&t.run(&["HRANDFIELD", "h"]));
        assert!(["a", "b", "c"].contains(&r.text()), "{r:?}");
        seen.insert(r.text().to_string());
    }
    assert_eq!(seen.len(), 3);
    assert_eq!(t.run(&["HRANDFIELD", "nokey"]), NIL);
    t.resp3();
    assert_eq!(t.run(&["HRANDFIELD", "nokey"]), "_\r\n");
    assert_eq!(t.run(&["SET", "s", "v"]), OK);
    assert_eq!(t.run(&["HRANDFIELD", "s"]), err(WRONGTYPE));
}

#[test]
fn hrandfield_positive_counts_are_distinct() {
    let mut t = TestEngine::new();
    numbered(&mut t, 100);
    let mut seen = HashSet::new();
    for count in [1, 2, 10, 33, 34, 99] {
        let fields = parse(&t.run(&["HRANDFIELD", "h", &count.to_string()])).texts();
        assert_eq!(fields.len(), count);
        let distinct: HashSet<_> = fields.iter().collect();
        assert_eq!(distinct.len(), count, "{fields:?}");
        seen.extend(fields);
    }
    assert!(seen.len() > 50, "picks spread over the hash");
    // At least the size: the whole hash, in order.
    let all: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
    assert_eq!(parse(&t.run(&["HRANDFIELD", "h", "100"])).texts(), all);
    assert_eq!(parse(&t.run(&["HRANDFIELD", "h", "1000"])).texts(), all);
    let pairs = parse(&t.run(&["HRANDFIELD", "h", "5", "WITHVALUES"])).texts();
    assert_eq!(pairs.len(), 10);
    for p in pairs.chunks(2) {
        assert_eq!(p[1], p[0].replace('f', "v"));
    }
    assert_eq!(t.run(&["HRANDFIELD", "h", "0"]), "*0\r\n");
    assert_eq!(t.run(&["HRANDFIELD", "h", "0", "withvalues"]), "*0\r\n");
    assert_eq!(t.run(&["HRANDFIELD", "nokey", "5"]), "*0\r\n");
    assert_eq!(
        t.run(&["HRANDFIELD", "nokey", "-5", "withvalues"]),
        "*0\r\n"
    );
}

#[test]
fn hrandfield_negative_counts_repeat() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["HSET", "h", "a", "1", "b", "2"]), int(2));
    let fields = parse(&t.run(&["HRANDFIELD", "h", "-50"])).texts();
    assert_eq!(fields.len(), 50);
    assert!(fields.iter().all(|f| f == "a" || f == "b"));
    assert!(fields.iter().any(|f| f == "a") && fields.iter().any(|f| f == "b"));
    let pairs = parse(&t.run(&["HRANDFIELD", "h", "-7", "withvalues"])).texts();
    assert_eq!(pairs.len(), 14);
    for p in pairs.chunks(2) {
        assert!(p == ["a", "1"] || p == ["b", "2"], "{p:?}");
    }
    assert_eq!(parse(&t.run(&["HRANDFIELD", "h", "-1"])).texts().len(), 1);
}

fn abc_value(field: &str) -> &'static str {
    match field {
        "a" => "1",
        "b" => "2",
        "c" => "3",
        other => panic!("unknown field {other}"),
    }
}

#[test]
fn hrandfield_withvalues_nests_pairs_in_resp3() {
    let mut t = abc();
    t.resp3();
    for (count, expect) in [("2", 2), ("-4", 4), ("3", 3), ("10", 3)] {
        let r = parse(&t.run(&["HRANDFIELD", "h", count, "WITHVALUES"]));
        assert_eq!(r.items().len(), expect, "{count}");
        for pair in r.items() {
            let Reply::Agg('*', kv) = pair else {
                panic!("not a pair: {pair:?}");
            };
            assert_eq!(kv.len(), 2);
            assert_eq!(abc_value(kv[0].text()), kv[1].text());
        }
    }
    // Without WITHVALUES a flat array of fields.
    assert_eq!(parse(&t.run(&["HRANDFIELD", "h", "2"])).texts().len(), 2);
}

#[test]
fn hrandfield_errors() {
    let mut t = abc();
    assert_eq!(t.run(&["HRANDFIELD", "h", "x"]), err(NOT_INT));
    assert_eq!(t.run(&["HRANDFIELD", "h", "1.5"]), err(NOT_INT));
    assert_eq!(t.run(&["HRANDFIELD", "h", "x", "WITHVALUES"]), err(NOT_INT));
    assert_eq!(t.run(&["HRANDFIELD", "h", "1", "WITHVALUE"]), err(SYNTAX));
    assert_eq!(
        t.run(&["HRANDFIELD", "h", "1", "WITHVALUES", "x"]),
        err(SYNTAX)
    );
    assert_eq!(
        t.run(&["HRANDFIELD", "h", "-9223372036854775808"]),
        err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    );
    for huge in ["-4611686018427387904", "4611686018427387904"] {
        assert_eq!(
            t.run(&["HRANDFIELD", "h", huge, "WITHVALUES"]),
            err(OUT_OF_RANGE)
        );
    }
    // Without WITHVALUES a huge positive count is the whole hash.
    assert_eq!(
        parse(&t.run(&["HRANDFIELD", "h", "9223372036854775807"])).texts(),
        ["a", "b", "c"]
    );
    // Repeats whose reply would pass proto-max-bulk-len are refused (Redis
    // would go on writing them for ever).
    assert_eq!(
        t.run(&["HRANDFIELD", "h", "-4611686018427387903", "WITHVALUES"]),
        err(OUT_OF_RANGE)
    );
    assert_eq!(
        t.run(&["HRANDFIELD", "h", "-9223372036854775807"]),
        err(OUT_OF_RANGE)
    );
    assert_eq!(t.run(&["SET", "s", "v"]), OK);
    assert_eq!(t.run(&["HRANDFIELD", "s", "0"]), err(WRONGTYPE));
    assert_eq!(t.run(&["HRANDFIELD", "s", "x"]), err(NOT_INT));
}

#[test]
fn hscan_returns_the_hash_with_match() {
    let mut t = abc();
    assert_eq!(t.run(&["HSET", "h", "ab", "4"]), int(1));
    assert_eq!(
        t.run(&["HSCAN", "h", "0"]),
        page(&["a", "1", "b", "2", "c", "3", "ab", "4"])
    );
    assert_eq!(
        t.run(&["HSCAN", "h", "0", "MATCH", "a*", "COUNT", "1"]),
        page(&["a", "1", "ab", "4"])
    );
    // A compact hash comes back whole whatever the cursor.
    assert_eq!(
        t.run(&["HSCAN", "h", "7", "match", "?"]),
        page(&["a", "1", "b", "2", "c", "3"])
    );
    assert_eq!(t.run(&["HSCAN", "h", "0", "MATCH", "zz*"]), page(&[]));
    // MATCH * takes the empty field too, as Redis skips the matcher for it.
    assert_eq!(run_bin(&mut t, &[b"HSET", b"e", b"", b"v"]), int(1));
    assert_eq!(t.run(&["HSCAN", "e", "0", "MATCH", "*"]), page(&["", "v"]));
    assert_eq!(t.run(&["HSCAN", "e", "0", "MATCH", "?*"]), page(&[]));
    // RESP3 keeps the flat array.
    t.resp3();
    assert_eq!(t.run(&["HSCAN", "h", "0", "MATCH", "c"]), page(&["c", "3"]));
}

#[test]
fn hscan_pages_cover_a_large_hash() {
    let mut t = TestEngine::new();
    numbered(&mut t, 1000);
    let mut cursor = "0".to_string();
    let mut fields = HashSet::new();
    loop {
        let r = parse(&t.run(&["HSCAN", "h", &cursor, "COUNT", "100"]));
        let items = r.items();
        cursor = items[0].text().to_string();
        for kv in items[1].texts().chunks(2) {
            assert_eq!(kv[1], kv[0].replace('f', "v"));
            fields.insert(kv[0].clone());
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(fields.len(), 1000);
}

#[test]
fn hscan_errors_in_redis_order() {
    let mut t = abc();
    assert_eq!(t.run(&["HSCAN", "nokey", "0"]), EMPTY_SCAN);
    // A missing key replies before the options are looked at.
    assert_eq!(t.run(&["HSCAN", "nokey", "0", "bogus"]), EMPTY_SCAN);
    assert_eq!(t.run(&["HSCAN", "nokey", "x"]), err("ERR invalid cursor"));
    assert_eq!(t.run(&["HSCAN", "h", "x"]), err("ERR invalid cursor"));
    assert_eq!(t.run(&["HSCAN", "h", "1 "]), err("ERR invalid cursor"));
    assert_eq!(
        t.run(&["HSCAN", "h", "-1"]),
        page(&["a", "1", "b", "2", "c", "3"])
    );
    for bad in [
        &["bogus"][..],
        &["COUNT", "0"],
        &["COUNT", "-1"],
        &["COUNT", "3", "COUNT", "0"],
        &["MATCH"],
        &["COUNT"],
        &["TYPE", "string"],
        &["NOVALUES"],
    ] {
        let mut cmd = vec!["HSCAN", "h", "0"];
        cmd.extend_from_slice(bad);
        assert_eq!(t.run(&cmd), err(SYNTAX), "{bad:?}");
    }
    assert_eq!(t.run(&["HSCAN", "h", "0", "COUNT", "x"]), err(NOT_INT));
    assert_eq!(t.run(&["SET", "s", "v"]), OK);
    assert_eq!(t.run(&["HSCAN", "s", "0"]), err(WRONGTYPE));
    assert_eq!(t.run(&["HSCAN", "s", "x"]), err("ERR invalid cursor"));
}

#[test]
fn expired_hashes_are_missing() {
    let mut t = abc();
    assert_eq!(t.run(&["PEXPIRE", "h", "10"]), int(1));
    t.advance_ms(11);
    assert_eq!(t.run(&["HLEN", "h"]), int(0));
    assert_eq!(t.run(&["HSET", "h", "z", "9"]), int(1));
    assert_eq!(t.run(&["HGETALL", "h"]), bulks(&["z", "9"]));
    assert_eq!(ttl(&t, "h"), Ttl::Persistent);
}

#[test]
fn type_and_object_encoding_of_hashes() {
    let mut t = abc();
    assert_eq!(t.run(&["TYPE", "h"]), "+hash\r\n");
    assert_eq!(t.run(&["OBJECT", "ENCODING", "h"]), bulk("listpack"));
    let long = "x".repeat(65);
    assert_eq!(t.run(&["HSET", "h", "long", &long]), int(1));
    assert_eq!(t.run(&["OBJECT", "ENCODING", "h"]), bulk("hashtable"));
}
