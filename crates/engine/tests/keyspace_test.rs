//! Key-space commands through the dispatcher: exact replies and error texts of
//! Redis 7.0. Time moves only by the manual clock.

mod common;

use common::*;

/// Runs SCAN to the end from cursor 0 with extra `opts`; returns the sorted
/// keys (duplicates kept) and checks every reply's shape.
fn scan_all(t: &mut TestEngine, opts: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut keys = Vec::new();
    for _ in 0..100_000 {
        let mut words = vec!["SCAN", cursor.as_str()];
        words.extend_from_slice(opts);
        let reply = t.run(&words);
        let (next, page) = parse_scan(&reply);
        keys.extend(page);
        cursor = next;
        if cursor == "0" {
            keys.sort();
            return keys;
        }
    }
    panic!("SCAN does not terminate");
}

/// Splits a RESP2 SCAN reply into its cursor and keys.
fn parse_scan(reply: &str) -> (String, Vec<String>) {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    assert_eq!(lines[0], "*2", "{reply}");
    let cursor = lines[2].to_string();
    let n: usize = lines[3][1..].parse().unwrap();
    let keys = (0..n).map(|i| lines[5 + 2 * i].to_string()).collect();
    (cursor, keys)
}

/// The sorted bulk strings of a flat RESP2 array reply.
fn sorted_bulks(reply: &str) -> Vec<String> {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    assert!(lines[0].starts_with('*'), "{reply}");
    let n: usize = lines[0][1..].parse().unwrap();
    let mut v: Vec<String> = (0..n).map(|i| lines[2 + 2 * i].to_string()).collect();
    v.sort();
    v
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn del_unlink_exists_touch_count_existing_keys() {
    let mut t = TestEngine::new();
    t.run(&["SET", "a", "1"]);
    t.run(&["SET", "b", "2"]);
    assert_eq!(t.run(&["EXISTS", "a", "b", "a", "nope"]), int(3));
    assert_eq!(t.run(&["TOUCH", "a", "nope"]), int(1));
    assert_eq!(t.run(&["DEL", "a", "a", "nope"]), int(1));
    assert_eq!(t.run(&["UNLINK", "b"]), int(1));
    assert_eq!(t.run(&["EXISTS", "a", "b"]), int(0));
    assert_eq!(
        t.run(&["TOUCH"]),
        err("ERR wrong number of arguments for 'touch' command")
    );
}

#[test]
fn type_names_and_none() {
    let mut t = TestEngine::new();
    t.run(&["SET", "s", "v"]);
    assert_eq!(t.run(&["TYPE", "s"]), "+string\r\n");
    assert_eq!(t.run(&["TYPE", "missing"]), "+none\r\n");
    t.run(&["SET", "gone", "v", "PX", "10"]);
    t.advance_ms(11);
    assert_eq!(t.run(&["TYPE", "gone"]), "+none\r\n");
}

#[test]
fn keys_returns_every_matching_key() {
    let mut t = TestEngine::new();
    for i in 0..300 {
        t.run(&["SET", &format!("user:{i}"), "v"]);
    }
    t.run(&["SET", "other", "v"]);
    t.run(&["SET", "", "empty key"]);
    t.run(&["SELECT", "1"]);
    t.run(&["SET", "user:elsewhere", "v"]);
    t.run(&["SELECT", "0"]);
    let all = sorted_bulks(&t.run(&["KEYS", "*"]));
    assert_eq!(
        all.len(),
        302,
        "a lone * returns every key, the empty one too"
    );
    assert!(all.contains(&String::new()));
    let users = sorted_bulks(&t.run(&["KEYS", "user:*"]));
    assert_eq!(users.len(), 300);
    assert_eq!(t.run(&["KEYS", "user:1?"]).matches("$").count(), 10);
    assert_eq!(t.run(&["KEYS", "nomatch*"]), "*0\r\n");
    assert_eq!(t.run(&["KEYS", "oth[a-f]r"]), bulks(&["other"]));
}

#[test]
fn scan_iterates_everything_with_match_count_and_type() {
    let mut t = TestEngine::new();
    for i in 0..500 {
        t.run(&["SET", &format!("k{i}"), "v"]);
    }
    for i in 0..20 {
        t.run(&["SET", &format!("x{i}"), "v"]);
    }
    let all = scan_all(&mut t, &[]);
    assert_eq!(all.len(), 520, "each key exactly once");
    let mut dedup = all.clone();
    dedup.dedup();
    assert_eq!(dedup, all);
    let xs = scan_all(&mut t, &["MATCH", "x*", "COUNT", "7"]);
    assert_eq!(xs.len(), 20);
    assert!(xs.iter().all(|k| k.starts_with('x')));
    assert_eq!(
        scan_all(&mut t, &["TYPE", "string", "COUNT", "1000"]).len(),
        520
    );
    assert_eq!(scan_all(&mut t, &["type", "LIST"]).len(), 0);
    assert_eq!(scan_all(&mut t, &["TYPE", "nosuchtype"]).len(), 0);
    assert_eq!(scan_all(&mut t, &["MATCH", "*"]).len(), 520);
    // Expired keys are not returned.
    t.run(&["SET", "short", "v", "PX", "5"]);
    t.advance_ms(6);
    assert!(!scan_all(&mut t, &[]).contains(&"short".to_string()));
}

#[test]
fn scan_errors() {
    let mut t = TestEngine::new();
    t.run(&["SET", "k", "v"]);
    assert_eq!(t.run(&["SCAN", "abc"]), err("ERR invalid cursor"));
    assert_eq!(t.run(&["SCAN", " 0"]), err("ERR invalid cursor"));
    assert_eq!(
        t.run(&["SCAN", "99999999999999999999"]),
        err("ERR invalid cursor")
    );
    assert_eq!(t.run(&["SCAN", "0", "COUNT", "0"]), err("ERR syntax error"));
    assert_eq!(
        t.run(&["SCAN", "0", "COUNT", "-5"]),
        err("ERR syntax error")
    );
    assert_eq!(
        t.run(&["SCAN", "0", "COUNT", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(t.run(&["SCAN", "0", "MATCH"]), err("ERR syntax error"));
    assert_eq!(t.run(&["SCAN", "0", "BOGUS", "1"]), err("ERR syntax error"));
    // The cursor is checked before the options.
    assert_eq!(
        t.run(&["SCAN", "x", "COUNT", "0"]),
        err("ERR invalid cursor")
    );
    // A cursor past the end finishes the scan.
    assert_eq!(
        t.run(&["SCAN", "18446744073709551615"]),
        "*2\r\n$1\r\n0\r\n*0\r\n"
    );
}

#[test]
fn randomkey_returns_a_key_or_nil() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["RANDOMKEY"]), NIL);
    t.run(&["SET", "only", "v"]);
    assert_eq!(t.run(&["RANDOMKEY"]), bulk("only"));
    t.resp3();
    t.run(&["DEL", "only"]);
    assert_eq!(t.run(&["RANDOMKEY"]), "_\r\n");
}

#[test]
fn rename_and_renamenx() {
    let mut t = TestEngine::new();
    t.run(&["SET", "a", "1", "EX", "100"]);
    assert_eq!(t.run(&["RENAME", "a", "b"]), OK);
    assert_eq!(t.run(&["GET", "b"]), bulk("1"));
    assert_eq!(t.run(&["TTL", "b"]), int(100));
    assert_eq!(t.run(&["EXISTS", "a"]), int(0));
    assert_eq!(t.run(&["RENAME", "missing", "x"]), err("ERR no such key"));
    assert_eq!(t.run(&["RENAMENX", "missing", "x"]), err("ERR no such key"));
    // The same key: OK for RENAME, 0 for RENAMENX, once it exists.
    assert_eq!(t.run(&["RENAME", "b", "b"]), OK);
    assert_eq!(t.run(&["RENAMENX", "b", "b"]), int(0));
    assert_eq!(t.run(&["RENAME", "nope", "nope"]), err("ERR no such key"));
    t.run(&["SET", "c", "3"]);
    assert_eq!(t.run(&["RENAMENX", "b", "c"]), int(0));
    assert_eq!(t.run(&["GET", "c"]), bulk("3"));
    assert_eq!(t.run(&["RENAMENX", "b", "d"]), int(1));
    // RENAME overwrites the destination and its TTL.
    t.run(&["SET", "e", "5", "EX", "50"]);
    assert_eq!(t.run(&["RENAME", "c", "e"]), OK);
    assert_eq!(t.run(&["GET", "e"]), bulk("3"));
    assert_eq!(t.run(&["TTL", "e"]), int(-1));
}

#[test]
fn copy_within_and_across_dbs() {
    let mut t = TestEngine::new();
    t.run(&["SET", "src", "value", "PX", "9000"]);
    assert_eq!(t.run(&["COPY", "src", "dst"]), int(1));
    assert_eq!(t.run(&["GET", "dst"]), bulk("value"));
    assert_eq!(t.run(&["PTTL", "dst"]), int(9000));
    assert_eq!(t.run(&["COPY", "src", "dst"]), int(0));
    assert_eq!(t.run(&["COPY", "src", "dst", "REPLACE"]), int(1));
    assert_eq!(t.run(&["COPY", "missing", "dst2"]), int(0));
    assert_eq!(t.run(&["COPY", "src", "other", "DB", "3"]), int(1));
    assert_eq!(
        t.run(&["COPY", "src", "other", "db", "3", "replace"]),
        int(1)
    );
    t.run(&["SELECT", "3"]);
    assert_eq!(t.run(&["GET", "other"]), bulk("value"));
    t.run(&["SELECT", "0"]);
    assert_eq!(
        t.run(&["COPY", "src", "src"]),
        err("ERR source and destination objects are the same")
    );
    assert_eq!(
        t.run(&["COPY", "src", "src", "DB", "0"]),
        err("ERR source and destination objects are the same")
    );
    assert_eq!(t.run(&["COPY", "src", "src", "DB", "1"]), int(1));
    assert_eq!(
        t.run(&["COPY", "src", "x", "DB", "16"]),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        t.run(&["COPY", "src", "x", "DB", "abc"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(t.run(&["COPY", "src", "x", "DB"]), err("ERR syntax error"));
    assert_eq!(t.run(&["COPY", "src", "x", "FOO"]), err("ERR syntax error"));
}

#[test]
fn move_between_dbs() {
    let mut t = TestEngine::new();
    t.run(&["SET", "k", "v"]);
    assert_eq!(t.run(&["MOVE", "k", "2"]), int(1));
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
    t.run(&["SET", "k", "again"]);
    assert_eq!(t.run(&["MOVE", "k", "2"]), int(0), "the destination has it");
    assert_eq!(t.run(&["MOVE", "missing", "2"]), int(0));
    assert_eq!(
        t.run(&["MOVE", "k", "0"]),
        err("ERR source and destination objects are the same")
    );
    assert_eq!(
        t.run(&["MOVE", "k", "16"]),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        t.run(&["MOVE", "k", "-1"]),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        t.run(&["MOVE", "k", "x"]),
        err("ERR value is not an integer or out of range")
    );
    t.run(&["SELECT", "2"]);
    assert_eq!(t.run(&["GET", "k"]), bulk("v"));
}

#[test]
fn expire_family_sets_ttls_relative_and_absolute() {
    let mut t = TestEngine::new();
    let now = t.now_ms();
    t.run(&["SET", "k", "v"]);
    assert_eq!(t.run(&["TTL", "k"]), int(-1));
    assert_eq!(t.run(&["PTTL", "k"]), int(-1));
    assert_eq!(t.run(&["EXPIRETIME", "k"]), int(-1));
    assert_eq!(t.run(&["PEXPIRETIME", "k"]), int(-1));
    assert_eq!(t.run(&["TTL", "missing"]), int(-2));
    assert_eq!(t.run(&["PTTL", "missing"]), int(-2));
    assert_eq!(t.run(&["EXPIRETIME", "missing"]), int(-2));
    assert_eq!(t.run(&["PEXPIRETIME", "missing"]), int(-2));
    assert_eq!(t.run(&["EXPIRE", "missing", "10"]), int(0));

    assert_eq!(t.run(&["EXPIRE", "k", "100"]), int(1));
    assert_eq!(t.run(&["TTL", "k"]), int(100));
    assert_eq!(t.run(&["PTTL", "k"]), int(100_000));
    assert_eq!(t.run(&["PEXPIRETIME", "k"]), int((now + 100_000) as i64));
    assert_eq!(
        t.run(&["EXPIRETIME", "k"]),
        int(((now + 100_000) / 1000) as i64)
    );
    // TTL rounds to the nearest second.
    t.advance_ms(600);
    assert_eq!(t.run(&["TTL", "k"]), int(99));
    assert_eq!(t.run(&["PTTL", "k"]), int(99_400));
    t.advance_ms(400);
    assert_eq!(t.run(&["PEXPIRE", "k", "1500"]), int(1));
    assert_eq!(t.run(&["TTL", "k"]), int(2));
    let at = (t.now_ms() / 1000 + 50) as i64;
    assert_eq!(t.run(&["EXPIREAT", "k", &at.to_string()]), int(1));
    assert_eq!(t.run(&["EXPIRETIME", "k"]), int(at));
    let pat = t.now_ms() as i64 + 12_345;
    assert_eq!(t.run(&["PEXPIREAT", "k", &pat.to_string()]), int(1));
    assert_eq!(t.run(&["PEXPIRETIME", "k"]), int(pat));
    assert_eq!(t.run(&["PTTL", "k"]), int(12_345));
    // The clock passes the time: the key is gone.
    t.advance_ms(12_346);
    assert_eq!(t.run(&["GET", "k"]), NIL);
    assert_eq!(t.run(&["TTL", "k"]), int(-2));
}

#[test]
fn expire_in_the_past_deletes_and_returns_one() {
    let mut t = TestEngine::new();
    for (cmd, arg) in [
        ("EXPIRE", "-1".to_string()),
        ("EXPIRE", "0".to_string()),
        ("PEXPIRE", "-100".to_string()),
        ("EXPIREAT", "1".to_string()),
        ("PEXPIREAT", (t.now_ms() - 1).to_string()),
        ("PEXPIREAT", t.now_ms().to_string()),
    ] {
        t.run(&["SET", "k", "v"]);
        assert_eq!(t.run(&[cmd, "k", &arg]), int(1), "{cmd} {arg}");
        assert_eq!(t.run(&["EXISTS", "k"]), int(0), "{cmd} {arg}");
    }
}

#[test]
fn expire_conditions_nx_xx_gt_lt() {
    let mut t = TestEngine::new();
    t.run(&["SET", "k", "v"]);
    assert_eq!(t.run(&["EXPIRE", "k", "100", "XX"]), int(0));
    assert_eq!(
        t.run(&["EXPIRE", "k", "100", "GT"]),
        int(0),
        "no TTL is infinite"
    );
    assert_eq!(t.run(&["EXPIRE", "k", "100", "LT"]), int(1));
    assert_eq!(t.run(&["EXPIRE", "k", "50", "NX"]), int(0));
    assert_eq!(t.run(&["EXPIRE", "k", "200", "xx"]), int(1));
    assert_eq!(t.run(&["EXPIRE", "k", "100", "gt"]), int(0));
    assert_eq!(t.run(&["EXPIRE", "k", "300", "GT"]), int(1));
    assert_eq!(t.run(&["EXPIRE", "k", "400", "LT"]), int(0));
    assert_eq!(t.run(&["EXPIRE", "k", "250", "LT", "XX"]), int(1));
    assert_eq!(t.run(&["TTL", "k"]), int(250));
    assert_eq!(t.run(&["EXPIRE", "k", "260", "XX", "GT"]), int(1));
    t.run(&["PERSIST", "k"]);
    assert_eq!(t.run(&["EXPIRE", "k", "10", "XX", "LT"]), int(0));
    assert_eq!(t.run(&["EXPIRE", "k", "10", "NX"]), int(1));
    assert_eq!(
        t.run(&["EXPIRE", "k", "10", "NX", "XX"]),
        err("ERR NX and XX, GT or LT options at the same time are not compatible")
    );
    assert_eq!(
        t.run(&["PEXPIRE", "k", "10", "GT", "NX"]),
        err("ERR NX and XX, GT or LT options at the same time are not compatible")
    );
    assert_eq!(
        t.run(&["EXPIREAT", "k", "10", "GT", "LT"]),
        err("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(
        t.run(&["EXPIRE", "k", "10", "FOO"]),
        err("ERR Unsupported option FOO")
    );
    // Options are checked before the number.
    assert_eq!(
        t.run(&["EXPIRE", "k", "abc", "GT", "LT"]),
        err("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(
        t.run(&["EXPIRE", "k", "abc"]),
        err("ERR value is not an integer or out of range")
    );
}

#[test]
fn expire_overflow_is_an_invalid_expire_time() {
    let mut t = TestEngine::new();
    t.run(&["SET", "k", "v"]);
    let max = i64::MAX.to_string();
    assert_eq!(
        t.run(&["EXPIRE", "k", &max]),
        err("ERR invalid expire time in 'expire' command")
    );
    assert_eq!(
        t.run(&["PEXPIRE", "k", &max]),
        err("ERR invalid expire time in 'pexpire' command")
    );
    assert_eq!(
        t.run(&["EXPIREAT", "k", &max]),
        err("ERR invalid expire time in 'expireat' command")
    );
    assert_eq!(
        t.run(&["EXPIRE", "k", "-9223372036854775808"]),
        err("ERR invalid expire time in 'expire' command")
    );
    // PEXPIREAT takes any i64: far future is fine.
    assert_eq!(t.run(&["PEXPIREAT", "k", &max]), int(1));
    assert_eq!(t.run(&["PEXPIRETIME", "k"]), int(i64::MAX));
    assert_eq!(
        t.run(&["EXPIRE", "k"]),
        err("ERR wrong number of arguments for 'expire' command")
    );
}

#[test]
fn persist_removes_only_an_existing_ttl() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["PERSIST", "missing"]), int(0));
    t.run(&["SET", "k", "v"]);
    assert_eq!(t.run(&["PERSIST", "k"]), int(0));
    t.run(&["EXPIRE", "k", "10"]);
    assert_eq!(t.run(&["PERSIST", "k"]), int(1));
    assert_eq!(t.run(&["TTL", "k"]), int(-1));
}

#[test]
fn dbsize_flushdb_flushall() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["DBSIZE"]), int(0));
    for i in 0..10 {
        t.run(&["SET", &format!("k{i}"), "v"]);
    }
    t.run(&["SELECT", "1"]);
    t.run(&["SET", "one", "v"]);
    assert_eq!(t.run(&["DBSIZE"]), int(1));
    t.run(&["SELECT", "0"]);
    assert_eq!(t.run(&["DBSIZE"]), int(10));
    assert_eq!(t.run(&["FLUSHDB", "FOO"]), err("ERR syntax error"));
    assert_eq!(
        t.run(&["FLUSHDB", "ASYNC", "SYNC"]),
        err("ERR syntax error")
    );
    assert_eq!(t.run(&["FLUSHDB", "async"]), OK);
    assert_eq!(t.run(&["DBSIZE"]), int(0));
    t.run(&["SELECT", "1"]);
    assert_eq!(t.run(&["DBSIZE"]), int(1));
    t.run(&["SET", "two", "v"]);
    assert_eq!(t.run(&["FLUSHALL", "SYNC"]), OK);
    assert_eq!(t.run(&["DBSIZE"]), int(0));
    assert_eq!(t.run(&["FLUSHALL"]), OK);
    assert_eq!(t.run(&["FLUSHDB"]), OK);
    assert_eq!(t.run(&["FLUSHALL", "x"]), err("ERR syntax error"));
}

#[test]
fn swapdb_swaps_contents_sizes_and_ttls() {
    let mut t = TestEngine::new();
    t.run(&["SET", "a", "zero", "EX", "100"]);
    t.run(&["SET", "b", "zero"]);
    t.run(&["SELECT", "1"]);
    t.run(&["SET", "a", "one"]);
    assert_eq!(t.run(&["SWAPDB", "0", "1"]), OK);
    // Still selected: db 1, which now holds what db 0 held.
    assert_eq!(t.run(&["GET", "a"]), bulk("zero"));
    assert_eq!(t.run(&["TTL", "a"]), int(100));
    assert_eq!(t.run(&["DBSIZE"]), int(2));
    t.run(&["SELECT", "0"]);
    assert_eq!(t.run(&["GET", "a"]), bulk("one"));
    assert_eq!(t.run(&["DBSIZE"]), int(1));
    assert_eq!(t.run(&["KEYS", "*"]), bulks(&["a"]));
    assert_eq!(t.run(&["SWAPDB", "5", "5"]), OK);
    assert_eq!(t.run(&["SWAPDB", "1", "0"]), OK);
    assert_eq!(t.run(&["GET", "a"]), bulk("zero"));
    assert_eq!(
        t.run(&["SWAPDB", "x", "1"]),
        err("ERR invalid first DB index")
    );
    assert_eq!(
        t.run(&["SWAPDB", "0", "1.5"]),
        err("ERR invalid second DB index")
    );
    assert_eq!(
        t.run(&["SWAPDB", "99999999999", "0"]),
        err("ERR invalid first DB index")
    );
    assert_eq!(
        t.run(&["SWAPDB", "0", "16"]),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        t.run(&["SWAPDB", "-1", "0"]),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        t.run(&["SWAPDB", "0"]),
        err("ERR wrong number of arguments for 'swapdb' command")
    );
}

#[test]
fn object_encoding_of_strings_follows_redis() {
    let mut t = TestEngine::new();
    let cases: &[(&str, &str)] = &[
        ("12345", "int"),
        ("-9223372036854775808", "int"),
        ("9223372036854775808", "embstr"),
        ("0", "int"),
        ("007", "embstr"),
        ("+1", "embstr"),
        ("1.5", "embstr"),
        ("", "embstr"),
        (&"x".repeat(44), "embstr"),
        (&"x".repeat(45), "raw"),
        (&"1".repeat(21), "embstr"),
    ];
    for (value, enc) in cases {
        t.run(&["SET", "k", value]);
        assert_eq!(t.run(&["OBJECT", "ENCODING", "k"]), bulk(enc), "{value:?}");
    }
    assert_eq!(t.run(&["OBJECT", "encoding", "missing"]), NIL);
    t.resp3();
    assert_eq!(t.run(&["OBJECT", "ENCODING", "missing"]), "_\r\n");
}

#[test]
fn object_idletime_refcount_freq_help() {
    let mut t = TestEngine::new();
    t.run(&["SET", "k", "hello"]);
    t.run(&["SET", "n", "42"]);
    t.run(&["SET", "big", "123456"]);
    assert_eq!(t.run(&["OBJECT", "IDLETIME", "k"]), int(0));
    t.advance_ms(5_000);
    assert_eq!(
        t.run(&["OBJECT", "IDLETIME", "k"]),
        int(5),
        "OBJECT does not touch"
    );
    assert_eq!(t.run(&["TYPE", "k"]), "+string\r\n");
    assert_eq!(
        t.run(&["OBJECT", "IDLETIME", "k"]),
        int(5),
        "TYPE does not touch"
    );
    assert_eq!(t.run(&["TOUCH", "k"]), int(1));
    assert_eq!(t.run(&["OBJECT", "IDLETIME", "k"]), int(0));
    t.advance_ms(3_000);
    t.run(&["GET", "k"]);
    assert_eq!(t.run(&["OBJECT", "IDLETIME", "k"]), int(0));
    assert_eq!(t.run(&["OBJECT", "IDLETIME", "missing"]), NIL);
    assert_eq!(t.run(&["OBJECT", "REFCOUNT", "k"]), int(1));
    assert_eq!(t.run(&["OBJECT", "REFCOUNT", "n"]), int(2147483647));
    assert_eq!(t.run(&["OBJECT", "REFCOUNT", "big"]), int(1));
    assert_eq!(t.run(&["OBJECT", "REFCOUNT", "missing"]), NIL);
    assert_eq!(
        t.run(&["OBJECT", "FREQ", "k"]),
        err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.")
    );
    assert_eq!(t.run(&["OBJECT", "FREQ", "missing"]), NIL);
    let help = t.run(&["OBJECT", "HELP"]);
    assert!(help.starts_with(
        "*15\r\n+OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
    ));
    assert!(help.ends_with("+HELP\r\n+    Print this help.\r\n"));
    assert_eq!(
        t.run(&["OBJECT", "NOPE", "k"]),
        err("ERR unknown subcommand 'NOPE'. Try OBJECT HELP.")
    );
    assert_eq!(
        t.run(&["OBJECT", "ENCODING"]),
        err("ERR wrong number of arguments for 'object|encoding' command")
    );
    assert_eq!(
        t.run(&["OBJECT"]),
        err("ERR wrong number of arguments for 'object' command")
    );
}

#[test]
fn object_freq_and_idletime_follow_the_policy() {
    const NO_LFU: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
    const NO_LRU: &str = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]),
        OK
    );
    t.run(&["SET", "m", "hello"]);
    // New keys start at LFU_INIT_VAL; up to it every read counts.
    assert_eq!(t.run(&["OBJECT", "FREQ", "m"]), int(5));
    assert_eq!(t.run(&["GET", "m"]), bulk("hello"));
    assert_eq!(t.run(&["OBJECT", "FREQ", "m"]), int(6));
    // OBJECT, TTL and TYPE do not touch.
    t.run(&["TTL", "m"]);
    t.run(&["TYPE", "m"]);
    t.run(&["OBJECT", "ENCODING", "m"]);
    assert_eq!(t.run(&["OBJECT", "FREQ", "m"]), int(6));
    assert_eq!(t.run(&["OBJECT", "IDLETIME", "m"]), err(NO_LRU));
    assert_eq!(t.run(&["OBJECT", "FREQ", "missing"]), NIL);
    assert_eq!(t.run(&["OBJECT", "IDLETIME", "missing"]), NIL);
    // lfu-log-factor 0 counts every access: reads, TOUCH, and a new value
    // (which keeps the counter, as Redis's overwrite). RENAME keeps it too;
    // COPY makes a new key.
    assert_eq!(t.run(&["CONFIG", "SET", "lfu-log-factor", "0"]), OK);
    for _ in 0..3 {
        t.run(&["GET", "m"]);
    }
    assert_eq!(t.run(&["TOUCH", "m"]), int(1));
    assert_eq!(t.run(&["OBJECT", "FREQ", "m"]), int(10));
    assert_eq!(t.run(&["SET", "m", "bye"]), OK);
    assert_eq!(t.run(&["OBJECT", "FREQ", "m"]), int(11));
    assert_eq!(t.run(&["RENAME", "m", "r"]), OK);
    assert_eq!(t.run(&["OBJECT", "FREQ", "r"]), int(11));
    assert_eq!(t.run(&["COPY", "r", "c"]), int(1));
    assert_eq!(t.run(&["OBJECT", "FREQ", "c"]), int(5));
    // One point lost per lfu-decay-time minutes idle (0: never).
    t.advance_ms(3 * 60_000);
    assert_eq!(t.run(&["OBJECT", "FREQ", "r"]), int(8));
    assert_eq!(t.run(&["CONFIG", "SET", "lfu-decay-time", "2"]), OK);
    assert_eq!(t.run(&["OBJECT", "FREQ", "r"]), int(10));
    assert_eq!(t.run(&["CONFIG", "SET", "lfu-decay-time", "0"]), OK);
    assert_eq!(t.run(&["OBJECT", "FREQ", "r"]), int(11));
    // volatile-lfu is an LFU policy too; volatile-random is not.
    assert_eq!(
        t.run(&["CONFIG", "SET", "maxmemory-policy", "volatile-lfu"]),
        OK
    );
    assert_eq!(t.run(&["OBJECT", "FREQ", "r"]), int(11));
    assert_eq!(t.run(&["OBJECT", "IDLETIME", "r"]), err(NO_LRU));
    assert_eq!(
        t.run(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]),
        OK
    );
    assert_eq!(t.run(&["OBJECT", "FREQ", "r"]), err(NO_LFU));
    // The LRU clock ran all along: idle since the COPY read it.
    assert_eq!(t.run(&["OBJECT", "IDLETIME", "r"]), int(180));
    assert_eq!(t.run(&["OBJECT", "FREQ", "missing"]), NIL);
}

#[test]
fn keys_of_other_dbs_stay_apart() {
    let mut t = TestEngine::new();
    t.run(&["SET", "k", "zero"]);
    t.run(&["SELECT", "9"]);
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
    assert_eq!(t.run(&["KEYS", "*"]), "*0\r\n");
    assert_eq!(scan_all(&mut t, &[]), owned(&[]));
    assert_eq!(t.run(&["RANDOMKEY"]), NIL);
    t.run(&["SET", "k", "nine"]);
    assert_eq!(t.run(&["GET", "k"]), bulk("nine"));
    t.run(&["SELECT", "0"]);
    assert_eq!(t.run(&["GET", "k"]), bulk("zero"));
}
