//! Keyspace notifications inside one engine, on a manual clock: the order
//! of the events the store reports on its own ("expired", "evicted",
//! "new") against the command's, which across worker processes only the
//! end-to-end test (tests/test_keyspace_events.py) can check loosely.

mod common;

use common::{TestEngine, OK, T0};
use engine::memcache::{McArith, McStore, McStored};
use engine::Session;

/// The subscriber's client id.
const WATCHER: u64 = 7;

/// An engine with a client subscribed to every keyspace and keyevent
/// channel, and `notify-keyspace-events` set to `flags`.
fn watched(flags: &str) -> (TestEngine, Session) {
    watched_in(TestEngine::new(), flags)
}

fn watched_in(mut t: TestEngine, flags: &str) -> (TestEngine, Session) {
    assert_eq!(
        t.run(&["CONFIG", "SET", "notify-keyspace-events", flags]),
        OK
    );
    let mut watcher = Session::new(WATCHER, T0);
    let args = [b"PSUBSCRIBE".as_slice(), b"__key*__:*"].map(std::borrow::Cow::Borrowed);
    let mut out = Vec::new();
    t.engine.begin_batch(&mut watcher);
    t.engine.execute(&mut watcher, &args, &mut out);
    t.engine.end_batch();
    assert!(String::from_utf8_lossy(&out).contains("psubscribe"));
    (t, watcher)
}

/// The (channel, message) pairs delivered to the watcher since the last
/// call, parsed from its pmessage frames.
fn events(t: &mut TestEngine) -> Vec<(String, String)> {
    let mut bytes = Vec::new();
    for (client, frame) in t.engine.pubsub().take_outbox() {
        if client == WATCHER {
            bytes.extend_from_slice(&frame);
        }
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    // *4 $8 pmessage $n pattern $n channel $n message: the bulk bodies are
    // every second line after each array header.
    let lines: Vec<&str> = text.split("\r\n").collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 8 < lines.len() {
        assert_eq!(lines[i], "*4", "{text}");
        assert_eq!(lines[i + 2], "pmessage", "{text}");
        out.push((lines[i + 6].to_string(), lines[i + 8].to_string()));
        i += 9;
    }
    out
}

/// The keyspace form of each event: (key, event) from `__keyspace@0__:key`.
fn keyspace(events: &[(String, String)]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|(c, m)| {
            c.strip_prefix("__keyspace@0__:")
                .map(|k| (k.to_string(), m.clone()))
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn a_read_of_an_expired_key_expires_it_then_misses() {
    let (mut t, _w) = watched("KEAm");
    assert_eq!(t.run(&["SET", "k", "v", "PX", "100"]), OK);
    events(&mut t);
    t.advance_ms(200);
    assert_eq!(t.run(&["GET", "k"]), common::NIL);
    assert_eq!(
        events(&mut t),
        pairs(&[
            ("__keyspace@0__:k", "expired"),
            ("__keyevent@0__:expired", "k"),
            ("__keyspace@0__:k", "keymiss"),
            ("__keyevent@0__:keymiss", "k"),
        ])
    );
}

#[test]
fn a_write_to_an_expired_key_expires_misses_creates_then_writes() {
    let (mut t, _w) = watched("KAnm");
    t.run(&["SET", "k", "v", "PX", "100"]);
    t.run(&["RPUSH", "l", "a"]);
    t.run(&["PEXPIRE", "l", "100"]);
    events(&mut t);
    t.advance_ms(200);
    t.run(&["GETSET", "k", "w"]);
    t.run(&["LPUSHX", "l", "b"]);
    assert_eq!(
        keyspace(&events(&mut t)),
        pairs(&[
            ("k", "expired"),
            ("k", "keymiss"),
            ("k", "new"),
            ("k", "set"),
            ("l", "expired"),
        ])
    );
}

#[test]
fn the_sweeper_announces_what_it_removes() {
    let (mut t, _w) = watched("Ex");
    t.run(&["SET", "a", "v", "PX", "100"]);
    t.run(&["SET", "b", "v", "PX", "100"]);
    t.run(&["SET", "c", "v"]);
    assert!(events(&mut t).is_empty(), "only expiry is selected");
    t.advance_ms(200);
    let mut got = Vec::new();
    for _ in 0..10_000 {
        if got.len() == 2 {
            break;
        }
        t.engine.tick();
        got.extend(events(&mut t));
    }
    got.sort();
    assert_eq!(
        got,
        pairs(&[
            ("__keyevent@0__:expired", "a"),
            ("__keyevent@0__:expired", "b")
        ])
    );
}

#[test]
fn expiry_is_silent_when_not_selected() {
    let (mut t, _w) = watched("KE$");
    t.run(&["SET", "k", "v", "PX", "100"]);
    assert_eq!(events(&mut t).len(), 2);
    t.advance_ms(200);
    assert_eq!(t.run(&["GET", "k"]), common::NIL);
    for _ in 0..100 {
        t.engine.tick();
    }
    assert!(events(&mut t).is_empty());
}

#[test]
fn evictions_are_announced_before_the_write_that_caused_them() {
    let (mut t, _w) = watched_in(TestEngine::with_size(8 << 20), "Kxe$");
    t.run(&["CONFIG", "SET", "maxmemory", "1mb"]);
    t.run(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let value = "x".repeat(1000);
    let mut evicted = Vec::new();
    for i in 0..3000 {
        let key = format!("k{i}");
        assert_eq!(t.run(&["SET", &key, &value]), OK);
        let got = keyspace(&events(&mut t));
        let (set, before) = got.split_last().expect("the SET's own event");
        assert_eq!(set, &(key.clone(), "set".to_string()));
        for (k, e) in before {
            assert_eq!(e, "evicted");
            evicted.push(k.clone());
        }
    }
    assert!(!evicted.is_empty(), "1 MB cannot hold 3 MB");
    let info = t.run(&["INFO", "stats"]);
    assert!(
        info.contains(&format!("evicted_keys:{}\r\n", evicted.len())),
        "{info}"
    );
    for k in &evicted {
        assert_eq!(t.run(&["EXISTS", k]), common::int(0));
    }
}

#[test]
fn rename_move_and_copy_create_their_destination() {
    let (mut t, _w) = watched("Kgn");
    t.run(&["SET", "a", "1"]);
    t.run(&["SET", "b", "2"]);
    t.run(&["RENAME", "a", "b"]);
    t.run(&["COPY", "b", "c"]);
    t.run(&["MOVE", "c", "3"]);
    let got = events(&mut t);
    assert_eq!(
        got,
        pairs(&[
            ("__keyspace@0__:a", "new"),
            ("__keyspace@0__:b", "new"),
            ("__keyspace@0__:b", "new"),
            ("__keyspace@0__:a", "rename_from"),
            ("__keyspace@0__:b", "rename_to"),
            ("__keyspace@0__:c", "new"),
            ("__keyspace@0__:c", "copy_to"),
            ("__keyspace@3__:c", "new"),
            ("__keyspace@0__:c", "move_from"),
            ("__keyspace@3__:c", "move_to"),
        ])
    );
}

#[test]
fn memcached_writes_send_their_redis_kins_events() {
    let (mut t, _w) = watched("KAnm");
    let e = &mut t.engine;
    assert!(matches!(
        e.mc_store(McStore::Set, b"k", b"1", 0, 0, None),
        Ok(McStored::Stored { .. })
    ));
    assert!(matches!(
        e.mc_store(McStore::Prepend, b"k", b"2", 0, 0, None),
        Ok(McStored::Stored { .. })
    ));
    assert!(matches!(
        e.mc_arith(b"k", false, 1, None, None, None),
        Ok(McArith::Value { value: 20, .. })
    ));
    assert!(e.mc_touch(b"k", 100).unwrap().is_some());
    assert!(e.mc_get(b"nope", None, &mut Vec::new()).unwrap().is_none());
    e.mc_delete(b"k", None).unwrap();
    e.mc_flush_all(0).unwrap();
    assert_eq!(
        keyspace(&events(&mut t)),
        pairs(&[
            ("k", "new"),
            ("k", "set"),
            ("k", "append"),
            ("k", "incrby"),
            ("k", "expire"),
            ("nope", "keymiss"),
            ("k", "del"),
        ])
    );
}
