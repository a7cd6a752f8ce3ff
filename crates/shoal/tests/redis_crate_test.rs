//! End to end through the `redis` client crate: starts the real binary
//! (`shoal serve --workers 2` on a free port with a private segment), runs
//! SET/GET/MGET/INCR/EXPIRE/TTL/DEL, pipelines and HELLO 3 through the crate,
//! and stops the server with SIGTERM (removing the segment) even when a check
//! fails.

use redis::{Commands, Value};

mod common;

use common::Server;

/// A connection through the crate, RESP3 when asked.
fn client(server: &Server, resp3: bool) -> redis::Connection {
    let proto = if resp3 { "?protocol=resp3" } else { "" };
    let url = format!("redis://127.0.0.1:{}/{proto}", server.port);
    redis::Client::open(url)
        .expect("client")
        .get_connection()
        .expect("connect")
}

#[test]
fn set_get_del_across_connections() {
    let server = Server::start(2);
    let mut con = client(&server, false);
    let () = con.set("greeting", "hello").unwrap();
    let v: String = con.get("greeting").unwrap();
    assert_eq!(v, "hello");
    let missing: Option<String> = con.get("nokey").unwrap();
    assert_eq!(missing, None);
    let () = con.set("bin", b"\x00\xffbin".as_slice()).unwrap();
    let v: Vec<u8> = con.get("bin").unwrap();
    assert_eq!(v, b"\x00\xffbin");

    // other connections (spread over both workers) see the writes at once
    for _ in 0..8 {
        let mut other = client(&server, false);
        let v: String = other.get("greeting").unwrap();
        assert_eq!(v, "hello");
    }

    let n: i64 = con.del(&["greeting", "bin", "nokey"]).unwrap();
    assert_eq!(n, 2);
    let mut other = client(&server, false);
    let exists: bool = other.exists("greeting").unwrap();
    assert!(!exists);
}

#[test]
fn mget() {
    let server = Server::start(2);
    let mut con = client(&server, false);
    let () = con.set("a", "1").unwrap();
    let () = con.set("c", b"\x00\xff".as_slice()).unwrap();
    let many: Vec<Option<Vec<u8>>> = con.mget(&["a", "nokey", "c"]).unwrap();
    assert_eq!(
        many,
        vec![Some(b"1".to_vec()), None, Some(b"\x00\xff".to_vec())]
    );
}

#[test]
fn incr() {
    let server = Server::start(2);
    let mut con = client(&server, false);
    let n: i64 = con.incr("counter", 1).unwrap();
    assert_eq!(n, 1);
    let n: i64 = con.incr("counter", 41).unwrap();
    assert_eq!(n, 42);
    let () = con.set("text", "abc").unwrap();
    let err = con.incr::<_, _, i64>("text", 1).unwrap_err();
    assert!(
        err.to_string()
            .contains("value is not an integer or out of range"),
        "{err}"
    );
}

#[test]
fn expire_and_ttl() {
    let server = Server::start(2);
    let mut con = client(&server, false);
    let () = con.set("k", "v").unwrap();
    let ttl: i64 = con.ttl("k").unwrap();
    assert_eq!(ttl, -1);
    let set: bool = con.expire("k", 100).unwrap();
    assert!(set);
    let ttl: i64 = con.ttl("k").unwrap();
    assert!((1..=100).contains(&ttl), "ttl {ttl}");
    let ttl: i64 = con.ttl("nokey").unwrap();
    assert_eq!(ttl, -2);
    let set: bool = con.expire("nokey", 100).unwrap();
    assert!(!set);
}

#[test]
fn pipelines() {
    let server = Server::start(2);
    let mut con = client(&server, false);
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.set(format!("k{i}"), format!("v{i}")).ignore();
    }
    for i in 0..1000 {
        pipe.get(format!("k{i}"));
    }
    let values: Vec<String> = pipe.query(&mut con).unwrap();
    let expected: Vec<String> = (0..1000).map(|i| format!("v{i}")).collect();
    assert_eq!(values, expected);

    let (a, b, c): (bool, Option<String>, i64) = redis::pipe()
        .exists("k0")
        .get("nokey")
        .del("k0")
        .query(&mut con)
        .unwrap();
    assert_eq!((a, b, c), (true, None, 1));
}

#[test]
fn hello_3_and_resp3_connections() {
    let server = Server::start(2);
    let mut con = client(&server, false);
    let hello: Value = redis::cmd("HELLO").arg(3).query(&mut con).unwrap();
    let Value::Map(fields) = hello else {
        panic!("HELLO 3 did not answer a map: {hello:?}")
    };
    let field = |name: &[u8]| {
        fields
            .iter()
            .find(|(k, _)| matches!(k, Value::BulkString(b) if b == name))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(field(b"proto"), Some(Value::Int(3)));
    assert_eq!(field(b"server"), Some(Value::BulkString(b"redis".to_vec())));

    let mut con3 = client(&server, true);
    let () = con3.set("k", "v").unwrap();
    let v: String = con3.get("k").unwrap();
    assert_eq!(v, "v");
    let nil: Value = redis::cmd("GET").arg("nokey").query(&mut con3).unwrap();
    assert_eq!(nil, Value::Nil);
}
