//! Sorted-set commands through the dispatcher, against Redis 7.0's replies
//! and error texts (`tests/unit/type/zset.tcl`). The expected replies of the
//! scripted tests were recorded from redis-server 7.0.15, byte for byte.

mod common;

use common::*;
use engine::{command, Flow};
use store::{Set, ValueType};

/// Stores a plain set under `key` (db 0): a source for ZUNION and kin.
fn make_set(t: &TestEngine, key: &str, members: &[&str]) {
    let mut h = t.engine.store().handle().expect("handle");
    h.write_collection::<Set, _>(0, key.as_bytes(), true, |s| {
        for m in members {
            s.insert(m.as_bytes())?;
        }
        Ok(())
    })
    .expect("write set");
}

/// First key, last key, step.
type Keys = (i32, i32, i32);

#[test]
fn table_entries_match_redis() {
    let expect: &[(&str, i32, Keys, &[&str])] = &[
        ("zadd", -4, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("zincrby", 4, (1, 1, 1), &["write", "denyoom", "fast"]),
        ("zrem", -3, (1, 1, 1), &["write", "fast"]),
        ("zcard", 2, (1, 1, 1), &["readonly", "fast"]),
        ("zcount", 4, (1, 1, 1), &["readonly", "fast"]),
        ("zlexcount", 4, (1, 1, 1), &["readonly", "fast"]),
        ("zscore", 3, (1, 1, 1), &["readonly", "fast"]),
        ("zmscore", -3, (1, 1, 1), &["readonly", "fast"]),
        ("zrank", 3, (1, 1, 1), &["readonly", "fast"]),
        ("zrevrank", 3, (1, 1, 1), &["readonly", "fast"]),
        ("zrange", -4, (1, 1, 1), &["readonly"]),
        ("zrangebyscore", -4, (1, 1, 1), &["readonly"]),
        ("zrevrangebyscore", -4, (1, 1, 1), &["readonly"]),
        ("zrangebylex", -4, (1, 1, 1), &["readonly"]),
        ("zrevrangebylex", -4, (1, 1, 1), &["readonly"]),
        ("zrevrange", -4, (1, 1, 1), &["readonly"]),
        ("zrangestore", -5, (1, 2, 1), &["write", "denyoom"]),
        ("zremrangebyrank", 4, (1, 1, 1), &["write"]),
        ("zremrangebyscore", 4, (1, 1, 1), &["write"]),
        ("zremrangebylex", 4, (1, 1, 1), &["write"]),
        ("zpopmin", -2, (1, 1, 1), &["write", "fast"]),
        ("zpopmax", -2, (1, 1, 1), &["write", "fast"]),
        ("zmpop", -4, (0, 0, 0), &["write"]),
        ("zrandmember", -2, (1, 1, 1), &["readonly"]),
        ("zunion", -3, (0, 0, 0), &["readonly"]),
        ("zinter", -3, (0, 0, 0), &["readonly"]),
        ("zdiff", -3, (0, 0, 0), &["readonly"]),
        ("zunionstore", -4, (1, 1, 1), &["write", "denyoom"]),
        ("zinterstore", -4, (1, 1, 1), &["write", "denyoom"]),
        ("zdiffstore", -4, (1, 1, 1), &["write", "denyoom"]),
        ("zintercard", -3, (0, 0, 0), &["readonly"]),
        ("zscan", -3, (1, 1, 1), &["readonly"]),
        (
            "bzpopmin",
            -3,
            (1, -2, 1),
            &["write", "noscript", "blocking", "fast"],
        ),
        (
            "bzpopmax",
            -3,
            (1, -2, 1),
            &["write", "noscript", "blocking", "fast"],
        ),
        ("bzmpop", -5, (0, 0, 0), &["write", "blocking"]),
    ];
    for (name, arity, keys, flags) in expect {
        let c = command::lookup(name.as_bytes()).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(c.arity, *arity, "{name}");
        assert_eq!((c.first_key, c.last_key, c.step), *keys, "{name}");
        assert_eq!(c.group, "sorted-set", "{name}");
        let names: Vec<&str> = command::flags::NAMES
            .iter()
            .filter(|(bit, _)| c.flags & bit != 0)
            .map(|(_, n)| *n)
            .collect();
        assert_eq!(&names, flags, "{name}");
        let atomic = c.flags & command::flags::ATOMIC != 0;
        // Writers of one key from others, and reads of several keys that
        // must see one instant, run in the exclusive section.
        let multi_key_read = ["zunion", "zinter", "zdiff", "zintercard"].contains(name);
        assert_eq!(
            atomic,
            name.ends_with("store") || multi_key_read,
            "{name} ATOMIC"
        );
    }
    let bz = command::lookup(b"bzpopmin").unwrap();
    assert_eq!(bz.key_positions(5).collect::<Vec<_>>(), [1, 2, 3]);
}

// ---------- scripted against redis-server 7.0.15 ----------

#[test]
fn zadd_adds_and_updates() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["zadd", "z", "1", "a", "2", "b"]), ":2\r\n");
    assert_eq!(t.run(&["zadd", "z", "3", "a", "4", "c"]), ":1\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1", "withscores"]),
        "*6\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n3\r\n$1\r\nc\r\n$1\r\n4\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "ch", "5", "a", "4", "c", "6", "d"]),
        ":2\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "1", "a", "2", "a"]),
        ":0\r\n"
    );
    assert_eq!(t.run(&["zscore", "z", "a"]), "$1\r\n2\r\n");
    assert_eq!(t.run(&["zcard", "z"]), ":4\r\n");
    // A member given twice counts once.
    assert_eq!(t.run(&["zadd", "z", "7", "e", "8", "e"]), ":1\r\n");
    assert_eq!(t.run(&["zscore", "z", "e"]), "$1\r\n8\r\n");
}

#[test]
fn zadd_nx_xx_gt_lt() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["zadd", "z", "10", "a", "20", "b"]), ":2\r\n");
    assert_eq!(t.run(&["zadd", "z", "nx", "1", "a", "5", "c"]), ":1\r\n");
    assert_eq!(t.run(&["zadd", "z", "xx", "2", "a", "5", "d"]), ":0\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1", "withscores"]),
        "*6\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n5\r\n$1\r\nb\r\n$2\r\n20\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "gt", "ch", "1", "a", "30", "b", "7", "e"]),
        ":2\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "lt", "ch", "1", "a", "30", "b"]),
        ":1\r\n"
    );
    assert_eq!(t.run(&["zrange", "z", "0", "-1", "withscores"]), "*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nc\r\n$1\r\n5\r\n$1\r\ne\r\n$1\r\n7\r\n$1\r\nb\r\n$2\r\n30\r\n");
    assert_eq!(
        t.run(&["zadd", "z", "GT", "lt", "1", "a"]),
        "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "NX", "Gt", "1", "a"]),
        "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "nx", "lt", "1", "a"]),
        "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "Nx", "xX", "1", "a"]),
        "-ERR XX and NX options at the same time are not compatible\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "xx", "gt", "ch", "100", "a", "100", "nosuch"]),
        ":1\r\n"
    );
    assert_eq!(t.run(&["zrange", "z", "0", "-1", "withscores"]), "*8\r\n$1\r\nc\r\n$1\r\n5\r\n$1\r\ne\r\n$1\r\n7\r\n$1\r\nb\r\n$2\r\n30\r\n$1\r\na\r\n$3\r\n100\r\n");
    assert_eq!(t.run(&["zadd", "missing", "xx", "1", "a"]), ":0\r\n");
    assert_eq!(t.run(&["exists", "missing"]), ":0\r\n");
    assert_eq!(
        t.run(&["zadd", "missing", "xx", "incr", "1", "a"]),
        "$-1\r\n"
    );
    assert_eq!(t.run(&["exists", "missing"]), ":0\r\n");
}

#[test]
fn zadd_incr() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["zadd", "z", "incr", "1.5", "a"]), "$3\r\n1.5\r\n");
    assert_eq!(t.run(&["zadd", "z", "incr", "1.5", "a"]), "$1\r\n3\r\n");
    assert_eq!(t.run(&["zadd", "z", "incr", "-inf", "a"]), "$4\r\n-inf\r\n");
    assert_eq!(t.run(&["zadd", "z", "incr", "inf", "b"]), "$3\r\ninf\r\n");
    assert_eq!(
        t.run(&["zadd", "z", "incr", "-inf", "b"]),
        "-ERR resulting score is not a number (NaN)\r\n"
    );
    assert_eq!(t.run(&["zscore", "z", "b"]), "$3\r\ninf\r\n");
    assert_eq!(t.run(&["zadd", "z", "nx", "incr", "1", "a"]), "$-1\r\n");
    assert_eq!(
        t.run(&["zadd", "z", "xx", "incr", "1", "nosuch"]),
        "$-1\r\n"
    );
    assert_eq!(t.run(&["zadd", "z", "gt", "incr", "-1", "a"]), "$-1\r\n");
    assert_eq!(t.run(&["zadd", "z", "gt", "incr", "0", "a"]), "$-1\r\n");
    assert_eq!(t.run(&["zadd", "z", "lt", "incr", "-1", "a"]), "$-1\r\n");
    assert_eq!(
        t.run(&["zadd", "z", "ch", "incr", "1", "a"]),
        "$4\r\n-inf\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "incr", "1", "a", "2", "b"]),
        "-ERR INCR option supports a single increment-element pair\r\n"
    );
    assert_eq!(t.run(&["zadd", "z", "incr", "-0", "c"]), "$2\r\n-0\r\n");
    assert_eq!(t.run(&["zscore", "z", "c"]), "$1\r\n0\r\n");
}

#[test]
fn zadd_errors() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "foo"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(t.run(&["zadd", "z", "nx", "1"]), "-ERR syntax error\r\n");
    assert_eq!(
        t.run(&["zadd", "z", "foo", "a"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "nan", "b"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", " 1", "a"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "1 ", "a"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "", "a"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "1e400", "a"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "1e-400", "a"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "nx", "xx", "gt", "lt", "1", "a"]),
        "-ERR XX and NX options at the same time are not compatible\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "xx", "gt", "lt", "1", "a"]),
        "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z", "incr", "nan", "a"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(t.run(&["exists", "z"]), ":0\r\n");
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zadd", "s", "1", "a"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "s", "foo", "a"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "s", "nx", "xx", "1", "a"]),
        "-ERR XX and NX options at the same time are not compatible\r\n"
    );
    assert_eq!(
        t.run(&["zincrby", "s", "1", "a"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}

#[test]
fn zadd_parses_scores_like_strtod() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&[
            "zadd", "z", "0x10", "a", ".5", "b", "5.", "c", "+2", "d", "1E2", "e", "-INF", "f",
            "infinity", "g", "0x1p-2", "h", "4.9e-324", "i"
        ]),
        ":9\r\n"
    );
    assert_eq!(t.run(&["zrange", "z", "0", "-1", "withscores"]), "*18\r\n$1\r\nf\r\n$4\r\n-inf\r\n$1\r\ni\r\n$23\r\n4.9406564584124654e-324\r\n$1\r\nh\r\n$4\r\n0.25\r\n$1\r\nb\r\n$3\r\n0.5\r\n$1\r\nd\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n5\r\n$1\r\na\r\n$2\r\n16\r\n$1\r\ne\r\n$3\r\n100\r\n$1\r\ng\r\n$3\r\ninf\r\n");
}

#[test]
fn zincrby_increments() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["zincrby", "z", "2.5", "a"]), "$3\r\n2.5\r\n");
    assert_eq!(t.run(&["zincrby", "z", "2.5", "a"]), "$1\r\n5\r\n");
    assert_eq!(t.run(&["zincrby", "z", "-10", "a"]), "$2\r\n-5\r\n");
    assert_eq!(
        t.run(&["zincrby", "z", "foo", "a"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(
        t.run(&["zincrby", "z", "", "a"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(t.run(&["zincrby", "z", "inf", "b"]), "$3\r\ninf\r\n");
    assert_eq!(
        t.run(&["zincrby", "z", "-inf", "b"]),
        "-ERR resulting score is not a number (NaN)\r\n"
    );
    assert_eq!(t.run(&["zincrby", "z", "1e308", "c"]), "$6\r\n1e+308\r\n");
    assert_eq!(t.run(&["zincrby", "z", "1e308", "c"]), "$3\r\ninf\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1", "withscores"]),
        "*6\r\n$1\r\na\r\n$2\r\n-5\r\n$1\r\nb\r\n$3\r\ninf\r\n$1\r\nc\r\n$3\r\ninf\r\n"
    );
}

#[test]
fn scores_print_as_redis() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&[
            "zadd",
            "z",
            "0.1",
            "a",
            "1.5",
            "b",
            "3",
            "c",
            "1e300",
            "d",
            "1e-5",
            "e",
            "123456789012345678",
            "f",
            "inf",
            "g",
            "-inf",
            "h",
            "1.7976931348623157e308",
            "i",
            "0.3",
            "j",
            "1e17",
            "k",
            "1e16",
            "l",
            "2.5e-7",
            "m",
            "-0",
            "n",
            "12345.678",
            "o",
            "-2.5",
            "p"
        ]),
        ":16\r\n"
    );
    assert_eq!(t.run(&["zrange", "z", "0", "-1", "withscores"]), "*32\r\n$1\r\nh\r\n$4\r\n-inf\r\n$1\r\np\r\n$4\r\n-2.5\r\n$1\r\nn\r\n$1\r\n0\r\n$1\r\nm\r\n$22\r\n2.4999999999999999e-07\r\n$1\r\ne\r\n$22\r\n1.0000000000000001e-05\r\n$1\r\na\r\n$19\r\n0.10000000000000001\r\n$1\r\nj\r\n$19\r\n0.29999999999999999\r\n$1\r\nb\r\n$3\r\n1.5\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\no\r\n$9\r\n12345.678\r\n$1\r\nl\r\n$17\r\n10000000000000000\r\n$1\r\nk\r\n$5\r\n1e+17\r\n$1\r\nf\r\n$22\r\n1.2345678901234568e+17\r\n$1\r\nd\r\n$23\r\n1.0000000000000001e+300\r\n$1\r\ni\r\n$23\r\n1.7976931348623157e+308\r\n$1\r\ng\r\n$3\r\ninf\r\n");
    assert_eq!(
        t.run(&["zscore", "z", "a"]),
        "$19\r\n0.10000000000000001\r\n"
    );
    assert_eq!(t.run(&["zscore", "z", "n"]), "$1\r\n0\r\n");
    assert_eq!(t.run(&["zscan", "z", "0"]), "*2\r\n$1\r\n0\r\n*32\r\n$1\r\nh\r\n$4\r\n-inf\r\n$1\r\np\r\n$4\r\n-2.5\r\n$1\r\nn\r\n$1\r\n0\r\n$1\r\nm\r\n$22\r\n2.4999999999999999e-07\r\n$1\r\ne\r\n$22\r\n1.0000000000000001e-05\r\n$1\r\na\r\n$19\r\n0.10000000000000001\r\n$1\r\nj\r\n$19\r\n0.29999999999999999\r\n$1\r\nb\r\n$3\r\n1.5\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\no\r\n$9\r\n12345.678\r\n$1\r\nl\r\n$17\r\n10000000000000000\r\n$1\r\nk\r\n$18\r\n100000000000000000\r\n$1\r\nf\r\n$18\r\n123456789012345680\r\n$1\r\nd\r\n$23\r\n1.0000000000000001e+300\r\n$1\r\ni\r\n$23\r\n1.7976931348623157e+308\r\n$1\r\ng\r\n$3\r\ninf\r\n");
}

#[test]
fn zrem_removes_and_deletes_empty() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c"]),
        ":3\r\n"
    );
    assert_eq!(t.run(&["zrem", "z", "a", "nosuch", "a"]), ":1\r\n");
    assert_eq!(t.run(&["zrem", "z", "b", "c"]), ":2\r\n");
    assert_eq!(t.run(&["exists", "z"]), ":0\r\n");
    assert_eq!(t.run(&["zrem", "z", "a"]), ":0\r\n");
    assert_eq!(t.run(&["zrem", "nosuch", "a"]), ":0\r\n");
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zrem", "s", "a"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}

#[test]
fn zcard_zscore_zmscore() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["zadd", "z", "1", "a", "2.5", "b"]), ":2\r\n");
    assert_eq!(t.run(&["zcard", "z"]), ":2\r\n");
    assert_eq!(t.run(&["zcard", "nosuch"]), ":0\r\n");
    assert_eq!(t.run(&["zscore", "z", "b"]), "$3\r\n2.5\r\n");
    assert_eq!(t.run(&["zscore", "z", "nosuch"]), "$-1\r\n");
    assert_eq!(t.run(&["zscore", "nosuch", "a"]), "$-1\r\n");
    assert_eq!(
        t.run(&["zmscore", "z", "a", "nosuch", "b"]),
        "*3\r\n$1\r\n1\r\n$-1\r\n$3\r\n2.5\r\n"
    );
    assert_eq!(
        t.run(&["zmscore", "nosuch", "a", "b"]),
        "*2\r\n$-1\r\n$-1\r\n"
    );
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zcard", "s"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zscore", "s", "a"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zmscore", "s", "a"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zmscore", "nosuch"]),
        "-ERR wrong number of arguments for 'zmscore' command\r\n"
    );
}

#[test]
fn zrank_and_zrevrank() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c", "3", "d"]),
        ":4\r\n"
    );
    assert_eq!(t.run(&["zrank", "z", "a"]), ":0\r\n");
    assert_eq!(t.run(&["zrank", "z", "d"]), ":3\r\n");
    assert_eq!(t.run(&["zrevrank", "z", "a"]), ":3\r\n");
    assert_eq!(t.run(&["zrevrank", "z", "d"]), ":0\r\n");
    assert_eq!(t.run(&["zrank", "z", "nosuch"]), "$-1\r\n");
    assert_eq!(t.run(&["zrevrank", "nosuch", "a"]), "$-1\r\n");
    assert_eq!(
        t.run(&["zrank", "z", "a", "withscore"]),
        "-ERR wrong number of arguments for 'zrank' command\r\n"
    );
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zrank", "s", "a"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}

#[test]
fn zrange_by_rank() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"]),
        ":5\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1"]),
        "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "1", "2", "withscores"]),
        "*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "-2", "-1"]),
        "*2\r\n$1\r\nd\r\n$1\r\ne\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "-100", "1"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(t.run(&["zrange", "z", "3", "1"]), "*0\r\n");
    assert_eq!(t.run(&["zrange", "z", "5", "10"]), "*0\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "0", "100"]),
        "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1", "rev"]),
        "*5\r\n$1\r\ne\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "0", "1", "rev", "withscores"]),
        "*4\r\n$1\r\ne\r\n$1\r\n5\r\n$1\r\nd\r\n$1\r\n4\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "-1", "-1", "REV"]),
        "*1\r\n$1\r\na\r\n"
    );
    assert_eq!(
        t.run(&["zrevrange", "z", "0", "1", "withscores"]),
        "*4\r\n$1\r\ne\r\n$1\r\n5\r\n$1\r\nd\r\n$1\r\n4\r\n"
    );
    assert_eq!(
        t.run(&["zrevrange", "z", "1", "100"]),
        "*4\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"
    );
    assert_eq!(t.run(&["zrevrange", "z", "0", "-1", "WITHSCORES"]), "*10\r\n$1\r\ne\r\n$1\r\n5\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "a", "b"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "0", "b"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1", "limit", "0", "-1"]),
        "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"
    );
    assert_eq!(t.run(&["zrange", "z", "0", "-1", "limit", "0", "1"]), "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n");
    assert_eq!(t.run(&["zrevrange", "z", "0", "1", "limit", "0", "1"]), "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1", "rev", "rev"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(t.run(&["zrange", "z", "0", "-1", "withscores", "withscores"]), "*10\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\ne\r\n$1\r\n5\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1", "foo"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zrevrange", "z", "0", "1", "byscore"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(t.run(&["zrange", "nosuch", "0", "-1"]), "*0\r\n");
    assert_eq!(
        t.run(&["zrange", "nosuch", "a", "b"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zrange", "s", "0", "-1"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}

#[test]
fn zrange_by_score() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"]),
        ":5\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "2", "4", "byscore"]),
        "*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "(2", "4", "byscore", "withscores"]),
        "*4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "2", "(4", "byscore"]),
        "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(t.run(&["zrange", "z", "(2", "(2", "byscore"]), "*0\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "2", "2", "byscore"]),
        "*1\r\n$1\r\nb\r\n"
    );
    assert_eq!(t.run(&["zrange", "z", "4", "2", "byscore"]), "*0\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "-inf", "+inf", "byscore"]),
        "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "4", "2", "byscore", "rev"]),
        "*3\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "(5", "(1", "byscore", "rev", "withscores"]),
        "*6\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "5", "1", "byscore", "limit", "1", "2", "rev"]),
        "*2\r\n$1\r\nd\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "1", "5", "byscore", "limit", "1", "2"]),
        "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "1", "5", "byscore", "limit", "1", "-1"]),
        "*4\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "1", "5", "byscore", "limit", "1", "0"]),
        "*0\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "1", "5", "byscore", "limit", "-1", "2"]),
        "*0\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "1", "5", "byscore", "limit", "10", "1"]),
        "*0\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "1", "5", "byscore", "limit", "5", "1"]),
        "*0\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "1", "5", "byscore", "limit", "4", "10"]),
        "*1\r\n$1\r\ne\r\n"
    );
    assert_eq!(
        t.run(&[
            "zrangebyscore",
            "z",
            "1",
            "5",
            "withscores",
            "limit",
            "1",
            "2"
        ]),
        "*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "-inf", "2"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(t.run(&["zrangebyscore", "z", "", ""]), "*0\r\n");
    assert_eq!(
        t.run(&["zrangebyscore", "z", " 2", "(4"]),
        "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "(", "10"]),
        "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"
    );
    assert_eq!(t.run(&["zrangebyscore", "z", "1e400", "inf"]), "*0\r\n");
    assert_eq!(
        t.run(&["zrangebyscore", "z", "-1e400", "+inf"]),
        "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "0x2", "0x3"]),
        "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        t.run(&["zrevrangebyscore", "z", "5", "1", "limit", "1", "2"]),
        "*2\r\n$1\r\nd\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        t.run(&["zrevrangebyscore", "z", "5", "1", "limit", "-1", "2"]),
        "*0\r\n"
    );
    assert_eq!(t.run(&["zrevrangebyscore", "z", "+inf", "-inf", "withscores"]), "*10\r\n$1\r\ne\r\n$1\r\n5\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n");
    assert_eq!(
        t.run(&["zrevrangebyscore", "z", "(4", "2"]),
        "*2\r\n$1\r\nc\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "nan", "1"]),
        "-ERR min or max is not a float\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "1", "2 "]),
        "-ERR min or max is not a float\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "[1", "2"]),
        "-ERR min or max is not a float\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "1", "x"]),
        "-ERR min or max is not a float\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "1", "5", "limit", "1"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "1", "5", "limit", "1", "2", "rev"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "1", "5", "limit", "a", "2"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "1", "5", "bylex"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zrangebyscore", "z", "1", "5", "foo"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "5", "(1", "byscore", "byscore"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "5", "(1", "byscore", "bylex"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(t.run(&["zrangebyscore", "nosuch", "1", "2"]), "*0\r\n");
    assert_eq!(
        t.run(&["zrangebyscore", "nosuch", "x", "2"]),
        "-ERR min or max is not a float\r\n"
    );
}

#[test]
fn zrange_by_lex() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e"]),
        ":5\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "[b", "[d", "bylex"]),
        "*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "(b", "[d", "bylex"]),
        "*2\r\n$1\r\nc\r\n$1\r\nd\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "[b", "(d", "bylex"]),
        "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "-", "+", "bylex"]),
        "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"
    );
    assert_eq!(t.run(&["zrange", "z", "+", "-", "bylex"]), "*0\r\n");
    assert_eq!(t.run(&["zrange", "z", "-", "-", "bylex"]), "*0\r\n");
    assert_eq!(t.run(&["zrange", "z", "[d", "[b", "bylex"]), "*0\r\n");
    assert_eq!(t.run(&["zrange", "z", "(b", "(b", "bylex"]), "*0\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "[e", "[a", "bylex", "rev"]),
        "*5\r\n$1\r\ne\r\n$1\r\nd\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "+", "-", "bylex", "rev", "limit", "1", "2"]),
        "*2\r\n$1\r\nd\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "-", "+", "bylex", "limit", "1", "2"]),
        "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "-", "+", "bylex", "limit", "-1", "2"]),
        "*0\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "-", "+", "bylex", "limit", "0", "0"]),
        "*0\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "[a", "[aa", "bylex"]),
        "*1\r\n$1\r\na\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "(", "+", "bylex"]),
        "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"
    );
    assert_eq!(
        t.run(&["zrangebylex", "z", "[c", "+"]),
        "*3\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"
    );
    assert_eq!(
        t.run(&["zrangebylex", "z", "-", "(c", "limit", "1", "5"]),
        "*1\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        t.run(&["zrevrangebylex", "z", "+", "-", "limit", "1", "2"]),
        "*2\r\n$1\r\nd\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        t.run(&["zrevrangebylex", "z", "[c", "-"]),
        "*3\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n"
    );
    assert_eq!(
        t.run(&["zrangebylex", "z", "a", "b"]),
        "-ERR min or max not valid string range item\r\n"
    );
    assert_eq!(
        t.run(&["zrangebylex", "z", "-", "+a"]),
        "-ERR min or max not valid string range item\r\n"
    );
    assert_eq!(
        t.run(&["zrangebylex", "z", "", "+"]),
        "-ERR min or max not valid string range item\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "-", "+", "bylex", "withscores"]),
        "-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n"
    );
    assert_eq!(
        t.run(&["zrangebylex", "z", "-", "+", "withscores"]),
        "-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n"
    );
    assert_eq!(
        t.run(&["zrangebylex", "nosuch", "a", "b"]),
        "-ERR min or max not valid string range item\r\n"
    );
    assert_eq!(t.run(&["zrangebylex", "nosuch", "-", "+"]), "*0\r\n");
}

#[test]
fn zrange_in_resp3() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["zadd", "z", "1", "a", "2.5", "b"]), ":2\r\n");
    t.resp3();
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1", "withscores"]),
        "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"
    );
    assert_eq!(
        t.run(&[
            "zrangebyscore",
            "z",
            "-inf",
            "inf",
            "withscores",
            "limit",
            "0",
            "1"
        ]),
        "*1\r\n*2\r\n$1\r\na\r\n,1\r\n"
    );
    assert_eq!(
        t.run(&["zrevrange", "z", "0", "-1", "withscores"]),
        "*2\r\n*2\r\n$1\r\nb\r\n,2.5\r\n*2\r\n$1\r\na\r\n,1\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "nosuch", "0", "-1", "withscores"]),
        "*0\r\n"
    );
    assert_eq!(t.run(&["zscore", "z", "b"]), ",2.5\r\n");
    assert_eq!(t.run(&["zscore", "z", "nosuch"]), "_\r\n");
    assert_eq!(t.run(&["zmscore", "z", "a", "nosuch"]), "*2\r\n,1\r\n_\r\n");
    assert_eq!(t.run(&["zrank", "z", "nosuch"]), "_\r\n");
    assert_eq!(t.run(&["zadd", "z", "incr", "1", "a"]), ",2\r\n");
    assert_eq!(t.run(&["zadd", "z", "xx", "incr", "1", "nosuch"]), "_\r\n");
    assert_eq!(t.run(&["zincrby", "z", "1", "b"]), ",3.5\r\n");
}

#[test]
fn zrangestore_stores_ranges() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"]),
        ":5\r\n"
    );
    assert_eq!(t.run(&["zrangestore", "d", "z", "1", "2"]), ":2\r\n");
    assert_eq!(
        t.run(&["zrange", "d", "0", "-1", "withscores"]),
        "*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );
    assert_eq!(
        t.run(&["zrangestore", "d", "z", "1", "3", "byscore", "rev"]),
        ":0\r\n"
    );
    assert_eq!(
        t.run(&["zrangestore", "d", "z", "3", "1", "byscore", "rev"]),
        ":3\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "d", "0", "-1", "withscores"]),
        "*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );
    assert_eq!(
        t.run(&[
            "zrangestore",
            "d",
            "z",
            "[b",
            "[d",
            "bylex",
            "limit",
            "1",
            "5"
        ]),
        ":2\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "d", "0", "-1", "withscores"]),
        "*4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n"
    );
    assert_eq!(
        t.run(&["zrangestore", "d", "z", "0", "-1", "rev"]),
        ":5\r\n"
    );
    assert_eq!(t.run(&["zrange", "d", "0", "-1", "withscores"]), "*10\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\ne\r\n$1\r\n5\r\n");
    assert_eq!(t.run(&["zrangestore", "d", "z", "10", "20"]), ":0\r\n");
    assert_eq!(t.run(&["exists", "d"]), ":0\r\n");
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(t.run(&["zrangestore", "s", "z", "0", "0"]), ":1\r\n");
    assert_eq!(t.run(&["type", "s"]), "+zset\r\n");
    assert_eq!(
        t.run(&["zrange", "s", "0", "-1", "withscores"]),
        "*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(t.run(&["zrangestore", "d", "nosuch", "0", "-1"]), ":0\r\n");
    assert_eq!(t.run(&["exists", "d"]), ":0\r\n");
    assert_eq!(t.run(&["set", "str", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zrangestore", "d", "str", "0", "-1"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zrangestore", "d", "z", "0", "-1", "withscores"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(t.run(&["zrangestore", "d", "z", "0", "-1", "limit", "0", "1"]), "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n");
    assert_eq!(
        t.run(&["zrangestore", "d", "z", "a", "b"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(t.run(&["zrangestore", "z", "z", "1", "2"]), ":2\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1"]),
        "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
}

#[test]
fn zcount_and_zlexcount() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"]),
        ":5\r\n"
    );
    assert_eq!(t.run(&["zcount", "z", "2", "4"]), ":3\r\n");
    assert_eq!(t.run(&["zcount", "z", "(2", "4"]), ":2\r\n");
    assert_eq!(t.run(&["zcount", "z", "-inf", "+inf"]), ":5\r\n");
    assert_eq!(t.run(&["zcount", "z", "(5", "+inf"]), ":0\r\n");
    assert_eq!(t.run(&["zcount", "z", "4", "2"]), ":0\r\n");
    assert_eq!(t.run(&["zcount", "z", "", ""]), ":0\r\n");
    assert_eq!(
        t.run(&["zcount", "z", "nan", "1"]),
        "-ERR min or max is not a float\r\n"
    );
    assert_eq!(
        t.run(&["zcount", "z", "1", "x"]),
        "-ERR min or max is not a float\r\n"
    );
    assert_eq!(t.run(&["zcount", "nosuch", "1", "2"]), ":0\r\n");
    assert_eq!(
        t.run(&["zcount", "nosuch", "x", "2"]),
        "-ERR min or max is not a float\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "l", "0", "a", "0", "b", "0", "c", "0", "d"]),
        ":4\r\n"
    );
    assert_eq!(t.run(&["zlexcount", "l", "-", "+"]), ":4\r\n");
    assert_eq!(t.run(&["zlexcount", "l", "[b", "(d"]), ":2\r\n");
    assert_eq!(t.run(&["zlexcount", "l", "(a", "[c"]), ":2\r\n");
    assert_eq!(t.run(&["zlexcount", "l", "+", "-"]), ":0\r\n");
    assert_eq!(
        t.run(&["zlexcount", "l", "a", "b"]),
        "-ERR min or max not valid string range item\r\n"
    );
    assert_eq!(t.run(&["zlexcount", "nosuch", "-", "+"]), ":0\r\n");
    assert_eq!(
        t.run(&["zlexcount", "nosuch", "a", "b"]),
        "-ERR min or max not valid string range item\r\n"
    );
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zcount", "s", "1", "2"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zlexcount", "s", "-", "+"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zcount", "s", "x", "2"]),
        "-ERR min or max is not a float\r\n"
    );
}

#[test]
fn zremrangeby() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "6", "f"]),
        ":6\r\n"
    );
    assert_eq!(t.run(&["zremrangebyrank", "z", "3", "1"]), ":0\r\n");
    assert_eq!(t.run(&["zremrangebyrank", "z", "-2", "-1"]), ":2\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1"]),
        "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"
    );
    assert_eq!(t.run(&["zremrangebyrank", "z", "0", "0"]), ":1\r\n");
    assert_eq!(t.run(&["zremrangebyscore", "z", "(2", "3"]), ":1\r\n");
    assert_eq!(
        t.run(&["zrange", "z", "0", "-1"]),
        "*2\r\n$1\r\nb\r\n$1\r\nd\r\n"
    );
    assert_eq!(t.run(&["zremrangebyscore", "z", "10", "20"]), ":0\r\n");
    assert_eq!(
        t.run(&["zremrangebyrank", "z", "a", "1"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        t.run(&["zremrangebyscore", "z", "foo", "2"]),
        "-ERR min or max is not a float\r\n"
    );
    assert_eq!(
        t.run(&["zremrangebylex", "z", "a", "+"]),
        "-ERR min or max not valid string range item\r\n"
    );
    assert_eq!(t.run(&["zremrangebyrank", "nosuch", "0", "1"]), ":0\r\n");
    assert_eq!(t.run(&["zremrangebyscore", "nosuch", "0", "1"]), ":0\r\n");
    assert_eq!(t.run(&["zremrangebylex", "nosuch", "-", "+"]), ":0\r\n");
    assert_eq!(
        t.run(&["zadd", "l", "0", "a", "0", "b", "0", "c", "0", "d"]),
        ":4\r\n"
    );
    assert_eq!(t.run(&["zremrangebylex", "l", "(a", "[c"]), ":2\r\n");
    assert_eq!(
        t.run(&["zrange", "l", "0", "-1"]),
        "*2\r\n$1\r\na\r\n$1\r\nd\r\n"
    );
    assert_eq!(t.run(&["zremrangebylex", "l", "-", "+"]), ":2\r\n");
    assert_eq!(t.run(&["exists", "l"]), ":0\r\n");
    assert_eq!(t.run(&["zremrangebyscore", "z", "-inf", "+inf"]), ":2\r\n");
    assert_eq!(t.run(&["exists", "z"]), ":0\r\n");
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zremrangebyrank", "s", "0", "1"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zremrangebyscore", "s", "0", "1"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zremrangebylex", "s", "-", "+"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}

#[test]
fn zpopmin_and_zpopmax() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c", "4", "d"]),
        ":4\r\n"
    );
    assert_eq!(t.run(&["zpopmin", "z"]), "*2\r\n$1\r\na\r\n$1\r\n1\r\n");
    assert_eq!(t.run(&["zpopmax", "z"]), "*2\r\n$1\r\nd\r\n$1\r\n4\r\n");
    assert_eq!(t.run(&["zpopmin", "z", "0"]), "*0\r\n");
    assert_eq!(
        t.run(&["zpopmax", "z", "1"]),
        "*2\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );
    assert_eq!(t.run(&["zadd", "z", "5", "e", "6", "f"]), ":2\r\n");
    assert_eq!(
        t.run(&["zpopmin", "z", "2"]),
        "*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\ne\r\n$1\r\n5\r\n"
    );
    assert_eq!(
        t.run(&["zpopmax", "z", "10"]),
        "*2\r\n$1\r\nf\r\n$1\r\n6\r\n"
    );
    assert_eq!(t.run(&["exists", "z"]), ":0\r\n");
    assert_eq!(t.run(&["zpopmin", "z"]), "*0\r\n");
    assert_eq!(t.run(&["zpopmin", "nosuch", "0"]), "*0\r\n");
    assert_eq!(
        t.run(&["zpopmin", "z", "-1"]),
        "-ERR value is out of range, must be positive\r\n"
    );
    assert_eq!(
        t.run(&["zpopmin", "z", "foo"]),
        "-ERR value is out of range, must be positive\r\n"
    );
    assert_eq!(
        t.run(&["zpopmin", "nosuch", "foo"]),
        "-ERR value is out of range, must be positive\r\n"
    );
    assert_eq!(t.run(&["zpopmin", "z", "1", "2"]), "-ERR syntax error\r\n");
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zpopmin", "s"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zpopmax", "s", "0"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}

#[test]
fn zpop_in_resp3() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c"]),
        ":3\r\n"
    );
    t.resp3();
    assert_eq!(t.run(&["zpopmin", "z"]), "*2\r\n$1\r\na\r\n,1\r\n");
    assert_eq!(
        t.run(&["zpopmin", "z", "1"]),
        "*1\r\n*2\r\n$1\r\nb\r\n,2\r\n"
    );
    assert_eq!(
        t.run(&["zpopmax", "z", "5"]),
        "*1\r\n*2\r\n$1\r\nc\r\n,3\r\n"
    );
    assert_eq!(t.run(&["zpopmin", "nosuch"]), "*0\r\n");
    assert_eq!(t.run(&["zpopmin", "nosuch", "1"]), "*0\r\n");
}

#[test]
fn zmpop_pops_from_the_first_set() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c"]),
        ":3\r\n"
    );
    assert_eq!(
        t.run(&["zmpop", "1", "z", "min"]),
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(
        t.run(&["zmpop", "1", "z", "MAX", "count", "5"]),
        "*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(t.run(&["exists", "z"]), ":0\r\n");
    assert_eq!(t.run(&["zadd", "y", "1", "a", "2", "b"]), ":2\r\n");
    assert_eq!(
        t.run(&["zmpop", "2", "nosuch", "y", "max"]),
        "*2\r\n$1\r\ny\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(
        t.run(&["zmpop", "3", "nosuch1", "nosuch2", "y", "min", "count", "1"]),
        "*2\r\n$1\r\ny\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(t.run(&["zmpop", "1", "nosuch", "min"]), "*-1\r\n");
    assert_eq!(
        t.run(&["zmpop", "1", "nosuch", "min", "count", "3"]),
        "*-1\r\n"
    );
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(t.run(&["zadd", "z", "1", "a"]), ":1\r\n");
    assert_eq!(
        t.run(&["zmpop", "2", "nosuch", "s", "min"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zmpop", "2", "z", "s", "min"]),
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    t.resp3();
    assert_eq!(t.run(&["zadd", "z", "1", "a", "2", "b"]), ":2\r\n");
    assert_eq!(
        t.run(&["zmpop", "1", "z", "min", "count", "2"]),
        "*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2\r\n"
    );
    assert_eq!(t.run(&["zmpop", "1", "z", "min"]), "_\r\n");
}

#[test]
fn zmpop_errors() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["zadd", "z", "1", "a"]), ":1\r\n");
    assert_eq!(
        t.run(&["zmpop", "0", "z", "min"]),
        "-ERR numkeys should be greater than 0\r\n"
    );
    assert_eq!(
        t.run(&["zmpop", "-1", "z", "min"]),
        "-ERR numkeys should be greater than 0\r\n"
    );
    assert_eq!(
        t.run(&["zmpop", "foo", "z", "min"]),
        "-ERR numkeys should be greater than 0\r\n"
    );
    assert_eq!(t.run(&["zmpop", "2", "z", "min"]), "-ERR syntax error\r\n");
    assert_eq!(
        t.run(&["zmpop", "9223372036854775807", "z", "min"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(t.run(&["zmpop", "1", "z", "foo"]), "-ERR syntax error\r\n");
    assert_eq!(
        t.run(&["zmpop", "1", "z", "min", "count", "0"]),
        "-ERR count should be greater than 0\r\n"
    );
    assert_eq!(
        t.run(&["zmpop", "1", "z", "min", "count", "-1"]),
        "-ERR count should be greater than 0\r\n"
    );
    assert_eq!(
        t.run(&["zmpop", "1", "z", "min", "count", "foo"]),
        "-ERR count should be greater than 0\r\n"
    );
    assert_eq!(
        t.run(&["zmpop", "1", "z", "min", "count", "1", "count", "1"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zmpop", "1", "z", "min", "count"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zmpop", "1", "z", "min", "foo"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["bzmpop", "0", "0", "z", "min"]),
        "-ERR numkeys should be greater than 0\r\n"
    );
    assert_eq!(
        t.run(&["bzmpop", "0", "2", "z", "min", "count", "2"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["bzmpop", "0", "1", "z", "foo"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["bzmpop", "foo", "1", "z", "min", "count", "0"]),
        "-ERR count should be greater than 0\r\n"
    );
    assert_eq!(
        t.run(&["bzmpop", "foo", "1", "z", "min"]),
        "-ERR timeout is not a float or out of range\r\n"
    );
    assert_eq!(
        t.run(&["bzmpop", "-1", "1", "z", "min"]),
        "-ERR timeout is negative\r\n"
    );
}

#[test]
fn bzpop_pops_at_once_when_it_can() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c"]),
        ":3\r\n"
    );
    assert_eq!(t.run(&["zadd", "y", "10", "x"]), ":1\r\n");
    assert_eq!(
        t.run(&["bzpopmin", "nosuch", "z", "y", "0"]),
        "*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(
        t.run(&["bzpopmax", "nosuch", "z", "y", "1.5"]),
        "*3\r\n$1\r\nz\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );
    assert_eq!(
        t.run(&["bzpopmin", "y", "z", "0"]),
        "*3\r\n$1\r\ny\r\n$1\r\nx\r\n$2\r\n10\r\n"
    );
    assert_eq!(
        t.run(&["bzmpop", "0", "2", "nosuch", "z", "max", "count", "5"]),
        "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(t.run(&["exists", "z"]), ":0\r\n");
    assert_eq!(
        t.run(&["bzpopmin", "z", "foo"]),
        "-ERR timeout is not a float or out of range\r\n"
    );
    assert_eq!(
        t.run(&["bzpopmin", "z", "-1"]),
        "-ERR timeout is negative\r\n"
    );
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["bzpopmin", "s", "0"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["bzpopmin", "nosuch", "s", "0"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["bzmpop", "0", "2", "nosuch", "s", "min"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    t.resp3();
    assert_eq!(t.run(&["zadd", "z", "1", "a"]), ":1\r\n");
    assert_eq!(
        t.run(&["bzpopmin", "z", "0"]),
        "*3\r\n$1\r\nz\r\n$1\r\na\r\n,1\r\n"
    );
}

#[test]
fn zunion_zinter_zdiff() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z1", "1", "a", "2", "b", "3", "c"]),
        ":3\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z2", "10", "b", "20", "c", "30", "d"]),
        ":3\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "2", "z1", "z2"]),
        "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"
    );
    assert_eq!(t.run(&["zunion", "2", "z1", "z2", "withscores"]), "*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n");
    assert_eq!(
        t.run(&["zinter", "2", "z1", "z2", "withscores"]),
        "*4\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n"
    );
    assert_eq!(
        t.run(&["zdiff", "2", "z1", "z2", "withscores"]),
        "*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(t.run(&["zdiff", "2", "z2", "z1"]), "*1\r\n$1\r\nd\r\n");
    assert_eq!(
        t.run(&["zinter", "2", "z1", "z2", "withscores", "aggregate", "max"]),
        "*4\r\n$1\r\nb\r\n$2\r\n10\r\n$1\r\nc\r\n$2\r\n20\r\n"
    );
    assert_eq!(
        t.run(&[
            "zinter",
            "2",
            "z1",
            "z2",
            "withscores",
            "aggregate",
            "MIN",
            "weights",
            "2",
            "-1"
        ]),
        "*4\r\n$1\r\nc\r\n$3\r\n-20\r\n$1\r\nb\r\n$3\r\n-10\r\n"
    );
    assert_eq!(t.run(&["zunion", "2", "z1", "z2", "weights", "1", "2", "weights", "3", "4", "withscores"]), "*8\r\n$1\r\na\r\n$1\r\n3\r\n$1\r\nb\r\n$2\r\n46\r\n$1\r\nc\r\n$2\r\n89\r\n$1\r\nd\r\n$3\r\n120\r\n");
    assert_eq!(
        t.run(&["zunion", "2", "z1", "nosuch", "withscores"]),
        "*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );
    assert_eq!(
        t.run(&["zinter", "2", "z1", "nosuch", "withscores"]),
        "*0\r\n"
    );
    assert_eq!(t.run(&["zdiff", "2", "nosuch", "z1"]), "*0\r\n");
    assert_eq!(
        t.run(&["zunion", "2", "z1", "z1", "withscores"]),
        "*6\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n6\r\n"
    );
    assert_eq!(
        t.run(&["zinter", "2", "z1", "z1", "withscores"]),
        "*6\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n4\r\n$1\r\nc\r\n$1\r\n6\r\n"
    );
    assert_eq!(t.run(&["zdiff", "2", "z1", "z1"]), "*0\r\n");
    assert_eq!(
        t.run(&["zunion", "1", "z1", "withscores", "withscores"]),
        "*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );
    assert_eq!(t.run(&["zunion", "2", "z1", "z2", "aggregate", "min", "aggregate", "max", "withscores"]), "*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n10\r\n$1\r\nc\r\n$2\r\n20\r\n$1\r\nd\r\n$2\r\n30\r\n");
}

#[test]
fn zunion_takes_sets_as_sources() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z1", "1", "a", "2", "b", "3", "c"]),
        ":3\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z2", "10", "b", "20", "c", "30", "d"]),
        ":3\r\n"
    );
    make_set(&t, "s", &["c", "d", "e"]);
    make_set(&t, "ints", &["3", "1", "2"]);
    assert_eq!(t.run(&["zunion", "3", "z1", "z2", "s", "withscores"]), "*10\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\ne\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n24\r\n$1\r\nd\r\n$2\r\n31\r\n");
    assert_eq!(
        t.run(&["zinter", "3", "z1", "z2", "s", "withscores"]),
        "*2\r\n$1\r\nc\r\n$2\r\n24\r\n"
    );
    assert_eq!(
        t.run(&["zdiff", "2", "s", "z1", "withscores"]),
        "*4\r\n$1\r\nd\r\n$1\r\n1\r\n$1\r\ne\r\n$1\r\n1\r\n"
    );
    assert_eq!(t.run(&["zunion", "2", "ints", "z1", "withscores", "weights", "2", "1"]), "*12\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n2\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    assert_eq!(
        t.run(&["zinter", "2", "s", "s", "withscores"]),
        "*6\r\n$1\r\nc\r\n$1\r\n2\r\n$1\r\nd\r\n$1\r\n2\r\n$1\r\ne\r\n$1\r\n2\r\n"
    );
}

#[test]
fn zunion_infinities_and_weights() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["zadd", "k", "inf", "x"]), ":1\r\n");
    assert_eq!(t.run(&["zadd", "l", "-inf", "x"]), ":1\r\n");
    assert_eq!(t.run(&["zadd", "m", "1", "x"]), ":1\r\n");
    assert_eq!(
        t.run(&["zunion", "2", "k", "l", "withscores"]),
        "*2\r\n$1\r\nx\r\n$1\r\n0\r\n"
    );
    assert_eq!(
        t.run(&["zinter", "2", "k", "l", "withscores"]),
        "*2\r\n$1\r\nx\r\n$1\r\n0\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "2", "k", "l", "withscores", "weights", "0", "1"]),
        "*2\r\n$1\r\nx\r\n$4\r\n-inf\r\n"
    );
    assert_eq!(
        t.run(&[
            "zinter",
            "2",
            "k",
            "l",
            "withscores",
            "weights",
            "1",
            "0",
            "aggregate",
            "max"
        ]),
        "*2\r\n$1\r\nx\r\n$3\r\ninf\r\n"
    );
    assert_eq!(
        t.run(&[
            "zinter",
            "2",
            "l",
            "k",
            "withscores",
            "weights",
            "1",
            "0",
            "aggregate",
            "min"
        ]),
        "*2\r\n$1\r\nx\r\n$4\r\n-inf\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "2", "k", "m", "withscores", "weights", "0", "0"]),
        "*2\r\n$1\r\nx\r\n$1\r\n0\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "1", "m", "withscores", "weights", "inf"]),
        "*2\r\n$1\r\nx\r\n$3\r\ninf\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "1", "m", "withscores", "weights", "-0"]),
        "*2\r\n$1\r\nx\r\n$2\r\n-0\r\n"
    );
    assert_eq!(
        t.run(&[
            "zunion",
            "2",
            "m",
            "m",
            "withscores",
            "weights",
            "0.1",
            "0.2"
        ]),
        "*2\r\n$1\r\nx\r\n$19\r\n0.30000000000000004\r\n"
    );
}

#[test]
fn zunion_errors() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["zadd", "z1", "1", "a"]), ":1\r\n");
    assert_eq!(t.run(&["set", "str", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zunion", "0", "z1"]),
        "-ERR at least 1 input key is needed for 'zunion' command\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "-1", "z1"]),
        "-ERR at least 1 input key is needed for 'zunion' command\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "foo", "z1"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(t.run(&["zunion", "3", "z1", "z2"]), "-ERR syntax error\r\n");
    assert_eq!(
        t.run(&["zunion", "2", "z1", "str"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "2", "z1", "str", "foo"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "1", "z1", "weights"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "2", "z1", "z1", "weights", "1"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "2", "z1", "z1", "weights", "1", "foo"]),
        "-ERR weight value is not a float\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "1", "z1", "weights", "1e400"]),
        "-ERR weight value is not a float\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "1", "z1", "weights", "nan"]),
        "-ERR weight value is not a float\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "1", "z1", "aggregate", "foo"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "1", "z1", "aggregate"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zunion", "1", "z1", "limit", "1"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zinter", "0", "z1"]),
        "-ERR at least 1 input key is needed for 'zinter' command\r\n"
    );
    assert_eq!(
        t.run(&["zdiff", "0", "z1"]),
        "-ERR at least 1 input key is needed for 'zdiff' command\r\n"
    );
    assert_eq!(
        t.run(&["zdiff", "1", "z1", "weights", "1"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zdiff", "1", "z1", "aggregate", "sum"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zunionstore", "d", "0", "z1"]),
        "-ERR at least 1 input key is needed for 'zunionstore' command\r\n"
    );
    assert_eq!(
        t.run(&["zinterstore", "d", "0", "z1"]),
        "-ERR at least 1 input key is needed for 'zinterstore' command\r\n"
    );
    assert_eq!(
        t.run(&["zdiffstore", "d", "0", "z1"]),
        "-ERR at least 1 input key is needed for 'zdiffstore' command\r\n"
    );
    assert_eq!(
        t.run(&["zunionstore", "d", "1", "z1", "withscores"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zdiffstore", "d", "1", "z1", "weights", "1"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zinterstore", "d", "2", "z1", "str"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zintercard", "0", "z1"]),
        "-ERR at least 1 input key is needed for 'zintercard' command\r\n"
    );
    assert_eq!(
        t.run(&["zintercard", "2", "z1", "z1", "limit", "-1"]),
        "-ERR LIMIT can't be negative\r\n"
    );
    assert_eq!(
        t.run(&["zintercard", "2", "z1", "z1", "limit", "foo"]),
        "-ERR LIMIT can't be negative\r\n"
    );
    assert_eq!(
        t.run(&["zintercard", "2", "z1", "z1", "withscores"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zintercard", "2", "z1", "z1", "weights", "1", "1"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zintercard", "1", "z1", "limit"]),
        "-ERR syntax error\r\n"
    );
}

#[test]
fn zstore_commands_replace_the_destination() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z1", "1", "a", "2", "b", "3", "c"]),
        ":3\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z2", "10", "b", "20", "c", "30", "d"]),
        ":3\r\n"
    );
    assert_eq!(
        t.run(&["zunionstore", "d", "2", "z1", "z2", "weights", "2", "3"]),
        ":4\r\n"
    );
    assert_eq!(t.run(&["zrange", "d", "0", "-1", "withscores"]), "*8\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$2\r\n34\r\n$1\r\nc\r\n$2\r\n66\r\n$1\r\nd\r\n$2\r\n90\r\n");
    assert_eq!(
        t.run(&["zinterstore", "d", "2", "z1", "z2", "aggregate", "max"]),
        ":2\r\n"
    );
    assert_eq!(
        t.run(&["zrange", "d", "0", "-1", "withscores"]),
        "*4\r\n$1\r\nb\r\n$2\r\n10\r\n$1\r\nc\r\n$2\r\n20\r\n"
    );
    assert_eq!(t.run(&["zdiffstore", "d", "2", "z2", "z1"]), ":1\r\n");
    assert_eq!(
        t.run(&["zrange", "d", "0", "-1", "withscores"]),
        "*2\r\n$1\r\nd\r\n$2\r\n30\r\n"
    );
    assert_eq!(t.run(&["zinterstore", "d", "2", "z1", "nosuch"]), ":0\r\n");
    assert_eq!(t.run(&["exists", "d"]), ":0\r\n");
    assert_eq!(t.run(&["zdiffstore", "d", "2", "z1", "z1"]), ":0\r\n");
    assert_eq!(t.run(&["exists", "d"]), ":0\r\n");
    assert_eq!(t.run(&["set", "str", "x"]), "+OK\r\n");
    assert_eq!(t.run(&["zunionstore", "str", "1", "z1"]), ":3\r\n");
    assert_eq!(t.run(&["type", "str"]), "+zset\r\n");
    assert_eq!(
        t.run(&["zrange", "str", "0", "-1", "withscores"]),
        "*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n"
    );
    assert_eq!(t.run(&["zunionstore", "z1", "2", "z1", "z2"]), ":4\r\n");
    assert_eq!(t.run(&["zrange", "z1", "0", "-1", "withscores"]), "*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n12\r\n$1\r\nc\r\n$2\r\n23\r\n$1\r\nd\r\n$2\r\n30\r\n");
    assert_eq!(t.run(&["zunionstore", "d", "1", "nosuch"]), ":0\r\n");
    assert_eq!(t.run(&["exists", "d"]), ":0\r\n");
}

#[test]
fn zintercard_counts() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z1", "1", "a", "2", "b", "3", "c"]),
        ":3\r\n"
    );
    assert_eq!(
        t.run(&["zadd", "z2", "10", "b", "20", "c", "30", "d"]),
        ":3\r\n"
    );
    make_set(&t, "s", &["b", "c", "d"]);
    assert_eq!(t.run(&["zintercard", "2", "z1", "z2"]), ":2\r\n");
    assert_eq!(t.run(&["zintercard", "3", "z1", "z2", "s"]), ":2\r\n");
    assert_eq!(
        t.run(&["zintercard", "2", "z1", "z2", "limit", "1"]),
        ":1\r\n"
    );
    assert_eq!(
        t.run(&["zintercard", "2", "z1", "z2", "limit", "0"]),
        ":2\r\n"
    );
    assert_eq!(
        t.run(&["zintercard", "2", "z1", "z2", "limit", "100"]),
        ":2\r\n"
    );
    assert_eq!(t.run(&["zintercard", "1", "nosuch"]), ":0\r\n");
    assert_eq!(t.run(&["zintercard", "2", "z1", "nosuch"]), ":0\r\n");
}

#[test]
fn zscan_iterates_in_one_step() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c", "1.5", "ab", "0.1", "x"]),
        ":5\r\n"
    );
    assert_eq!(t.run(&["zscan", "z", "0"]), "*2\r\n$1\r\n0\r\n*10\r\n$1\r\nx\r\n$19\r\n0.10000000000000001\r\n$1\r\na\r\n$1\r\n1\r\n$2\r\nab\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    assert_eq!(
        t.run(&["zscan", "z", "0", "match", "a*"]),
        "*2\r\n$1\r\n0\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n$2\r\nab\r\n$3\r\n1.5\r\n"
    );
    assert_eq!(t.run(&["zscan", "z", "0", "match", "*[bc]", "count", "1"]), "*2\r\n$1\r\n0\r\n*6\r\n$2\r\nab\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    assert_eq!(t.run(&["zscan", "z", "0", "MATCH", "*", "COUNT", "100"]), "*2\r\n$1\r\n0\r\n*10\r\n$1\r\nx\r\n$19\r\n0.10000000000000001\r\n$1\r\na\r\n$1\r\n1\r\n$2\r\nab\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    assert_eq!(t.run(&["zscan", "z", "7"]), "*2\r\n$1\r\n0\r\n*10\r\n$1\r\nx\r\n$19\r\n0.10000000000000001\r\n$1\r\na\r\n$1\r\n1\r\n$2\r\nab\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    assert_eq!(t.run(&["zscan", "z", "-1"]), "*2\r\n$1\r\n0\r\n*10\r\n$1\r\nx\r\n$19\r\n0.10000000000000001\r\n$1\r\na\r\n$1\r\n1\r\n$2\r\nab\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    assert_eq!(t.run(&["zscan", "z", ""]), "*2\r\n$1\r\n0\r\n*10\r\n$1\r\nx\r\n$19\r\n0.10000000000000001\r\n$1\r\na\r\n$1\r\n1\r\n$2\r\nab\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    assert_eq!(t.run(&["zscan", "z", "foo"]), "-ERR invalid cursor\r\n");
    assert_eq!(t.run(&["zscan", "z", " 0"]), "-ERR invalid cursor\r\n");
    assert_eq!(t.run(&["zscan", "z", "18446744073709551615"]), "*2\r\n$1\r\n0\r\n*10\r\n$1\r\nx\r\n$19\r\n0.10000000000000001\r\n$1\r\na\r\n$1\r\n1\r\n$2\r\nab\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    assert_eq!(
        t.run(&["zscan", "z", "18446744073709551616"]),
        "-ERR invalid cursor\r\n"
    );
    assert_eq!(
        t.run(&["zscan", "z", "0", "count", "0"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zscan", "z", "0", "count", "-1"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zscan", "z", "0", "count", "foo"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        t.run(&["zscan", "z", "0", "match"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zscan", "z", "0", "foo", "bar"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zscan", "z", "0", "type", "string"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(t.run(&["zscan", "nosuch", "0"]), "*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(
        t.run(&["zscan", "nosuch", "0", "count", "0"]),
        "*2\r\n$1\r\n0\r\n*0\r\n"
    );
    assert_eq!(
        t.run(&["zscan", "nosuch", "foo"]),
        "-ERR invalid cursor\r\n"
    );
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zscan", "s", "0"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zscan", "s", "0", "count", "0"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(t.run(&["zscan", "s", "foo"]), "-ERR invalid cursor\r\n");
}

#[test]
fn zscan_prints_listpack_scores_as_integers() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&[
            "zadd",
            "z",
            "1e17",
            "x",
            "123456789012345678",
            "y",
            "4611686018427387904",
            "z",
            "1e300",
            "v",
            "1e16",
            "u",
            "1.5",
            "t",
            "-0",
            "w"
        ]),
        ":7\r\n"
    );
    assert_eq!(t.run(&["zscan", "z", "0"]), "*2\r\n$1\r\n0\r\n*14\r\n$1\r\nw\r\n$1\r\n0\r\n$1\r\nt\r\n$3\r\n1.5\r\n$1\r\nu\r\n$17\r\n10000000000000000\r\n$1\r\nx\r\n$18\r\n100000000000000000\r\n$1\r\ny\r\n$18\r\n123456789012345680\r\n$1\r\nz\r\n$19\r\n4611686018427387904\r\n$1\r\nv\r\n$23\r\n1.0000000000000001e+300\r\n");
    t.resp3();
    assert_eq!(t.run(&["zscan", "z", "0"]), "*2\r\n$1\r\n0\r\n*14\r\n$1\r\nw\r\n$1\r\n0\r\n$1\r\nt\r\n$3\r\n1.5\r\n$1\r\nu\r\n$17\r\n10000000000000000\r\n$1\r\nx\r\n$18\r\n100000000000000000\r\n$1\r\ny\r\n$18\r\n123456789012345680\r\n$1\r\nz\r\n$19\r\n4611686018427387904\r\n$1\r\nv\r\n$23\r\n1.0000000000000001e+300\r\n");
}

#[test]
fn zrandmember_errors() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["zadd", "z", "1", "a", "2", "b"]), ":2\r\n");
    assert_eq!(t.run(&["zrandmember", "nosuch"]), "$-1\r\n");
    assert_eq!(t.run(&["zrandmember", "nosuch", "5"]), "*0\r\n");
    assert_eq!(t.run(&["zrandmember", "nosuch", "0"]), "*0\r\n");
    assert_eq!(t.run(&["zrandmember", "z", "0"]), "*0\r\n");
    assert_eq!(t.run(&["zrandmember", "z", "0", "withscores"]), "*0\r\n");
    assert_eq!(
        t.run(&["zrandmember", "z", "foo"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        t.run(&["zrandmember", "z", "1", "foo"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        t.run(&["zrandmember", "z", "1", "withscores", "foo"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(t.run(&["zrandmember", "z", "-9223372036854775808"]), "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n");
    assert_eq!(
        t.run(&["zrandmember", "z", "9223372036854775807", "withscores"]),
        "-ERR value is out of range\r\n"
    );
    assert_eq!(
        t.run(&["zrandmember", "z", "-4611686018427387904", "withscores"]),
        "-ERR value is out of range\r\n"
    );
    assert_eq!(t.run(&["set", "s", "x"]), "+OK\r\n");
    assert_eq!(
        t.run(&["zrandmember", "s"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zrandmember", "s", "1"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        t.run(&["zrandmember", "s", "foo"]),
        "-ERR value is not an integer or out of range\r\n"
    );
}

#[test]
fn negative_zero_survives_only_in_large_sets() {
    let mut t = TestEngine::new();
    // 129 members: Redis makes a skiplist, which keeps -0.
    let mut zadd: Vec<String> = vec!["zadd".into(), "big".into()];
    for i in 0..129 {
        zadd.push(i.to_string());
        zadd.push(format!("m{i:03}"));
    }
    let words: Vec<&str> = zadd.iter().map(String::as_str).collect();
    assert_eq!(t.run(&words), ":129\r\n");
    assert_eq!(t.run(&["zadd", "big", "-0", "z"]), ":1\r\n");
    assert_eq!(t.run(&["zscore", "big", "z"]), "$2\r\n-0\r\n");
    assert_eq!(t.run(&["zincrby", "big", "-0", "y"]), "$2\r\n-0\r\n");
    assert_eq!(t.run(&["zscore", "big", "y"]), "$2\r\n-0\r\n");
    // 0 and -0 are the same score: no update.
    assert_eq!(t.run(&["zadd", "big", "-0", "m000"]), ":0\r\n");
    assert_eq!(t.run(&["zscore", "big", "m000"]), "$1\r\n0\r\n");
    let union = t.run(&["zunion", "1", "big", "withscores", "weights", "1"]);
    assert!(union.starts_with(
        "*262\r\n$4\r\nm000\r\n$1\r\n0\r\n$1\r\ny\r\n$2\r\n-0\r\n$1\r\nz\r\n$2\r\n-0\r\n$4\r\nm001\r\n$1\r\n1\r\n"
    ));
    // A large result keeps -0 …
    assert_eq!(
        t.run(&["zunionstore", "small", "1", "big", "weights", "-0"]),
        ":131\r\n"
    );
    assert_eq!(t.run(&["zscore", "small", "m005"]), "$2\r\n-0\r\n");
    // … a small one is stored as a listpack: 0.
    assert_eq!(t.run(&["zrangestore", "small", "big", "0", "2"]), ":3\r\n");
    assert_eq!(
        t.run(&["zrange", "small", "0", "-1", "withscores"]),
        "*6\r\n$4\r\nm000\r\n$1\r\n0\r\n$1\r\ny\r\n$1\r\n0\r\n$1\r\nz\r\n$1\r\n0\r\n"
    );
    assert_eq!(t.run(&["zadd", "tiny", "-0", "a"]), ":1\r\n");
    assert_eq!(t.run(&["zscore", "tiny", "a"]), "$1\r\n0\r\n");
    assert_eq!(
        t.run(&["zunion", "2", "tiny", "tiny", "withscores"]),
        "*2\r\n$1\r\na\r\n$1\r\n0\r\n"
    );
}

// ---------- written by hand ----------

#[test]
fn arity_is_checked_by_the_table() {
    let mut t = TestEngine::new();
    for (words, name) in [
        (&["zadd", "z", "1"][..], "zadd"),
        (&["zincrby", "z", "1"], "zincrby"),
        (&["zrange", "z", "0"], "zrange"),
        (&["zrangestore", "d", "z", "0"], "zrangestore"),
        (&["zmpop", "1", "z"], "zmpop"),
        (&["bzpopmin", "z"], "bzpopmin"),
        (&["bzmpop", "0", "1", "z"], "bzmpop"),
        (&["zunionstore", "d", "1"], "zunionstore"),
        (&["zscan", "z"], "zscan"),
        (&["zrank", "z", "a", "withscore"], "zrank"),
    ] {
        let expected = err(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        assert_eq!(t.run(words), expected, "{words:?}");
    }
}

#[test]
fn writes_keep_the_ttl_and_stores_drop_it() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["zadd", "z", "1", "a"]), int(1));
    assert_eq!(t.run(&["expire", "z", "100"]), int(1));
    assert_eq!(t.run(&["zadd", "z", "2", "b"]), int(1));
    assert_eq!(t.run(&["zincrby", "z", "1", "a"]), bulk("2"));
    assert_eq!(t.run(&["zrem", "z", "a"]), int(1));
    assert_eq!(t.run(&["zpopmin", "z", "0"]), "*0\r\n");
    assert_eq!(t.run(&["ttl", "z"]), int(100));
    assert_eq!(t.run(&["set", "d", "x", "EX", "100"]), OK);
    assert_eq!(t.run(&["zunionstore", "d", "1", "z"]), int(1));
    assert_eq!(t.run(&["ttl", "d"]), int(-1));
    assert_eq!(t.run(&["set", "d", "x", "EX", "100"]), OK);
    assert_eq!(t.run(&["zrangestore", "d", "z", "0", "-1"]), int(1));
    assert_eq!(t.run(&["ttl", "d"]), int(-1));
    // An expired source is missing.
    t.advance_ms(100_001);
    assert_eq!(t.run(&["zcard", "z"]), int(0));
    assert_eq!(t.run(&["zunionstore", "d", "1", "z"]), int(0));
    assert_eq!(t.run(&["exists", "d"]), int(0));
}

#[test]
fn adding_members_signals_blocked_clients() {
    let mut t = TestEngine::new();
    let ready = |t: &mut TestEngine| -> Vec<String> {
        let keys = t.engine.take_ready_keys();
        keys.into_iter()
            .map(|(db, k)| format!("{db}:{}", String::from_utf8_lossy(&k)))
            .collect()
    };
    assert_eq!(t.run(&["zadd", "z", "1", "a"]), int(1));
    assert_eq!(ready(&mut t), ["0:z"]);
    // Only an update: the set was not empty before, nobody waits on it.
    assert_eq!(t.run(&["zadd", "z", "2", "a"]), int(0));
    assert!(ready(&mut t).is_empty());
    assert_eq!(t.run(&["zincrby", "y", "1", "a"]), bulk("1"));
    assert_eq!(t.run(&["zadd", "x", "incr", "1", "a"]), bulk("1"));
    assert_eq!(ready(&mut t), ["0:y", "0:x"]);
    assert_eq!(t.run(&["zunionstore", "u", "2", "z", "y"]), int(1));
    assert_eq!(t.run(&["zinterstore", "i", "2", "z", "y"]), int(1));
    assert_eq!(t.run(&["zdiffstore", "d", "2", "z", "nosuch"]), int(1));
    assert_eq!(t.run(&["zrangestore", "r", "z", "0", "-1"]), int(1));
    assert_eq!(ready(&mut t), ["0:u", "0:i", "0:d", "0:r"]);
    // An empty result deletes the destination and signals nothing.
    assert_eq!(t.run(&["zdiffstore", "d", "2", "z", "z"]), int(0));
    assert_eq!(t.run(&["zrangestore", "r", "nosuch", "0", "-1"]), int(0));
    assert!(ready(&mut t).is_empty());
    // The session's db is the one signalled.
    assert_eq!(t.run(&["select", "3"]), OK);
    assert_eq!(t.run(&["zadd", "z", "1", "a"]), int(1));
    assert_eq!(ready(&mut t), ["3:z"]);
}

/// Runs a command and returns its reply and what the connection does next.
fn run_flow(t: &mut TestEngine, words: &[&str]) -> (String, Flow) {
    let args: Vec<std::borrow::Cow<[u8]>> = words
        .iter()
        .map(|w| std::borrow::Cow::Borrowed(w.as_bytes()))
        .collect();
    t.run_bytes(&args)
}

#[test]
fn blocking_pops_block_on_missing_keys() {
    let mut t = TestEngine::new();
    let now = t.now_ms();
    for (words, keys, deadline) in [
        (&["bzpopmin", "a", "b", "0"][..], &["a", "b"][..], None),
        (&["bzpopmax", "a", "1.5"], &["a"], Some(now + 1500)),
        (
            &["bzmpop", "0.001", "2", "a", "b", "min", "count", "3"],
            &["a", "b"],
            Some(now + 1),
        ),
    ] {
        let (reply, flow) = run_flow(&mut t, words);
        assert_eq!(reply, "", "{words:?}");
        let Flow::Block(req) = flow else {
            panic!("{words:?} did not block: {flow:?}");
        };
        let expected: Vec<Vec<u8>> = keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        assert_eq!(req.keys, expected);
        assert_eq!(req.db, 0);
        assert_eq!(req.deadline_ms, deadline);
        assert_eq!(req.wants, ValueType::ZSet);
    }
    // Where a client cannot wait (inside EXEC) the timeout reply comes at
    // once.
    t.run(&["multi"]);
    t.run(&["bzpopmin", "a", "0"]);
    t.run(&["bzmpop", "0", "1", "a", "max"]);
    let (reply, flow) = run_flow(&mut t, &["exec"]);
    assert_eq!(
        (reply.as_str(), flow),
        ("*2\r\n*-1\r\n*-1\r\n", Flow::Continue)
    );
    // Once a key has members, the same command pops at once.
    assert_eq!(t.run(&["zadd", "b", "1", "x", "2", "y"]), int(2));
    let (reply, flow) = run_flow(&mut t, &["bzpopmax", "a", "b", "0"]);
    assert_eq!(reply, "*3\r\n$1\r\nb\r\n$1\r\ny\r\n$1\r\n2\r\n");
    assert_eq!(flow, Flow::Continue);
    // Errors come before blocking.
    let (reply, flow) = run_flow(&mut t, &["bzmpop", "0", "1", "a", "middle"]);
    assert_eq!(
        (reply.as_str(), flow),
        ("-ERR syntax error\r\n", Flow::Continue)
    );
}

/// The members of a RESP2 array of bulk strings.
fn parse_bulks(reply: &str) -> Vec<String> {
    let mut lines = reply.split("\r\n");
    let header = lines.next().unwrap_or_default();
    let n: usize = header.trim_start_matches('*').parse().expect("array");
    (0..n)
        .map(|_| {
            lines.next();
            lines.next().unwrap_or_default().to_owned()
        })
        .collect()
}

#[test]
fn zrandmember_samples_members() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["zadd", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"]),
        int(5)
    );
    let all = ["a", "b", "c", "d", "e"];
    let one = t.run(&["zrandmember", "z"]);
    assert!(all.iter().any(|m| one == bulk(m)), "{one}");
    for _ in 0..50 {
        // Distinct members, as many as asked for (up to all of them).
        for n in [1usize, 3, 5, 10] {
            let got = parse_bulks(&t.run(&["zrandmember", "z", &n.to_string()]));
            assert_eq!(got.len(), n.min(5));
            let mut uniq = got.clone();
            uniq.sort();
            uniq.dedup();
            assert_eq!(uniq.len(), got.len(), "{got:?}");
            assert!(got.iter().all(|m| all.contains(&m.as_str())));
        }
        // A negative count may repeat members and always gives that many.
        let got = parse_bulks(&t.run(&["zrandmember", "z", "-20"]));
        assert_eq!(got.len(), 20);
        assert!(got.iter().all(|m| all.contains(&m.as_str())));
    }
    // Over many draws every member shows up.
    let mut seen = parse_bulks(&t.run(&["zrandmember", "z", "-500"]));
    seen.sort();
    seen.dedup();
    assert_eq!(seen, all);
    // WITHSCORES pairs each member with its own score.
    let got = parse_bulks(&t.run(&["zrandmember", "z", "-10", "withscores"]));
    assert_eq!(got.len(), 20);
    for pair in got.chunks(2) {
        let rank = all.iter().position(|m| *m == pair[0]).expect("member");
        assert_eq!(pair[1], (rank + 1).to_string());
    }
    let got = parse_bulks(&t.run(&["zrandmember", "z", "9", "withscores"]));
    assert_eq!(got, ["a", "1", "b", "2", "c", "3", "d", "4", "e", "5"]);
    t.resp3();
    let got = t.run(&["zrandmember", "z", "-1", "withscores"]);
    assert!(got.starts_with("*1\r\n*2\r\n$1\r\n"), "{got}");
    assert_eq!(t.run(&["zrandmember", "nosuch"]), "_\r\n");
    // shoal refuses to build a reply of more than 2^24 elements.
    assert_eq!(
        t.run(&["zrandmember", "z", "-16777217"]),
        err("ERR value is out of range")
    );
    assert_eq!(t.run(&["zrandmember", "z", "16777217"]).len(), 4 + 5 * 7);
}

#[test]
fn scores_survive_a_round_trip() {
    // Every printed score reads back as the same double.
    let mut t = TestEngine::new();
    let scores = [
        "0.1",
        "1e-300",
        "5e-324",
        "1.7976931348623157e308",
        "-123.456",
        "3",
        "1e22",
        "0x1.8p1",
        "12345678901234567890",
    ];
    for (i, s) in scores.iter().enumerate() {
        let member = format!("m{i}");
        assert_eq!(t.run(&["zadd", "z", s, &member]), int(1));
        let printed = parse_bulks(&format!("*1\r\n{}", t.run(&["zscore", "z", &member])));
        assert_eq!(
            t.run(&["zadd", "z", "xx", "ch", &printed[0], &member]),
            int(0),
            "{s}"
        );
    }
}

/// One step of the model test.
#[derive(Clone, Debug)]
enum Op {
    Add(u8, i8),
    Incr(u8, i8),
    Rem(u8),
    RemRangeByScore(i8, i8),
    PopMin,
}

/// A score of the model test: halves, so that `%.17g` prints them as Rust's
/// `Display` does.
fn half(k: i8) -> f64 {
    f64::from(k) / 2.0
}

fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        3 => (0u8..8, -6i8..6).prop_map(|(m, s)| Op::Add(m, s)),
        1 => (0u8..8, -3i8..3).prop_map(|(m, s)| Op::Incr(m, s)),
        1 => (0u8..8).prop_map(Op::Rem),
        1 => (-6i8..6, -6i8..6).prop_map(|(a, b)| Op::RemRangeByScore(a, b)),
        1 => Just(Op::PopMin),
    ]
}

/// The model's members in Redis's order.
fn model_sorted(model: &std::collections::BTreeMap<String, f64>) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = model.iter().map(|(m, s)| (m.clone(), *s)).collect();
    v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// A RESP2 reply of members, with their scores when `withscores`.
fn members_reply(items: &[(String, f64)], withscores: bool) -> String {
    let mut words = Vec::new();
    for (m, s) in items {
        words.push(m.clone());
        if withscores {
            words.push(s.to_string());
        }
    }
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    bulks(&refs)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Random writes against a `BTreeMap` model; after each, the whole set,
    /// score ranges (with LIMIT, both directions), counts and ranks agree.
    #[test]
    fn sorted_sets_match_a_model(
        ops in proptest::collection::vec(op_strategy(), 1..40),
        queries in proptest::collection::vec((-7i8..7, -7i8..7, 0i64..4, -1i64..4), 4),
    ) {
        let mut t = TestEngine::new();
        let mut model = std::collections::BTreeMap::<String, f64>::new();
        for op in ops {
            match op {
                Op::Add(m, s) => {
                    let m = format!("m{m}");
                    let new = model.insert(m.clone(), half(s)).is_none();
                    let reply = t.run(&["zadd", "z", &half(s).to_string(), &m]);
                    proptest::prop_assert_eq!(reply, int(i64::from(new)));
                }
                Op::Incr(m, s) => {
                    let m = format!("m{m}");
                    let v = model.entry(m.clone()).or_insert(0.0);
                    *v += half(s);
                    let reply = t.run(&["zincrby", "z", &half(s).to_string(), &m]);
                    proptest::prop_assert_eq!(reply, bulk(&v.to_string()));
                }
                Op::Rem(m) => {
                    let m = format!("m{m}");
                    let was = model.remove(&m).is_some();
                    proptest::prop_assert_eq!(t.run(&["zrem", "z", &m]), int(i64::from(was)));
                }
                Op::RemRangeByScore(a, b) => {
                    let (lo, hi) = (half(a), half(b));
                    let before = model.len();
                    model.retain(|_, s| *s < lo || *s > hi);
                    let reply = t.run(&["zremrangebyscore", "z", &lo.to_string(), &hi.to_string()]);
                    proptest::prop_assert_eq!(reply, int((before - model.len()) as i64));
                }
                Op::PopMin => {
                    let first = model_sorted(&model).into_iter().next();
                    if let Some((m, _)) = &first {
                        model.remove(m);
                    }
                    let reply = t.run(&["zpopmin", "z"]);
                    proptest::prop_assert_eq!(reply, members_reply(first.as_slice(), true));
                }
            }
            let sorted = model_sorted(&model);
            proptest::prop_assert_eq!(t.run(&["zrange", "z", "0", "-1", "withscores"]), members_reply(&sorted, true));
            proptest::prop_assert_eq!(t.run(&["zcard", "z"]), int(sorted.len() as i64));
            for (i, (m, _)) in sorted.iter().enumerate() {
                proptest::prop_assert_eq!(t.run(&["zrank", "z", m]), int(i as i64));
                let rev = sorted.len() - 1 - i;
                proptest::prop_assert_eq!(t.run(&["zrevrank", "z", m]), int(rev as i64));
            }
            for &(a, b, offset, limit) in &queries {
                // "(" on odd bounds exercises exclusive ends.
                let bound = |k: i8| {
                    if k % 2 != 0 { format!("({}", half(k)) } else { half(k).to_string() }
                };
                let (min, max) = (bound(a), bound(b));
                let in_min = |s: f64| if a % 2 != 0 { s > half(a) } else { s >= half(a) };
                let in_max = |s: f64| if b % 2 != 0 { s < half(b) } else { s <= half(b) };
                let inside: Vec<(String, f64)> =
                    sorted.iter().filter(|(_, s)| in_min(*s) && in_max(*s)).cloned().collect();
                let (o, l) = (offset.to_string(), limit.to_string());
                let take = |v: Vec<(String, f64)>| -> Vec<(String, f64)> {
                    let v = v.into_iter().skip(offset as usize);
                    if limit < 0 { v.collect() } else { v.take(limit as usize).collect() }
                };
                proptest::prop_assert_eq!(
                    t.run(&["zcount", "z", &min, &max]),
                    int(inside.len() as i64)
                );
                proptest::prop_assert_eq!(
                    t.run(&["zrangebyscore", "z", &min, &max, "withscores", "limit", &o, &l]),
                    members_reply(&take(inside.clone()), true)
                );
                let reversed: Vec<(String, f64)> = inside.iter().rev().cloned().collect();
                proptest::prop_assert_eq!(
                    t.run(&["zrange", "z", &max, &min, "byscore", "rev", "limit", &o, &l]),
                    members_reply(&take(reversed), false)
                );
                // Ranks: Redis's clamping of start and stop.
                let len = sorted.len() as i64;
                let (start, stop) = (i64::from(a), i64::from(b));
                let s = if start < 0 { (len + start).max(0) } else { start };
                let e = if stop < 0 { len + stop } else { stop.min(len - 1) };
                let by_rank: Vec<(String, f64)> = if s > e || s >= len {
                    Vec::new()
                } else {
                    sorted[s as usize..=e as usize].to_vec()
                };
                proptest::prop_assert_eq!(
                    t.run(&["zrange", "z", &a.to_string(), &b.to_string()]),
                    members_reply(&by_rank, false)
                );
            }
        }
    }
}

/// `zadd key 1 m000 2 m001 …` with `n` members.
fn zadd_many(t: &mut TestEngine, key: &str, n: usize) -> String {
    let mut words: Vec<String> = vec!["zadd".into(), key.into()];
    for i in 0..n {
        words.push((i + 1).to_string());
        words.push(format!("m{i:03}"));
    }
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    t.run(&refs)
}

#[test]
fn negative_zero_follows_the_encoding_member_by_member() {
    // Recorded from redis-server 7.0.15: a set turns into a skiplist just
    // before its 129th member goes in.
    let mut t = TestEngine::new();
    assert_eq!(zadd_many(&mut t, "z", 127), int(127));
    assert_eq!(t.run(&["zadd", "z", "-0", "x", "-0", "y"]), int(2));
    assert_eq!(t.run(&["zscore", "z", "x"]), bulk("0"));
    assert_eq!(t.run(&["zscore", "z", "y"]), bulk("-0"));
    // A member longer than 64 bytes turns it too.
    let long = "l".repeat(65);
    assert_eq!(
        t.run(&["zadd", "s", "-0", "a", "-0", &long, "-0", "b"]),
        int(3)
    );
    assert_eq!(
        t.run(&["zmscore", "s", "a", &long, "b"]),
        "*3\r\n$1\r\n0\r\n$2\r\n-0\r\n$2\r\n-0\r\n"
    );

    // ZRANGESTORE by rank knows its length: more than 128 makes a skiplist
    // from the start. By score it starts as a listpack.
    assert_eq!(zadd_many(&mut t, "big", 130), int(130));
    assert_eq!(
        t.run(&["zadd", "big", "-0", "a", "-0", "b", "-0", "m129"]),
        int(2)
    );
    assert_eq!(t.run(&["zscore", "big", "m129"]), bulk("-0"));
    assert_eq!(t.run(&["zrangestore", "d", "big", "0", "-1"]), int(132));
    assert_eq!(
        t.run(&["zmscore", "d", "a", "m129"]),
        "*2\r\n$2\r\n-0\r\n$2\r\n-0\r\n"
    );
    assert_eq!(
        t.run(&["zrangestore", "d", "big", "0", "-1", "rev"]),
        int(132)
    );
    assert_eq!(
        t.run(&["zmscore", "d", "a", "m129"]),
        "*2\r\n$2\r\n-0\r\n$2\r\n-0\r\n"
    );
    assert_eq!(
        t.run(&["zrangestore", "d", "big", "-inf", "+inf", "byscore"]),
        int(132)
    );
    assert_eq!(
        t.run(&["zmscore", "d", "a", "m129"]),
        "*2\r\n$1\r\n0\r\n$1\r\n0\r\n"
    );
    assert_eq!(t.run(&["zrangestore", "d", "big", "0", "2"]), int(3));
    assert_eq!(t.run(&["zscore", "d", "m129"]), bulk("0"));
}
