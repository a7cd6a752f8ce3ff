//! Pub/sub inside one engine (one worker): subscriptions, frames for local
//! clients, RESP2 subscribed mode, retained channels and key subscriptions.
//! Delivery across worker processes is tested end to end in tests/.

mod common;

use std::borrow::Cow;

use common::TestEngine;
use engine::Session;

/// Runs a command for another client of the same engine.
fn run_as(t: &mut TestEngine, s: &mut Session, words: &[&str]) -> String {
    let args: Vec<Cow<[u8]>> = words.iter().map(|w| Cow::Borrowed(w.as_bytes())).collect();
    let mut out = Vec::new();
    t.engine.begin_batch(s);
    t.engine.execute(s, &args, &mut out);
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

#[test]
fn publish_reaches_channel_and_pattern_subscribers_in_order() {
    let mut t = TestEngine::new();
    let mut sub = Session::new(7, common::T0);
    assert_eq!(
        run_as(&mut t, &mut sub, &["SUBSCRIBE", "news", "news"]),
        "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"
    );
    assert_eq!(
        run_as(&mut t, &mut sub, &["PSUBSCRIBE", "n*"]),
        "*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:2\r\n"
    );
    assert_eq!(t.run(&["PUBLISH", "news", "one"]), ":2\r\n");
    assert_eq!(t.run(&["PUBLISH", "other", "x"]), ":0\r\n");
    assert_eq!(
        frames_for(&mut t, 7),
        "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$3\r\none\r\n*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$3\r\none\r\n"
    );
    assert_eq!(
        t.run(&["PUBSUB", "NUMSUB", "news", "none"]),
        "*4\r\n$4\r\nnews\r\n:1\r\n$4\r\nnone\r\n:0\r\n"
    );
    assert_eq!(t.run(&["PUBSUB", "NUMPAT"]), ":1\r\n");
    // Closing the client removes it everywhere.
    t.engine.client_closed(&mut sub);
    assert_eq!(t.run(&["PUBLISH", "news", "two"]), ":0\r\n");
    assert_eq!(t.run(&["PUBSUB", "NUMPAT"]), ":0\r\n");
}

#[test]
fn resp2_subscribed_mode_allows_only_subscription_commands() {
    let mut t = TestEngine::new();
    t.run(&["SUBSCRIBE", "a"]);
    assert_eq!(
        t.run(&["GET", "k"]),
        "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
    );
    assert_eq!(t.run(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    assert_eq!(
        t.run(&["UNSUBSCRIBE"]),
        "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n"
    );
    assert_eq!(
        t.run(&["UNSUBSCRIBE"]),
        "*3\r\n$11\r\nunsubscribe\r\n*-1\r\n:0\r\n".replace("*-1", "$-1")
    );
    assert_eq!(t.run(&["GET", "k"]), "$-1\r\n");
    t.run(&["SUBSCRIBE", "a"]);
    assert_eq!(t.run(&["RESET"]), "+RESET\r\n");
    assert_eq!(t.run(&["PUBLISH", "a", "m"]), ":0\r\n");
}

#[test]
fn resp3_pushes_and_self_messages_come_before_the_reply() {
    let mut t = TestEngine::new();
    t.resp3();
    assert_eq!(
        t.run(&["SUBSCRIBE", "a"]),
        ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n"
    );
    assert_eq!(t.run(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(
        t.run(&["PUBLISH", "a", "hi"]),
        ">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$2\r\nhi\r\n:1\r\n"
    );
}

#[test]
fn shard_channels_are_their_own_namespace() {
    let mut t = TestEngine::new();
    let mut sub = Session::new(9, common::T0);
    assert_eq!(
        run_as(&mut t, &mut sub, &["SSUBSCRIBE", "s"]),
        "*3\r\n$10\r\nssubscribe\r\n$1\r\ns\r\n:1\r\n"
    );
    assert_eq!(t.run(&["PUBLISH", "s", "x"]), ":0\r\n");
    assert_eq!(t.run(&["SPUBLISH", "s", "y"]), ":1\r\n");
    assert_eq!(
        frames_for(&mut t, 9),
        "*3\r\n$8\r\nsmessage\r\n$1\r\ns\r\n$1\r\ny\r\n"
    );
    assert_eq!(
        t.run(&["PUBSUB", "SHARDNUMSUB", "s"]),
        "*2\r\n$1\r\ns\r\n:1\r\n"
    );
}

#[test]
fn retained_channels_give_the_last_value_then_numbered_messages() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["CONFIG", "SET", "lvc-channels", "md.*"]), "+OK\r\n");
    assert_eq!(t.run(&["PUBLISH", "md.x", "p1"]), ":0\r\n");
    assert_eq!(t.run(&["PUBLISH", "md.x", "p2"]), ":0\r\n");
    let mut sub = Session::new(5, common::T0);
    assert_eq!(
        run_as(&mut t, &mut sub, &["LSUBSCRIBE", "md.x"]),
        "*3\r\n$10\r\nlsubscribe\r\n$4\r\nmd.x\r\n:1\r\n*4\r\n$8\r\nlmessage\r\n$4\r\nmd.x\r\n:2\r\n$2\r\np2\r\n"
    );
    assert_eq!(t.run(&["PUBLISH", "md.x", "p3"]), ":1\r\n");
    assert_eq!(
        frames_for(&mut t, 5),
        "*4\r\n$8\r\nlmessage\r\n$4\r\nmd.x\r\n:3\r\n$2\r\np3\r\n"
    );
    // The retained value is a key: 8 bytes of epoch, 8 of sequence, then
    // the message.
    let value = t.run(&["GET", "__lvc__:md.x"]).into_bytes();
    assert!(value.starts_with(b"$18\r\n"), "{value:?}");
    assert_eq!(&value[5 + 8..5 + 16], &3u64.to_be_bytes());
    assert_eq!(&value[5 + 16..], b"p3\r\n");
    // Removing it restarts the numbering, and the subscriber gets the
    // restarted messages.
    t.run(&["DEL", "__lvc__:md.x"]);
    assert_eq!(t.run(&["PUBLISH", "md.x", "q1"]), ":1\r\n");
    assert_eq!(
        frames_for(&mut t, 5),
        "*4\r\n$8\r\nlmessage\r\n$4\r\nmd.x\r\n:1\r\n$2\r\nq1\r\n"
    );
}
