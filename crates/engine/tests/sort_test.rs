//! SORT and SORT_RO through the dispatcher, against Redis 7.0's replies and
//! error texts (`tests/unit/sort.tcl`, and what redis-server 7.0.15
//! answers where that file does not look).

mod common;

use std::borrow::Cow;

use common::*;
use engine::command;
use engine::Session;
use store::{Ttl, ValueType};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";
const NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";

/// A RESP2 array of bulk strings and nulls.
fn opt_bulks(items: &[Option<&str>]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for i in items {
        match i {
            Some(v) => s.push_str(&bulk(v)),
            None => s.push_str(NIL),
        }
    }
    s
}

/// Runs a command given as a whitespace-separated line.
fn run(t: &mut TestEngine, line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    t.run(&words)
}

/// Runs a command with binary arguments.
fn run_bin(t: &mut TestEngine, args: &[&[u8]]) -> String {
    let args: Vec<Cow<[u8]>> = args.iter().map(|a| Cow::Borrowed(*a)).collect();
    t.run_bytes(&args).0
}

/// A list, a set and a sorted set of the same numbers, and weights and
/// hash weights that sort them the other way round.
fn numbers(t: &mut TestEngine) {
    run(t, "RPUSH l 3 1 10 2");
    run(t, "SADD s 3 1 10 2");
    run(t, "ZADD z 1 3 2 1 3 10 4 2");
    for (e, w) in [("1", "40"), ("2", "30"), ("3", "20"), ("10", "10")] {
        t.run(&["SET", &format!("w_{e}"), w]);
        t.run(&["HSET", &format!("o_{e}"), "w", w, "name", &format!("n{e}")]);
    }
}

#[test]
fn table_entries_match_redis() {
    let sort = command::lookup(b"sort").expect("sort");
    assert_eq!(sort.arity, -2);
    assert_eq!((sort.first_key, sort.last_key, sort.step), (1, 1, 1));
    assert_eq!(sort.group, "generic");
    assert!(sort.is_write());
    assert!(sort.flags & command::flags::DENYOOM != 0);
    // It reads keys its data names and may write another: one step for
    // every other client.
    assert!(sort.needs_exclusive(2));
    let ro = command::lookup(b"SORT_RO").expect("sort_ro");
    assert_eq!(ro.arity, -2);
    assert_eq!((ro.first_key, ro.last_key, ro.step), (1, 1, 1));
    assert!(!ro.is_write());
    assert!(ro.flags & command::flags::READONLY != 0);
    assert!(ro.needs_exclusive(4));
    assert_eq!(ro.since, "7.0.0");
}

#[test]
fn numbers_sort_by_value_in_every_type() {
    let mut t = TestEngine::new();
    numbers(&mut t);
    for key in ["l", "s", "z"] {
        assert_eq!(
            t.run(&["SORT", key]),
            bulks(&["1", "2", "3", "10"]),
            "{key}"
        );
        assert_eq!(
            t.run(&["SORT", key, "DESC"]),
            bulks(&["10", "3", "2", "1"]),
            "{key}"
        );
        assert_eq!(
            t.run(&["SORT_RO", key, "ALPHA"]),
            bulks(&["1", "10", "2", "3"]),
            "{key}"
        );
        assert_eq!(
            t.run(&["SORT", key, "LIMIT", "1", "2"]),
            bulks(&["2", "3"]),
            "{key}"
        );
    }
    // The last ASC/DESC wins.
    assert_eq!(
        run(&mut t, "SORT l DESC ASC"),
        bulks(&["1", "2", "3", "10"])
    );
    // A missing key sorts as an empty list.
    assert_eq!(run(&mut t, "SORT nosuch"), "*0\r\n");
    assert_eq!(
        run(&mut t, "SORT nosuch BY nosort GET # LIMIT 0 10"),
        "*0\r\n"
    );
}

#[test]
fn numbers_are_read_as_strtod_reads_them() {
    let mut t = TestEngine::new();
    // Hex, leading spaces, a trailing point, an empty string (0), infinities.
    run_bin(
        &mut t,
        &[
            b"RPUSH", b"l", b"0x10", b" 7", b"1.", b"", b"-inf", b"+2", b"3e1",
        ],
    );
    assert_eq!(
        run(&mut t, "SORT l"),
        bulks(&["-inf", "", "1.", "+2", " 7", "0x10", "3e1"])
    );
    // Equal values: by the elements' bytes.
    run(&mut t, "RPUSH e 1.0 1 01 +1");
    assert_eq!(run(&mut t, "SORT e"), bulks(&["+1", "01", "1", "1.0"]));
    assert_eq!(run(&mut t, "SORT e DESC"), bulks(&["1.0", "1", "01", "+1"]));
    // A NUL ends the number, as in C.
    run_bin(&mut t, &[b"RPUSH", b"n", b"5\0x", b"4"]);
    assert_eq!(
        run_bin(&mut t, &[b"SORT", b"n"]),
        "*2\r\n$1\r\n4\r\n$3\r\n5\0x\r\n"
    );
    for bad in ["abc", "nan", "1e400", "1e-400", "1x", " "] {
        run(&mut t, "DEL b");
        run_bin(&mut t, &[b"RPUSH", b"b", b"1", bad.as_bytes()]);
        assert_eq!(run(&mut t, "SORT b"), err(NOT_DOUBLE), "{bad:?}");
        assert!(run(&mut t, "SORT b ALPHA").starts_with("*2"));
    }
}

#[test]
fn by_patterns_read_strings_and_hash_fields() {
    let mut t = TestEngine::new();
    numbers(&mut t);
    for key in ["l", "s", "z"] {
        assert_eq!(
            t.run(&["SORT", key, "BY", "w_*"]),
            bulks(&["10", "3", "2", "1"])
        );
        assert_eq!(
            t.run(&["SORT", key, "BY", "o_*->w"]),
            bulks(&["10", "3", "2", "1"])
        );
        assert_eq!(
            t.run(&["SORT", key, "BY", "o_*->w", "DESC", "LIMIT", "0", "1"]),
            bulks(&["1"])
        );
        assert_eq!(
            t.run(&["SORT", key, "BY", "o_*->name", "ALPHA", "DESC"]),
            bulks(&["3", "2", "10", "1"])
        );
    }
    // A missing weight weighs 0; equal weights sort by the elements.
    run(&mut t, "DEL w_3");
    run(&mut t, "SET w_2 0");
    assert_eq!(run(&mut t, "SORT l BY w_*"), bulks(&["2", "3", "10", "1"]));
    // A weight of another type counts as missing.
    run(&mut t, "RPUSH w_2 x");
    run(&mut t, "DEL w_2");
    run(&mut t, "RPUSH w_2 x");
    assert_eq!(run(&mut t, "SORT l BY w_*"), bulks(&["2", "3", "10", "1"]));
    // All weights 0: the elements' bytes decide.
    assert_eq!(
        run(&mut t, "SORT l BY o_*->nosuchfield"),
        bulks(&["1", "10", "2", "3"])
    );
    // ALPHA BY: a missing weight sorts first.
    assert_eq!(
        run(&mut t, "SORT l BY w_* ALPHA LIMIT 2 2"),
        bulks(&["10", "1"])
    );
    // A weight that is not a number.
    run(&mut t, "SET w_1 heavy");
    assert_eq!(run(&mut t, "SORT l BY w_*"), err(NOT_DOUBLE));
    assert_eq!(
        run(&mut t, "SORT l BY w_* ALPHA DESC LIMIT 0 1"),
        bulks(&["1"])
    );
    // Only the first star is replaced.
    run(&mut t, "SET 1_* 5");
    run(&mut t, "SET 2_* 1");
    assert_eq!(run(&mut t, "SORT l BY *_* LIMIT 0 2"), bulks(&["10", "3"]));
}

#[test]
fn by_sub_sorts_equal_weights_lexicographically() {
    let mut t = TestEngine::new();
    let members = "a b c d e f g h i l m n o p q r s t u v z aa aaa azz";
    run(&mut t, &format!("SADD myset {members}"));
    for m in members.split(' ') {
        t.run(&["SET", &format!("score:{m}"), "100"]);
    }
    let sorted = [
        "a", "aa", "aaa", "azz", "b", "c", "d", "e", "f", "g", "h", "i", "l", "m", "n", "o", "p",
        "q", "r", "s", "t", "u", "v", "z",
    ];
    assert_eq!(run(&mut t, "SORT myset BY score:*"), bulks(&sorted));
}

#[test]
fn get_patterns_replace_the_elements() {
    let mut t = TestEngine::new();
    numbers(&mut t);
    assert_eq!(
        run(&mut t, "SORT l GET # GET w_* GET o_*->name"),
        bulks(&["1", "40", "n1", "2", "30", "n2", "3", "20", "n3", "10", "10", "n10"])
    );
    // A constant, a missing key, a missing field and a wrong type: nulls.
    run(&mut t, "SET const x");
    run(&mut t, "DEL o_2");
    run(&mut t, "SET o_3 string");
    assert_eq!(
        run(
            &mut t,
            "SORT l LIMIT 0 3 GET const GET o_*->name GET nosuch_*"
        ),
        opt_bulks(&[None, Some("n1"), None, None, None, None, None, None, None])
    );
    // "->" with nothing after it is part of the key name.
    run(&mut t, "DEL ml");
    run(&mut t, "LPUSH ml a");
    t.run(&["SET", "x:a->", "100"]);
    assert_eq!(run(&mut t, "SORT ml BY num GET x:*->"), bulks(&["100"]));
    assert_eq!(
        run(&mut t, "SORT_RO ml BY nosort GET x:*->"),
        bulks(&["100"])
    );
    // RESP3 nulls.
    t.resp3();
    assert_eq!(run(&mut t, "SORT ml BY nosort GET nope_*"), "*1\r\n_\r\n");
}

#[test]
fn by_a_constant_keeps_the_values_order() {
    let mut t = TestEngine::new();
    run(&mut t, "LPUSH testa 2 1 4 3 5");
    assert_eq!(
        run(&mut t, "SORT testa BY nosort"),
        bulks(&["5", "3", "4", "1", "2"])
    );
    assert_eq!(
        run(&mut t, "SORT testa BY nosort DESC"),
        bulks(&["2", "1", "4", "3", "5"])
    );
    // LIMIT is a range of that order (of the reversed order for DESC).
    assert_eq!(
        run(&mut t, "SORT testa BY nosort LIMIT 1 2"),
        bulks(&["3", "4"])
    );
    assert_eq!(
        run(&mut t, "SORT testa BY nosort DESC LIMIT 1 2"),
        bulks(&["1", "4"])
    );
    assert_eq!(
        run(&mut t, "SORT testa BY nosort LIMIT 4 10"),
        bulks(&["2"])
    );
    assert_eq!(run(&mut t, "SORT testa BY nosort LIMIT 5 10"), "*0\r\n");
    assert_eq!(run(&mut t, "SORT testa BY nosort LIMIT 2 0"), "*0\r\n");
    assert_eq!(
        run(&mut t, "SORT testa BY nosort GET # LIMIT -10 2"),
        bulks(&["5", "3"])
    );
    // Sorted sets keep their score order.
    run(&mut t, "ZADD zset 1 a 5 b 2 c 10 d 3 e");
    assert_eq!(
        run(&mut t, "SORT zset BY nosort"),
        bulks(&["a", "c", "e", "b", "d"])
    );
    assert_eq!(
        run(&mut t, "SORT zset BY nosort DESC"),
        bulks(&["d", "b", "e", "c", "a"])
    );
    assert_eq!(
        run(&mut t, "SORT zset BY nosort ASC LIMIT 0 2"),
        bulks(&["a", "c"])
    );
    assert_eq!(
        run(&mut t, "SORT zset BY nosort DESC LIMIT 0 2"),
        bulks(&["d", "b"])
    );
    assert_eq!(
        run(&mut t, "SORT zset BY nosort DESC LIMIT 1 3"),
        bulks(&["b", "e", "c"])
    );
    assert_eq!(run(&mut t, "SORT zset BY nosort LIMIT 5 10"), "*0\r\n");
    assert_eq!(
        run(&mut t, "SORT zset BY nosort LIMIT -10 100"),
        bulks(&["a", "c", "e", "b", "d"])
    );
    // A constant BY sticks, even when a later BY has a star.
    assert_eq!(
        run(&mut t, "SORT testa BY nosort BY w_*"),
        bulks(&["5", "3", "4", "1", "2"])
    );
    // Inside MULTI.
    assert_eq!(run(&mut t, "MULTI"), OK);
    assert_eq!(run(&mut t, "SORT zset BY nosort ASC"), "+QUEUED\r\n");
    assert_eq!(run(&mut t, "SORT zset BY nosort DESC"), "+QUEUED\r\n");
    assert_eq!(
        run(&mut t, "EXEC"),
        format!(
            "*2\r\n{}{}",
            bulks(&["a", "c", "e", "b", "d"]),
            bulks(&["d", "b", "e", "c", "a"])
        )
    );
}

#[test]
fn a_set_by_a_constant_into_a_store_is_sorted_as_strings() {
    let mut t = TestEngine::new();
    run(
        &mut t,
        "SADD myset a b c d e f g h i l m n o p q r s t u v z aa aaa azz",
    );
    assert_eq!(run(&mut t, "SORT myset ALPHA BY _ STORE mylist"), int(24));
    assert_eq!(
        run(&mut t, "LRANGE mylist 0 -1"),
        bulks(&[
            "a", "aa", "aaa", "azz", "b", "c", "d", "e", "f", "g", "h", "i", "l", "m", "n", "o",
            "p", "q", "r", "s", "t", "u", "v", "z"
        ])
    );
    // Even without ALPHA, and numbers too.
    run(&mut t, "SADD nums 10 9 100");
    assert_eq!(run(&mut t, "SORT nums BY nosort DESC STORE out"), int(3));
    assert_eq!(run(&mut t, "LRANGE out 0 -1"), bulks(&["9", "100", "10"]));
    // Without STORE a set keeps its own order: every member, once.
    let reply = run(&mut t, "SORT myset BY nosort");
    assert!(reply.starts_with("*24\r\n"), "{reply}");
}

#[test]
fn store_writes_a_list() {
    let mut t = TestEngine::new();
    numbers(&mut t);
    assert_eq!(run(&mut t, "SORT s BY w_* STORE dst"), int(4));
    assert_eq!(
        run(&mut t, "LRANGE dst 0 -1"),
        bulks(&["10", "3", "2", "1"])
    );
    assert_eq!(run(&mut t, "TYPE dst"), "+list\r\n");
    // It replaces any type and its TTL; GET values are stored, a missing
    // one as an empty string.
    run(&mut t, "SET other v EX 100");
    run(&mut t, "DEL o_2");
    assert_eq!(
        run(&mut t, "SORT l GET # GET o_*->name STORE other"),
        int(8)
    );
    assert_eq!(
        run(&mut t, "LRANGE other 0 -1"),
        bulks(&["1", "n1", "2", "", "3", "n3", "10", "n10"])
    );
    let mut h = t.engine.store().handle().expect("handle");
    assert_eq!(h.ttl(0, b"other").expect("ttl"), Ttl::Persistent);
    // The last STORE wins; the source may be the destination.
    assert_eq!(run(&mut t, "SORT l DESC STORE a STORE l"), int(4));
    assert_eq!(run(&mut t, "LRANGE l 0 -1"), bulks(&["10", "3", "2", "1"]));
    assert_eq!(run(&mut t, "EXISTS a"), int(0));
    // By nosort with LIMIT, into a store.
    run(&mut t, "LPUSH testa 2 1 4 3 5");
    assert_eq!(
        run(&mut t, "SORT testa BY nosort LIMIT 0 3 STORE testb"),
        int(3)
    );
    assert_eq!(run(&mut t, "LRANGE testb 0 -1"), bulks(&["5", "3", "4"]));
}

#[test]
fn an_empty_result_deletes_the_destination() {
    let mut t = TestEngine::new();
    assert_eq!(run(&mut t, "SORT foo STORE bar"), int(0));
    assert_eq!(run(&mut t, "EXISTS bar"), int(0));
    run(&mut t, "LPUSH foo bar");
    assert_eq!(run(&mut t, "SORT foo ALPHA LIMIT 10 10 STORE zap"), int(0));
    assert_eq!(run(&mut t, "EXISTS zap"), int(0));
    assert_eq!(run(&mut t, "SORT emptylist STORE foo"), int(0));
    assert_eq!(run(&mut t, "EXISTS foo"), int(0));
    // A numeric error stores nothing.
    run(&mut t, "RPUSH bad 1 x");
    run(&mut t, "SET keep v");
    assert_eq!(run(&mut t, "SORT bad STORE keep"), err(NOT_DOUBLE));
    assert_eq!(run(&mut t, "GET keep"), bulk("v"));
}

#[test]
fn limit_is_clamped_like_redis() {
    let mut t = TestEngine::new();
    run(&mut t, "LPUSH L 2 1 0");
    assert_eq!(
        run(&mut t, "SORT_RO L BY a LIMIT 2 9223372036854775807"),
        bulks(&["2"])
    );
    assert_eq!(run(&mut t, "SORT L LIMIT 1 -1"), bulks(&["1", "2"]));
    assert_eq!(run(&mut t, "SORT L LIMIT -5 2"), bulks(&["0", "1"]));
    assert_eq!(run(&mut t, "SORT L LIMIT 3 1"), "*0\r\n");
    assert_eq!(run(&mut t, "SORT L DESC LIMIT 0 0"), "*0\r\n");
    assert_eq!(
        run(
            &mut t,
            "SORT L LIMIT -9223372036854775808 -9223372036854775808"
        ),
        bulks(&["0", "1", "2"])
    );
}

#[test]
fn argument_errors() {
    let mut t = TestEngine::new();
    run(&mut t, "RPUSH l 1");
    run(&mut t, "SET str v");
    let cases: &[(&str, &str)] = &[
        ("SORT l LIMIT 1", SYNTAX),
        ("SORT l LIMIT x 1", NOT_INT),
        ("SORT l LIMIT 1 1.5", NOT_INT),
        ("SORT l BY", SYNTAX),
        ("SORT l GET", SYNTAX),
        ("SORT l STORE", SYNTAX),
        ("SORT l NOPE", SYNTAX),
        ("SORT_RO l STORE dst", SYNTAX),
        ("SORT_RO foolist STORE bar", SYNTAX),
        // Options are checked before the key.
        ("SORT str NOPE", SYNTAX),
        ("SORT str", WRONGTYPE),
        ("SORT_RO str BY nosort", WRONGTYPE),
    ];
    for (line, e) in cases {
        assert_eq!(run(&mut t, line), err(e), "{line}");
    }
    run(&mut t, "HSET h f v");
    assert_eq!(run(&mut t, "SORT h STORE dst"), err(WRONGTYPE));
    assert_eq!(run(&mut t, "EXISTS dst"), int(0));
    assert_eq!(
        run(&mut t, "SORT"),
        err("ERR wrong number of arguments for 'sort' command")
    );
}

#[test]
fn large_values_sort_like_small_ones() {
    let mut t = TestEngine::with_size(64 << 20);
    // Past the compact forms' thresholds: paged lists, sets and hashes.
    let n = 3000usize;
    let mut expect: Vec<(u64, usize)> = Vec::new();
    let mut x: u64 = 12345;
    let mut push = vec!["RPUSH".to_string(), "big".to_string()];
    let mut sadd = vec!["SADD".to_string(), "bigset".to_string()];
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let w = x >> 40;
        t.run(&["SET", &format!("weight_{i}"), &w.to_string()]);
        t.run(&["HSET", &format!("wobj_{i}"), "weight", &w.to_string()]);
        push.push(i.to_string());
        sadd.push(i.to_string());
        expect.push((w, i));
    }
    t.run(&push.iter().map(String::as_str).collect::<Vec<_>>());
    t.run(&sadd.iter().map(String::as_str).collect::<Vec<_>>());
    expect.sort();
    let ids: Vec<String> = expect.iter().map(|(_, i)| i.to_string()).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    for key in ["big", "bigset"] {
        assert_eq!(
            t.run(&["SORT", key, "BY", "weight_*"]),
            bulks(&ids),
            "{key}"
        );
        assert_eq!(
            t.run(&["SORT", key, "BY", "wobj_*->weight", "LIMIT", "5", "5"]),
            bulks(&ids[5..10])
        );
    }
    assert_eq!(
        run(&mut t, "SORT big BY weight_* STORE sorted"),
        int(n as i64)
    );
    assert_eq!(run(&mut t, "LRANGE sorted 0 -1"), bulks(&ids));
    assert_eq!(run(&mut t, "SORT big LIMIT 0 3"), bulks(&["0", "1", "2"]));
    assert_eq!(
        run(&mut t, "SORT big BY nosort DESC LIMIT 0 2"),
        bulks(&["2999", "2998"])
    );
}

#[test]
fn store_wakes_blocked_clients_and_notifies() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
        OK
    );
    const WATCHER: u64 = 7;
    let mut watcher = Session::new(WATCHER, T0);
    let args = [b"PSUBSCRIBE".as_slice(), b"__keyevent@0__:*"].map(Cow::Borrowed);
    let mut out = Vec::new();
    t.engine.begin_batch(&mut watcher);
    t.engine.execute(&mut watcher, &args, &mut out);
    t.engine.end_batch();
    let events = |t: &mut TestEngine| -> Vec<String> {
        t.engine
            .pubsub()
            .take_outbox()
            .into_iter()
            .filter(|(c, _)| *c == WATCHER)
            .map(|(_, f)| {
                let text = String::from_utf8_lossy(&f).into_owned();
                let lines: Vec<&str> = text.split("\r\n").collect();
                format!("{} {}", lines[6].rsplit(':').next().unwrap_or(""), lines[8])
            })
            .collect()
    };
    run(&mut t, "RPUSH src 2 1");
    events(&mut t);
    t.engine.take_ready_keys();
    assert_eq!(run(&mut t, "SORT src STORE dst"), int(2));
    assert_eq!(events(&mut t), ["sortstore dst"]);
    assert_eq!(t.engine.take_ready_keys(), [(0u8, b"dst".to_vec())]);
    assert_eq!(t.engine.key_type(0, b"dst"), Some(ValueType::List));
    // Reads notify nothing (keymiss is off).
    run(&mut t, "SORT src BY nosuch_* GET nosuch_*");
    assert_eq!(events(&mut t), Vec::<String>::new());
    assert_eq!(run(&mut t, "SORT nosuch STORE dst"), int(0));
    assert_eq!(events(&mut t), ["del dst"]);
    // Deleting a missing destination is no event.
    assert_eq!(run(&mut t, "SORT nosuch STORE dst"), int(0));
    assert_eq!(events(&mut t), Vec::<String>::new());
    assert!(t.engine.take_ready_keys().is_empty());
}
