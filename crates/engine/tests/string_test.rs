//! String and bitmap commands through the dispatcher, against Redis 7.0's
//! replies and error texts (`tests/unit/type/string.tcl`, `bitops.tcl`).

mod common;

use std::borrow::Cow;

use common::*;
use engine::command;
use store::{SetOptions, Ttl, ValueType};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";
const EMPTY: &str = "$0\r\n\r\n";

/// Stores a list value under `key` (db 0), for WRONGTYPE checks.
fn make_list(t: &TestEngine, key: &str) {
    let mut h = t.engine.store().handle().expect("handle");
    h.write_value(
        0,
        key.as_bytes(),
        ValueType::List,
        b"x",
        &SetOptions::default(),
    )
    .expect("write list");
}

/// The key's remaining time to live.
fn ttl(t: &TestEngine, key: &str) -> Ttl {
    let mut h = t.engine.store().handle().expect("handle");
    h.ttl(0, key.as_bytes()).expect("ttl")
}

/// The key's string value, read straight from the store.
fn raw_get(t: &TestEngine, key: &str) -> Vec<u8> {
    let mut h = t.engine.store().handle().expect("handle");
    h.get(0, key.as_bytes()).expect("get").expect("present")
}

/// Runs a command with binary arguments.
fn run_bin(t: &mut TestEngine, args: &[&[u8]]) -> String {
    let args: Vec<Cow<[u8]>> = args.iter().map(|a| Cow::Borrowed(*a)).collect();
    t.run_bytes(&args).0
}

/// A RESP2 array of integers.
fn ints(items: &[i64]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for i in items {
        s.push_str(&int(*i));
    }
    s
}

/// First key, last key, step.
type Keys = (i32, i32, i32);

#[test]
fn table_entries_match_redis() {
    let expect: &[(&str, i32, Keys, &[&str])] = &[
        ("setnx", 3, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("setex", 4, (1, 1, 1), &["write", "denyoom"]),
        ("psetex", 4, (1, 1, 1), &["write", "denyoom"]),
        ("getset", 3, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("getdel", 2, (1, 1, 1), &["write", "fast"]),
        ("getex", -2, (1, 1, 1), &["write", "fast"]),
        ("mget", -2, (1, -1, 1), &["readonly", "fast"]),
        ("mset", -3, (1, -1, 2), &["write", "denyoom"]),
        ("msetnx", -3, (1, -1, 2), &["write", "denyoom"]),
        ("append", 3, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("strlen", 2, (1, 1, 1), &["readonly", "fast"]),
        ("incr", 2, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("decr", 2, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("incrby", 3, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("decrby", 3, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("incrbyfloat", 3, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("getrange", 4, (1, 1, 1), &["readonly"]),
        ("setrange", 4, (1, 1, 1), &["write", "denyoom"]),
        ("substr", 4, (1, 1, 1), &["readonly"]),
        ("lcs", -3, (1, 2, 1), &["readonly"]),
        ("setbit", 4, (1, 1, 1), &["write", "denyoom"]),
        ("getbit", 3, (1, 1, 1), &["readonly", "fast"]),
        ("bitcount", -2, (1, 1, 1), &["readonly"]),
        ("bitpos", -3, (1, 1, 1), &["readonly"]),
        ("bitop", -4, (2, -1, 1), &["write", "denyoom"]),
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
    }
    let mset = command::lookup(b"mset").unwrap();
    assert_eq!(mset.key_positions(5).collect::<Vec<_>>(), [1, 3]);
    let bitop = command::lookup(b"bitop").unwrap();
    assert_eq!(bitop.key_positions(5).collect::<Vec<_>>(), [2, 3, 4]);
    assert_eq!(bitop.group, "bitmap");
    let lcs = command::lookup(b"lcs").unwrap();
    assert_eq!(lcs.key_positions(5).collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn setnx_sets_only_missing_keys() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SETNX", "k", "a"]), int(1));
    assert_eq!(t.run(&["SETNX", "k", "b"]), int(0));
    assert_eq!(t.run(&["GET", "k"]), bulk("a"));
    // An expired key counts as missing.
    assert_eq!(t.run(&["SET", "e", "old", "PX", "10"]), OK);
    t.advance_ms(11);
    assert_eq!(t.run(&["SETNX", "e", "new"]), int(1));
    assert_eq!(t.run(&["GET", "e"]), bulk("new"));
    // Against another type: no error, just 0 (the key exists).
    make_list(&t, "l");
    assert_eq!(t.run(&["SETNX", "l", "v"]), int(0));
}

#[test]
fn setex_and_psetex_set_a_ttl() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SETEX", "k", "10", "v"]), OK);
    assert_eq!(ttl(&t, "k"), Ttl::Ms(10_000));
    // As in Redis, a key expires once the clock is past its time.
    t.advance_ms(10_000);
    assert_eq!(t.run(&["GET", "k"]), bulk("v"));
    t.advance_ms(1);
    assert_eq!(t.run(&["GET", "k"]), NIL);

    assert_eq!(t.run(&["PSETEX", "p", "1500", "v"]), OK);
    assert_eq!(ttl(&t, "p"), Ttl::Ms(1_500));
    // SETEX overwrites any type and any TTL.
    make_list(&t, "l");
    assert_eq!(t.run(&["SETEX", "l", "100", "s"]), OK);
    assert_eq!(t.run(&["GET", "l"]), bulk("s"));
}

#[test]
fn setex_errors() {
    let mut t = TestEngine::new();
    for (cmd, name) in [("SETEX", "setex"), ("PSETEX", "psetex")] {
        let bad = err(&format!("ERR invalid expire time in '{name}' command"));
        assert_eq!(t.run(&[cmd, "k", "0", "v"]), bad);
        assert_eq!(t.run(&[cmd, "k", "-10", "v"]), bad);
        assert_eq!(t.run(&[cmd, "k", "x", "v"]), err(NOT_INT));
        assert_eq!(t.run(&[cmd, "k", "1.5", "v"]), err(NOT_INT));
        assert_eq!(t.run(&[cmd, "k", "9223372036854775807", "v"]), bad);
        assert_eq!(
            t.run(&[cmd, "k", "10"]),
            err(&format!(
                "ERR wrong number of arguments for '{name}' command"
            ))
        );
    }
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
}

#[test]
fn getset_returns_the_old_value_and_clears_the_ttl() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["GETSET", "k", "a"]), NIL);
    assert_eq!(t.run(&["GETSET", "k", "b"]), bulk("a"));
    assert_eq!(t.run(&["GET", "k"]), bulk("b"));
    assert_eq!(t.run(&["SETEX", "k", "10", "c"]), OK);
    assert_eq!(t.run(&["GETSET", "k", "d"]), bulk("c"));
    assert_eq!(ttl(&t, "k"), Ttl::Persistent);
    make_list(&t, "l");
    assert_eq!(t.run(&["GETSET", "l", "v"]), err(WRONGTYPE));
}

#[test]
fn getdel_reads_and_deletes() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["GETDEL", "k"]), NIL);
    assert_eq!(t.run(&["SET", "k", "v"]), OK);
    assert_eq!(t.run(&["GETDEL", "k"]), bulk("v"));
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
    make_list(&t, "l");
    assert_eq!(t.run(&["GETDEL", "l"]), err(WRONGTYPE));
    assert_eq!(t.run(&["EXISTS", "l"]), int(1));
}

#[test]
fn getex_changes_the_expiry() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SET", "k", "v"]), OK);
    assert_eq!(t.run(&["GETEX", "k"]), bulk("v"));
    assert_eq!(ttl(&t, "k"), Ttl::Persistent);
    assert_eq!(t.run(&["GETEX", "k", "EX", "100"]), bulk("v"));
    assert_eq!(ttl(&t, "k"), Ttl::Ms(100_000));
    assert_eq!(t.run(&["GETEX", "k"]), bulk("v"));
    assert_eq!(ttl(&t, "k"), Ttl::Ms(100_000), "no option keeps the ttl");
    assert_eq!(t.run(&["getex", "k", "px", "500"]), bulk("v"));
    assert_eq!(ttl(&t, "k"), Ttl::Ms(500));
    assert_eq!(t.run(&["GETEX", "k", "PERSIST"]), bulk("v"));
    assert_eq!(ttl(&t, "k"), Ttl::Persistent);
    let at_s = (t.now_ms() / 1000 + 20).to_string();
    assert_eq!(t.run(&["GETEX", "k", "EXAT", &at_s]), bulk("v"));
    assert!(matches!(ttl(&t, "k"), Ttl::Ms(ms) if ms > 19_000 && ms <= 20_000));
    let at_ms = (t.now_ms() + 300).to_string();
    assert_eq!(t.run(&["GETEX", "k", "PXAT", &at_ms]), bulk("v"));
    assert_eq!(ttl(&t, "k"), Ttl::Ms(300));
    t.advance_ms(301);
    assert_eq!(t.run(&["GETEX", "k"]), NIL);
}

#[test]
fn getex_with_a_past_time_deletes_after_reading() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SET", "k", "v"]), OK);
    let past = (t.now_ms() - 1).to_string();
    assert_eq!(t.run(&["GETEX", "k", "PXAT", &past]), bulk("v"));
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
    assert_eq!(t.run(&["SET", "k", "v"]), OK);
    assert_eq!(t.run(&["GETEX", "k", "EXAT", "1"]), bulk("v"));
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
}

#[test]
fn getex_errors_in_redis_order() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SET", "k", "v"]), OK);
    for bad in [
        &["GETEX", "k", "EX"][..],
        &["GETEX", "k", "EX", "10", "PX", "10"],
        &["GETEX", "k", "EX", "10", "PERSIST"],
        &["GETEX", "k", "PERSIST", "EX", "10"],
        &["GETEX", "k", "PERSIST", "PERSIST"],
        &["GETEX", "k", "KEEPTTL"],
        &["GETEX", "k", "NX"],
        &["GETEX", "k", "GET"],
        &["GETEX", "missing", "FOO"],
    ] {
        assert_eq!(t.run(bad), err(SYNTAX), "{bad:?}");
    }
    let bad_time = err("ERR invalid expire time in 'getex' command");
    assert_eq!(t.run(&["GETEX", "k", "EX", "0"]), bad_time);
    assert_eq!(t.run(&["GETEX", "k", "PXAT", "-1"]), bad_time);
    assert_eq!(
        t.run(&["GETEX", "k", "EX", "9223372036854775807"]),
        bad_time
    );
    assert_eq!(t.run(&["GETEX", "k", "EX", "ten"]), err(NOT_INT));
    assert_eq!(ttl(&t, "k"), Ttl::Persistent);
    // A missing key is nil and a wrong type errs before the time is checked.
    assert_eq!(t.run(&["GETEX", "missing", "EX", "-1"]), NIL);
    make_list(&t, "l");
    assert_eq!(t.run(&["GETEX", "l", "EX", "-1"]), err(WRONGTYPE));
    assert_eq!(t.run(&["GETEX", "l"]), err(WRONGTYPE));
}

#[test]
fn mget_reads_many_and_skips_other_types() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SET", "a", "1"]), OK);
    assert_eq!(t.run(&["SET", "c", ""]), OK);
    make_list(&t, "l");
    assert_eq!(
        t.run(&["MGET", "a", "b", "l", "c", "a"]),
        "*5\r\n$1\r\n1\r\n$-1\r\n$-1\r\n$0\r\n\r\n$1\r\n1\r\n"
    );
    t.resp3();
    assert_eq!(t.run(&["MGET", "b", "a"]), "*2\r\n_\r\n$1\r\n1\r\n");
}

#[test]
fn mset_writes_every_pair() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SETEX", "a", "100", "old"]), OK);
    make_list(&t, "l");
    assert_eq!(t.run(&["MSET", "a", "1", "b", "2", "l", "3", "b", "4"]), OK);
    assert_eq!(t.run(&["MGET", "a", "b", "l"]), bulks(&["1", "4", "3"]));
    assert_eq!(ttl(&t, "a"), Ttl::Persistent, "MSET clears the ttl");
    assert_eq!(
        t.run(&["MSET", "a", "1", "b"]),
        err("ERR wrong number of arguments for 'mset' command")
    );
    assert_eq!(
        t.run(&["MSET", "a"]),
        err("ERR wrong number of arguments for 'mset' command")
    );
    assert_eq!(t.run(&["GET", "a"]), bulk("1"));
}

#[test]
fn msetnx_is_all_or_nothing() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["MSETNX", "a", "1", "b", "2"]), int(1));
    assert_eq!(t.run(&["MSETNX", "c", "3", "b", "x"]), int(0));
    assert_eq!(t.run(&["EXISTS", "c"]), int(0));
    assert_eq!(t.run(&["GET", "b"]), bulk("2"));
    // A duplicate missing key: both pairs are written, the last wins.
    assert_eq!(t.run(&["MSETNX", "d", "1", "d", "2"]), int(1));
    assert_eq!(t.run(&["GET", "d"]), bulk("2"));
    make_list(&t, "l");
    assert_eq!(t.run(&["MSETNX", "l", "1", "e", "2"]), int(0));
    assert_eq!(
        t.run(&["MSETNX", "x", "1", "y"]),
        err("ERR wrong number of arguments for 'msetnx' command")
    );
}

#[test]
fn append_and_strlen() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["STRLEN", "k"]), int(0));
    assert_eq!(t.run(&["APPEND", "k", "foo"]), int(3));
    assert_eq!(t.run(&["APPEND", "k", "bar"]), int(6));
    assert_eq!(t.run(&["APPEND", "k", ""]), int(6));
    assert_eq!(t.run(&["GET", "k"]), bulk("foobar"));
    assert_eq!(t.run(&["STRLEN", "k"]), int(6));
    assert_eq!(t.run(&["APPEND", "e", ""]), int(0));
    assert_eq!(t.run(&["EXISTS", "e"]), int(1));
    assert_eq!(t.run(&["STRLEN", "e"]), int(0));
    assert_eq!(run_bin(&mut t, &[b"APPEND", b"b", b"\x00\xff"]), int(2));
    assert_eq!(t.run(&["STRLEN", "b"]), int(2));
    // APPEND keeps the ttl.
    assert_eq!(t.run(&["SETEX", "x", "10", "a"]), OK);
    assert_eq!(t.run(&["APPEND", "x", "b"]), int(2));
    assert_eq!(ttl(&t, "x"), Ttl::Ms(10_000));
    make_list(&t, "l");
    assert_eq!(t.run(&["APPEND", "l", "x"]), err(WRONGTYPE));
    assert_eq!(t.run(&["STRLEN", "l"]), err(WRONGTYPE));
}

#[test]
fn incr_decr_family() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["INCR", "n"]), int(1));
    assert_eq!(t.run(&["INCRBY", "n", "10"]), int(11));
    assert_eq!(t.run(&["DECR", "n"]), int(10));
    assert_eq!(t.run(&["DECRBY", "n", "25"]), int(-15));
    assert_eq!(t.run(&["DECRBY", "n", "-20"]), int(5));
    assert_eq!(t.run(&["INCRBY", "n", "-5"]), int(0));
    assert_eq!(t.run(&["GET", "n"]), bulk("0"));
    assert_eq!(t.run(&["DECR", "m"]), int(-1));
    // The ttl is kept.
    assert_eq!(t.run(&["SETEX", "x", "10", "5"]), OK);
    assert_eq!(t.run(&["INCR", "x"]), int(6));
    assert_eq!(ttl(&t, "x"), Ttl::Ms(10_000));
}

#[test]
fn incr_errors_and_overflow() {
    let mut t = TestEngine::new();
    for bad in [
        "abc",
        " 1",
        "1 ",
        "01",
        "+1",
        "1.5",
        "",
        "99999999999999999999",
    ] {
        assert_eq!(t.run(&["SET", "k", bad]), OK);
        assert_eq!(t.run(&["INCR", "k"]), err(NOT_INT), "{bad:?}");
    }
    assert_eq!(t.run(&["INCRBY", "n", "x"]), err(NOT_INT));
    assert_eq!(t.run(&["DECRBY", "n", "1.0"]), err(NOT_INT));
    let overflow = err("ERR increment or decrement would overflow");
    assert_eq!(t.run(&["SET", "max", "9223372036854775807"]), OK);
    assert_eq!(t.run(&["INCR", "max"]), overflow);
    assert_eq!(t.run(&["INCRBY", "max", "1"]), overflow);
    assert_eq!(t.run(&["SET", "min", "-9223372036854775808"]), OK);
    assert_eq!(t.run(&["DECR", "min"]), overflow);
    assert_eq!(t.run(&["DECRBY", "min", "1"]), overflow);
    assert_eq!(t.run(&["INCRBY", "min", "-9223372036854775808"]), overflow);
    assert_eq!(t.run(&["GET", "min"]), bulk("-9223372036854775808"));
    assert_eq!(
        t.run(&["DECRBY", "z", "-9223372036854775808"]),
        err("ERR decrement would overflow")
    );
    assert_eq!(t.run(&["EXISTS", "z"]), int(0));
    assert_eq!(
        t.run(&["INCRBY", "z", "-9223372036854775808"]),
        int(i64::MIN)
    );
    make_list(&t, "l");
    assert_eq!(t.run(&["INCR", "l"]), err(WRONGTYPE));
    assert_eq!(t.run(&["DECRBY", "l", "1"]), err(WRONGTYPE));
    // The argument is checked before the key's type.
    assert_eq!(t.run(&["INCRBY", "l", "x"]), err(NOT_INT));
}

#[test]
fn incrbyfloat_is_exact_decimal() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SET", "k", "1.10"]), OK);
    assert_eq!(t.run(&["INCRBYFLOAT", "k", "2.2"]), bulk("3.3"));
    assert_eq!(t.run(&["GET", "k"]), bulk("3.3"));
    assert_eq!(t.run(&["INCRBYFLOAT", "f", "0.1"]), bulk("0.1"));
    assert_eq!(t.run(&["INCRBYFLOAT", "f", "0.2"]), bulk("0.3"));
    assert_eq!(t.run(&["INCRBYFLOAT", "f", "-0.3"]), bulk("0"));
    assert_eq!(t.run(&["INCRBYFLOAT", "g", "5.0e3"]), bulk("5000"));
    assert_eq!(t.run(&["INCRBYFLOAT", "g", "-.5"]), bulk("4999.5"));
    assert_eq!(t.run(&["INCRBYFLOAT", "g", "+1E-1"]), bulk("4999.6"));
    assert_eq!(t.run(&["SET", "i", "10"]), OK);
    assert_eq!(t.run(&["INCRBYFLOAT", "i", "10.50"]), bulk("20.5"));
    assert_eq!(t.run(&["INCRBYFLOAT", "i", "-40.5"]), bulk("-20"));
    assert_eq!(
        t.run(&["INCR", "i"]),
        int(-19),
        "an integral result is an integer"
    );
    assert_eq!(
        t.run(&["INCRBYFLOAT", "s", "1e-20"]),
        bulk("0.00000000000000000001")
    );
    assert_eq!(
        t.run(&["INCRBYFLOAT", "b", "1e30"]),
        bulk(&format!("1{}", "0".repeat(30)))
    );
    // The ttl is kept; RESP3 still gets a bulk string.
    assert_eq!(t.run(&["SETEX", "x", "10", "1.5"]), OK);
    t.resp3();
    assert_eq!(t.run(&["INCRBYFLOAT", "x", "1"]), bulk("2.5"));
    assert_eq!(ttl(&t, "x"), Ttl::Ms(10_000));
}

#[test]
fn incrbyfloat_errors() {
    let mut t = TestEngine::new();
    for bad in [
        "abc", " 1", "1 ", "nan", "", "1e", "0x10", "1e99999", "1e-99999",
    ] {
        assert_eq!(t.run(&["INCRBYFLOAT", "k", bad]), err(NOT_FLOAT), "{bad:?}");
        assert_eq!(t.run(&["SET", "v", bad]), OK);
        assert_eq!(t.run(&["INCRBYFLOAT", "v", "1"]), err(NOT_FLOAT), "{bad:?}");
    }
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
    let nan_inf = err("ERR increment would produce NaN or Infinity");
    assert_eq!(t.run(&["INCRBYFLOAT", "k", "inf"]), nan_inf);
    assert_eq!(t.run(&["INCRBYFLOAT", "k", "-Infinity"]), nan_inf);
    assert_eq!(
        t.run(&["SET", "k", "9.999999999999999999999999999999999e6144"]),
        OK
    );
    assert_eq!(t.run(&["INCRBYFLOAT", "k", "9e6144"]), nan_inf);
    assert_eq!(t.run(&["SET", "inf", "inf"]), OK);
    assert_eq!(t.run(&["INCRBYFLOAT", "inf", "-inf"]), nan_inf);
    assert_eq!(t.run(&["GET", "inf"]), bulk("inf"));
    make_list(&t, "l");
    assert_eq!(t.run(&["INCRBYFLOAT", "l", "1"]), err(WRONGTYPE));
    assert_eq!(t.run(&["INCRBYFLOAT", "l", "x"]), err(WRONGTYPE));
}

#[test]
fn getrange_and_substr() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["GETRANGE", "k", "0", "-1"]), EMPTY);
    assert_eq!(t.run(&["SET", "k", "Hello World"]), OK);
    for cmd in ["GETRANGE", "SUBSTR"] {
        assert_eq!(t.run(&[cmd, "k", "0", "3"]), bulk("Hell"));
        assert_eq!(t.run(&[cmd, "k", "0", "-1"]), bulk("Hello World"));
        assert_eq!(t.run(&[cmd, "k", "-3", "-1"]), bulk("rld"));
        assert_eq!(t.run(&[cmd, "k", "5", "3"]), EMPTY);
        assert_eq!(t.run(&[cmd, "k", "5", "5000"]), bulk(" World"));
        assert_eq!(t.run(&[cmd, "k", "-5000", "1"]), bulk("He"));
        assert_eq!(t.run(&[cmd, "k", "100", "200"]), EMPTY);
        // Both negative with start > end: empty, not the first byte.
        assert_eq!(t.run(&[cmd, "k", "-1", "-5"]), EMPTY);
        assert_eq!(t.run(&[cmd, "k", "-100", "-200"]), EMPTY);
        assert_eq!(t.run(&[cmd, "k", "-200", "-100"]), bulk("H"));
        assert_eq!(
            t.run(&[cmd, "k", "-9223372036854775808", "9223372036854775807"]),
            bulk("Hello World")
        );
        assert_eq!(t.run(&[cmd, "k", "x", "1"]), err(NOT_INT));
        assert_eq!(t.run(&[cmd, "k", "1", "9223372036854775808"]), err(NOT_INT));
    }
    assert_eq!(t.run(&["SET", "e", ""]), OK);
    assert_eq!(t.run(&["GETRANGE", "e", "0", "-1"]), EMPTY);
    make_list(&t, "l");
    assert_eq!(t.run(&["GETRANGE", "l", "0", "1"]), err(WRONGTYPE));
    assert_eq!(t.run(&["GETRANGE", "l", "-1", "-5"]), err(WRONGTYPE));
}

#[test]
fn setrange_overwrites_and_pads() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SETRANGE", "k", "0", ""]), int(0));
    assert_eq!(
        t.run(&["EXISTS", "k"]),
        int(0),
        "an empty patch creates nothing"
    );
    assert_eq!(t.run(&["SETRANGE", "k", "1000000", ""]), int(0));
    assert_eq!(t.run(&["SET", "k", "Hello World"]), OK);
    assert_eq!(t.run(&["SETRANGE", "k", "6", "Redis"]), int(11));
    assert_eq!(t.run(&["GET", "k"]), bulk("Hello Redis"));
    assert_eq!(t.run(&["SETRANGE", "k", "100", ""]), int(11));
    assert_eq!(t.run(&["SETRANGE", "p", "3", "ab"]), int(5));
    assert_eq!(t.run(&["GET", "p"]), "$5\r\n\0\0\0ab\r\n");
    assert_eq!(t.run(&["SETRANGE", "p", "4", "xyz"]), int(7));
    assert_eq!(t.run(&["GET", "p"]), "$7\r\n\0\0\0axyz\r\n");
    assert_eq!(
        t.run(&["SETRANGE", "k", "-1", "x"]),
        err("ERR offset is out of range")
    );
    assert_eq!(t.run(&["SETRANGE", "k", "x", "x"]), err(NOT_INT));
    let too_large = err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    assert_eq!(t.run(&["SETRANGE", "k", "536870912", "x"]), too_large);
    assert_eq!(
        t.run(&["SETRANGE", "k", "9223372036854775807", "x"]),
        too_large
    );
    assert_eq!(t.run(&["SETRANGE", "new", "536870912", "x"]), too_large);
    assert_eq!(t.run(&["EXISTS", "new"]), int(0));
    // SETRANGE keeps the ttl.
    assert_eq!(t.run(&["SETEX", "x", "10", "abc"]), OK);
    assert_eq!(t.run(&["SETRANGE", "x", "1", "Z"]), int(3));
    assert_eq!(ttl(&t, "x"), Ttl::Ms(10_000));
    make_list(&t, "l");
    assert_eq!(t.run(&["SETRANGE", "l", "0", "x"]), err(WRONGTYPE));
    assert_eq!(t.run(&["SETRANGE", "l", "0", ""]), err(WRONGTYPE));
    assert_eq!(
        t.run(&["SETRANGE", "l", "-1", "x"]),
        err("ERR offset is out of range")
    );
}

/// One LCS match: the range in the first string, in the second, and the
/// length (with WITHMATCHLEN).
type Match = ((i64, i64), (i64, i64), Option<i64>);

/// The LCS IDX reply in RESP2: `matches`, ranges, `len`, n.
fn lcs_idx(ranges: &[Match], len: i64) -> String {
    let mut s = format!("*4\r\n{}*{}\r\n", bulk("matches"), ranges.len());
    for (a, b, n) in ranges {
        s.push_str(&format!("*{}\r\n", if n.is_some() { 3 } else { 2 }));
        s.push_str(&ints(&[a.0, a.1]));
        s.push_str(&ints(&[b.0, b.1]));
        if let Some(n) = n {
            s.push_str(&int(*n));
        }
    }
    s.push_str(&bulk("len"));
    s.push_str(&int(len));
    s
}

#[test]
fn lcs_string_len_and_idx() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["MSET", "a", "ohmytext", "b", "mynewtext"]), OK);
    assert_eq!(t.run(&["LCS", "a", "b"]), bulk("mytext"));
    assert_eq!(t.run(&["LCS", "a", "b", "LEN"]), int(6));
    assert_eq!(
        t.run(&["LCS", "a", "b", "IDX"]),
        lcs_idx(&[((4, 7), (5, 8), None), ((2, 3), (0, 1), None)], 6)
    );
    assert_eq!(
        t.run(&["LCS", "a", "b", "IDX", "WITHMATCHLEN"]),
        lcs_idx(&[((4, 7), (5, 8), Some(4)), ((2, 3), (0, 1), Some(2))], 6)
    );
    assert_eq!(
        t.run(&["LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"]),
        lcs_idx(&[((4, 7), (5, 8), Some(4))], 6)
    );
    assert_eq!(
        t.run(&["LCS", "a", "b", "IDX", "MINMATCHLEN", "5"]),
        lcs_idx(&[], 6)
    );
    assert_eq!(
        t.run(&["LCS", "a", "b", "IDX", "MINMATCHLEN", "-3"]),
        lcs_idx(&[((4, 7), (5, 8), None), ((2, 3), (0, 1), None)], 6)
    );
    // Options without IDX are accepted and ignored.
    assert_eq!(t.run(&["LCS", "a", "b", "WITHMATCHLEN"]), bulk("mytext"));
    assert_eq!(t.run(&["LCS", "a", "b", "MINMATCHLEN", "3", "LEN"]), int(6));
    // Missing keys are empty strings.
    assert_eq!(t.run(&["LCS", "a", "missing"]), EMPTY);
    assert_eq!(t.run(&["LCS", "x", "y", "LEN"]), int(0));
    assert_eq!(t.run(&["LCS", "x", "y", "IDX"]), lcs_idx(&[], 0));
    assert_eq!(t.run(&["LCS", "a", "a"]), bulk("ohmytext"));
    assert_eq!(
        t.run(&["LCS", "a", "a", "IDX"]),
        lcs_idx(&[((0, 7), (0, 7), None)], 8)
    );
}

#[test]
fn lcs_idx_is_a_map_in_resp3() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["MSET", "a", "ohmytext", "b", "mynewtext"]), OK);
    t.resp3();
    let r = t.run(&["LCS", "a", "b", "IDX"]);
    let expected = format!(
        "%2\r\n{}*2\r\n*2\r\n{}{}*2\r\n{}{}{}{}",
        bulk("matches"),
        ints(&[4, 7]),
        ints(&[5, 8]),
        ints(&[2, 3]),
        ints(&[0, 1]),
        bulk("len"),
        int(6)
    );
    assert_eq!(r, expected);
}

#[test]
fn lcs_errors() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["MSET", "a", "abc", "b", "abd"]), OK);
    assert_eq!(t.run(&["LCS", "a", "b", "FOO"]), err(SYNTAX));
    assert_eq!(t.run(&["LCS", "a", "b", "MINMATCHLEN"]), err(SYNTAX));
    assert_eq!(t.run(&["LCS", "a", "b", "MINMATCHLEN", "x"]), err(NOT_INT));
    assert_eq!(
        t.run(&["LCS", "a", "b", "LEN", "IDX"]),
        err("ERR If you want both the length and indexes, please just use IDX.")
    );
    make_list(&t, "l");
    let not_strings = err("ERR The specified keys must contain string values");
    assert_eq!(t.run(&["LCS", "a", "l"]), not_strings);
    assert_eq!(t.run(&["LCS", "l", "missing", "FOO"]), not_strings);
    assert_eq!(
        t.run(&["LCS", "a"]),
        err("ERR wrong number of arguments for 'lcs' command")
    );
}

#[test]
fn setbit_and_getbit() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["GETBIT", "k", "0"]), int(0));
    assert_eq!(t.run(&["SETBIT", "k", "7", "1"]), int(0));
    assert_eq!(t.run(&["GET", "k"]), bulk("\x01"));
    assert_eq!(t.run(&["SETBIT", "k", "7", "1"]), int(1));
    assert_eq!(t.run(&["SETBIT", "k", "1", "1"]), int(0));
    assert_eq!(t.run(&["GET", "k"]), bulk("A"));
    assert_eq!(t.run(&["GETBIT", "k", "1"]), int(1));
    assert_eq!(t.run(&["GETBIT", "k", "2"]), int(0));
    assert_eq!(t.run(&["GETBIT", "k", "100"]), int(0));
    assert_eq!(t.run(&["SETBIT", "k", "7", "0"]), int(1));
    assert_eq!(t.run(&["GET", "k"]), bulk("@"));
    // Growing pads with zero bytes; clearing a bit of a new key creates it.
    assert_eq!(t.run(&["SETBIT", "k", "23", "1"]), int(0));
    assert_eq!(t.run(&["STRLEN", "k"]), int(3));
    assert_eq!(t.run(&["GET", "k"]), "$3\r\n@\0\x01\r\n");
    assert_eq!(t.run(&["SETBIT", "z", "20", "0"]), int(0));
    assert_eq!(t.run(&["GET", "z"]), "$3\r\n\0\0\0\r\n");
    // The ttl is kept.
    assert_eq!(t.run(&["SETEX", "x", "10", "a"]), OK);
    assert_eq!(t.run(&["SETBIT", "x", "0", "1"]), int(0));
    assert_eq!(ttl(&t, "x"), Ttl::Ms(10_000));
    assert_eq!(raw_get(&t, "x"), [0xe1]);
}

#[test]
fn bit_errors() {
    let mut t = TestEngine::new();
    let offset = err("ERR bit offset is not an integer or out of range");
    let value = err("ERR bit is not an integer or out of range");
    for bad in ["-1", "x", "4294967296", "9223372036854775808", "1.0", ""] {
        assert_eq!(t.run(&["SETBIT", "k", bad, "1"]), offset, "{bad:?}");
        assert_eq!(t.run(&["GETBIT", "k", bad]), offset, "{bad:?}");
    }
    for bad in ["2", "-1", "x", "01", ""] {
        assert_eq!(t.run(&["SETBIT", "k", "0", bad]), value, "{bad:?}");
    }
    assert_eq!(t.run(&["GETBIT", "k", "4294967295"]), int(0));
    // An offset past what the store can hold (32MB here) is refused by the
    // store, not the parser. (4294967295, the largest valid offset, would
    // build a 512MB value first: too slow for a test.)
    let r = t.run(&["SETBIT", "k", "268435456", "1"]);
    assert_eq!(
        r,
        err("OOM command not allowed when used memory > 'maxmemory'.")
    );
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
    make_list(&t, "l");
    assert_eq!(t.run(&["SETBIT", "l", "0", "1"]), err(WRONGTYPE));
    assert_eq!(t.run(&["GETBIT", "l", "0"]), err(WRONGTYPE));
    // Arguments are checked before the type.
    assert_eq!(t.run(&["SETBIT", "l", "-1", "1"]), offset);
    assert_eq!(t.run(&["SETBIT", "l", "0", "2"]), value);
}

#[test]
fn bitcount_bytes_and_bits() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SET", "k", "foobar"]), OK);
    assert_eq!(t.run(&["BITCOUNT", "k"]), int(26));
    assert_eq!(t.run(&["BITCOUNT", "k", "0", "0"]), int(4));
    assert_eq!(t.run(&["BITCOUNT", "k", "1", "1"]), int(6));
    assert_eq!(t.run(&["BITCOUNT", "k", "1", "1", "BYTE"]), int(6));
    assert_eq!(t.run(&["BITCOUNT", "k", "5", "30", "BIT"]), int(17));
    assert_eq!(t.run(&["BITCOUNT", "k", "0", "-1", "bit"]), int(26));
    assert_eq!(t.run(&["BITCOUNT", "k", "-2", "-1"]), int(7));
    assert_eq!(t.run(&["BITCOUNT", "k", "-3", "-1", "BIT"]), int(1));
    assert_eq!(t.run(&["BITCOUNT", "k", "0", "1000"]), int(26));
    assert_eq!(t.run(&["BITCOUNT", "k", "3", "1"]), int(0));
    assert_eq!(t.run(&["BITCOUNT", "k", "-1", "-5"]), int(0));
    assert_eq!(t.run(&["BITCOUNT", "k", "100", "200"]), int(0));
    assert_eq!(
        t.run(&[
            "BITCOUNT",
            "k",
            "-9223372036854775808",
            "9223372036854775807",
            "BIT"
        ]),
        int(26)
    );
    assert_eq!(t.run(&["SET", "e", ""]), OK);
    assert_eq!(t.run(&["BITCOUNT", "e"]), int(0));
    assert_eq!(t.run(&["BITCOUNT", "e", "0", "-1", "BIT"]), int(0));
}

#[test]
fn bitcount_errors() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SET", "k", "foobar"]), OK);
    assert_eq!(t.run(&["BITCOUNT", "k", "0"]), err(SYNTAX));
    assert_eq!(
        t.run(&["BITCOUNT", "k", "0", "1", "BYTE", "x"]),
        err(SYNTAX)
    );
    assert_eq!(t.run(&["BITCOUNT", "k", "0", "1", "WORD"]), err(SYNTAX));
    assert_eq!(t.run(&["BITCOUNT", "k", "x", "1"]), err(NOT_INT));
    assert_eq!(t.run(&["BITCOUNT", "k", "0", "y"]), err(NOT_INT));
    // Redis 7.0 answers 0 for a missing key before looking at the rest.
    assert_eq!(t.run(&["BITCOUNT", "missing", "0"]), int(0));
    assert_eq!(t.run(&["BITCOUNT", "missing", "x", "y", "z"]), int(0));
    make_list(&t, "l");
    assert_eq!(t.run(&["BITCOUNT", "l"]), err(WRONGTYPE));
    assert_eq!(t.run(&["BITCOUNT", "l", "x"]), err(WRONGTYPE));
}

#[test]
fn bitpos_finds_set_and_clear_bits() {
    let mut t = TestEngine::new();
    assert_eq!(run_bin(&mut t, &[b"SET", b"k", b"\xff\xf0\x00"]), OK);
    assert_eq!(t.run(&["BITPOS", "k", "0"]), int(12));
    assert_eq!(t.run(&["BITPOS", "k", "1"]), int(0));
    assert_eq!(run_bin(&mut t, &[b"SET", b"k", b"\x00\xff\xf0"]), OK);
    assert_eq!(t.run(&["BITPOS", "k", "1", "0"]), int(8));
    assert_eq!(t.run(&["BITPOS", "k", "1", "2"]), int(16));
    assert_eq!(t.run(&["BITPOS", "k", "1", "2", "-1", "BYTE"]), int(16));
    assert_eq!(t.run(&["BITPOS", "k", "1", "7", "15", "BIT"]), int(8));
    assert_eq!(t.run(&["BITPOS", "k", "1", "7", "-3", "bit"]), int(8));
    assert_eq!(t.run(&["BITPOS", "k", "0", "8", "-1", "BIT"]), int(20));
    assert_eq!(t.run(&["BITPOS", "k", "1", "0", "6", "BIT"]), int(-1));
    assert_eq!(t.run(&["BITPOS", "k", "1", "3", "1"]), int(-1));
    // All ones: a clear bit is found past the end unless an end was given.
    assert_eq!(run_bin(&mut t, &[b"SET", b"f", b"\xff\xff\xff"]), OK);
    assert_eq!(t.run(&["BITPOS", "f", "0"]), int(24));
    assert_eq!(t.run(&["BITPOS", "f", "0", "1"]), int(24));
    assert_eq!(t.run(&["BITPOS", "f", "0", "0", "-1"]), int(-1));
    assert_eq!(t.run(&["BITPOS", "f", "0", "0", "-1", "BIT"]), int(-1));
    assert_eq!(t.run(&["BITPOS", "f", "1", "100"]), int(-1));
    // All zeros.
    assert_eq!(run_bin(&mut t, &[b"SET", b"z", b"\x00\x00"]), OK);
    assert_eq!(t.run(&["BITPOS", "z", "1"]), int(-1));
    assert_eq!(t.run(&["BITPOS", "z", "0", "1"]), int(8));
    // Missing keys are endless zeros; empty strings hold nothing.
    assert_eq!(t.run(&["BITPOS", "missing", "0"]), int(0));
    assert_eq!(t.run(&["BITPOS", "missing", "1"]), int(-1));
    assert_eq!(t.run(&["SET", "e", ""]), OK);
    assert_eq!(t.run(&["BITPOS", "e", "0"]), int(-1));
    assert_eq!(t.run(&["BITPOS", "e", "1"]), int(-1));
    assert_eq!(
        t.run(&[
            "BITPOS",
            "k",
            "1",
            "-9223372036854775808",
            "9223372036854775807",
            "BIT"
        ]),
        int(8)
    );
}

#[test]
fn bitpos_errors() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SET", "k", "a"]), OK);
    let bit = err("ERR The bit argument must be 1 or 0.");
    assert_eq!(t.run(&["BITPOS", "k", "2"]), bit);
    assert_eq!(t.run(&["BITPOS", "missing", "-1"]), bit);
    assert_eq!(t.run(&["BITPOS", "k", "x"]), err(NOT_INT));
    assert_eq!(t.run(&["BITPOS", "k", "1", "x"]), err(NOT_INT));
    assert_eq!(t.run(&["BITPOS", "k", "1", "0", "x"]), err(NOT_INT));
    assert_eq!(t.run(&["BITPOS", "k", "1", "0", "1", "WORD"]), err(SYNTAX));
    assert_eq!(t.run(&["BITPOS", "k", "1", "x", "1", "WORD"]), err(NOT_INT));
    assert_eq!(t.run(&["BITPOS", "k", "1", "0", "x", "WORD"]), err(SYNTAX));
    assert_eq!(
        t.run(&["BITPOS", "k", "1", "0", "1", "BIT", "x"]),
        err(SYNTAX)
    );
    assert_eq!(t.run(&["BITPOS", "missing", "1", "x"]), int(-1));
    make_list(&t, "l");
    assert_eq!(t.run(&["BITPOS", "l", "1"]), err(WRONGTYPE));
    assert_eq!(t.run(&["BITPOS", "l", "2"]), bit);
}

#[test]
fn bitop_and_or_xor_not() {
    let mut t = TestEngine::new();
    assert_eq!(run_bin(&mut t, &[b"SET", b"a", b"\xf0\x0f\xff"]), OK);
    assert_eq!(run_bin(&mut t, &[b"SET", b"b", b"\xcc\xcc"]), OK);
    assert_eq!(t.run(&["BITOP", "AND", "d", "a", "b"]), int(3));
    assert_eq!(raw_get(&t, "d"), [0xc0, 0x0c, 0x00]);
    assert_eq!(t.run(&["BITOP", "or", "d", "a", "b"]), int(3));
    assert_eq!(raw_get(&t, "d"), [0xfc, 0xcf, 0xff]);
    assert_eq!(t.run(&["BITOP", "Xor", "d", "a", "b"]), int(3));
    assert_eq!(raw_get(&t, "d"), [0x3c, 0xc3, 0xff]);
    assert_eq!(t.run(&["BITOP", "NOT", "d", "b"]), int(2));
    assert_eq!(raw_get(&t, "d"), [0x33, 0x33]);
    // Missing sources are empty strings (zeros for AND).
    assert_eq!(t.run(&["BITOP", "AND", "d", "a", "missing"]), int(3));
    assert_eq!(raw_get(&t, "d"), [0, 0, 0]);
    assert_eq!(t.run(&["BITOP", "OR", "d", "missing", "a"]), int(3));
    assert_eq!(raw_get(&t, "d"), [0xf0, 0x0f, 0xff]);
    assert_eq!(t.run(&["BITOP", "XOR", "d", "a", "a", "a"]), int(3));
    assert_eq!(raw_get(&t, "d"), [0xf0, 0x0f, 0xff]);
    // In place; an all-empty result deletes the destination.
    assert_eq!(t.run(&["BITOP", "NOT", "a", "a"]), int(3));
    assert_eq!(raw_get(&t, "a"), [0x0f, 0xf0, 0x00]);
    assert_eq!(t.run(&["BITOP", "OR", "d", "x", "y"]), int(0));
    assert_eq!(t.run(&["EXISTS", "d"]), int(0));
    // The destination loses its ttl and may have been of any type.
    assert_eq!(t.run(&["SETEX", "d", "10", "v"]), OK);
    assert_eq!(t.run(&["BITOP", "OR", "d", "b"]), int(2));
    assert_eq!(ttl(&t, "d"), Ttl::Persistent);
    make_list(&t, "l");
    assert_eq!(t.run(&["BITOP", "OR", "l", "b"]), int(2));
    assert_eq!(raw_get(&t, "l"), [0xcc, 0xcc]);
}

#[test]
fn bitop_errors() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SET", "a", "x"]), OK);
    assert_eq!(t.run(&["BITOP", "NAND", "d", "a"]), err(SYNTAX));
    assert_eq!(
        t.run(&["BITOP", "NOT", "d", "a", "a"]),
        err("ERR BITOP NOT must be called with a single source key.")
    );
    assert_eq!(
        t.run(&["BITOP", "AND", "d"]),
        err("ERR wrong number of arguments for 'bitop' command")
    );
    make_list(&t, "l");
    assert_eq!(t.run(&["BITOP", "AND", "d", "a", "l"]), err(WRONGTYPE));
    assert_eq!(t.run(&["EXISTS", "d"]), int(0));
}

#[test]
fn set_keeps_its_options() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SET", "k", "v", "NX"]), OK);
    assert_eq!(t.run(&["SET", "k", "w", "NX"]), NIL);
    assert_eq!(t.run(&["SET", "k", "w", "XX", "GET"]), bulk("v"));
    assert_eq!(t.run(&["SET", "k", "x", "EX", "5"]), OK);
    assert_eq!(ttl(&t, "k"), Ttl::Ms(5_000));
    assert_eq!(t.run(&["SET", "k", "y", "KEEPTTL"]), OK);
    assert_eq!(ttl(&t, "k"), Ttl::Ms(5_000));
    assert_eq!(t.run(&["SET", "k", "y", "NX", "XX"]), err(SYNTAX));
    assert_eq!(
        t.run(&["SET", "k", "y", "EX", "0"]),
        err("ERR invalid expire time in 'set' command")
    );
}
