//! CLIENT PAUSE and UNPAUSE in the engine: which commands a pause holds
//! (the engine answers `Flow::Hold` and runs nothing), the errors, how a
//! later pause combines with one in force, and that a pause keeps expired
//! keys in place.

mod common;

use common::*;
use engine::Flow;
use std::borrow::Cow;

fn holdable() -> TestEngine {
    let mut t = TestEngine::new();
    t.session.holdable = true;
    t
}

fn held(t: &mut TestEngine, words: &[&str]) -> bool {
    let args: Vec<Cow<[u8]>> = words.iter().map(|w| Cow::Borrowed(w.as_bytes())).collect();
    let (out, flow) = t.run_bytes(&args);
    if flow == Flow::Hold {
        assert_eq!(out, "", "a held command writes nothing");
        true
    } else {
        false
    }
}

#[test]
fn errors_are_redis_s() {
    let mut t = holdable();
    assert_eq!(
        t.run(&["CLIENT", "PAUSE", "abc"]),
        err("ERR timeout is not an integer or out of range")
    );
    assert_eq!(
        t.run(&["CLIENT", "PAUSE", "-1"]),
        err("ERR timeout is negative")
    );
    assert_eq!(
        t.run(&["CLIENT", "PAUSE", "abc", "SOME"]),
        err("ERR CLIENT PAUSE mode must be WRITE or ALL")
    );
    assert_eq!(
        t.run(&["CLIENT", "PAUSE", "1", "WRITE", "x"]),
        err("ERR unknown subcommand or wrong number of arguments for 'pause'. Try CLIENT HELP.")
    );
    assert_eq!(
        t.run(&["CLIENT", "PAUSE"]),
        err("ERR wrong number of arguments for 'client|pause' command")
    );
    assert_eq!(
        t.run(&["CLIENT", "UNPAUSE", "x"]),
        err("ERR wrong number of arguments for 'client|unpause' command")
    );
    assert!(t.engine.pause().is_none());
}

#[test]
fn a_write_pause_holds_writes_and_may_replicate_commands_only() {
    let mut t = holdable();
    t.run(&["SET", "k", "v"]);
    assert_eq!(t.run(&["CLIENT", "PAUSE", "1000", "WRITE"]), OK);
    assert!(held(&mut t, &["SET", "k", "w"]));
    assert!(held(&mut t, &["PUBLISH", "ch", "m"]));
    assert!(held(&mut t, &["DEL", "k"]));
    assert!(!held(&mut t, &["GET", "k"]));
    assert_eq!(t.run(&["GET", "k"]), bulk("v"));
    assert_eq!(t.run(&["PING"]), "+PONG\r\n");
    // Refused commands are answered at once.
    assert_eq!(
        t.run(&["SET", "k"]),
        err("ERR wrong number of arguments for 'set' command")
    );
    // Past the deadline the pause is over.
    t.advance_ms(1001);
    assert!(t.engine.pause().is_none());
    assert_eq!(t.run(&["SET", "k", "w"]), OK);
}

#[test]
fn an_all_pause_holds_everything_and_unpause_ends_it() {
    let mut t = holdable();
    assert_eq!(t.run(&["CLIENT", "PAUSE", "1000"]), OK);
    assert!(held(&mut t, &["GET", "k"]));
    assert!(held(&mut t, &["PING"]));
    // A client that cannot wait is refused instead.
    t.session.holdable = false;
    assert!(t.run(&["GET", "k"]).starts_with("-ERR clients are paused"));
    // UNPAUSE itself is held under ALL, as in Redis: another engine (here,
    // the same one with the pause ended through the word) lifts it.
    t.session.holdable = true;
    assert!(held(&mut t, &["CLIENT", "UNPAUSE"]));
    t.advance_ms(1001);
    assert_eq!(t.run(&["CLIENT", "UNPAUSE"]), OK);
    assert!(t.engine.take_pause_changed());
}

#[test]
fn a_later_pause_keeps_the_later_deadline_and_the_stronger_mode() {
    let mut t = holdable();
    assert_eq!(t.run(&["CLIENT", "PAUSE", "1000", "WRITE"]), OK);
    let (_, first) = t.engine.pause().unwrap();
    assert_eq!(t.run(&["CLIENT", "PAUSE", "10", "WRITE"]), OK);
    assert_eq!(t.engine.pause().unwrap().1, first);
    assert_eq!(t.run(&["CLIENT", "PAUSE", "5000", "WRITE"]), OK);
    assert_eq!(
        t.engine.pause().unwrap(),
        (engine::PauseMode::Write, T0 + 5000)
    );
    // ALL replaces WRITE; the shorter timeout leaves the deadline alone.
    assert_eq!(t.run(&["CLIENT", "PAUSE", "10", "ALL"]), OK);
    let (mode, deadline) = t.engine.pause().unwrap();
    assert_eq!((mode, deadline), (engine::PauseMode::All, T0 + 5000));
    // Timeout 0 alone pauses nothing.
    t.advance_ms(5001);
    assert_eq!(t.run(&["CLIENT", "PAUSE", "0", "ALL"]), OK);
    assert!(t.engine.pause().is_none());
}

#[test]
fn exec_is_held_when_its_queue_writes_and_a_pause_inside_exec_starts_after_it() {
    let mut t = holdable();
    t.run(&["MULTI"]);
    t.run(&["GET", "k"]);
    assert_eq!(t.run(&["CLIENT", "PAUSE", "1000", "WRITE"]), "+QUEUED\r\n");
    t.run(&["SET", "k", "v"]);
    // The pause inside the transaction does not stop the SET after it.
    assert_eq!(t.run(&["EXEC"]), "*3\r\n$-1\r\n+OK\r\n+OK\r\n");
    assert!(t.engine.pause().is_some());
    // A read-only transaction runs; one that writes waits at EXEC.
    t.run(&["MULTI"]);
    t.run(&["GET", "k"]);
    assert!(!held(&mut t, &["EXEC"]));
    t.run(&["MULTI"]);
    t.run(&["GET", "k"]);
    // Queuing a write waits too, as in Redis.
    assert!(held(&mut t, &["INCR", "n"]));
    t.advance_ms(1001);
    assert_eq!(t.run(&["INCR", "n"]), "+QUEUED\r\n");
    assert_eq!(t.run(&["CLIENT", "PAUSE", "1000", "WRITE"]), "+QUEUED\r\n");
    assert_eq!(t.run(&["EXEC"]), "*3\r\n$1\r\nv\r\n:1\r\n+OK\r\n");
    // The pause EXEC started is in force now.
    assert!(held(&mut t, &["SET", "k", "w"]));
    assert_eq!(t.run(&["GET", "n"]), bulk("1"));
}

#[test]
fn a_pause_keeps_expired_keys_until_it_ends() {
    let mut t = holdable();
    t.run(&["SET", "k", "v", "PX", "10"]);
    assert_eq!(t.run(&["CLIENT", "PAUSE", "1000", "WRITE"]), OK);
    t.advance_ms(20);
    let expired = |t: &mut TestEngine| {
        let info = t.run(&["INFO", "stats"]);
        info.lines()
            .find_map(|l| l.strip_prefix("expired_keys:"))
            .unwrap()
            .trim()
            .to_string()
    };
    let before = expired(&mut t);
    assert_eq!(t.run(&["GET", "k"]), NIL);
    assert_eq!(t.engine.tick(), 0);
    assert_eq!(expired(&mut t), before);
    assert_eq!(t.run(&["CLIENT", "UNPAUSE"]), OK);
    assert_eq!(t.run(&["GET", "k"]), NIL);
    assert_eq!(
        expired(&mut t).parse::<u64>().unwrap(),
        before.parse::<u64>().unwrap() + 1
    );
}
