//! Set commands through the dispatcher, against Redis 7.0's replies and
//! error texts (`tests/unit/type/set.tcl`).

mod common;
#[path = "common/resp.rs"]
mod resp;

use std::borrow::Cow;
use std::collections::HashSet;

use common::*;
use engine::command;
use resp::parse;
use store::Ttl;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";
const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
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

/// Adds m0..m{n-1} to `key`.
fn numbered(t: &mut TestEngine, key: &str, n: usize) {
    let mut args: Vec<String> = vec!["SADD".into(), key.into()];
    args.extend((0..n).map(|i| format!("m{i}")));
    assert_eq!(run_owned(t, &args), int(n as i64));
}

/// The sorted members of the set reply to `words`.
fn sorted(t: &mut TestEngine, words: &[&str]) -> Vec<String> {
    parse(&t.run(words)).sorted()
}

/// Owned strings.
fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The ttl of `key` in db 0.
fn ttl(t: &TestEngine, key: &str) -> Ttl {
    let mut h = t.engine.store().handle().expect("handle");
    h.ttl(0, key.as_bytes()).expect("ttl")
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
    let expect: &[(&str, i32, Keys, &[&str], bool)] = &[
        ("sadd", -3, (1, 1, 1), &["write", "denyoom", "fast"], false),
        ("srem", -3, (1, 1, 1), &["write", "fast"], false),
        ("scard", 2, (1, 1, 1), &["readonly", "fast"], false),
        ("sismember", 3, (1, 1, 1), &["readonly", "fast"], false),
        ("smismember", -3, (1, 1, 1), &["readonly", "fast"], false),
        ("smembers", 2, (1, 1, 1), &["readonly"], false),
        ("spop", -2, (1, 1, 1), &["write", "fast"], false),
        ("srandmember", -2, (1, 1, 1), &["readonly"], false),
        ("smove", 4, (1, 2, 1), &["write", "fast"], true),
        ("sinter", -2, (1, -1, 1), &["readonly"], true),
        ("sintercard", -3, (0, 0, 0), &["readonly"], true),
        ("sinterstore", -3, (1, -1, 1), &["write", "denyoom"], true),
        ("sunion", -2, (1, -1, 1), &["readonly"], true),
        ("sunionstore", -3, (1, -1, 1), &["write", "denyoom"], true),
        ("sdiff", -2, (1, -1, 1), &["readonly"], true),
        ("sdiffstore", -3, (1, -1, 1), &["write", "denyoom"], true),
        ("sscan", -3, (1, 1, 1), &["readonly"], false),
    ];
    for (name, arity, keys, flags, atomic) in expect {
        let c = command::lookup(name.as_bytes()).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(c.arity, *arity, "{name}");
        assert_eq!((c.first_key, c.last_key, c.step), *keys, "{name}");
        assert_eq!(c.group, "set", "{name}");
        assert_eq!(c.flags & command::flags::ATOMIC != 0, *atomic, "{name}");
        let names: Vec<&str> = command::flags::NAMES
            .iter()
            .filter(|(bit, _)| c.flags & bit != 0)
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(&names, flags, "{name}");
    }
    let smove = command::lookup(b"smove").unwrap();
    assert_eq!(smove.key_positions(4).collect::<Vec<_>>(), [1, 2]);
    let sunionstore = command::lookup(b"sunionstore").unwrap();
    assert_eq!(
        sunionstore.key_positions(5).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
}

#[test]
fn sadd_srem_scard() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "s", "a", "b", "a"]), int(2));
    assert_eq!(t.run(&["SADD", "s", "b", "c"]), int(1));
    assert_eq!(t.run(&["SCARD", "s"]), int(3));
    assert_eq!(t.run(&["SCARD", "nokey"]), int(0));
    assert_eq!(t.run(&["SREM", "s", "zz"]), int(0));
    assert_eq!(t.run(&["SREM", "s", "a", "a", "zz"]), int(1));
    assert_eq!(t.run(&["SMEMBERS", "s"]), bulks(&["b", "c"]));
    assert_eq!(t.run(&["SREM", "s", "b", "c"]), int(2));
    assert_eq!(t.run(&["EXISTS", "s"]), int(0));
    assert_eq!(t.run(&["SREM", "nokey", "a"]), int(0));
    assert_eq!(
        t.run(&["SADD", "s"]),
        err("ERR wrong number of arguments for 'sadd' command")
    );
    assert_eq!(
        t.run(&["SREM", "s"]),
        err("ERR wrong number of arguments for 'srem' command")
    );
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    for cmd in [
        &["SADD", "str", "a"][..],
        &["SREM", "str", "a"],
        &["SCARD", "str"],
    ] {
        assert_eq!(t.run(cmd), err(WRONGTYPE), "{cmd:?}");
    }
    // Binary members, the empty one too.
    assert_eq!(run_bin(&mut t, &[b"SADD", b"b", b"", b"\x00\xff"]), int(2));
    assert_eq!(run_bin(&mut t, &[b"SISMEMBER", b"b", b""]), int(1));
    assert_eq!(run_bin(&mut t, &[b"SISMEMBER", b"b", b"\x00\xff"]), int(1));
}

#[test]
fn srem_of_many_members_of_a_large_set() {
    let mut t = TestEngine::new();
    numbered(&mut t, "s", 3000);
    let mut args: Vec<String> = vec!["SREM".into(), "s".into()];
    args.extend((0..3000).filter(|i| i % 3 != 0).map(|i| format!("m{i}")));
    args.push("zz".into());
    assert_eq!(run_owned(&mut t, &args), int(2000));
    assert_eq!(t.run(&["SCARD", "s"]), int(1000));
    assert_eq!(t.run(&["SISMEMBER", "s", "m3"]), int(1));
    assert_eq!(t.run(&["SISMEMBER", "s", "m4"]), int(0));
}

#[test]
fn sismember_and_smismember() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "s", "a", "b"]), int(2));
    assert_eq!(t.run(&["SISMEMBER", "s", "a"]), int(1));
    assert_eq!(t.run(&["SISMEMBER", "s", "zz"]), int(0));
    assert_eq!(t.run(&["SISMEMBER", "nokey", "a"]), int(0));
    assert_eq!(
        t.run(&["SMISMEMBER", "s", "a", "zz", "b", "a"]),
        ints(&[1, 0, 1, 1])
    );
    assert_eq!(t.run(&["SMISMEMBER", "nokey", "a", "b"]), ints(&[0, 0]));
    t.resp3();
    assert_eq!(t.run(&["SMISMEMBER", "s", "a"]), ints(&[1]));
    assert_eq!(
        t.run(&["SMISMEMBER", "s"]),
        err("ERR wrong number of arguments for 'smismember' command")
    );
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    assert_eq!(t.run(&["SISMEMBER", "str", "a"]), err(WRONGTYPE));
    assert_eq!(t.run(&["SMISMEMBER", "str", "a"]), err(WRONGTYPE));
}

#[test]
fn smembers_orders_integer_sets_and_is_a_set_in_resp3() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "i", "5", "-3", "100", "2"]), int(4));
    assert_eq!(t.run(&["SMEMBERS", "i"]), bulks(&["-3", "2", "5", "100"]));
    assert_eq!(t.run(&["OBJECT", "ENCODING", "i"]), bulk("intset"));
    assert_eq!(t.run(&["SADD", "m", "b", "a", "c"]), int(3));
    assert_eq!(t.run(&["SMEMBERS", "m"]), bulks(&["b", "a", "c"]));
    assert_eq!(t.run(&["OBJECT", "ENCODING", "m"]), bulk("hashtable"));
    assert_eq!(t.run(&["SMEMBERS", "nokey"]), "*0\r\n");
    t.resp3();
    assert_eq!(
        t.run(&["SMEMBERS", "i"]),
        bulks(&["-3", "2", "5", "100"]).replacen('*', "~", 1)
    );
    assert_eq!(t.run(&["SMEMBERS", "nokey"]), "~0\r\n");
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    assert_eq!(t.run(&["SMEMBERS", "str"]), err(WRONGTYPE));
}

#[test]
fn spop_without_a_count() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "s", "a", "b", "c"]), int(3));
    let mut popped = Vec::new();
    for _ in 0..3 {
        popped.push(parse(&t.run(&["SPOP", "s"])).text().to_string());
    }
    popped.sort();
    assert_eq!(popped, ["a", "b", "c"]);
    assert_eq!(t.run(&["EXISTS", "s"]), int(0));
    assert_eq!(t.run(&["SPOP", "s"]), NIL);
    t.resp3();
    assert_eq!(t.run(&["SPOP", "s"]), "_\r\n");
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    assert_eq!(t.run(&["SPOP", "str"]), err(WRONGTYPE));
}

#[test]
fn spop_with_a_count() {
    let mut t = TestEngine::new();
    numbered(&mut t, "s", 100);
    let mut all = HashSet::new();
    for count in [1, 10, 39] {
        let popped = parse(&t.run(&["SPOP", "s", &count.to_string()])).texts();
        assert_eq!(popped.len(), count);
        for m in &popped {
            assert!(all.insert(m.clone()), "{m} popped twice");
            assert_eq!(t.run(&["SISMEMBER", "s", m]), int(0));
        }
    }
    assert_eq!(t.run(&["SCARD", "s"]), int(50));
    assert_eq!(t.run(&["SPOP", "s", "0"]), "*0\r\n");
    // At least the size: the whole set, and the key is gone.
    let rest = parse(&t.run(&["SPOP", "s", "50"])).texts();
    assert_eq!(rest.len(), 50);
    all.extend(rest);
    assert_eq!(all.len(), 100);
    assert_eq!(t.run(&["EXISTS", "s"]), int(0));
    assert_eq!(t.run(&["SPOP", "s", "5"]), "*0\r\n");
    assert_eq!(t.run(&["SADD", "i", "3", "1", "2"]), int(3));
    assert_eq!(
        t.run(&["SPOP", "i", "9223372036854775807"]),
        bulks(&["1", "2", "3"])
    );
    assert_eq!(t.run(&["EXISTS", "i"]), int(0));
    t.resp3();
    assert_eq!(t.run(&["SPOP", "nokey", "1"]), "~0\r\n");
    assert_eq!(t.run(&["SADD", "s", "a"]), int(1));
    assert_eq!(t.run(&["SPOP", "s", "0"]), "~0\r\n");
    assert_eq!(t.run(&["SPOP", "s", "1"]), "~1\r\n$1\r\na\r\n");
}

#[test]
fn spop_errors() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "s", "a"]), int(1));
    for bad in ["-1", "x", "1.5", ""] {
        assert_eq!(t.run(&["SPOP", "s", bad]), err(MUST_BE_POSITIVE), "{bad:?}");
    }
    assert_eq!(t.run(&["SPOP", "s", "1", "2"]), err(SYNTAX));
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    // The count is checked first, then the type, then a zero count.
    assert_eq!(t.run(&["SPOP", "str", "x"]), err(MUST_BE_POSITIVE));
    assert_eq!(t.run(&["SPOP", "str", "0"]), err(WRONGTYPE));
    assert_eq!(t.run(&["SCARD", "s"]), int(1));
}

#[test]
fn srandmember_without_a_count() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "s", "a", "b", "c"]), int(3));
    let mut seen = HashSet::new();
    for _ in 0..100 {
        seen.insert(parse(&t.run(&["SRANDMEMBER", "s"])).text().to_string());
    }
    assert_eq!(seen.len(), 3);
    assert_eq!(t.run(&["SCARD", "s"]), int(3));
    assert_eq!(t.run(&["SRANDMEMBER", "nokey"]), NIL);
    t.resp3();
    assert_eq!(t.run(&["SRANDMEMBER", "nokey"]), "_\r\n");
}

#[test]
fn srandmember_with_a_count() {
    let mut t = TestEngine::new();
    numbered(&mut t, "s", 100);
    for count in [1, 5, 33, 34, 99] {
        let picked = parse(&t.run(&["SRANDMEMBER", "s", &count.to_string()])).texts();
        assert_eq!(picked.len(), count);
        assert_eq!(
            picked.iter().collect::<HashSet<_>>().len(),
            count,
            "distinct"
        );
    }
    let all: Vec<String> = (0..100).map(|i| format!("m{i}")).collect();
    assert_eq!(parse(&t.run(&["SRANDMEMBER", "s", "100"])).texts(), all);
    assert_eq!(parse(&t.run(&["SRANDMEMBER", "s", "500"])).texts(), all);
    assert_eq!(t.run(&["SRANDMEMBER", "s", "0"]), "*0\r\n");
    assert_eq!(t.run(&["SRANDMEMBER", "nokey", "5"]), "*0\r\n");
    assert_eq!(t.run(&["SRANDMEMBER", "nokey", "-5"]), "*0\r\n");
    // Negative: repeats allowed, exactly that many.
    assert_eq!(t.run(&["SADD", "two", "a", "b"]), int(2));
    let picked = parse(&t.run(&["SRANDMEMBER", "two", "-100"])).texts();
    assert_eq!(picked.len(), 100);
    assert_eq!(picked.iter().collect::<HashSet<_>>().len(), 2);
    assert_eq!(t.run(&["SCARD", "two"]), int(2));
    // An array, not a set, in RESP3 too.
    t.resp3();
    assert!(t.run(&["SRANDMEMBER", "two", "2"]).starts_with("*2\r\n"));
    assert!(t.run(&["SRANDMEMBER", "two", "-3"]).starts_with("*3\r\n"));
}

#[test]
fn srandmember_errors() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "s", "a"]), int(1));
    assert_eq!(t.run(&["SRANDMEMBER", "s", "x"]), err(NOT_INT));
    assert_eq!(
        t.run(&["SRANDMEMBER", "s", "-9223372036854775808"]),
        err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    );
    assert_eq!(t.run(&["SRANDMEMBER", "s", "1", "2"]), err(SYNTAX));
    // Repeats whose reply would pass proto-max-bulk-len are refused.
    assert_eq!(
        t.run(&["SRANDMEMBER", "s", "-9223372036854775807"]),
        err("ERR value is out of range")
    );
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    assert_eq!(t.run(&["SRANDMEMBER", "str"]), err(WRONGTYPE));
    assert_eq!(t.run(&["SRANDMEMBER", "str", "0"]), err(WRONGTYPE));
    assert_eq!(t.run(&["SRANDMEMBER", "str", "x"]), err(NOT_INT));
}

#[test]
fn smove_moves_one_member() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "src", "a", "b"]), int(2));
    assert_eq!(t.run(&["SADD", "dst", "x"]), int(1));
    assert_eq!(t.run(&["EXPIRE", "dst", "100"]), int(1));
    assert_eq!(t.run(&["SMOVE", "src", "dst", "a"]), int(1));
    assert_eq!(t.run(&["SMEMBERS", "src"]), bulks(&["b"]));
    assert_eq!(sorted(&mut t, &["SMEMBERS", "dst"]), owned(&["a", "x"]));
    assert_eq!(
        ttl(&t, "dst"),
        Ttl::Ms(100_000),
        "the destination keeps its ttl"
    );
    assert_eq!(t.run(&["SMOVE", "src", "dst", "zz"]), int(0));
    // Already in the destination: still moved out of the source.
    assert_eq!(t.run(&["SADD", "dst", "b"]), int(1));
    assert_eq!(t.run(&["SMOVE", "src", "dst", "b"]), int(1));
    assert_eq!(
        t.run(&["EXISTS", "src"]),
        int(0),
        "the emptied source is gone"
    );
    // Into a missing key: created.
    assert_eq!(t.run(&["SMOVE", "dst", "new", "x"]), int(1));
    assert_eq!(t.run(&["SMEMBERS", "new"]), bulks(&["x"]));
    assert_eq!(ttl(&t, "new"), Ttl::Persistent);
    // Onto itself: whether it is a member.
    assert_eq!(t.run(&["SMOVE", "new", "new", "x"]), int(1));
    assert_eq!(t.run(&["SMOVE", "new", "new", "zz"]), int(0));
    assert_eq!(t.run(&["SMEMBERS", "new"]), bulks(&["x"]));
}

#[test]
fn smove_type_checks_in_redis_order() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "s", "a"]), int(1));
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    // A missing source is 0 before the destination's type is looked at.
    assert_eq!(t.run(&["SMOVE", "nokey", "str", "a"]), int(0));
    assert_eq!(t.run(&["SMOVE", "str", "s", "a"]), err(WRONGTYPE));
    assert_eq!(t.run(&["SMOVE", "s", "str", "a"]), err(WRONGTYPE));
    assert_eq!(t.run(&["SMOVE", "s", "str", "zz"]), err(WRONGTYPE));
    assert_eq!(t.run(&["SMEMBERS", "s"]), bulks(&["a"]));
    assert_eq!(t.run(&["GET", "str"]), bulk("v"));
}

#[test]
fn sinter_walks_the_smallest_set() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "a", "1", "2", "3", "4", "x"]), int(5));
    assert_eq!(t.run(&["SADD", "b", "4", "3", "2", "y"]), int(4));
    assert_eq!(t.run(&["SADD", "c", "3", "2", "1"]), int(3));
    // c is an intset, the smallest: its ascending order.
    assert_eq!(t.run(&["SINTER", "a", "b", "c"]), bulks(&["2", "3"]));
    assert_eq!(
        sorted(&mut t, &["SINTER", "a", "b"]),
        owned(&["2", "3", "4"])
    );
    assert_eq!(t.run(&["SINTER", "c"]), bulks(&["1", "2", "3"]));
    assert_eq!(t.run(&["SINTER", "a", "nokey"]), "*0\r\n");
    assert_eq!(t.run(&["SINTER", "nokey"]), "*0\r\n");
    assert_eq!(
        t.run(&["SINTER", "a", "a"]).len(),
        t.run(&["SMEMBERS", "a"]).len()
    );
    t.resp3();
    assert_eq!(t.run(&["SINTER", "a", "nokey"]), "~0\r\n");
    assert_eq!(t.run(&["SINTER", "b", "c"]), "~2\r\n$1\r\n2\r\n$1\r\n3\r\n");
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    // Every key's type is checked, even after a missing one.
    assert_eq!(t.run(&["SINTER", "nokey", "str"]), err(WRONGTYPE));
    assert_eq!(t.run(&["SINTER", "a", "str"]), err(WRONGTYPE));
}

#[test]
fn sintercard_counts_with_a_limit() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "a", "1", "2", "3", "4"]), int(4));
    assert_eq!(t.run(&["SADD", "b", "2", "3", "4", "5"]), int(4));
    assert_eq!(t.run(&["SINTERCARD", "2", "a", "b"]), int(3));
    assert_eq!(t.run(&["SINTERCARD", "1", "a"]), int(4));
    assert_eq!(t.run(&["SINTERCARD", "2", "a", "b", "LIMIT", "2"]), int(2));
    assert_eq!(t.run(&["SINTERCARD", "2", "a", "b", "limit", "0"]), int(3));
    assert_eq!(t.run(&["SINTERCARD", "2", "a", "b", "LIMIT", "10"]), int(3));
    assert_eq!(
        t.run(&["SINTERCARD", "2", "a", "b", "LIMIT", "0", "LIMIT", "1"]),
        int(1)
    );
    assert_eq!(t.run(&["SINTERCARD", "2", "a", "nokey"]), int(0));
    // Keys after numkeys are options, not keys.
    assert_eq!(t.run(&["SINTERCARD", "1", "a", "LIMIT", "1"]), int(1));
}

#[test]
fn sintercard_errors() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "a", "1"]), int(1));
    let numkeys = err("ERR numkeys should be greater than 0");
    for bad in ["0", "-1", "x", "1.5"] {
        assert_eq!(t.run(&["SINTERCARD", bad, "a"]), numkeys, "{bad}");
    }
    assert_eq!(
        t.run(&["SINTERCARD", "2", "a"]),
        err("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        t.run(&["SINTERCARD", "9223372036854775807", "a"]),
        err("ERR Number of keys can't be greater than number of args")
    );
    let limit = err("ERR LIMIT can't be negative");
    assert_eq!(t.run(&["SINTERCARD", "1", "a", "LIMIT", "-1"]), limit);
    assert_eq!(t.run(&["SINTERCARD", "1", "a", "LIMIT", "x"]), limit);
    assert_eq!(
        t.run(&["SINTERCARD", "1", "a", "LIMIT", "-1", "foo"]),
        limit
    );
    for bad in [
        &["LIMIT"][..],
        &["foo"],
        &["foo", "1"],
        &["LIMIT", "1", "foo"],
    ] {
        let mut cmd = vec!["SINTERCARD", "1", "a"];
        cmd.extend_from_slice(bad);
        assert_eq!(t.run(&cmd), err(SYNTAX), "{bad:?}");
    }
    assert_eq!(
        t.run(&["SINTERCARD", "1"]),
        err("ERR wrong number of arguments for 'sintercard' command")
    );
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    assert_eq!(t.run(&["SINTERCARD", "2", "nokey", "str"]), err(WRONGTYPE));
}

#[test]
fn sunion_and_sdiff() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "a", "1", "2", "3"]), int(3));
    assert_eq!(t.run(&["SADD", "b", "3", "4"]), int(2));
    assert_eq!(t.run(&["SADD", "m", "x", "1"]), int(2));
    // All integers: ascending, as an intset.
    assert_eq!(
        t.run(&["SUNION", "b", "a", "nokey"]),
        bulks(&["1", "2", "3", "4"])
    );
    assert_eq!(
        sorted(&mut t, &["SUNION", "a", "m"]),
        owned(&["1", "2", "3", "x"])
    );
    assert_eq!(t.run(&["SUNION", "nokey"]), "*0\r\n");
    assert_eq!(t.run(&["SDIFF", "a", "b"]), bulks(&["1", "2"]));
    assert_eq!(t.run(&["SDIFF", "a", "b", "m"]), bulks(&["2"]));
    assert_eq!(t.run(&["SDIFF", "a", "nokey"]), bulks(&["1", "2", "3"]));
    assert_eq!(t.run(&["SDIFF", "a"]), bulks(&["1", "2", "3"]));
    assert_eq!(t.run(&["SDIFF", "a", "a"]), "*0\r\n");
    assert_eq!(t.run(&["SDIFF", "nokey", "a"]), "*0\r\n");
    assert_eq!(t.run(&["SDIFF", "m", "a"]), bulks(&["x"]));
    t.resp3();
    assert_eq!(t.run(&["SUNION", "nokey"]), "~0\r\n");
    assert_eq!(t.run(&["SDIFF", "a", "b"]), "~2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    for cmd in [
        &["SUNION", "a", "str"][..],
        &["SUNION", "nokey", "str"],
        &["SDIFF", "nokey", "str"],
        &["SDIFF", "a", "str"],
        &["SDIFF", "str", "a"],
    ] {
        assert_eq!(t.run(cmd), err(WRONGTYPE), "{cmd:?}");
    }
}

#[test]
fn store_variants_replace_the_destination() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "a", "1", "2", "3"]), int(3));
    assert_eq!(t.run(&["SADD", "b", "2", "3", "4"]), int(3));
    assert_eq!(t.run(&["SET", "dst", "string"]), OK);
    assert_eq!(t.run(&["EXPIRE", "dst", "100"]), int(1));
    // Any type is overwritten, and the expiry goes with it.
    assert_eq!(t.run(&["SINTERSTORE", "dst", "a", "b"]), int(2));
    assert_eq!(t.run(&["SMEMBERS", "dst"]), bulks(&["2", "3"]));
    assert_eq!(ttl(&t, "dst"), Ttl::Persistent);
    assert_eq!(t.run(&["SUNIONSTORE", "dst", "a", "b"]), int(4));
    assert_eq!(t.run(&["SMEMBERS", "dst"]), bulks(&["1", "2", "3", "4"]));
    assert_eq!(t.run(&["SDIFFSTORE", "dst", "a", "b"]), int(1));
    assert_eq!(t.run(&["SMEMBERS", "dst"]), bulks(&["1"]));
    // A destination among the sources is read before it is replaced.
    assert_eq!(t.run(&["SUNIONSTORE", "a", "a", "b"]), int(4));
    assert_eq!(t.run(&["SMEMBERS", "a"]), bulks(&["1", "2", "3", "4"]));
    // An empty result deletes the destination.
    for cmd in [
        &["SINTERSTORE", "dst", "a", "nokey"][..],
        &["SUNIONSTORE", "dst", "nokey"],
        &["SDIFFSTORE", "dst", "b", "a"],
        &["SDIFFSTORE", "dst", "nokey", "a"],
    ] {
        assert_eq!(t.run(&["SADD", "dst", "old"]), int(1));
        assert_eq!(t.run(cmd), int(0), "{cmd:?}");
        assert_eq!(t.run(&["EXISTS", "dst"]), int(0), "{cmd:?}");
    }
    assert_eq!(t.run(&["SINTERSTORE", "dst", "nokey"]), int(0));
    assert_eq!(t.run(&["EXISTS", "dst"]), int(0));
}

#[test]
fn store_variants_errors() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "a", "1"]), int(1));
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    assert_eq!(t.run(&["SADD", "dst", "keep"]), int(1));
    for cmd in [
        &["SINTERSTORE", "dst", "a", "str"][..],
        &["SINTERSTORE", "dst", "nokey", "str"],
        &["SUNIONSTORE", "dst", "str"],
        &["SDIFFSTORE", "dst", "nokey", "str"],
    ] {
        assert_eq!(t.run(cmd), err(WRONGTYPE), "{cmd:?}");
        assert_eq!(t.run(&["SMEMBERS", "dst"]), bulks(&["keep"]), "{cmd:?}");
    }
    for name in ["sinterstore", "sunionstore", "sdiffstore"] {
        assert_eq!(
            t.run(&[name, "dst"]),
            err(&format!(
                "ERR wrong number of arguments for '{name}' command"
            ))
        );
    }
}

#[test]
fn sscan_returns_the_set_with_match() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "s", "a", "ab", "b"]), int(3));
    let page = |items: &[&str]| format!("*2\r\n{}{}", bulk("0"), bulks(items));
    assert_eq!(t.run(&["SSCAN", "s", "0"]), page(&["a", "ab", "b"]));
    assert_eq!(
        t.run(&["SSCAN", "s", "0", "MATCH", "a*"]),
        page(&["a", "ab"])
    );
    assert_eq!(
        t.run(&["SSCAN", "s", "5", "COUNT", "1", "MATCH", "b"]),
        page(&["b"])
    );
    assert_eq!(t.run(&["SADD", "i", "10", "2"]), int(2));
    assert_eq!(t.run(&["SSCAN", "i", "0"]), page(&["2", "10"]));
    assert_eq!(run_bin(&mut t, &[b"SADD", b"e", b""]), int(1));
    assert_eq!(t.run(&["SSCAN", "e", "0", "MATCH", "*"]), page(&[""]));
    t.resp3();
    assert_eq!(t.run(&["SSCAN", "s", "0", "MATCH", "b"]), page(&["b"]));
}

#[test]
fn sscan_pages_cover_a_large_set() {
    let mut t = TestEngine::new();
    numbered(&mut t, "s", 1000);
    let mut cursor = "0".to_string();
    let mut seen = HashSet::new();
    loop {
        let r = parse(&t.run(&["SSCAN", "s", &cursor, "COUNT", "50"]));
        cursor = r.items()[0].text().to_string();
        seen.extend(r.items()[1].texts());
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 1000);
}

#[test]
fn sscan_errors_in_redis_order() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SADD", "s", "a"]), int(1));
    assert_eq!(t.run(&["SSCAN", "nokey", "0"]), EMPTY_SCAN);
    assert_eq!(t.run(&["SSCAN", "nokey", "0", "bogus"]), EMPTY_SCAN);
    assert_eq!(t.run(&["SSCAN", "nokey", "x"]), err("ERR invalid cursor"));
    assert_eq!(t.run(&["SSCAN", "s", "x"]), err("ERR invalid cursor"));
    for bad in [
        &["bogus"][..],
        &["COUNT", "0"],
        &["MATCH"],
        &["TYPE", "set"],
    ] {
        let mut cmd = vec!["SSCAN", "s", "0"];
        cmd.extend_from_slice(bad);
        assert_eq!(t.run(&cmd), err(SYNTAX), "{bad:?}");
    }
    assert_eq!(t.run(&["SSCAN", "s", "0", "COUNT", "x"]), err(NOT_INT));
    assert_eq!(t.run(&["SET", "str", "v"]), OK);
    assert_eq!(t.run(&["SSCAN", "str", "0"]), err(WRONGTYPE));
    assert_eq!(t.run(&["SSCAN", "str", "x"]), err("ERR invalid cursor"));
}

#[test]
fn large_sets_change_encoding_and_survive_pops() {
    let mut t = TestEngine::new();
    let mut args: Vec<String> = vec!["SADD".into(), "i".into()];
    args.extend((0..600).map(|i| i.to_string()));
    assert_eq!(run_owned(&mut t, &args), int(600));
    // Past 512 integers Redis leaves the intset.
    assert_eq!(t.run(&["OBJECT", "ENCODING", "i"]), bulk("hashtable"));
    let popped = parse(&t.run(&["SPOP", "i", "550"])).texts();
    assert_eq!(popped.iter().collect::<HashSet<_>>().len(), 550);
    assert_eq!(t.run(&["SCARD", "i"]), int(50));
    assert_eq!(t.run(&["OBJECT", "ENCODING", "i"]), bulk("intset"));
    let rest = parse(&t.run(&["SMEMBERS", "i"])).texts();
    let nums: Vec<i64> = rest.iter().map(|m| m.parse().unwrap()).collect();
    assert!(nums.windows(2).all(|w| w[0] < w[1]), "ascending: {nums:?}");
}
