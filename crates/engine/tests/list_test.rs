//! List commands, blocking ones included, through the dispatcher, against
//! Redis 7.0's replies and error texts (`tests/unit/type/list.tcl`).

mod common;

use std::borrow::Cow;

use common::*;
use engine::{command, BlockRequest, Flow};
use store::ValueType;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";
const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
const RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";
const NULL_ARRAY: &str = "*-1\r\n";
const EMPTY_ARRAY: &str = "*0\r\n";
const RESP3_NULL: &str = "_\r\n";

/// A RESP2 array of integers.
fn ints(items: &[i64]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for i in items {
        s.push_str(&int(*i));
    }
    s
}

/// `[key, [items…]]`, LMPOP's reply.
fn mpop_reply(key: &str, items: &[&str]) -> String {
    format!("*2\r\n{}{}", bulk(key), bulks(items))
}

/// The whole list at `key`.
fn all(t: &mut TestEngine, key: &str) -> String {
    t.run(&["LRANGE", key, "0", "-1"])
}

/// Runs a command given as words; returns its reply and what the connection
/// does next.
fn run_flow(t: &mut TestEngine, words: &[&str]) -> (String, Flow) {
    let args: Vec<Cow<[u8]>> = words.iter().map(|w| Cow::Borrowed(w.as_bytes())).collect();
    t.run_bytes(&args)
}

/// The keys signalled ready (db 0) since the last call, as text.
fn ready(t: &mut TestEngine) -> Vec<String> {
    t.engine
        .take_ready_keys()
        .into_iter()
        .map(|(db, k)| {
            assert_eq!(db, 0);
            String::from_utf8(k).unwrap()
        })
        .collect()
}

/// The block request a command ended with (it must have written nothing).
fn blocked(t: &mut TestEngine, words: &[&str]) -> BlockRequest {
    match run_flow(t, words) {
        (out, Flow::Block(req)) if out.is_empty() => req,
        other => panic!("{words:?} did not block: {other:?}"),
    }
}

/// First key, last key, step.
type Keys = (i32, i32, i32);

#[test]
fn table_entries_match_redis() {
    let expect: &[(&str, i32, Keys, &[&str])] = &[
        ("lpush", -3, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("rpush", -3, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("lpushx", -3, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("rpushx", -3, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("lpop", -2, (1, 1, 1), &["write", "fast"]),
        ("rpop", -2, (1, 1, 1), &["write", "fast"]),
        ("llen", 2, (1, 1, 1), &["readonly", "fast"]),
        ("lrange", 4, (1, 1, 1), &["readonly"]),
        ("lindex", 3, (1, 1, 1), &["readonly"]),
        ("lset", 4, (1, 1, 1), &["write", "denyoom"]),
        ("linsert", 5, (1, 1, 1), &["write", "denyoom"]),
        ("lrem", 4, (1, 1, 1), &["write"]),
        ("ltrim", 4, (1, 1, 1), &["write"]),
        ("lpos", -3, (1, 1, 1), &["readonly"]),
        ("lmove", 5, (1, 2, 1), &["write", "denyoom"]),
        ("rpoplpush", 3, (1, 2, 1), &["write", "denyoom"]),
        ("lmpop", -4, (0, 0, 0), &["write"]),
        ("blpop", -3, (1, -2, 1), &["write", "noscript", "blocking"]),
        ("brpop", -3, (1, -2, 1), &["write", "noscript", "blocking"]),
        (
            "blmove",
            6,
            (1, 2, 1),
            &["write", "denyoom", "noscript", "blocking"],
        ),
        (
            "brpoplpush",
            4,
            (1, 2, 1),
            &["write", "denyoom", "noscript", "blocking"],
        ),
        ("blmpop", -5, (0, 0, 0), &["write", "blocking"]),
    ];
    for (name, arity, keys, flags) in expect {
        let c = command::lookup(name.as_bytes()).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(c.arity, *arity, "{name}");
        assert_eq!((c.first_key, c.last_key, c.step), *keys, "{name}");
        assert_eq!(c.group, "list", "{name}");
        let names: Vec<&str> = command::flags::NAMES
            .iter()
            .filter(|(bit, _)| c.flags & bit != 0)
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(&names, flags, "{name}");
        let atomic = ["lmove", "rpoplpush", "blmove", "brpoplpush"].contains(name);
        assert_eq!(c.flags & command::flags::ATOMIC != 0, atomic, "{name}");
    }
    let blpop = command::lookup(b"blpop").unwrap();
    assert_eq!(blpop.key_positions(4).collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn pushes_prepend_and_append_in_argument_order() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["LPUSH", "l", "a", "b", "c"]), int(3));
    assert_eq!(all(&mut t, "l"), bulks(&["c", "b", "a"]));
    assert_eq!(t.run(&["RPUSH", "l", "x", "y"]), int(5));
    assert_eq!(all(&mut t, "l"), bulks(&["c", "b", "a", "x", "y"]));
    assert_eq!(t.run(&["LLEN", "l"]), int(5));
    assert_eq!(t.run(&["LLEN", "nokey"]), int(0));
    assert_eq!(t.run(&["TYPE", "l"]), "+list\r\n");
    assert_eq!(
        t.run(&["LPUSH", "l"]),
        err("ERR wrong number of arguments for 'lpush' command")
    );
}

#[test]
fn pushx_only_touches_existing_lists() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["LPUSHX", "l", "a"]), int(0));
    assert_eq!(t.run(&["RPUSHX", "l", "a", "b"]), int(0));
    assert_eq!(t.run(&["EXISTS", "l"]), int(0));
    assert!(ready(&mut t).is_empty());
    t.run(&["RPUSH", "l", "m"]);
    assert_eq!(t.run(&["LPUSHX", "l", "a", "b"]), int(3));
    assert_eq!(t.run(&["RPUSHX", "l", "z"]), int(4));
    assert_eq!(all(&mut t, "l"), bulks(&["b", "a", "m", "z"]));
}

#[test]
fn elements_are_binary_safe() {
    let mut t = TestEngine::new();
    let odd: &[u8] = b"a\r\n\0\xff";
    let args: Vec<Cow<[u8]>> = vec![
        Cow::Borrowed(b"RPUSH"),
        Cow::Borrowed(b"l"),
        Cow::Borrowed(odd),
        Cow::Borrowed(b""),
    ];
    assert_eq!(t.run_bytes(&args).0, int(2));
    let args: Vec<Cow<[u8]>> = vec![
        Cow::Borrowed(b"LPOS"),
        Cow::Borrowed(b"l"),
        Cow::Borrowed(odd),
    ];
    assert_eq!(t.run_bytes(&args).0, int(0));
    assert_eq!(t.run(&["LINDEX", "l", "1"]), "$0\r\n\r\n");
    let mut out = Vec::new();
    t.engine.execute(
        &mut t.session,
        &[Cow::Borrowed(b"LPOP"), Cow::Borrowed(b"l")],
        &mut out,
    );
    assert_eq!(out, b"$5\r\na\r\n\0\xff\r\n");
}

#[test]
fn writers_signal_ready_keys() {
    let mut t = TestEngine::new();
    t.run(&["LPUSH", "a", "1"]);
    t.run(&["RPUSH", "a", "2"]);
    t.run(&["RPUSH", "b", "2"]);
    assert_eq!(ready(&mut t), ["a", "b"]);
    t.run(&["LPUSHX", "a", "0"]);
    t.run(&["RPUSHX", "nokey", "0"]);
    assert_eq!(ready(&mut t), ["a"]);
    t.run(&["LINSERT", "a", "BEFORE", "1", "x"]);
    assert_eq!(ready(&mut t), ["a"]);
    t.run(&["LINSERT", "a", "BEFORE", "nothere", "x"]);
    t.run(&["LINSERT", "nokey", "BEFORE", "1", "x"]);
    t.run(&["LSET", "a", "0", "y"]);
    t.run(&["LPOP", "a"]);
    t.run(&["LREM", "a", "0", "1"]);
    t.run(&["LTRIM", "a", "0", "0"]);
    assert!(ready(&mut t).is_empty());
    t.run(&["LMOVE", "a", "c", "LEFT", "RIGHT"]);
    assert_eq!(ready(&mut t), ["c"]);
    t.run(&["RPOPLPUSH", "c", "c"]);
    assert_eq!(ready(&mut t), ["c"]);
    t.run(&["RPOPLPUSH", "nokey", "c"]);
    assert!(ready(&mut t).is_empty());
}

#[test]
fn pop_without_count_replies_one_element() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "a", "b", "c"]);
    assert_eq!(t.run(&["LPOP", "l"]), bulk("a"));
    assert_eq!(t.run(&["RPOP", "l"]), bulk("c"));
    assert_eq!(t.run(&["RPOP", "l"]), bulk("b"));
    assert_eq!(t.run(&["EXISTS", "l"]), int(0));
    assert_eq!(t.run(&["LPOP", "l"]), NIL);
    assert_eq!(t.run(&["RPOP", "l"]), NIL);
    t.resp3();
    assert_eq!(t.run(&["LPOP", "l"]), RESP3_NULL);
}

#[test]
fn pop_with_count_replies_an_array() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "a", "b", "c", "d"]);
    assert_eq!(t.run(&["LPOP", "l", "0"]), EMPTY_ARRAY);
    assert_eq!(t.run(&["LPOP", "l", "1"]), bulks(&["a"]));
    assert_eq!(t.run(&["RPOP", "l", "2"]), bulks(&["d", "c"]));
    assert_eq!(t.run(&["RPOP", "l", "9223372036854775807"]), bulks(&["b"]));
    assert_eq!(t.run(&["EXISTS", "l"]), int(0));
    // A missing key: a null array, whatever the count.
    assert_eq!(t.run(&["LPOP", "l", "0"]), NULL_ARRAY);
    assert_eq!(t.run(&["RPOP", "l", "3"]), NULL_ARRAY);
    t.resp3();
    assert_eq!(t.run(&["LPOP", "l", "3"]), RESP3_NULL);
    t.run(&["RPUSH", "l", "a"]);
    assert_eq!(t.run(&["LPOP", "l", "0"]), EMPTY_ARRAY);
}

#[test]
fn pop_count_errors() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "a"]);
    for bad in ["-1", "abc", "9223372036854775808", ""] {
        assert_eq!(t.run(&["LPOP", "l", bad]), err(MUST_BE_POSITIVE), "{bad}");
        assert_eq!(t.run(&["RPOP", "nokey", bad]), err(MUST_BE_POSITIVE));
    }
    assert_eq!(
        t.run(&["LPOP", "l", "1", "2"]),
        err("ERR wrong number of arguments for 'lpop' command")
    );
    assert_eq!(
        t.run(&["RPOP", "l", "1", "2"]),
        err("ERR wrong number of arguments for 'rpop' command")
    );
    assert_eq!(t.run(&["LLEN", "l"]), int(1));
}

#[test]
fn lrange_resolves_indexes_like_redis() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "0", "1", "2", "3", "4"]);
    let cases: &[(&str, &str, &[&str])] = &[
        ("0", "-1", &["0", "1", "2", "3", "4"]),
        ("1", "2", &["1", "2"]),
        ("-2", "-1", &["3", "4"]),
        ("-100", "1", &["0", "1"]),
        ("3", "100", &["3", "4"]),
        ("2", "2", &["2"]),
        ("3", "1", &[]),
        ("5", "10", &[]),
        ("0", "-100", &[]),
        ("-1", "-2", &[]),
        (
            "-9223372036854775808",
            "9223372036854775807",
            &["0", "1", "2", "3", "4"],
        ),
    ];
    for (start, stop, want) in cases {
        assert_eq!(
            t.run(&["LRANGE", "l", start, stop]),
            bulks(want),
            "{start} {stop}"
        );
    }
    assert_eq!(t.run(&["LRANGE", "nokey", "0", "-1"]), EMPTY_ARRAY);
    assert_eq!(t.run(&["LRANGE", "l", "0", "x"]), err(NOT_INT));
    assert_eq!(t.run(&["LRANGE", "nokey", "x", "1"]), err(NOT_INT));
}

#[test]
fn lrange_of_a_large_list_returns_only_the_range() {
    let mut t = TestEngine::with_size(256 << 20);
    let n = 1_000_000;
    let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let mut args: Vec<Cow<[u8]>> = vec![Cow::Borrowed(b"RPUSH"), Cow::Borrowed(b"big")];
    args.extend(items.iter().map(|s| Cow::Borrowed(s.as_bytes())));
    assert_eq!(t.run_bytes(&args).0, int(n as i64));
    assert_eq!(
        t.run(&["LRANGE", "big", "500000", "500002"]),
        bulks(&["500000", "500001", "500002"])
    );
    assert_eq!(
        t.run(&["LRANGE", "big", "-2", "-1"]),
        bulks(&["999998", "999999"])
    );
    assert_eq!(t.run(&["LINDEX", "big", "-1000000"]), bulk("0"));
    assert_eq!(t.run(&["LLEN", "big"]), int(n as i64));
    assert_eq!(t.run(&["LPOS", "big", "999999", "MAXLEN", "10"]), NIL);
    assert_eq!(
        t.run(&["LPOS", "big", "999999", "RANK", "-1"]),
        int(999_999)
    );
}

#[test]
fn lindex_reads_by_index() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "a", "b", "c"]);
    assert_eq!(t.run(&["LINDEX", "l", "0"]), bulk("a"));
    assert_eq!(t.run(&["LINDEX", "l", "-1"]), bulk("c"));
    assert_eq!(t.run(&["LINDEX", "l", "-3"]), bulk("a"));
    assert_eq!(t.run(&["LINDEX", "l", "3"]), NIL);
    assert_eq!(t.run(&["LINDEX", "l", "-4"]), NIL);
    assert_eq!(t.run(&["LINDEX", "l", "-9223372036854775808"]), NIL);
    assert_eq!(t.run(&["LINDEX", "l", "abc"]), err(NOT_INT));
    // The key is looked up before the index is parsed.
    assert_eq!(t.run(&["LINDEX", "nokey", "abc"]), NIL);
    t.resp3();
    assert_eq!(t.run(&["LINDEX", "l", "5"]), RESP3_NULL);
}

#[test]
fn lset_replaces_an_element() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "a", "b", "c"]);
    assert_eq!(t.run(&["LSET", "l", "0", "x"]), OK);
    assert_eq!(t.run(&["LSET", "l", "-1", "z"]), OK);
    assert_eq!(all(&mut t, "l"), bulks(&["x", "b", "z"]));
    assert_eq!(
        t.run(&["LSET", "l", "3", "y"]),
        err("ERR index out of range")
    );
    assert_eq!(
        t.run(&["LSET", "l", "-4", "y"]),
        err("ERR index out of range")
    );
    assert_eq!(t.run(&["LSET", "l", "abc", "y"]), err(NOT_INT));
    assert_eq!(t.run(&["LSET", "nokey", "0", "y"]), err("ERR no such key"));
    assert_eq!(
        t.run(&["LSET", "nokey", "abc", "y"]),
        err("ERR no such key")
    );
    assert_eq!(t.run(&["EXISTS", "nokey"]), int(0));
}

#[test]
fn linsert_before_and_after_the_first_pivot() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "a", "b", "a"]);
    assert_eq!(t.run(&["LINSERT", "l", "BEFORE", "a", "x"]), int(4));
    assert_eq!(t.run(&["LINSERT", "l", "after", "a", "y"]), int(5));
    assert_eq!(t.run(&["LINSERT", "l", "AFTER", "a", "z"]), int(6));
    assert_eq!(all(&mut t, "l"), bulks(&["x", "a", "z", "y", "b", "a"]));
    assert_eq!(t.run(&["LINSERT", "l", "AFTER", "b", "w"]), int(7));
    assert_eq!(t.run(&["LINSERT", "l", "BEFORE", "nothere", "w"]), int(-1));
    assert_eq!(t.run(&["LINSERT", "nokey", "BEFORE", "a", "w"]), int(0));
    assert_eq!(t.run(&["EXISTS", "nokey"]), int(0));
    assert_eq!(t.run(&["LINSERT", "l", "MIDDLE", "a", "w"]), err(SYNTAX));
    assert_eq!(
        t.run(&["LINSERT", "nokey", "MIDDLE", "a", "w"]),
        err(SYNTAX)
    );
    assert_eq!(t.run(&["LLEN", "l"]), int(7));
}

#[test]
fn lrem_counts_from_either_end() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "a", "b", "a", "c", "a", "b"]);
    assert_eq!(t.run(&["LREM", "l", "-2", "a"]), int(2));
    assert_eq!(all(&mut t, "l"), bulks(&["a", "b", "c", "b"]));
    assert_eq!(t.run(&["LREM", "l", "1", "b"]), int(1));
    assert_eq!(all(&mut t, "l"), bulks(&["a", "c", "b"]));
    assert_eq!(t.run(&["LREM", "l", "0", "z"]), int(0));
    assert_eq!(t.run(&["LREM", "l", "-9223372036854775808", "a"]), int(1));
    assert_eq!(t.run(&["LREM", "l", "0", "c"]), int(1));
    assert_eq!(t.run(&["LREM", "l", "5", "b"]), int(1));
    assert_eq!(t.run(&["EXISTS", "l"]), int(0));
    assert_eq!(t.run(&["LREM", "nokey", "0", "a"]), int(0));
    assert_eq!(t.run(&["LREM", "nokey", "x", "a"]), err(NOT_INT));
}

#[test]
fn ltrim_keeps_a_range_or_removes_the_key() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "1", "2", "3", "4", "5"]);
    assert_eq!(t.run(&["LTRIM", "l", "1", "-2"]), OK);
    assert_eq!(all(&mut t, "l"), bulks(&["2", "3", "4"]));
    assert_eq!(t.run(&["LTRIM", "l", "-100", "100"]), OK);
    assert_eq!(all(&mut t, "l"), bulks(&["2", "3", "4"]));
    assert_eq!(t.run(&["LTRIM", "l", "0", "-100"]), OK);
    assert_eq!(t.run(&["EXISTS", "l"]), int(0));
    t.run(&["RPUSH", "l", "1", "2"]);
    assert_eq!(t.run(&["LTRIM", "l", "5", "10"]), OK);
    assert_eq!(t.run(&["EXISTS", "l"]), int(0));
    assert_eq!(t.run(&["LTRIM", "nokey", "0", "1"]), OK);
    assert_eq!(t.run(&["LTRIM", "nokey", "x", "1"]), err(NOT_INT));
}

#[test]
fn lpos_ranks_counts_and_maxlen() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "a", "b", "c", "a", "b", "c", "a"]);
    let cases: &[(&[&str], String)] = &[
        (&["a"], int(0)),
        (&["z"], NIL.to_string()),
        (&["a", "RANK", "2"], int(3)),
        (&["a", "RANK", "-1"], int(6)),
        (&["a", "RANK", "-3"], int(0)),
        (&["a", "RANK", "4"], NIL.to_string()),
        (&["a", "RANK", "9223372036854775807"], NIL.to_string()),
        (&["a", "RANK", "-9223372036854775807"], NIL.to_string()),
        (&["a", "COUNT", "0"], ints(&[0, 3, 6])),
        (&["a", "COUNT", "2"], ints(&[0, 3])),
        (&["a", "COUNT", "2", "RANK", "-1"], ints(&[6, 3])),
        (&["a", "COUNT", "2", "RANK", "2"], ints(&[3, 6])),
        (&["a", "RANK", "5", "COUNT", "0"], ints(&[])),
        (&["z", "COUNT", "0"], ints(&[])),
        (&["a", "COUNT", "0", "MAXLEN", "4"], ints(&[0, 3])),
        (
            &["a", "MAXLEN", "1", "COUNT", "0", "RANK", "-1"],
            ints(&[6]),
        ),
        (&["a", "RANK", "-2", "MAXLEN", "3"], NIL.to_string()),
        (&["a", "MAXLEN", "0"], int(0)),
        (&["a", "count", "1", "count", "0"], ints(&[0, 3, 6])),
        (&["a", "RANK", "-1", "RANK", "1"], int(0)),
        // Redis's negation of LONG_MIN stays negative: every match from
        // the tail, and COUNT no longer stops the walk.
        (&["a", "RANK", "-9223372036854775808"], int(6)),
        (
            &["a", "RANK", "-9223372036854775808", "COUNT", "1"],
            ints(&[6, 3, 0]),
        ),
    ];
    for (opts, want) in cases {
        let mut words = vec!["LPOS", "l"];
        words.extend_from_slice(opts);
        assert_eq!(&t.run(&words), want, "{opts:?}");
    }
    assert_eq!(t.run(&["LPOS", "nokey", "a"]), NIL);
    assert_eq!(t.run(&["LPOS", "nokey", "a", "COUNT", "0"]), EMPTY_ARRAY);
    t.resp3();
    assert_eq!(t.run(&["LPOS", "l", "z"]), RESP3_NULL);
    assert_eq!(t.run(&["LPOS", "nokey", "a"]), RESP3_NULL);
}

#[test]
fn lpos_option_errors() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "a"]);
    let cases: &[(&[&str], &str)] = &[
        (&["RANK", "0"], RANK_ZERO),
        (&["RANK", "x"], NOT_INT),
        (&["COUNT", "-1"], "ERR COUNT can't be negative"),
        (&["COUNT", "x"], "ERR COUNT can't be negative"),
        (
            &["COUNT", "9223372036854775808"],
            "ERR COUNT can't be negative",
        ),
        (&["MAXLEN", "-1"], "ERR MAXLEN can't be negative"),
        (&["MAXLEN", "x"], "ERR MAXLEN can't be negative"),
        (&["RANK"], SYNTAX),
        (&["FOO", "1"], SYNTAX),
        (&["b"], SYNTAX),
        // Options are checked in order; the first bad one wins.
        (&["RANK", "0", "COUNT", "-1"], RANK_ZERO),
        (&["COUNT", "-1", "RANK", "0"], "ERR COUNT can't be negative"),
    ];
    for (opts, want) in cases {
        for key in ["l", "nokey"] {
            let mut words = vec!["LPOS", key, "a"];
            words.extend_from_slice(opts);
            assert_eq!(t.run(&words), err(want), "{key} {opts:?}");
        }
    }
    assert_eq!(
        t.run(&["LPOS", "l"]),
        err("ERR wrong number of arguments for 'lpos' command")
    );
}

#[test]
fn lmove_in_every_direction() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "src", "1", "2", "3", "4"]);
    assert_eq!(t.run(&["LMOVE", "src", "dst", "LEFT", "LEFT"]), bulk("1"));
    assert_eq!(t.run(&["LMOVE", "src", "dst", "left", "right"]), bulk("2"));
    assert_eq!(t.run(&["LMOVE", "src", "dst", "RIGHT", "LEFT"]), bulk("4"));
    assert_eq!(t.run(&["LMOVE", "src", "dst", "RIGHT", "RIGHT"]), bulk("3"));
    assert_eq!(all(&mut t, "dst"), bulks(&["4", "1", "2", "3"]));
    assert_eq!(t.run(&["EXISTS", "src"]), int(0));
    assert_eq!(t.run(&["LMOVE", "src", "dst", "LEFT", "LEFT"]), NIL);
    assert_eq!(t.run(&["LMOVE", "dst", "src", "UP", "LEFT"]), err(SYNTAX));
    assert_eq!(t.run(&["LMOVE", "dst", "src", "LEFT", "DOWN"]), err(SYNTAX));
    assert_eq!(t.run(&["LLEN", "dst"]), int(4));
    t.resp3();
    assert_eq!(t.run(&["LMOVE", "src", "dst", "LEFT", "LEFT"]), RESP3_NULL);
}

#[test]
fn lmove_onto_itself_rotates() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "1", "2", "3"]);
    assert_eq!(t.run(&["LMOVE", "l", "l", "LEFT", "RIGHT"]), bulk("1"));
    assert_eq!(all(&mut t, "l"), bulks(&["2", "3", "1"]));
    assert_eq!(t.run(&["RPOPLPUSH", "l", "l"]), bulk("1"));
    assert_eq!(all(&mut t, "l"), bulks(&["1", "2", "3"]));
    assert_eq!(t.run(&["LMOVE", "l", "l", "LEFT", "LEFT"]), bulk("1"));
    assert_eq!(all(&mut t, "l"), bulks(&["1", "2", "3"]));
    // A one-element list keeps its key, and so its expiry.
    t.run(&["RPUSH", "one", "x"]);
    t.run(&["EXPIRE", "one", "100"]);
    assert_eq!(t.run(&["LMOVE", "one", "one", "RIGHT", "LEFT"]), bulk("x"));
    assert_eq!(t.run(&["TTL", "one"]), int(100));
}

#[test]
fn lmove_keeps_expiries_and_creates_the_destination() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "src", "1", "2"]);
    t.run(&["RPUSH", "dst", "x"]);
    t.run(&["EXPIRE", "src", "50"]);
    t.run(&["EXPIRE", "dst", "60"]);
    assert_eq!(t.run(&["RPOPLPUSH", "src", "dst"]), bulk("2"));
    assert_eq!(t.run(&["TTL", "src"]), int(50));
    assert_eq!(t.run(&["TTL", "dst"]), int(60));
    assert_eq!(t.run(&["RPOPLPUSH", "src", "new"]), bulk("1"));
    assert_eq!(t.run(&["TTL", "new"]), int(-1));
    assert_eq!(t.run(&["EXISTS", "src"]), int(0));
    assert_eq!(t.run(&["RPOPLPUSH", "src", "new"]), NIL);
    assert_eq!(all(&mut t, "dst"), bulks(&["2", "x"]));
}

#[test]
fn lmove_checks_both_types_before_popping() {
    let mut t = TestEngine::new();
    t.run(&["SET", "s", "x"]);
    t.run(&["RPUSH", "l", "1"]);
    assert_eq!(t.run(&["LMOVE", "s", "l", "LEFT", "LEFT"]), err(WRONGTYPE));
    assert_eq!(t.run(&["LMOVE", "l", "s", "LEFT", "LEFT"]), err(WRONGTYPE));
    assert_eq!(t.run(&["RPOPLPUSH", "l", "s"]), err(WRONGTYPE));
    assert_eq!(t.run(&["LMOVE", "s", "s", "LEFT", "LEFT"]), err(WRONGTYPE));
    // A missing source answers null before the destination is looked at.
    assert_eq!(t.run(&["LMOVE", "nokey", "s", "LEFT", "LEFT"]), NIL);
    assert_eq!(all(&mut t, "l"), bulks(&["1"]));
    assert_eq!(t.run(&["GET", "s"]), bulk("x"));
}

#[test]
fn lmpop_pops_from_the_first_non_empty_key() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "a", "1", "2", "3"]);
    t.run(&["RPUSH", "b", "x"]);
    assert_eq!(
        t.run(&["LMPOP", "2", "nokey", "a", "LEFT"]),
        mpop_reply("a", &["1"])
    );
    assert_eq!(
        t.run(&["LMPOP", "2", "a", "b", "right", "COUNT", "5"]),
        mpop_reply("a", &["3", "2"])
    );
    assert_eq!(
        t.run(&["LMPOP", "2", "a", "b", "LEFT"]),
        mpop_reply("b", &["x"])
    );
    assert_eq!(t.run(&["LMPOP", "2", "a", "b", "LEFT"]), NULL_ARRAY);
    assert_eq!(t.run(&["EXISTS", "a", "b"]), int(0));
    t.resp3();
    assert_eq!(t.run(&["LMPOP", "1", "a", "LEFT"]), RESP3_NULL);
    t.run(&["RPUSH", "a", "1"]);
    assert_eq!(t.run(&["LMPOP", "1", "a", "LEFT"]), mpop_reply("a", &["1"]));
}

#[test]
fn lmpop_errors() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "a", "1"]);
    t.run(&["SET", "s", "x"]);
    let numkeys = "ERR numkeys should be greater than 0";
    let count = "ERR count should be greater than 0";
    let cases: &[(&[&str], &str)] = &[
        (&["0", "a", "LEFT"], numkeys),
        (&["-1", "a", "LEFT"], numkeys),
        (&["x", "a", "LEFT"], numkeys),
        (&["9223372036854775808", "a", "LEFT"], numkeys),
        (&["2", "a", "LEFT"], SYNTAX),
        (&["9223372036854775807", "a", "LEFT"], SYNTAX),
        (&["1", "a", "UP"], SYNTAX),
        (&["1", "a", "LEFT", "COUNT", "0"], count),
        (&["1", "a", "LEFT", "COUNT", "-1"], count),
        (&["1", "a", "LEFT", "COUNT", "x"], count),
        (&["1", "a", "LEFT", "COUNT"], SYNTAX),
        (&["1", "a", "LEFT", "COUNT", "1", "COUNT", "1"], SYNTAX),
        (&["1", "a", "LEFT", "FOO"], SYNTAX),
        (&["2", "nokey", "s", "LEFT"], WRONGTYPE),
    ];
    for (rest, want) in cases {
        let mut words = vec!["LMPOP"];
        words.extend_from_slice(rest);
        assert_eq!(t.run(&words), err(want), "{rest:?}");
    }
    // Keys after the one served are not looked at.
    assert_eq!(
        t.run(&["LMPOP", "2", "a", "s", "LEFT"]),
        mpop_reply("a", &["1"])
    );
    assert_eq!(
        t.run(&["LMPOP", "1", "a"]),
        err("ERR wrong number of arguments for 'lmpop' command")
    );
}

#[test]
fn blpop_serves_at_once_in_key_order() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "b", "1", "2"]);
    t.run(&["RPUSH", "c", "x"]);
    assert_eq!(t.run(&["BLPOP", "a", "b", "c", "0"]), bulks(&["b", "1"]));
    assert_eq!(t.run(&["BRPOP", "a", "c", "b", "1.5"]), bulks(&["c", "x"]));
    t.resp3();
    assert_eq!(t.run(&["BRPOP", "b", "0"]), bulks(&["b", "2"]));
    assert_eq!(t.run(&["EXISTS", "b", "c"]), int(0));
}

#[test]
fn blpop_blocks_then_serves_on_a_rerun() {
    let mut t = TestEngine::new();
    let req = blocked(&mut t, &["BLPOP", "a", "b", "0"]);
    assert_eq!(
        req,
        BlockRequest {
            db: 0,
            keys: vec![b"a".to_vec(), b"b".to_vec()],
            deadline_ms: None,
            wants: ValueType::List,
            rerun: None,
        }
    );
    let req = blocked(&mut t, &["BRPOP", "a", "0.25"]);
    assert_eq!(req.deadline_ms, Some(T0 + 250));
    // Nothing there changes nothing, so the re-run after a wake-up is safe.
    let req = blocked(&mut t, &["BRPOP", "a", "0.0001"]);
    assert_eq!(req.deadline_ms, Some(T0 + 1));
    assert_eq!(t.run(&["EXISTS", "a", "b"]), int(0));
    t.run(&["RPUSH", "b", "v"]);
    assert_eq!(ready(&mut t), ["b"]);
    assert_eq!(t.run(&["BLPOP", "a", "b", "0"]), bulks(&["b", "v"]));
    t.session.db = 3;
    assert_eq!(blocked(&mut t, &["BLPOP", "a", "0"]).db, 3);
}

#[test]
fn blocking_commands_inside_exec_reply_their_timeout_reply() {
    let mut t = TestEngine::new();
    let cases: &[(&[&str], &str)] = &[
        (&["BLPOP", "a", "0"], NULL_ARRAY),
        (&["BRPOP", "a", "b", "1"], NULL_ARRAY),
        (&["BLMPOP", "0", "1", "a", "LEFT"], NULL_ARRAY),
        (&["BLMOVE", "a", "b", "LEFT", "LEFT", "0"], NIL),
        (&["BRPOPLPUSH", "a", "b", "0"], NIL),
    ];
    for resp3 in [false, true] {
        if resp3 {
            t.resp3();
        }
        for (words, want) in cases {
            t.run(&["MULTI"]);
            t.run(words);
            let want = if resp3 { RESP3_NULL } else { want };
            assert_eq!(
                run_flow(&mut t, &["EXEC"]),
                (format!("*1\r\n{want}"), Flow::Continue)
            );
        }
    }
}

#[test]
fn blocking_pop_errors() {
    let mut t = TestEngine::new();
    t.run(&["SET", "s", "x"]);
    t.run(&["RPUSH", "l", "1"]);
    let not_float = err("ERR timeout is not a float or out of range");
    let negative = err("ERR timeout is negative");
    assert_eq!(t.run(&["BLPOP", "a", "abc"]), not_float);
    assert_eq!(t.run(&["BLPOP", "a", "-1"]), negative);
    assert_eq!(t.run(&["BLPOP", "s", "l", "0"]), err(WRONGTYPE));
    // Keys before a non-empty one are only looked at, the rest not at all.
    assert_eq!(
        t.run(&["BLPOP", "nokey", "l", "s", "0"]),
        bulks(&["l", "1"])
    );
    assert_eq!(
        t.run(&["BLPOP", "a"]),
        err("ERR wrong number of arguments for 'blpop' command")
    );
}

#[test]
fn blmove_serves_or_waits_on_the_source() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "src", "1", "2"]);
    assert_eq!(
        t.run(&["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]),
        bulk("1")
    );
    assert_eq!(t.run(&["BRPOPLPUSH", "src", "dst", "0"]), bulk("2"));
    assert_eq!(all(&mut t, "dst"), bulks(&["2", "1"]));
    assert_eq!(ready(&mut t), ["src", "dst"]);
    let req = blocked(&mut t, &["BLMOVE", "src", "dst", "RIGHT", "LEFT", "2"]);
    assert_eq!(
        req,
        BlockRequest {
            db: 0,
            keys: vec![b"src".to_vec()],
            deadline_ms: Some(T0 + 2000),
            wants: ValueType::List,
            rerun: None,
        }
    );
    let req = blocked(&mut t, &["BRPOPLPUSH", "src", "dst", "0"]);
    assert_eq!(req.wants, ValueType::List);
    assert_eq!(req.keys, [b"src".to_vec()]);
    assert!(ready(&mut t).is_empty());
}

#[test]
fn blmove_errors() {
    let mut t = TestEngine::new();
    t.run(&["SET", "s", "x"]);
    t.run(&["RPUSH", "l", "1"]);
    assert_eq!(t.run(&["BLMOVE", "l", "d", "UP", "LEFT", "x"]), err(SYNTAX));
    assert_eq!(
        t.run(&["BLMOVE", "l", "d", "LEFT", "LEFT", "x"]),
        err("ERR timeout is not a float or out of range")
    );
    assert_eq!(
        t.run(&["BRPOPLPUSH", "l", "d", "-1"]),
        err("ERR timeout is negative")
    );
    assert_eq!(
        t.run(&["BLMOVE", "s", "d", "LEFT", "LEFT", "0"]),
        err(WRONGTYPE)
    );
    assert_eq!(
        t.run(&["BLMOVE", "l", "s", "LEFT", "LEFT", "0"]),
        err(WRONGTYPE)
    );
    assert_eq!(t.run(&["BRPOPLPUSH", "l", "s", "0"]), err(WRONGTYPE));
    assert_eq!(all(&mut t, "l"), bulks(&["1"]));
    // A missing source waits, whatever the destination holds.
    blocked(&mut t, &["BLMOVE", "nokey", "s", "LEFT", "LEFT", "0"]);
}

#[test]
fn blmpop_serves_or_waits_on_its_keys() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "b", "1", "2", "3"]);
    assert_eq!(
        t.run(&["BLMPOP", "0", "2", "a", "b", "RIGHT", "COUNT", "2"]),
        mpop_reply("b", &["3", "2"])
    );
    assert_eq!(
        t.run(&["BLMPOP", "1", "2", "a", "b", "LEFT"]),
        mpop_reply("b", &["1"])
    );
    let req = blocked(&mut t, &["BLMPOP", "0.5", "2", "a", "b", "LEFT"]);
    assert_eq!(
        req,
        BlockRequest {
            db: 0,
            keys: vec![b"a".to_vec(), b"b".to_vec()],
            deadline_ms: Some(T0 + 500),
            wants: ValueType::List,
            rerun: None,
        }
    );
    assert_eq!(
        t.run(&["BLMPOP", "x", "1", "a", "LEFT"]),
        err("ERR timeout is not a float or out of range")
    );
    assert_eq!(
        t.run(&["BLMPOP", "0", "0", "a", "LEFT"]),
        err("ERR numkeys should be greater than 0")
    );
    assert_eq!(
        t.run(&["BLMPOP", "0", "1", "a", "LEFT", "COUNT", "0"]),
        err("ERR count should be greater than 0")
    );
    assert_eq!(t.run(&["BLMPOP", "0", "2", "a", "LEFT"]), err(SYNTAX));
    t.run(&["SET", "s", "x"]);
    assert_eq!(
        t.run(&["BLMPOP", "0", "2", "a", "s", "LEFT"]),
        err(WRONGTYPE)
    );
    assert_eq!(
        t.run(&["BLMPOP", "0", "1", "a"]),
        err("ERR wrong number of arguments for 'blmpop' command")
    );
}

#[test]
fn wrong_type_both_ways() {
    let mut t = TestEngine::new();
    t.run(&["SET", "s", "x"]);
    t.run(&["RPUSH", "l", "a"]);
    assert_eq!(t.run(&["GET", "l"]), err(WRONGTYPE));
    assert_eq!(t.run(&["APPEND", "l", "x"]), err(WRONGTYPE));
    assert_eq!(t.run(&["INCR", "l"]), err(WRONGTYPE));
    let on_string: &[&[&str]] = &[
        &["LPUSH", "s", "a"],
        &["RPUSH", "s", "a"],
        &["LPUSHX", "s", "a"],
        &["RPUSHX", "s", "a"],
        &["LPOP", "s"],
        &["RPOP", "s", "0"],
        &["LLEN", "s"],
        &["LRANGE", "s", "0", "-1"],
        &["LINDEX", "s", "0"],
        &["LINDEX", "s", "abc"],
        &["LSET", "s", "0", "a"],
        &["LSET", "s", "abc", "a"],
        &["LINSERT", "s", "BEFORE", "a", "b"],
        &["LREM", "s", "0", "a"],
        &["LTRIM", "s", "0", "1"],
        &["LPOS", "s", "a"],
        &["LMOVE", "s", "l", "LEFT", "LEFT"],
        &["RPOPLPUSH", "s", "l"],
        &["LMPOP", "1", "s", "LEFT"],
        &["BLPOP", "s", "0"],
        &["BRPOP", "s", "0"],
        &["BLMOVE", "s", "l", "LEFT", "LEFT", "0"],
        &["BRPOPLPUSH", "s", "l", "0"],
        &["BLMPOP", "0", "1", "s", "LEFT"],
    ];
    for words in on_string {
        assert_eq!(t.run(words), err(WRONGTYPE), "{words:?}");
    }
    assert_eq!(t.run(&["GET", "s"]), bulk("x"));
    assert_eq!(all(&mut t, "l"), bulks(&["a"]));
}

#[test]
fn writes_keep_the_expiry_and_expired_lists_are_gone() {
    let mut t = TestEngine::new();
    t.run(&["RPUSH", "l", "a", "b"]);
    t.run(&["PEXPIRE", "l", "100"]);
    t.run(&["RPUSH", "l", "c"]);
    t.run(&["LSET", "l", "0", "z"]);
    t.run(&["LPOP", "l"]);
    assert_eq!(t.run(&["PTTL", "l"]), int(100));
    t.advance_ms(101);
    assert_eq!(t.run(&["LLEN", "l"]), int(0));
    assert_eq!(t.run(&["LPUSHX", "l", "a"]), int(0));
    assert_eq!(t.run(&["LPUSH", "l", "a"]), int(1));
    assert_eq!(t.run(&["PTTL", "l"]), int(-1));
}
