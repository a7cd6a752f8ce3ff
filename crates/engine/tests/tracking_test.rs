//! Client-side caching (CLIENT TRACKING) inside one engine: what is
//! remembered, what is invalidated and how it is written. Invalidations
//! across worker processes are tested end to end in tests/test_tracking.py.

mod common;

use std::borrow::Cow;

use common::{err, int, TestEngine, OK};
use engine::Session;

/// Runs a command for another client of the same engine.
fn run_as(t: &mut TestEngine, s: &mut Session, words: &[&str]) -> String {
    let args: Vec<Cow<[u8]>> = words.iter().map(|w| Cow::Borrowed(w.as_bytes())).collect();
    let mut out = Vec::new();
    t.engine.begin_batch(s);
    let flow = t.engine.execute(s, &args, &mut out);
    if let engine::Flow::Server(engine::ServerRequest::Gather(q)) = &flow {
        let answer = t.engine.answer_gather(q);
        t.engine.finish_gather(q, &[answer], s.protocol, &mut out);
    }
    t.engine.end_batch();
    String::from_utf8_lossy(&out).into_owned()
}

/// The frames waiting for client `id`, concatenated.
fn frames_for(t: &mut TestEngine, id: u64) -> String {
    let outbox = t.engine.pubsub().take_outbox();
    outbox
        .iter()
        .filter(|(c, _)| *c == id)
        .map(|(_, f)| String::from_utf8_lossy(f).into_owned())
        .collect()
}

/// A RESP3 client of the engine with id `id`.
fn resp3_client(t: &mut TestEngine, id: u64) -> Session {
    let mut s = Session::new(id, common::T0);
    assert!(run_as(t, &mut s, &["HELLO", "3"]).starts_with('%'));
    s
}

const INVALIDATE_K: &str = ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n";

#[test]
fn default_mode_invalidates_a_read_key_once_until_read_again() {
    let mut t = TestEngine::new();
    let mut c = resp3_client(&mut t, 10);
    let mut w = Session::new(11, common::T0);
    assert_eq!(run_as(&mut t, &mut c, &["CLIENT", "TRACKING", "on"]), OK);
    run_as(&mut t, &mut w, &["SET", "k", "1"]);
    run_as(&mut t, &mut w, &["SET", "other", "1"]);
    assert_eq!(run_as(&mut t, &mut c, &["GET", "k"]), "$1\r\n1\r\n");
    // A key never read is not reported.
    run_as(&mut t, &mut w, &["SET", "other", "2"]);
    assert_eq!(frames_for(&mut t, 10), "");
    run_as(&mut t, &mut w, &["SET", "k", "2"]);
    assert_eq!(frames_for(&mut t, 10), INVALIDATE_K);
    // Once: the key is forgotten until read again.
    run_as(&mut t, &mut w, &["SET", "k", "3"]);
    assert_eq!(frames_for(&mut t, 10), "");
    run_as(&mut t, &mut c, &["GET", "k"]);
    // The client's own write: the push follows its reply.
    assert_eq!(
        run_as(&mut t, &mut c, &["DEL", "k"]),
        format!(":1\r\n{INVALIDATE_K}")
    );
}

#[test]
fn noloop_spares_the_writer_and_optin_needs_caching_yes() {
    let mut t = TestEngine::new();
    let mut c = resp3_client(&mut t, 10);
    let mut w = Session::new(11, common::T0);
    run_as(&mut t, &mut c, &["CLIENT", "TRACKING", "on", "NOLOOP"]);
    run_as(&mut t, &mut c, &["GET", "k"]);
    assert_eq!(run_as(&mut t, &mut c, &["SET", "k", "1"]), OK);
    assert_eq!(frames_for(&mut t, 10), "");
    run_as(&mut t, &mut c, &["CLIENT", "TRACKING", "off"]);

    run_as(&mut t, &mut c, &["CLIENT", "TRACKING", "on", "OPTIN"]);
    run_as(&mut t, &mut c, &["GET", "k"]);
    run_as(&mut t, &mut w, &["SET", "k", "2"]);
    assert_eq!(frames_for(&mut t, 10), "");
    assert_eq!(run_as(&mut t, &mut c, &["CLIENT", "CACHING", "yes"]), OK);
    run_as(&mut t, &mut c, &["GET", "k"]);
    run_as(&mut t, &mut w, &["SET", "k", "3"]);
    assert_eq!(frames_for(&mut t, 10), INVALIDATE_K);
    assert_eq!(
        run_as(&mut t, &mut c, &["CLIENT", "CACHING", "no"]),
        err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
    );
}

#[test]
fn bcast_sends_one_message_per_prefix_per_command() {
    let mut t = TestEngine::new();
    let mut c = resp3_client(&mut t, 10);
    assert_eq!(
        run_as(
            &mut t,
            &mut c,
            &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "PREFIX", "b:"]
        ),
        OK
    );
    t.run(&["MSET", "a:1", "x", "b:1", "y", "c:1", "z", "a:2", "w"]);
    assert_eq!(
        frames_for(&mut t, 10),
        ">2\r\n$10\r\ninvalidate\r\n*2\r\n$3\r\na:1\r\n$3\r\na:2\r\n\
         >2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nb:1\r\n"
    );
    assert_eq!(
        run_as(&mut t, &mut c, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"]),
        err("ERR Prefix 'a' overlaps with an existing prefix 'a:'. Prefixes for a single client must not overlap.")
    );
    assert_eq!(
        run_as(&mut t, &mut c, &["CLIENT", "TRACKING", "on"]),
        err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.")
    );
}

#[test]
fn resp2_redirect_goes_to_the_invalidate_channel() {
    let mut t = TestEngine::new();
    let mut target = Session::new(20, common::T0);
    run_as(&mut t, &mut target, &["SUBSCRIBE", "__redis__:invalidate"]);
    frames_for(&mut t, 20);
    assert_eq!(t.run(&["CLIENT", "TRACKING", "on", "REDIRECT", "20"]), OK);
    assert_eq!(t.run(&["CLIENT", "GETREDIR"]), int(20));
    t.run(&["GET", "k"]);
    t.run(&["SET", "k", "1"]);
    assert_eq!(
        frames_for(&mut t, 20),
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n"
    );
    t.run(&["GET", "k"]);
    t.run(&["FLUSHALL"]);
    assert_eq!(
        frames_for(&mut t, 20),
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
    );
}

#[test]
fn a_gone_redirect_target_is_reported_to_a_resp3_client() {
    let mut t = TestEngine::new();
    let mut target = Session::new(20, common::T0);
    run_as(&mut t, &mut target, &["CLIENT", "ID"]);
    let mut c = resp3_client(&mut t, 10);
    run_as(
        &mut t,
        &mut c,
        &["CLIENT", "TRACKING", "on", "REDIRECT", "20"],
    );
    run_as(&mut t, &mut c, &["GET", "k"]);
    t.engine.client_closed(&mut target);
    t.run(&["SET", "k", "1"]);
    assert_eq!(
        frames_for(&mut t, 10),
        ">2\r\n$21\r\ntracking-redir-broken\r\n:20\r\n"
    );
    let info = run_as(&mut t, &mut c, &["CLIENT", "TRACKINGINFO"]);
    assert!(info.contains("broken_redirect"), "{info}");
}

#[test]
fn errors_are_redis_errors() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["CLIENT", "TRACKING", "on", "REDIRECT", "999"]),
        err("ERR The client ID you want redirect to does not exist")
    );
    assert_eq!(
        t.run(&["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"]),
        err("ERR You can't use both OPTIN and OPTOUT")
    );
    assert_eq!(
        t.run(&["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"]),
        err("ERR OPTIN and OPTOUT are not compatible with BCAST")
    );
    assert_eq!(
        t.run(&["CLIENT", "TRACKING", "on", "PREFIX", "a"]),
        err("ERR PREFIX option requires BCAST mode to be enabled")
    );
    assert_eq!(
        t.run(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab", "PREFIX", "a"]),
        err("ERR Prefix 'ab' overlaps with another provided prefix 'a'. Prefixes for a single client must not overlap.")
    );
    assert_eq!(
        t.run(&["CLIENT", "TRACKING", "maybe"]),
        err("ERR syntax error")
    );
    assert_eq!(
        t.run(&["CLIENT", "CACHING", "yes"]),
        err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
    );
    assert_eq!(t.run(&["CLIENT", "GETREDIR"]), int(-1));
    assert_eq!(
        t.run(&["CLIENT", "TRACKINGINFO"]),
        "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"
    );
}

#[test]
fn the_table_keeps_at_most_tracking_table_max_keys() {
    let mut t = TestEngine::new();
    let mut c = resp3_client(&mut t, 10);
    run_as(&mut t, &mut c, &["CLIENT", "TRACKING", "on"]);
    run_as(&mut t, &mut c, &["MGET", "a", "b", "c"]);
    let info = t.run(&["INFO", "stats"]);
    assert!(info.contains("tracking_total_keys:3\r\n"), "{info}");
    assert!(info.contains("tracking_total_items:3\r\n"), "{info}");
    assert!(t
        .run(&["INFO", "clients"])
        .contains("tracking_clients:1\r\n"));
    assert_eq!(
        t.run(&["CONFIG", "SET", "tracking-table-max-keys", "1"]),
        OK
    );
    t.engine.tick();
    let frames = frames_for(&mut t, 10);
    assert_eq!(frames.matches("invalidate").count(), 2, "{frames}");
    assert!(t
        .run(&["INFO", "stats"])
        .contains("tracking_total_keys:1\r\n"));
}

#[test]
fn a_read_after_a_write_in_one_command_stays_tracked() {
    let mut t = TestEngine::new();
    let mut c = resp3_client(&mut t, 10);
    let mut w = Session::new(11, common::T0);
    run_as(&mut t, &mut c, &["CLIENT", "TRACKING", "on"]);
    // A read that finds its key expired: the push follows the reply and
    // the key stays tracked (Redis invalidates on the expiry, then the read
    // remembers the key again).
    run_as(&mut t, &mut w, &["SET", "k", "1", "PX", "10"]);
    run_as(&mut t, &mut c, &["GET", "k"]);
    t.advance_ms(20);
    assert_eq!(
        run_as(&mut t, &mut c, &["GET", "k"]),
        format!("_\r\n{INVALIDATE_K}")
    );
    run_as(&mut t, &mut w, &["SET", "k", "2"]);
    assert_eq!(frames_for(&mut t, 10), INVALIDATE_K);
    // GET then SET in one EXEC: invalidated after EXEC's reply, not
    // tracked after.
    run_as(&mut t, &mut c, &["MULTI"]);
    run_as(&mut t, &mut c, &["GET", "k"]);
    run_as(&mut t, &mut c, &["SET", "k", "3"]);
    let exec = run_as(&mut t, &mut c, &["EXEC"]);
    assert!(exec.ends_with(INVALIDATE_K), "{exec}");
    run_as(&mut t, &mut w, &["SET", "k", "4"]);
    assert_eq!(frames_for(&mut t, 10), "");
    // SET then GET in one EXEC: the key read last stays tracked.
    run_as(&mut t, &mut c, &["MULTI"]);
    run_as(&mut t, &mut c, &["SET", "k", "5"]);
    run_as(&mut t, &mut c, &["GET", "k"]);
    let exec = run_as(&mut t, &mut c, &["EXEC"]);
    assert!(!exec.contains("invalidate"), "{exec}");
    run_as(&mut t, &mut w, &["SET", "k", "6"]);
    assert_eq!(frames_for(&mut t, 10), INVALIDATE_K);
}
