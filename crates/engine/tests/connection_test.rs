//! Connection commands through the dispatcher.

mod common;

use common::*;
use engine::{Flow, ServerRequest};
use std::borrow::Cow;

#[test]
fn ping_echo_select() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["PING"]), "+PONG\r\n");
    assert_eq!(t.run(&["ping", "hi"]), bulk("hi"));
    assert_eq!(
        t.run(&["PING", "a", "b"]),
        err("ERR wrong number of arguments for 'ping' command")
    );
    assert_eq!(t.run(&["ECHO", "x y"]), bulk("x y"));
    assert_eq!(t.run(&["SELECT", "15"]), OK);
    assert_eq!(
        t.run(&["SELECT", "16"]),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        t.run(&["SELECT", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(t.session.db, 15);
}

#[test]
fn unknown_commands_and_arity() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["FOO", "a", "b"]),
        err("ERR unknown command 'FOO', with args beginning with: 'a' 'b' ")
    );
    assert_eq!(
        t.run(&["GET"]),
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        t.run(&["CLIENT", "NOPE"]),
        err("ERR unknown subcommand 'NOPE'. Try CLIENT HELP.")
    );
    assert_eq!(
        t.run(&["CLIENT", "SETNAME"]),
        err("ERR wrong number of arguments for 'client|setname' command")
    );
}

#[test]
fn hello_switches_protocol_and_validates() {
    let mut t = TestEngine::new();
    let r = t.run(&["HELLO", "3"]);
    assert!(
        r.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
        "{r}"
    );
    assert!(r.contains("$5\r\nproto\r\n:3\r\n"), "{r}");
    assert_eq!(t.run(&["GET", "missing"]), "_\r\n");
    assert_eq!(
        t.run(&["HELLO", "4"]),
        err("NOPROTO unsupported protocol version")
    );
    assert_eq!(
        t.run(&["HELLO", "x"]),
        err("ERR Protocol version is not an integer or out of range")
    );
    assert_eq!(
        t.run(&["HELLO", "2", "SETNAME", "bad name"]),
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    let r = t.run(&["HELLO", "2", "AUTH", "default", "pw", "SETNAME", "me"]);
    assert!(r.starts_with("*14\r\n"), "{r}");
    assert_eq!(t.run(&["CLIENT", "GETNAME"]), bulk("me"));
    assert_eq!(t.run(&["RESET"]), "+RESET\r\n");
    assert_eq!(t.run(&["CLIENT", "GETNAME"]), NIL);
}

#[test]
fn client_reply_off_and_skip() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["CLIENT", "REPLY", "SKIP"]), "");
    assert_eq!(t.run(&["PING"]), "");
    assert_eq!(t.run(&["PING"]), "+PONG\r\n");
    assert_eq!(t.run(&["CLIENT", "REPLY", "OFF"]), "");
    assert_eq!(t.run(&["SET", "k", "v"]), "");
    assert_eq!(t.run(&["CLIENT", "REPLY", "ON"]), OK);
    assert_eq!(t.run(&["GET", "k"]), bulk("v"));
}

#[test]
fn client_list_and_kill_go_to_the_server() {
    let mut t = TestEngine::new();
    let args: Vec<Cow<[u8]>> = ["CLIENT", "LIST", "ID", "3", "4"]
        .iter()
        .map(|w| Cow::Borrowed(w.as_bytes()))
        .collect();
    let (out, flow) = t.run_bytes(&args);
    assert_eq!(out, "");
    assert_eq!(
        flow,
        Flow::Server(ServerRequest::ClientList {
            ids: vec![3, 4],
            client_type: None
        })
    );
    assert_eq!(
        t.run(&["CLIENT", "LIST", "ID", "x"]),
        err("ERR Invalid client ID")
    );
    assert_eq!(
        t.run(&["CLIENT", "KILL", "ID", "0"]),
        err("ERR client-id should be greater than 0")
    );
    assert_eq!(
        t.run(&["CLIENT", "KILL", "ID", "5", "SKIPME"]),
        err("ERR syntax error")
    );
    assert_eq!(t.run(&["CLIENT", "ID"]), int(1));
    assert!(t.run(&["CLIENT", "INFO"]).contains("id=1 addr="));
}

#[test]
fn quit_closes_after_ok() {
    let mut t = TestEngine::new();
    let args = vec![Cow::Borrowed(&b"QUIT"[..])];
    assert_eq!(t.run_bytes(&args), (OK.to_string(), Flow::Close));
}
