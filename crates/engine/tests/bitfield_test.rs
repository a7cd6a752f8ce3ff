//! BITFIELD and BITFIELD_RO through the dispatcher, against Redis 7.0's
//! replies and error texts (`tests/unit/bitfield.tcl`, and what
//! redis-server 7.0.15 answers where that file does not look).

mod common;

use std::borrow::Cow;

use common::*;
use engine::command;
use engine::Session;
use store::{SetOptions, Ttl, ValueType};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";
const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_OVERFLOW: &str = "ERR Invalid OVERFLOW type specified";
const RO_WRITE: &str = "ERR BITFIELD_RO only supports the GET subcommand";

/// A RESP2 array of integers and nulls.
fn replies(items: &[Option<i64>]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for i in items {
        match i {
            Some(n) => s.push_str(&int(*n)),
            None => s.push_str(NIL),
        }
    }
    s
}

/// All replies present.
fn ints(items: &[i64]) -> String {
    replies(&items.iter().map(|n| Some(*n)).collect::<Vec<_>>())
}

/// The key's string value, read straight from the store.
fn raw_get(t: &TestEngine, key: &str) -> Option<Vec<u8>> {
    let mut h = t.engine.store().handle().expect("handle");
    h.get(0, key.as_bytes()).expect("get")
}

/// Runs a command with binary arguments.
fn run_bin(t: &mut TestEngine, args: &[&[u8]]) -> String {
    let args: Vec<Cow<[u8]>> = args.iter().map(|a| Cow::Borrowed(*a)).collect();
    t.run_bytes(&args).0
}

#[test]
fn table_entries_match_redis() {
    let bf = command::lookup(b"bitfield").expect("bitfield");
    assert_eq!(bf.arity, -2);
    assert_eq!((bf.first_key, bf.last_key, bf.step), (1, 1, 1));
    assert_eq!(bf.flags, command::flags::WRITE | command::flags::DENYOOM);
    assert_eq!(bf.group, "bitmap");
    let ro = command::lookup(b"BITFIELD_RO").expect("bitfield_ro");
    assert_eq!(ro.arity, -2);
    assert_eq!((ro.first_key, ro.last_key, ro.step), (1, 1, 1));
    assert_eq!(ro.flags, command::flags::READONLY | command::flags::FAST);
    assert!(!bf.needs_exclusive(6), "one key: its lock is enough");
}

#[test]
fn set_and_get_signed_and_unsigned() {
    let mut t = TestEngine::new();
    // bitfield.tcl's basics.
    assert_eq!(
        t.run(&["BITFIELD", "bits", "SET", "i8", "0", "-100"]),
        ints(&[0])
    );
    assert_eq!(
        t.run(&["BITFIELD", "bits", "SET", "i8", "0", "101"]),
        ints(&[-100])
    );
    assert_eq!(t.run(&["BITFIELD", "bits", "GET", "i8", "0"]), ints(&[101]));
    assert_eq!(t.run(&["DEL", "bits"]), int(1));
    assert_eq!(
        t.run(&[
            "bitfield", "bits", "set", "i8", "0", "255", "set", "i8", "0", "100", "get", "i8", "0"
        ]),
        ints(&[0, -1, 100])
    );
    assert_eq!(
        t.run(&[
            "bitfield", "bits", "set", "u8", "0", "255", "incrby", "u8", "0", "100", "get", "u8",
            "0"
        ]),
        ints(&[100, 99, 99])
    );
    // Fields need not be byte aligned and may cross bytes.
    assert_eq!(t.run(&["SET", "s", "\u{7f}"]), OK);
    assert_eq!(
        t.run(&["BITFIELD", "s", "GET", "u4", "3", "GET", "i3", "1", "GET", "u63", "1"]),
        ints(&[15, -1, 127 << 56])
    );
    // i64 spans the whole range; u63 is the widest unsigned.
    assert_eq!(
        t.run(&[
            "BITFIELD",
            "w",
            "SET",
            "i64",
            "5",
            "-9223372036854775808",
            "GET",
            "i64",
            "5",
            "SET",
            "u63",
            "5",
            "9223372036854775807",
            "GET",
            "u63",
            "5"
        ]),
        ints(&[0, i64::MIN, 1 << 62, i64::MAX])
    );
}

#[test]
fn the_hash_form_counts_fields_of_the_type_width() {
    let mut t = TestEngine::new();
    for (i, v) in ["65", "66", "67"].iter().enumerate() {
        let idx = format!("#{i}");
        assert_eq!(
            t.run(&["BITFIELD", "bits", "SET", "u8", &idx, v]),
            ints(&[0])
        );
    }
    assert_eq!(t.run(&["GET", "bits"]), bulk("ABC"));
    assert_eq!(t.run(&["BITFIELD", "bits", "GET", "u4", "#1"]), ints(&[1]));
    assert_eq!(
        t.run(&["BITFIELD", "bits", "GET", "u16", "#1"]),
        ints(&[0x4300])
    );
}

#[test]
fn incrby_chains_and_overflows() {
    let mut t = TestEngine::new();
    t.run(&["BITFIELD", "bits", "SET", "u8", "#0", "10"]);
    assert_eq!(
        t.run(&["BITFIELD", "bits", "INCRBY", "u8", "#0", "100", "INCRBY", "u8", "#0", "100"]),
        ints(&[110, 210])
    );
    // WRAP (the default), SAT and FAIL, each from where it is given on.
    t.run(&["BITFIELD", "bits", "SET", "u8", "#0", "100"]);
    assert_eq!(
        t.run(&["BITFIELD", "bits", "OVERFLOW", "WRAP", "INCRBY", "u8", "#0", "257"]),
        ints(&[101])
    );
    assert_eq!(
        t.run(&["BITFIELD", "bits", "overflow", "sat", "incrby", "u8", "#0", "257"]),
        ints(&[255])
    );
    assert_eq!(
        t.run(&["BITFIELD", "bits", "overflow", "sat", "incrby", "u8", "#0", "-256"]),
        ints(&[0])
    );
    assert_eq!(
        t.run(&["BITFIELD", "bits", "SET", "i8", "#0", "100"]),
        ints(&[0])
    );
    assert_eq!(
        t.run(&["BITFIELD", "bits", "INCRBY", "i8", "#0", "257"]),
        ints(&[101])
    );
    assert_eq!(
        t.run(&["BITFIELD", "bits", "OVERFLOW", "SAT", "INCRBY", "i8", "#0", "257"]),
        ints(&[127])
    );
    assert_eq!(
        t.run(&["BITFIELD", "bits", "OVERFLOW", "SAT", "INCRBY", "i8", "#0", "-255"]),
        ints(&[-128])
    );
    assert_eq!(
        t.run(&[
            "BITFIELD", "bits", "OVERFLOW", "FAIL", "INCRBY", "i8", "#0", "-1", "OVERFLOW", "WRAP",
            "INCRBY", "i8", "#0", "-1", "GET", "i8", "#0"
        ]),
        replies(&[None, Some(127), Some(127)])
    );
    // SET checks the value it stores; it replies the old one.
    assert_eq!(
        t.run(&[
            "BITFIELD", "bits", "OVERFLOW", "FAIL", "SET", "u8", "#0", "256", "OVERFLOW", "SAT",
            "SET", "u8", "#0", "256", "SET", "u8", "#0", "-1", "OVERFLOW", "WRAP", "SET", "u8",
            "#0", "-1"
        ]),
        replies(&[None, Some(127), Some(255), Some(255)])
    );
    // redis-server's quirk: a value too far below an iN's range wraps its
    // `max - value` and saturates to the maximum.
    assert_eq!(
        t.run(&[
            "BITFIELD",
            "q",
            "OVERFLOW",
            "SAT",
            "SET",
            "i58",
            "0",
            "-9079256848778919937",
            "SET",
            "i58",
            "0",
            "-9079256848778919936",
            "GET",
            "i58",
            "0"
        ]),
        ints(&[0, (1 << 57) - 1, -(1 << 57)])
    );
}

#[test]
fn regressions_from_redis() {
    let mut t = TestEngine::new();
    // #3221: a GET of bits beyond a short string.
    assert_eq!(t.run(&["SET", "bits", "1"]), OK);
    assert_eq!(t.run(&["BITFIELD", "bits", "GET", "u1", "0"]), ints(&[0]));
    // #3564: the string grows to the farthest write first.
    for _ in 0..3 {
        t.run(&["DEL", "mystring"]);
        assert_eq!(
            t.run(&[
                "BITFIELD", "mystring", "SET", "i8", "0", "10", "SET", "i8", "64", "10", "INCRBY",
                "i8", "10", "99900"
            ]),
            ints(&[0, 0, 60])
        );
    }
}

#[test]
fn no_operations_and_missing_keys() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["BITFIELD", "k"]), "*0\r\n");
    assert_eq!(t.run(&["BITFIELD_RO", "k"]), "*0\r\n");
    assert_eq!(t.run(&["BITFIELD", "k", "GET", "i64", "1000"]), ints(&[0]));
    assert_eq!(t.run(&["BITFIELD", "k", "OVERFLOW", "FAIL"]), "*0\r\n");
    assert_eq!(t.run(&["EXISTS", "k"]), int(0), "reads create nothing");
}

#[test]
fn a_refused_write_still_grows_the_string() {
    let mut t = TestEngine::new();
    // As Redis: the key is made as long as the farthest write before any
    // operation runs, even one OVERFLOW FAIL then refuses.
    assert_eq!(
        t.run(&["BITFIELD", "k", "OVERFLOW", "FAIL", "SET", "u8", "8", "300"]),
        replies(&[None])
    );
    assert_eq!(raw_get(&t, "k"), Some(vec![0, 0]));
    assert_eq!(t.run(&["SET", "k", "ab", "EX", "100"]), OK);
    assert_eq!(
        t.run(&["BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u8", "#3", "300"]),
        replies(&[None])
    );
    assert_eq!(raw_get(&t, "k"), Some(b"ab\0\0".to_vec()));
    // A read-modify-write keeps the TTL.
    let mut h = t.engine.store().handle().expect("handle");
    assert_eq!(h.ttl(0, b"k").expect("ttl"), Ttl::Ms(100_000));
}

#[test]
fn argument_errors_in_redis_order() {
    let mut t = TestEngine::new();
    let cases: &[(&[&str], &str)] = &[
        (&["BITFIELD", "k", "GET", "i8"], SYNTAX),
        (&["BITFIELD", "k", "SET", "i8", "0"], SYNTAX),
        (&["BITFIELD", "k", "FOO", "i8", "0"], SYNTAX),
        (&["BITFIELD", "k", "OVERFLOW"], SYNTAX),
        (&["BITFIELD", "k", "OVERFLOW", "BAD"], BAD_OVERFLOW),
        (&["BITFIELD", "k", "GET", "u64", "0"], BAD_TYPE),
        (&["BITFIELD", "k", "GET", "i65", "0"], BAD_TYPE),
        (&["BITFIELD", "k", "GET", "i0", "0"], BAD_TYPE),
        (&["BITFIELD", "k", "GET", "I8", "0"], BAD_TYPE),
        (&["BITFIELD", "k", "GET", "8", "0"], BAD_TYPE),
        (&["BITFIELD", "k", "GET", "i8", "-1"], BAD_OFFSET),
        (&["BITFIELD", "k", "GET", "i8", "x"], BAD_OFFSET),
        (&["BITFIELD", "k", "GET", "i8", "#-1"], BAD_OFFSET),
        (&["BITFIELD", "k", "GET", "i8", "4294967296"], BAD_OFFSET),
        (&["BITFIELD", "k", "GET", "i8", "#536870912"], BAD_OFFSET),
        (&["BITFIELD", "k", "SET", "i8", "0", "1.5"], NOT_INT),
        (&["BITFIELD", "k", "INCRBY", "i8", "0", "x"], NOT_INT),
        // The first bad argument wins; nothing runs before it is found.
        (
            &["BITFIELD", "k", "SET", "i8", "0", "1", "GET", "x", "0"],
            BAD_TYPE,
        ),
        (
            &["BITFIELD_RO", "k", "SET", "i8", "0", "1", "GET", "i8", "x"],
            BAD_OFFSET,
        ),
        (&["BITFIELD_RO", "k", "SET", "i8", "0", "1"], RO_WRITE),
        (
            &[
                "BITFIELD_RO",
                "k",
                "GET",
                "u8",
                "0",
                "INCRBY",
                "u8",
                "0",
                "1",
            ],
            RO_WRITE,
        ),
    ];
    for (args, e) in cases {
        assert_eq!(t.run(args), err(e), "{args:?}");
    }
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
    assert_eq!(
        t.run(&["BITFIELD", "k"]).len(),
        4,
        "the arity allows the key alone"
    );
    assert_eq!(
        t.run(&["BITFIELD"]),
        err("ERR wrong number of arguments for 'bitfield' command")
    );
}

#[test]
fn the_offset_limit_follows_proto_max_bulk_len() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]), OK);
    assert_eq!(
        t.run(&["BITFIELD", "k", "GET", "u8", "8388607"]),
        ints(&[0])
    );
    assert_eq!(
        t.run(&["BITFIELD", "k", "GET", "u8", "8388608"]),
        err(BAD_OFFSET)
    );
    assert_eq!(
        t.run(&["BITFIELD", "k", "GET", "u8", "#1048576"]),
        err(BAD_OFFSET)
    );
}

#[test]
fn wrong_types() {
    let mut t = TestEngine::new();
    let mut h = t.engine.store().handle().expect("handle");
    h.write_value(0, b"l", ValueType::List, b"x", &SetOptions::default())
        .expect("list");
    assert_eq!(t.run(&["BITFIELD", "l", "GET", "u8", "0"]), err(WRONGTYPE));
    assert_eq!(
        t.run(&["BITFIELD", "l", "SET", "u8", "0", "1"]),
        err(WRONGTYPE)
    );
    assert_eq!(
        t.run(&["BITFIELD_RO", "l", "GET", "u8", "0"]),
        err(WRONGTYPE)
    );
    assert_eq!(t.run(&["BITFIELD", "l"]), err(WRONGTYPE));
    // BITFIELD_RO's refusal comes before the type check.
    assert_eq!(
        t.run(&["BITFIELD_RO", "l", "SET", "u8", "0", "1"]),
        err(RO_WRITE)
    );
}

#[test]
fn bitfield_ro_reads() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["BITFIELD", "bits", "SET", "u8", "0", "255", "SET", "u8", "0", "100"]),
        ints(&[0, 255])
    );
    assert_eq!(
        t.run(&["BITFIELD_RO", "bits", "GET", "u8", "0", "GET", "i4", "#1"]),
        ints(&[100, 4])
    );
    assert_eq!(
        t.run(&["BITFIELD_RO", "bits", "OVERFLOW", "SAT", "GET", "u8", "0"]),
        ints(&[100])
    );
}

#[test]
fn binary_values_and_resp3_nulls() {
    let mut t = TestEngine::new();
    assert_eq!(run_bin(&mut t, &[b"SET", b"b", b"\xff\x00\x80"]), OK);
    assert_eq!(t.run(&["BITFIELD", "b", "GET", "i16", "4"]), ints(&[-4088]));
    t.resp3();
    assert_eq!(
        t.run(&["BITFIELD", "b", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "1"]),
        "*1\r\n_\r\n"
    );
}

#[test]
fn writes_notify_setbit_once_when_something_changed() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
        OK
    );
    const WATCHER: u64 = 7;
    let mut watcher = Session::new(WATCHER, T0);
    let args = [b"SUBSCRIBE".as_slice(), b"__keyevent@0__:setbit"].map(Cow::Borrowed);
    let mut out = Vec::new();
    t.engine.begin_batch(&mut watcher);
    t.engine.execute(&mut watcher, &args, &mut out);
    t.engine.end_batch();
    let count = |t: &mut TestEngine| {
        t.engine
            .pubsub()
            .take_outbox()
            .into_iter()
            .filter(|(c, f)| *c == WATCHER && String::from_utf8_lossy(f).contains("setbit"))
            .count()
    };
    count(&mut t);
    // Two changes, one event.
    t.run(&[
        "BITFIELD", "k", "SET", "u8", "0", "1", "SET", "u8", "8", "2",
    ]);
    assert_eq!(count(&mut t), 1);
    // The same value again: nothing changed.
    t.run(&["BITFIELD", "k", "SET", "u8", "0", "1"]);
    assert_eq!(count(&mut t), 0);
    // A refused write that grew nothing: no event.
    t.run(&[
        "BITFIELD", "k", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "300",
    ]);
    assert_eq!(count(&mut t), 0);
    // Growing counts as a change even when the bits written are zeros.
    t.run(&["BITFIELD", "k", "SET", "u8", "#5", "0"]);
    assert_eq!(count(&mut t), 1);
    assert_eq!(raw_get(&t, "k").map(|v| v.len()), Some(6));
    // Reads never notify.
    t.run(&["BITFIELD", "k", "GET", "u8", "0"]);
    t.run(&["BITFIELD_RO", "k", "GET", "u8", "0"]);
    assert_eq!(count(&mut t), 0);
}
