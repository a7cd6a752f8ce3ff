//! MULTI / EXEC / DISCARD / WATCH / UNWATCH through the dispatcher, with
//! Redis 7.0's replies; WATCH seeing writes of a second worker (another
//! engine on the same segment); and EXEC and multi-key commands atomic for
//! concurrent workers.

mod common;

use std::borrow::Cow;
use std::thread;

use common::*;
use engine::{Config, Engine, Flow, ServerInfo, Session};
use store::Store;

const QUEUED: &str = "+QUEUED\r\n";
const NULL_ARRAY: &str = "*-1\r\n";
const EXECABORT: &str = "-EXECABORT Transaction discarded because of previous errors.\r\n";
const NOT_IN_MULTI: &str = "ERR Command not allowed inside a transaction";

/// Another worker: its own engine (store context) on the same segment.
struct Worker {
    engine: Engine,
    session: Session,
}

impl Worker {
    fn new(store: &Store) -> Worker {
        let engine =
            Engine::new(store.clone(), Config::default(), ServerInfo::default()).expect("engine");
        let session = Session::new(2, engine.now_ms());
        Worker { engine, session }
    }

    fn of(t: &TestEngine) -> Worker {
        Worker::new(t.engine.store())
    }

    fn run(&mut self, words: &[&str]) -> String {
        let args: Vec<Cow<[u8]>> = words.iter().map(|w| Cow::Borrowed(w.as_bytes())).collect();
        let mut out = Vec::new();
        self.engine.begin_batch(&mut self.session);
        self.engine.execute(&mut self.session, &args, &mut out);
        self.engine.end_batch();
        String::from_utf8_lossy(&out).into_owned()
    }

    fn num(&mut self, key: &str) -> u64 {
        let r = self.run(&["GET", key]);
        if r == NIL {
            return 0;
        }
        r.split("\r\n").nth(1).unwrap().parse().unwrap()
    }
}

/// Runs each command and expects +QUEUED (MULTI is open).
fn queue(t: &mut TestEngine, commands: &[&[&str]]) {
    for c in commands {
        assert_eq!(t.run(c), QUEUED, "{c:?}");
    }
}

/// A RESP2 array of already-encoded replies.
fn array(items: &[&str]) -> String {
    format!("*{}\r\n{}", items.len(), items.concat())
}

// ---------- MULTI / EXEC / DISCARD ----------

#[test]
fn exec_runs_the_queue_and_replies_an_array() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["MULTI"]), OK);
    queue(
        &mut t,
        &[
            &["SET", "a", "1"],
            &["INCR", "a"],
            &["GET", "a"],
            &["GET", "nokey"],
        ],
    );
    // Nothing ran yet.
    let mut other = Worker::of(&t);
    assert_eq!(other.run(&["GET", "a"]), NIL);
    assert_eq!(t.run(&["EXEC"]), array(&[OK, &int(2), &bulk("2"), NIL]));
    assert_eq!(other.run(&["GET", "a"]), bulk("2"));
    // An empty transaction.
    assert_eq!(t.run(&["MULTI"]), OK);
    assert_eq!(t.run(&["EXEC"]), "*0\r\n");
    assert_eq!(t.run(&["EXEC"]), err("ERR EXEC without MULTI"));
}

#[test]
fn a_runtime_error_is_one_element_and_the_rest_still_run() {
    let mut t = TestEngine::new();
    t.run(&["SET", "s", "text"]);
    t.run(&["MULTI"]);
    queue(
        &mut t,
        &[
            &["INCR", "s"],
            &["SET", "a", "b", "XX", "NX"],
            &["SET", "b", "1"],
            &["PING"],
        ],
    );
    assert_eq!(
        t.run(&["EXEC"]),
        array(&[
            &err("ERR value is not an integer or out of range"),
            &err("ERR syntax error"),
            OK,
            "+PONG\r\n",
        ])
    );
    assert_eq!(t.run(&["GET", "b"]), bulk("1"));
}

#[test]
fn misuse_errors_are_redis_texts() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["EXEC"]), err("ERR EXEC without MULTI"));
    assert_eq!(t.run(&["DISCARD"]), err("ERR DISCARD without MULTI"));
    assert_eq!(
        t.run(&["MULTI", "x"]),
        err("ERR wrong number of arguments for 'multi' command")
    );
    assert_eq!(
        t.run(&["WATCH"]),
        err("ERR wrong number of arguments for 'watch' command")
    );
    assert_eq!(t.run(&["MULTI"]), OK);
    // Neither of these dooms the transaction (they are not queued).
    assert_eq!(t.run(&["MULTI"]), err("ERR MULTI calls can not be nested"));
    assert_eq!(
        t.run(&["WATCH", "k"]),
        err("ERR WATCH inside MULTI is not allowed")
    );
    queue(&mut t, &[&["SET", "a", "1"]]);
    assert_eq!(t.run(&["EXEC"]), array(&[OK]));
}

#[test]
fn a_refused_command_dooms_the_transaction() {
    let refused: &[(&[&str], String)] = &[
        (
            &["NOSUCH", "x"],
            err("ERR unknown command 'NOSUCH', with args beginning with: 'x' "),
        ),
        (
            &["GET"],
            err("ERR wrong number of arguments for 'get' command"),
        ),
        (
            &["CLIENT", "NOPE"],
            err("ERR unknown subcommand 'NOPE'. Try CLIENT HELP."),
        ),
        (
            &["CLIENT", "SETNAME"],
            err("ERR wrong number of arguments for 'client|setname' command"),
        ),
        (&["SHUTDOWN"], err(NOT_IN_MULTI)),
    ];
    for (command, reply) in refused {
        let mut t = TestEngine::new();
        t.run(&["MULTI"]);
        queue(&mut t, &[&["SET", "a", "1"]]);
        assert_eq!(&t.run(command), reply, "{command:?}");
        // Queuing goes on after the error, as in Redis.
        queue(&mut t, &[&["SET", "b", "1"]]);
        assert_eq!(t.run(&["EXEC"]), EXECABORT, "{command:?}");
        assert_eq!(t.run(&["EXISTS", "a", "b"]), int(0));
        // The transaction is over.
        assert_eq!(t.run(&["EXEC"]), err("ERR EXEC without MULTI"));
    }
}

#[test]
fn discard_drops_the_queue_and_unwatches() {
    let mut t = TestEngine::new();
    let mut other = Worker::of(&t);
    assert_eq!(t.run(&["WATCH", "w"]), OK);
    t.run(&["MULTI"]);
    queue(&mut t, &[&["SET", "a", "1"]]);
    assert_eq!(t.run(&["DISCARD"]), OK);
    assert_eq!(t.run(&["EXISTS", "a"]), int(0));
    assert_eq!(t.run(&["DISCARD"]), err("ERR DISCARD without MULTI"));
    // No longer watched: a change of w does not fail the next EXEC.
    other.run(&["SET", "w", "changed"]);
    t.run(&["MULTI"]);
    queue(&mut t, &[&["SET", "a", "1"]]);
    assert_eq!(t.run(&["EXEC"]), array(&[OK]));
}

#[test]
fn reset_and_quit_discard_too() {
    let mut t = TestEngine::new();
    let mut other = Worker::of(&t);
    t.run(&["WATCH", "w"]);
    t.run(&["MULTI"]);
    queue(&mut t, &[&["SET", "a", "1"]]);
    assert_eq!(t.run(&["RESET"]), "+RESET\r\n");
    assert_eq!(t.run(&["EXEC"]), err("ERR EXEC without MULTI"));
    other.run(&["SET", "w", "changed"]);
    t.run(&["MULTI"]);
    assert_eq!(t.run(&["EXEC"]), "*0\r\n");
    assert_eq!(t.run(&["EXISTS", "a"]), int(0));

    t.run(&["WATCH", "w"]);
    t.run(&["MULTI"]);
    queue(&mut t, &[&["SET", "a", "1"]]);
    let (reply, flow) = t.run_bytes(&[Cow::Borrowed(&b"QUIT"[..])]);
    assert_eq!((reply.as_str(), flow), (OK, Flow::Close));
    assert!(!t.session.in_multi());
    assert_eq!(t.run(&["EXEC"]), err("ERR EXEC without MULTI"));
}

#[test]
fn select_inside_applies_to_the_commands_after_it() {
    let mut t = TestEngine::new();
    t.run(&["MULTI"]);
    queue(
        &mut t,
        &[&["SELECT", "3"], &["SET", "k", "in3"], &["DBSIZE"]],
    );
    assert_eq!(t.run(&["EXEC"]), array(&[OK, OK, &int(1)]));
    assert_eq!(t.session.db, 3);
    assert_eq!(t.run(&["GET", "k"]), bulk("in3"));
}

#[test]
fn client_info_shows_an_open_transaction() {
    let mut t = TestEngine::new();
    assert!(t
        .run(&["CLIENT", "INFO"])
        .contains(" flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 "));
    t.run(&["MULTI"]);
    assert!(t.session.in_multi());
    queue(&mut t, &[&["PING"], &["PING"]]);
    // CLIENT INFO itself would be queued now.
    let info = t.session.client_line(T0);
    assert!(
        info.contains(" flags=x db=0 sub=0 psub=0 ssub=0 multi=2 "),
        "{info}"
    );
}

// ---------- replies inside EXEC ----------

#[test]
fn each_element_is_the_reply_written_alone_in_resp3() {
    let mut t = TestEngine::new();
    t.resp3();
    t.run(&["SET", "s", "v"]);
    t.run(&["MULTI"]);
    queue(
        &mut t,
        &[
            &["GET", "nokey"],
            &["GET", "s"],
            &["INCR", "s"],
            &["TTL", "s"],
        ],
    );
    assert_eq!(
        t.run(&["EXEC"]),
        array(&[
            "_\r\n",
            &bulk("v"),
            &err("ERR value is not an integer or out of range"),
            &int(-1)
        ])
    );
    // A failed WATCH is RESP3's null.
    let mut other = Worker::of(&t);
    t.run(&["WATCH", "s"]);
    other.run(&["SET", "s", "w"]);
    t.run(&["MULTI"]);
    assert_eq!(t.run(&["EXEC"]), "_\r\n");
}

#[test]
fn hello_inside_switches_the_protocol_of_the_elements_after_it() {
    let mut t = TestEngine::new();
    t.run(&["MULTI"]);
    queue(
        &mut t,
        &[&["GET", "nokey"], &["HELLO", "3"], &["GET", "nokey"]],
    );
    let r = t.run(&["EXEC"]);
    assert!(r.starts_with("*3\r\n$-1\r\n%7\r\n"), "{r}");
    assert!(r.ends_with("*0\r\n_\r\n"), "{r}");
}

#[test]
fn client_reply_applies_to_exec_as_one_reply() {
    let mut t = TestEngine::new();
    // CLIENT REPLY is queued like any command; SKIP before MULTI skips MULTI.
    assert_eq!(t.run(&["CLIENT", "REPLY", "SKIP"]), "");
    assert_eq!(t.run(&["MULTI"]), "");
    queue(&mut t, &[&["SET", "a", "1"], &["SET", "b", "2"]]);
    assert_eq!(t.run(&["EXEC"]), array(&[OK, OK]));
    // Queued SKIP: an element of its own, and the next command is skipped.
    t.run(&["MULTI"]);
    queue(&mut t, &[&["CLIENT", "REPLY", "SKIP"], &["PING"]]);
    assert_eq!(t.run(&["EXEC"]), array(&[OK, "+PONG\r\n"]));
    assert_eq!(t.run(&["PING"]), "");
    assert_eq!(t.run(&["PING"]), "+PONG\r\n");
    // Queued OFF: EXEC's reply is already off.
    t.run(&["MULTI"]);
    queue(&mut t, &[&["CLIENT", "REPLY", "OFF"], &["SET", "c", "3"]]);
    assert_eq!(t.run(&["EXEC"]), "");
    assert_eq!(t.run(&["CLIENT", "REPLY", "ON"]), OK);
    assert_eq!(t.run(&["GET", "c"]), bulk("3"));
}

#[test]
fn container_commands_are_checked_and_queued() {
    let mut t = TestEngine::new();
    t.run(&["MULTI"]);
    queue(
        &mut t,
        &[&["COMMAND"], &["COMMAND", "COUNT"], &["CLIENT", "GETNAME"]],
    );
    let r = t.run(&["EXEC"]);
    let count = t.run(&["COMMAND", "COUNT"]);
    assert!(r.starts_with("*3\r\n*"), "{r}");
    assert!(r.ends_with(&format!("{count}{NIL}")), "{r}");
}

#[test]
fn server_side_commands_answer_an_error_inside_exec() {
    let mut t = TestEngine::new();
    t.run(&["MULTI"]);
    queue(&mut t, &[&["CLIENT", "LIST"], &["CLIENT", "ID"]]);
    let (reply, flow) = t.run_bytes(&[Cow::Borrowed(&b"EXEC"[..])]);
    assert_eq!(reply, array(&[&err(NOT_IN_MULTI), &int(1)]));
    assert_eq!(flow, Flow::Continue);
}

#[test]
fn db_wide_and_multi_key_commands_work_inside() {
    let mut t = TestEngine::new();
    t.run(&["SET", "x", "1"]);
    t.run(&["MULTI"]);
    queue(
        &mut t,
        &[
            &["MSET", "a", "1", "b", "2"],
            &["SWAPDB", "0", "1"],
            &["DBSIZE"],
            &["SELECT", "1"],
            &["DEL", "a", "b"],
            &["FLUSHDB"],
            &["BITOP", "OR", "dest", "x", "y"],
            &["FLUSHALL"],
            &["DBSIZE"],
        ],
    );
    assert_eq!(
        t.run(&["EXEC"]),
        array(&[OK, OK, &int(0), OK, &int(2), OK, &int(0), OK, &int(0)])
    );
}

// ---------- WATCH ----------

#[test]
fn watch_sees_a_write_of_another_worker() {
    let mut t = TestEngine::new();
    let mut other = Worker::of(&t);
    t.run(&["SET", "k", "1"]);
    assert_eq!(t.run(&["WATCH", "k"]), OK);
    assert_eq!(other.run(&["SET", "k", "2"]), OK);
    t.run(&["MULTI"]);
    queue(&mut t, &[&["SET", "x", "1"]]);
    assert_eq!(t.run(&["EXEC"]), NULL_ARRAY);
    assert_eq!(t.run(&["EXISTS", "x"]), int(0));
    // EXEC unwatched: the same transaction now runs.
    other.run(&["SET", "k", "3"]);
    t.run(&["MULTI"]);
    queue(&mut t, &[&["SET", "x", "1"]]);
    assert_eq!(t.run(&["EXEC"]), array(&[OK]));
}

#[test]
fn watch_passes_when_nothing_changed() {
    let mut t = TestEngine::new();
    let mut other = Worker::of(&t);
    t.run(&["SET", "k", "1"]);
    t.run(&["WATCH", "k", "missing"]);
    // Reads and writes of other keys change nothing watched.
    other.run(&["GET", "k"]);
    other.run(&["SET", "unrelated", "1"]);
    t.run(&["GET", "k"]);
    t.run(&["MULTI"]);
    queue(&mut t, &[&["INCR", "k"]]);
    assert_eq!(t.run(&["EXEC"]), array(&[&int(2)]));
}

#[test]
fn every_kind_of_change_fails_exec() {
    // (setup, change) pairs, each run on a fresh engine watching k.
    let changes: &[(&[&str], &[&str])] = &[
        (&["SET", "k", "1"], &["SET", "k", "1"]), // same value, still a write
        (&["SET", "k", "1"], &["DEL", "k"]),
        (&["PING"], &["SET", "k", "new"]), // created
        (&["SET", "k", "1"], &["APPEND", "k", "x"]),
        (&["SET", "k", "1"], &["EXPIRE", "k", "100"]),
        (&["SET", "k", "1"], &["INCR", "k"]),
        (&["SET", "j", "1"], &["RENAME", "j", "k"]),
        (&["SET", "k", "1"], &["RENAME", "k", "j"]),
        (&["SET", "k", "1"], &["MOVE", "k", "1"]),
        (&["SET", "k", "1"], &["FLUSHDB"]),
        (&["SET", "k", "1"], &["FLUSHALL"]),
        (&["SET", "k", "1"], &["SWAPDB", "0", "1"]),
        // Coarser than Redis: a flush or swap of other dbs fails it too.
        (&["SET", "k", "1"], &["SWAPDB", "4", "5"]),
    ];
    for (setup, change) in changes {
        let mut t = TestEngine::new();
        let mut other = Worker::of(&t);
        t.run(setup);
        t.run(&["WATCH", "k"]);
        other.run(change);
        t.run(&["MULTI"]);
        queue(&mut t, &[&["SET", "done", "1"]]);
        assert_eq!(t.run(&["EXEC"]), NULL_ARRAY, "{change:?}");
        assert_eq!(t.run(&["EXISTS", "done"]), int(0), "{change:?}");
    }
}

#[test]
fn own_writes_between_watch_and_multi_fail_exec_too() {
    let mut t = TestEngine::new();
    t.run(&["WATCH", "k"]);
    t.run(&["SET", "k", "mine"]);
    t.run(&["MULTI"]);
    queue(&mut t, &[&["GET", "k"]]);
    assert_eq!(t.run(&["EXEC"]), NULL_ARRAY);
}

#[test]
fn a_watched_key_that_expires_fails_exec() {
    let mut t = TestEngine::new();
    t.run(&["SET", "k", "v", "PX", "100"]);
    t.run(&["WATCH", "k"]);
    t.advance_ms(101);
    t.run(&["MULTI"]);
    queue(&mut t, &[&["PING"]]);
    assert_eq!(t.run(&["EXEC"]), NULL_ARRAY);
    // Already expired when watched, and still gone: nothing changed.
    t.run(&["SET", "e", "v", "PX", "100"]);
    t.advance_ms(101);
    t.run(&["WATCH", "e"]);
    t.run(&["MULTI"]);
    queue(&mut t, &[&["PING"]]);
    assert_eq!(t.run(&["EXEC"]), array(&["+PONG\r\n"]));
}

#[test]
fn unwatch_forgets_and_watch_keeps_the_first_version() {
    let mut t = TestEngine::new();
    let mut other = Worker::of(&t);
    t.run(&["WATCH", "k"]);
    assert_eq!(t.run(&["UNWATCH"]), OK);
    other.run(&["SET", "k", "1"]);
    t.run(&["MULTI"]);
    assert_eq!(t.run(&["EXEC"]), "*0\r\n");
    // Watching again after a change does not forgive it.
    t.run(&["WATCH", "k"]);
    other.run(&["SET", "k", "2"]);
    t.run(&["WATCH", "k"]);
    t.run(&["MULTI"]);
    assert_eq!(t.run(&["EXEC"]), NULL_ARRAY);
    // UNWATCH queued runs inside EXEC, after the check.
    t.run(&["WATCH", "k"]);
    other.run(&["SET", "k", "3"]);
    t.run(&["MULTI"]);
    queue(&mut t, &[&["UNWATCH"]]);
    assert_eq!(t.run(&["EXEC"]), NULL_ARRAY);
}

#[test]
fn watch_is_per_db() {
    let mut t = TestEngine::new();
    let mut other = Worker::of(&t);
    t.run(&["SELECT", "2"]);
    t.run(&["WATCH", "k"]);
    t.run(&["SELECT", "0"]);
    other.run(&["SET", "k", "in db 0"]);
    t.run(&["MULTI"]);
    assert_eq!(t.run(&["EXEC"]), "*0\r\n");
    t.run(&["SELECT", "2"]);
    t.run(&["WATCH", "k"]);
    other.run(&["SELECT", "2"]);
    other.run(&["SET", "k", "in db 2"]);
    t.run(&["MULTI"]);
    assert_eq!(t.run(&["EXEC"]), NULL_ARRAY);
}

// ---------- atomicity across workers ----------

/// Workers on threads run `write(i)` for i in 1..=n; another reads `x` then
/// `y` and checks `y` never lags `x`: a reader between the two writes of
/// one step would see `x = i`, `y = i - 1`.
fn never_half_done(write: fn(&mut Worker, u64)) {
    const N: u64 = 1500;
    let t = TestEngine::new();
    let store = t.engine.store().clone();
    let writer = {
        let store = store.clone();
        thread::spawn(move || {
            let mut w = Worker::new(&store);
            for i in 1..=N {
                write(&mut w, i);
            }
        })
    };
    let mut r = Worker::new(&store);
    loop {
        let done = writer.is_finished();
        let x = r.num("x");
        let y = r.num("y");
        assert!(y >= x, "saw x = {x} without its y (y = {y})");
        if x == N {
            break;
        }
        assert!(!done, "the writer stopped at {x}");
    }
    writer.join().unwrap();
}

#[test]
fn exec_is_atomic_for_other_workers() {
    never_half_done(|w, i| {
        let v = i.to_string();
        w.run(&["MULTI"]);
        w.run(&["SET", "x", &v]);
        w.run(&["SET", "y", &v]);
        assert_eq!(w.run(&["EXEC"]), array(&[OK, OK]));
    });
}

#[test]
fn mset_is_atomic_for_other_workers() {
    never_half_done(|w, i| {
        let v = i.to_string();
        assert_eq!(w.run(&["MSET", "x", &v, "y", &v]), OK);
    });
}

#[test]
fn optimistic_increments_never_lose_an_update() {
    const THREADS: u64 = 4;
    const K: u64 = 200;
    let t = TestEngine::new();
    let store = t.engine.store().clone();
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let store = store.clone();
            thread::spawn(move || {
                let mut w = Worker::new(&store);
                let mut retries = 0;
                for _ in 0..K {
                    loop {
                        w.run(&["WATCH", "c"]);
                        let n = w.num("c");
                        w.run(&["MULTI"]);
                        w.run(&["SET", "c", &(n + 1).to_string()]);
                        if w.run(&["EXEC"]) != NULL_ARRAY {
                            break;
                        }
                        retries += 1;
                    }
                }
                retries
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    assert_eq!(Worker::new(&store).num("c"), THREADS * K);
}

#[test]
fn msetnx_checks_and_sets_as_one_step() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["MSETNX", "a", "1"]), int(1));
    assert_eq!(t.run(&["MSETNX", "a", "2"]), int(0));
    assert_eq!(t.run(&["MSETNX", "b", "1", "a", "2"]), int(0));
    assert_eq!(t.run(&["MSETNX", "b", "1", "c", "2"]), int(1));
    assert_eq!(t.run(&["MGET", "a", "b", "c"]), bulks(&["1", "1", "2"]));
    // Concurrent MSETNX of overlapping keys: exactly one wins each round.
    let store = t.engine.store().clone();
    for round in 0..50 {
        let (p, q) = (format!("p{round}"), format!("q{round}"));
        let racers: Vec<_> = (0..3)
            .map(|i| {
                let (store, p, q) = (store.clone(), p.clone(), q.clone());
                thread::spawn(move || {
                    let v = i.to_string();
                    Worker::new(&store).run(&["MSETNX", &p, &v, &q, &v])
                })
            })
            .collect();
        let wins = racers
            .into_iter()
            .map(|r| r.join().unwrap())
            .filter(|r| *r == int(1))
            .count();
        assert_eq!(wins, 1, "round {round}");
        let (pv, qv) = (t.run(&["GET", &p]), t.run(&["GET", &q]));
        assert_eq!(pv, qv, "round {round}: keys of two different MSETNX");
    }
}

// ---------- the table ----------

#[test]
fn command_info_lists_the_transaction_commands() {
    let mut t = TestEngine::new();
    let r = t.run(&["COMMAND", "INFO", "watch"]);
    assert!(
        r.starts_with("*1\r\n*10\r\n$5\r\nwatch\r\n:-2\r\n*5\r\n+noscript\r\n+loading\r\n+stale\r\n+fast\r\n+allow_busy\r\n:1\r\n:-1\r\n:1\r\n*2\r\n+@fast\r\n+@transaction\r\n"),
        "{r}"
    );
    // ATOMIC is shoal's own: not shown.
    let r = t.run(&["COMMAND", "INFO", "mset"]);
    assert!(r.contains("*2\r\n+write\r\n+denyoom\r\n"), "{r}");
    let exec = engine::command::lookup(b"exec").unwrap();
    assert_eq!((exec.arity, exec.group), (1, "transactions"));
}

#[test]
fn atomic_commands_take_a_section_only_when_they_must() {
    use engine::command::lookup;
    let mset = lookup(b"mset").unwrap();
    assert!(!mset.needs_exclusive(3));
    assert!(mset.needs_exclusive(5));
    let del = lookup(b"del").unwrap();
    assert!(!del.needs_exclusive(2));
    assert!(del.needs_exclusive(3));
    assert!(lookup(b"bitop").unwrap().needs_exclusive(4));
    for single in [&b"get"[..], b"set", b"incr", b"rename", b"copy", b"move"] {
        assert!(!lookup(single).unwrap().needs_exclusive(4), "{single:?}");
    }
}
