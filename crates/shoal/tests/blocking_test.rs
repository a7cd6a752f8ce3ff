//! Blocking commands end to end: a real `shoal serve --workers 2`, driven
//! over raw RESP so that a test controls exactly when a request is sent and
//! when its reply is read. A client blocked on one worker is woken by a
//! write on the other; waiters are served in the order they blocked;
//! timeouts, CLIENT KILL and CLIENT UNBLOCK end a wait; requests pipelined
//! after a blocking command wait for it. Nothing here measures time: a test
//! waits for a state (INFO's `blocked_clients`) by polling it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

mod common;

use common::Server;

/// Raw connections to the server under test, and its blocked clients.
trait Blocking {
    fn connect(&self) -> Conn;
    fn connect_to(&self, worker: u32) -> Conn;
    fn wait_blocked(&self, n: u64);
}

impl Blocking for Server {
    fn connect(&self) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        // A bug shows as a failed read, not as a test that hangs.
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        }
    }

    /// A connection served by worker `worker` (connections are spread over
    /// the workers by the kernel: try until one lands there).
    fn connect_to(&self, worker: u32) -> Conn {
        for _ in 0..500 {
            let mut c = self.connect();
            if c.worker() == worker {
                return c;
            }
        }
        panic!("no connection landed on worker {worker}");
    }

    /// Polls INFO until `blocked_clients` is `n` (bounded).
    fn wait_blocked(&self, n: u64) {
        let mut c = self.connect();
        for _ in 0..3000 {
            if c.blocked_clients() == n {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!(
            "blocked_clients never became {n} (is {})",
            c.blocked_clients()
        );
    }
}

/// A RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

fn array(items: &[&str]) -> Reply {
    Reply::Array(Some(items.iter().map(|s| bulk(s)).collect()))
}

struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

impl Conn {
    fn send(&mut self, args: &[&str]) {
        self.w.write_all(&encode(args)).expect("send");
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.r.read_line(&mut line).expect("read reply");
        assert!(line.ends_with("\r\n"), "connection closed: {line:?}");
        line.truncate(line.len() - 2);
        line
    }

    fn read(&mut self) -> Reply {
        let line = self.line();
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" => Reply::Simple(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Int(rest.parse().unwrap()),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Reply::Bulk(None);
                }
                let mut b = vec![0; n as usize + 2];
                self.r.read_exact(&mut b).unwrap();
                b.truncate(n as usize);
                Reply::Bulk(Some(b))
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Reply::Array(None);
                }
                Reply::Array(Some((0..n).map(|_| self.read()).collect()))
            }
            _ => panic!("unexpected reply line {line:?}"),
        }
    }

    fn call(&mut self, args: &[&str]) -> Reply {
        self.send(args);
        self.read()
    }

    /// Whether the server closed the connection (reads to EOF).
    fn closed(&mut self) -> bool {
        let mut rest = Vec::new();
        match self.r.read_to_end(&mut rest) {
            Ok(_) => rest.is_empty(),
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }

    fn text(&mut self, args: &[&str]) -> String {
        match self.call(args) {
            Reply::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn field(&mut self, args: &[&str], name: &str) -> u64 {
        let text = self.text(args);
        text.split(|c: char| c.is_whitespace() || c == ' ')
            .find_map(|f| f.strip_prefix(name)?.strip_prefix(['=', ':']))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    }

    fn worker(&mut self) -> u32 {
        self.field(&["CLIENT", "INFO"], "worker") as u32
    }

    fn id(&mut self) -> u64 {
        match self.call(&["CLIENT", "ID"]) {
            Reply::Int(n) => n as u64,
            other => panic!("CLIENT ID: {other:?}"),
        }
    }

    fn blocked_clients(&mut self) -> u64 {
        self.field(&["INFO", "clients"], "blocked_clients")
    }
}

#[test]
fn a_push_on_one_worker_wakes_a_client_blocked_on_the_other() {
    let server = Server::start(2);
    let mut waiter = server.connect_to(0);
    let mut pusher = server.connect_to(1);
    waiter.send(&["BLPOP", "q", "0"]);
    server.wait_blocked(1);
    assert_eq!(pusher.call(&["RPUSH", "q", "x"]), Reply::Int(1));
    assert_eq!(waiter.read(), array(&["q", "x"]));
    server.wait_blocked(0);
    assert_eq!(pusher.call(&["EXISTS", "q"]), Reply::Int(0));

    // And the other way round, on the second of two keys.
    let mut waiter = server.connect_to(1);
    let mut pusher = server.connect_to(0);
    waiter.send(&["BRPOP", "k1", "k2", "0"]);
    server.wait_blocked(1);
    assert_eq!(pusher.call(&["LPUSH", "k2", "a", "b"]), Reply::Int(2));
    assert_eq!(waiter.read(), array(&["k2", "a"]));
    assert_eq!(pusher.call(&["LRANGE", "k2", "0", "-1"]), array(&["b"]));
}

#[test]
fn no_wake_up_is_lost_when_the_push_races_the_block() {
    let server = Server::start(2);
    let mut waiter = server.connect_to(0);
    let mut pusher = server.connect_to(1);
    // The watched key first, then many empty ones: the BLPOP spends a while
    // between looking at "race" and registering, which widens the window a
    // push on the other worker must not slip through.
    let mut blpop = vec!["BLPOP".to_string(), "race".to_string()];
    blpop.extend((0..300).map(|i| format!("empty{i}")));
    blpop.push("0".to_string());
    let blpop: Vec<&str> = blpop.iter().map(String::as_str).collect();
    for i in 0..300 {
        let value = format!("v{i}");
        // No waiting for the block: the push lands before, during or after.
        waiter.send(&blpop);
        assert_eq!(pusher.call(&["RPUSH", "race", &value]), Reply::Int(1));
        assert_eq!(waiter.read(), array(&["race", &value]));
    }
}

#[test]
fn waiters_are_served_in_the_order_they_blocked() {
    let server = Server::start(2);
    let mut first = server.connect_to(0);
    let mut second = server.connect_to(0);
    let mut third = server.connect_to(0);
    let mut pusher = server.connect_to(1);
    first.send(&["BLPOP", "fifo", "0"]);
    server.wait_blocked(1);
    second.send(&["BLPOP", "other", "fifo", "0"]);
    server.wait_blocked(2);
    third.send(&["BLPOP", "fifo", "0"]);
    server.wait_blocked(3);

    // One element: the first waiter gets it, the others keep waiting (and
    // keep their places).
    assert_eq!(pusher.call(&["RPUSH", "fifo", "a"]), Reply::Int(1));
    assert_eq!(first.read(), array(&["fifo", "a"]));
    server.wait_blocked(2);
    // Two elements: the next two in order.
    assert_eq!(pusher.call(&["RPUSH", "fifo", "b", "c"]), Reply::Int(2));
    assert_eq!(second.read(), array(&["fifo", "b"]));
    assert_eq!(third.read(), array(&["fifo", "c"]));
    server.wait_blocked(0);
}

#[test]
fn a_push_and_a_pop_pipelined_on_the_waiters_worker_serve_the_waiter_first() {
    let server = Server::start(2);
    let mut waiter = server.connect_to(0);
    let mut writer = server.connect_to(0);
    waiter.send(&["BLPOP", "p", "0"]);
    server.wait_blocked(1);
    // As in Redis, the blocked client is served right after the push, before
    // the writer's next command.
    let mut batch = encode(&["RPUSH", "p", "x"]);
    batch.extend(encode(&["LPOP", "p"]));
    writer.w.write_all(&batch).unwrap();
    assert_eq!(writer.read(), Reply::Int(1));
    assert_eq!(writer.read(), Reply::Bulk(None));
    assert_eq!(waiter.read(), array(&["p", "x"]));
}

#[test]
fn a_served_blmove_wakes_the_clients_blocked_on_its_destination() {
    let server = Server::start(2);
    let mut mover = server.connect_to(0);
    let mut popper = server.connect_to(1);
    let mut pusher = server.connect_to(1);
    mover.send(&["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]);
    server.wait_blocked(1);
    popper.send(&["BLPOP", "dst", "0"]);
    server.wait_blocked(2);
    assert_eq!(pusher.call(&["RPUSH", "src", "x"]), Reply::Int(1));
    assert_eq!(mover.read(), bulk("x"));
    assert_eq!(popper.read(), array(&["dst", "x"]));
    assert_eq!(pusher.call(&["EXISTS", "src", "dst"]), Reply::Int(0));
}

#[test]
fn a_timeout_replies_a_null_array_and_the_connection_goes_on() {
    let server = Server::start(2);
    let mut c = server.connect();
    assert_eq!(c.call(&["BLPOP", "none", "0.05"]), Reply::Array(None));
    assert_eq!(
        c.call(&["BLMOVE", "none", "dst", "LEFT", "LEFT", "0.05"]),
        Reply::Array(None)
    );
    assert_eq!(
        c.call(&["BRPOPLPUSH", "none", "dst", "0.05"]),
        Reply::Array(None)
    );
    assert_eq!(c.call(&["PING"]), Reply::Simple("PONG".into()));
    server.wait_blocked(0);
    // A timed-out client waits on nothing any more.
    assert_eq!(c.call(&["RPUSH", "none", "x"]), Reply::Int(1));
    assert_eq!(c.call(&["LLEN", "none"]), Reply::Int(1));
}

#[test]
fn requests_pipelined_after_a_blocking_command_wait_for_it() {
    let server = Server::start(2);
    let mut waiter = server.connect_to(0);
    let mut pusher = server.connect_to(1);
    let mut batch = encode(&["PING", "before"]);
    batch.extend(encode(&["BLPOP", "pipe", "0"]));
    batch.extend(encode(&["PING", "after"]));
    batch.extend(encode(&["LLEN", "pipe"]));
    waiter.w.write_all(&batch).unwrap();
    assert_eq!(waiter.read(), bulk("before"));
    server.wait_blocked(1);
    assert_eq!(pusher.call(&["RPUSH", "pipe", "a", "b"]), Reply::Int(2));
    // The replies come in order: the pipelined PING was not answered first.
    assert_eq!(waiter.read(), array(&["pipe", "a"]));
    assert_eq!(waiter.read(), bulk("after"));
    assert_eq!(waiter.read(), Reply::Int(1));
}

#[test]
fn client_kill_closes_a_blocked_client_which_then_waits_on_nothing() {
    let server = Server::start(2);
    for (waiter_worker, killer_worker) in [(0, 0), (0, 1)] {
        let mut waiter = server.connect_to(waiter_worker);
        let id = waiter.id().to_string();
        let mut killer = server.connect_to(killer_worker);
        waiter.send(&["BLPOP", "killed", "0"]);
        server.wait_blocked(1);
        let list = killer.text(&["CLIENT", "LIST", "ID", &id]);
        assert!(list.contains(" flags=b "), "{list}");
        assert!(list.contains(" cmd=blpop "), "{list}");
        assert_eq!(killer.call(&["CLIENT", "KILL", "ID", &id]), Reply::Int(1));
        assert!(waiter.closed());
        server.wait_blocked(0);
        assert_eq!(killer.call(&["RPUSH", "killed", "x"]), Reply::Int(1));
        assert_eq!(killer.call(&["LPOP", "killed"]), bulk("x"));
    }
}

#[test]
fn a_blocked_client_that_hangs_up_waits_on_nothing() {
    let server = Server::start(1);
    let mut waiter = server.connect();
    waiter.send(&["BLPOP", "gone", "0"]);
    server.wait_blocked(1);
    drop(waiter);
    server.wait_blocked(0);
    let mut c = server.connect();
    assert_eq!(c.call(&["RPUSH", "gone", "x"]), Reply::Int(1));
    assert_eq!(c.call(&["LLEN", "gone"]), Reply::Int(1));
}

#[test]
fn client_unblock_ends_a_wait_with_the_timeout_reply_or_an_error() {
    let server = Server::start(2);
    for (waiter_worker, caller_worker) in [(0, 0), (1, 0)] {
        let mut waiter = server.connect_to(waiter_worker);
        let id = waiter.id().to_string();
        let mut caller = server.connect_to(caller_worker);
        waiter.send(&["BLPOP", "u", "0"]);
        server.wait_blocked(1);
        assert_eq!(
            caller.call(&["CLIENT", "UNBLOCK", &id, "TIMEOUT"]),
            Reply::Int(1)
        );
        assert_eq!(waiter.read(), Reply::Array(None));
        waiter.send(&["BLMOVE", "u", "v", "LEFT", "LEFT", "0"]);
        server.wait_blocked(1);
        assert_eq!(
            caller.call(&["CLIENT", "UNBLOCK", &id, "error"]),
            Reply::Int(1)
        );
        assert_eq!(
            waiter.read(),
            Reply::Error("UNBLOCKED client unblocked via CLIENT UNBLOCK".into())
        );
        // Not blocked any more.
        assert_eq!(caller.call(&["CLIENT", "UNBLOCK", &id]), Reply::Int(0));
        assert_eq!(waiter.call(&["PING"]), Reply::Simple("PONG".into()));
        server.wait_blocked(0);
    }
    let mut c = server.connect();
    assert_eq!(
        c.call(&["CLIENT", "UNBLOCK", "1", "MAYBE"]),
        Reply::Error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR".into())
    );
    assert_eq!(
        c.call(&["CLIENT", "UNBLOCK", "x"]),
        Reply::Error("ERR value is not an integer or out of range".into())
    );
    assert_eq!(c.call(&["CLIENT", "UNBLOCK", "-3"]), Reply::Int(0));
}
