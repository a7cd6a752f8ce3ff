//! The worker registry and the worker mailboxes (`src/ipc/workers.rs`,
//! `src/ipc/mailbox.rs`): registry records, liveness of dead workers, the CLIENT
//! ID counter and shared settings; mailbox order, wrap-around against a
//! `VecDeque` model, the wake flag, size limits, concurrent producers, a
//! producer killed while it holds the mailbox lock, and scribbled ring words.
//! Child processes are this test binary run again with `SHOAL_WORKERS_CHILD`
//! set (see `child_entry`).

mod common;

use std::collections::{HashSet, VecDeque};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{wait_for_line, TempSegment};
use proptest::prelude::*;
use store::*;

/// Small segments get 4 KiB mailboxes: a 4032-byte ring, so a few messages
/// wrap it.
const SEG: u64 = 2 << 20;

// Mirrors of `src/segment/layout.rs`, for scribbling through the segment file. The
// `layout_mirror_matches` test checks them against a live mailbox.
const H_MBOX_OFF: u64 = 96;
const H_MBOX_SIZE: u64 = 104;
const M_LOCK: u64 = 0;
const M_HEAD: u64 = 8;
const M_TAIL: u64 = 16;
const M_WAKE: u64 = 24;
const M_RING: u64 = 64;
const MSG_HEADER: u64 = 24;

fn pad8(n: u64) -> u64 {
    (n + 7) & !7
}

/// Ring bytes one message of `len` payload bytes takes.
fn footprint(len: usize) -> u64 {
    MSG_HEADER + pad8(len as u64)
}

fn open(seg: &TempSegment) -> Store {
    let mut opts = seg.options(SEG);
    opts.contexts = 16;
    Store::open(&opts).expect("open segment")
}

/// A payload whose every byte follows from its sender, sequence number and
/// length, so a torn or mixed payload is always detected.
fn payload(from: u32, seq: u64, len: usize) -> Vec<u8> {
    let seed = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(from) << 7 ^ len as u64;
    (0..len)
        .map(|i| (seed.wrapping_add(i as u64 * 0x2F) >> 5) as u8)
        .collect()
}

fn message(kind: u32, from: u32, request: u64, len: usize) -> Message {
    Message {
        kind,
        from,
        request,
        payload: payload(from, request, len),
    }
}

fn send(h: &mut Handle, to: u32, m: &Message) -> Result<Sent> {
    h.mailbox_send(to, m.kind, m.from, m.request, &m.payload)
}

fn take(h: &mut Handle, slot: u32) -> Result<Vec<Message>> {
    let mut out = Vec::new();
    h.mailbox_take(slot, &mut out)?;
    Ok(out)
}

/// Runs `f`, aborting the whole test binary if it takes longer than `secs`
/// (an endless loop on scribbled words must fail, not hang CI).
fn with_watchdog<T>(secs: u64, what: &str, f: impl FnOnce() -> T) -> T {
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        let what = what.to_string();
        std::thread::spawn(move || {
            let start = Instant::now();
            while !done.load(Ordering::Relaxed) {
                if start.elapsed() > Duration::from_secs(secs) {
                    eprintln!("{what}: hung for more than {secs} s");
                    std::process::abort();
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let out = f();
    done.store(true, Ordering::Relaxed);
    watchdog.join().unwrap();
    out
}

// ---------- the segment file, for scribbling ----------

struct SegmentFile {
    file: std::fs::File,
}

impl SegmentFile {
    fn open(path: &Path) -> SegmentFile {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        SegmentFile { file }
    }

    fn read64(&self, off: u64) -> u64 {
        let mut b = [0u8; 8];
        self.file.read_exact_at(&mut b, off).unwrap();
        u64::from_le_bytes(b)
    }

    fn write64(&self, off: u64, v: u64) {
        self.file.write_all_at(&v.to_le_bytes(), off).unwrap();
    }

    fn write32(&self, off: u64, v: u32) {
        self.file.write_all_at(&v.to_le_bytes(), off).unwrap();
    }

    /// Offset of `slot`'s mailbox, from the segment header.
    fn mailbox(&self, slot: u32) -> u64 {
        self.read64(H_MBOX_OFF) + u64::from(slot) * self.read64(H_MBOX_SIZE)
    }

    fn ring_cap(&self) -> u64 {
        self.read64(H_MBOX_SIZE) - M_RING
    }
}

// ---------- child processes ----------

fn spawn_child(role: &str, seg: &TempSegment, extra: &[(&str, String)]) -> Child {
    let mut env = vec![("SHOAL_WORKERS_CHILD", role.to_string())];
    env.extend(extra.iter().cloned());
    common::spawn_child(seg, &env)
}

fn env_u64(name: &str) -> u64 {
    std::env::var(name).unwrap().parse().unwrap()
}

/// Not a test of its own: the body of every child process.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var("SHOAL_WORKERS_CHILD") else {
        return;
    };
    let path = std::env::var("SHOAL_SEGMENT").unwrap();
    let store = Store::open(&OpenOptions {
        location: Location::Path(path.into()),
        create: false,
        ..OpenOptions::default()
    })
    .expect("child attach");
    let parent = std::os::unix::process::parent_id();
    match role.as_str() {
        "register-exit" => {
            store
                .register_worker(env_u64("SHOAL_SLOT") as u32, 7000)
                .unwrap();
            store
                .set_worker_state(env_u64("SHOAL_SLOT") as u32, WorkerState::Serving)
                .unwrap();
            println!("registered");
            // No destructors, no deregistration: as if it crashed.
            std::process::exit(0);
        }
        "register-hold" => {
            store
                .register_worker(env_u64("SHOAL_SLOT") as u32, 7001)
                .unwrap();
            println!("ready");
            while std::os::unix::process::parent_id() == parent {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        "crash-send" => {
            let mut h = store.handle().unwrap();
            store::testing::crash_after(&mut h, env_u64("SHOAL_CRASH_AT"));
            let m = message(9, 4, 1000, 300);
            let sent = send(&mut h, 0, &m).unwrap();
            assert!(matches!(sent, Sent::Delivered { .. }), "{sent:?}");
            drop(h);
            println!("completed");
        }
        "spam-send" => {
            // Sends numbered messages of varied sizes to slot 0 until killed.
            let from = env_u64("SHOAL_FROM") as u32;
            let mut h = store.handle().unwrap();
            let mut seq = env_u64("SHOAL_FIRST_SEQ");
            let mut announced = false;
            for round in 1u64.. {
                let m = message(1, from, seq, (seq * 53 % 700) as usize);
                match send(&mut h, 0, &m).unwrap() {
                    Sent::Delivered { .. } => seq += 1,
                    Sent::Full => std::thread::yield_now(),
                }
                if !announced {
                    println!("ready");
                    announced = true;
                }
                if round.is_multiple_of(256) && std::os::unix::process::parent_id() != parent {
                    // The test that started us is gone; do not run on as an orphan.
                    std::process::exit(1);
                }
            }
        }
        other => panic!("unknown child role {other}"),
    }
}

// ---------- registry ----------

#[test]
fn register_state_and_counters() {
    let seg = TempSegment::new("workers-reg");
    let store = open(&seg);
    assert_eq!(store.workers().unwrap(), vec![]);

    store.register_worker(3, 6380).unwrap();
    let w = store.workers().unwrap();
    assert_eq!(w.len(), 1);
    let w = &w[0];
    assert_eq!((w.slot, w.pid, w.port), (3, std::process::id(), 6380));
    assert_eq!(w.state, WorkerState::Starting);
    assert_eq!(
        (w.connections, w.total_connections, w.commands, w.restarts),
        (0, 0, 0, 0)
    );
    assert!(w.started_ms > 0);

    for state in [
        WorkerState::Serving,
        WorkerState::Draining,
        WorkerState::Starting,
    ] {
        store.set_worker_state(3, state).unwrap();
        assert_eq!(store.workers().unwrap()[0].state, state);
    }
    assert_eq!(WorkerState::Serving.name(), "serving");

    store
        .add_worker_counter(3, WorkerCounter::Connections, 5)
        .unwrap();
    store
        .add_worker_counter(3, WorkerCounter::Connections, -2)
        .unwrap();
    store
        .add_worker_counter(3, WorkerCounter::TotalConnections, 5)
        .unwrap();
    for _ in 0..10 {
        store
            .add_worker_counter(3, WorkerCounter::Commands, 7)
            .unwrap();
    }
    let w = &store.workers().unwrap()[0];
    assert_eq!((w.connections, w.total_connections, w.commands), (3, 5, 70));
    // The accept path's cheap view: serving slots only.
    assert_eq!(store.serving_connections().unwrap(), vec![]);
    store.set_worker_state(3, WorkerState::Serving).unwrap();
    assert_eq!(store.serving_connections().unwrap(), vec![(3, 3)]);

    // Another slot, seen through a second attachment of the same segment.
    store.register_worker(0, 6381).unwrap();
    let other = open(&seg);
    let slots: Vec<u32> = other.workers().unwrap().iter().map(|w| w.slot).collect();
    assert_eq!(slots, vec![0, 3]);

    // Free is not listed; registering again counts a restart and zeroes the
    // counters.
    store.set_worker_state(0, WorkerState::Free).unwrap();
    assert_eq!(store.workers().unwrap().len(), 1);
    store.register_worker(3, 6390).unwrap();
    let w = &store.workers().unwrap()[0];
    assert_eq!(
        (w.port, w.restarts, w.commands, w.connections),
        (6390, 1, 0, 0)
    );
    assert_eq!(w.state, WorkerState::Starting);

    // Slots out of range are errors, not panics.
    assert!(store.register_worker(MAX_WORKERS, 1).is_err());
    assert!(store
        .set_worker_state(MAX_WORKERS, WorkerState::Serving)
        .is_err());
    assert!(store
        .add_worker_counter(u32::MAX, WorkerCounter::Commands, 1)
        .is_err());
}

#[test]
fn a_dead_workers_slot_is_not_listed() {
    let seg = TempSegment::new("workers-dead");
    let store = open(&seg);
    store.register_worker(1, 6380).unwrap();

    // A live child is listed under its own pid...
    let mut holder = spawn_child("register-hold", &seg, &[("SHOAL_SLOT", "2".into())]);
    wait_for_line(&mut holder, "ready");
    let listed: Vec<(u32, u32)> = store
        .workers()
        .unwrap()
        .iter()
        .map(|w| (w.slot, w.pid))
        .collect();
    assert_eq!(listed, vec![(1, std::process::id()), (2, holder.id())]);
    // ... and not once it is killed.
    holder.kill().unwrap();
    holder.wait().unwrap();
    let slots: Vec<u32> = store.workers().unwrap().iter().map(|w| w.slot).collect();
    assert_eq!(slots, vec![1]);

    // A child that registers, says it is serving and exits without a word.
    let mut child = spawn_child("register-exit", &seg, &[("SHOAL_SLOT", "5".into())]);
    wait_for_line(&mut child, "registered");
    assert!(child.wait().unwrap().success());
    let slots: Vec<u32> = store.workers().unwrap().iter().map(|w| w.slot).collect();
    assert_eq!(slots, vec![1]);

    // A new worker taking the dead one's slot over counts a restart.
    store.register_worker(5, 6385).unwrap();
    let w = store.workers().unwrap();
    assert_eq!((w[1].slot, w[1].restarts), (5, 1));
}

#[test]
fn client_ids_are_unique_across_threads_and_attachments() {
    let seg = TempSegment::new("workers-ids");
    let first = open(&seg);
    let second = open(&seg);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = if t % 2 == 0 {
                first.clone()
            } else {
                second.clone()
            };
            std::thread::spawn(move || {
                (0..5000)
                    .map(|_| store.next_client_id().unwrap())
                    .collect::<Vec<u64>>()
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for t in threads {
        let ids = t.join().unwrap();
        // Each thread sees its own ids increase.
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        for id in ids {
            assert!(seen.insert(id), "CLIENT ID {id} handed out twice");
        }
    }
    assert_eq!(seen.len(), 20_000);
    let next = first.next_client_id().unwrap();
    assert!(seen.iter().all(|&id| id < next));
}

#[test]
fn supervisor_pid_and_config_words() {
    let seg = TempSegment::new("workers-sup");
    let store = open(&seg);
    let other = open(&seg);
    assert_eq!(store.supervisor_pid().unwrap(), None);
    store.set_supervisor_pid(std::process::id()).unwrap();
    assert_eq!(other.supervisor_pid().unwrap(), Some(std::process::id()));
    // A recorded supervisor that has exited reads as none.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    store.set_supervisor_pid(dead).unwrap();
    assert_eq!(other.supervisor_pid().unwrap(), None);
    store.set_supervisor_pid(0).unwrap();
    assert_eq!(other.supervisor_pid().unwrap(), None);

    for i in 0..CONFIG_WORDS {
        store.set_config_word(i, i * 1000 + 1).unwrap();
    }
    for i in 0..CONFIG_WORDS {
        assert_eq!(other.config_word(i).unwrap(), i * 1000 + 1);
    }
    assert!(store.config_word(CONFIG_WORDS).is_err());
    assert!(store.set_config_word(CONFIG_WORDS, 1).is_err());
    assert!(store.config_word(u64::MAX).is_err());
}

#[test]
fn scribbled_registry_words_never_panic() {
    let seg = TempSegment::new("workers-scribble");
    let store = open(&seg);
    store.register_worker(0, 6380).unwrap();
    store.register_worker(1, 6381).unwrap();
    let f = SegmentFile::open(&seg.path);
    // H_WORKERS = 12288, WORKER_REC = 128 (src/segment/layout.rs).
    let rec = |slot: u64| 12288 + 128 * slot;
    for v in [u64::MAX, 1 << 40, 4, u64::from(u32::MAX), 0] {
        for field in (0..72).step_by(8) {
            f.write64(rec(0) + field, v);
            f.write64(rec(1) + field, v.wrapping_add(field));
        }
        let _ = store.workers();
        // Taking a scribbled slot over repairs it.
        store.register_worker(0, 6380).unwrap();
        let w = store.workers().unwrap();
        let w0 = w.iter().find(|w| w.slot == 0).expect("slot 0 listed");
        assert_eq!(
            (w0.pid, w0.port, w0.commands),
            (std::process::id(), 6380, 0)
        );
        store
            .add_worker_counter(1, WorkerCounter::Commands, 1)
            .unwrap();
    }
    let _ = store.supervisor_pid();
    f.write64(8200, u64::MAX);
    assert_eq!(store.supervisor_pid().unwrap(), None);
}

// ---------- mailbox: order, sizes, wake flag ----------

#[test]
fn layout_mirror_matches() {
    let seg = TempSegment::new("mbox-layout");
    let store = open(&seg);
    let mut h = store.handle().unwrap();
    let f = SegmentFile::open(&seg.path);
    assert_eq!(h.mailbox_max_payload() as u64, f.ring_cap() - MSG_HEADER);
    send(&mut h, 2, &message(1, 0, 1, 13)).unwrap();
    let base = f.mailbox(2);
    assert_eq!(f.read64(base + M_HEAD), 0);
    assert_eq!(f.read64(base + M_TAIL), footprint(13));
    assert_eq!(f.read64(base + M_WAKE), 1);
    assert_eq!(f.read64(base + M_LOCK) as u32, 0, "the lock word is free");
    // The header's length word, then the payload right after the header.
    assert_eq!(f.read64(base + M_RING) as u32, 13);
    let mut b = [0u8; 13];
    f.file
        .read_exact_at(&mut b, base + M_RING + MSG_HEADER)
        .unwrap();
    assert_eq!(b.to_vec(), payload(0, 1, 13));
    take(&mut h, 2).unwrap();
    assert_eq!(f.read64(base + M_HEAD), footprint(13));
    assert_eq!(f.read64(base + M_WAKE), 0);
}

#[test]
fn messages_arrive_in_order_and_whole() {
    let seg = TempSegment::new("mbox-fifo");
    let store = open(&seg);
    let mut a = store.handle().unwrap();
    let mut b = store.handle().unwrap();
    let sent = vec![
        message(1, 0, 10, 0),
        message(2, 5, u64::MAX, 1),
        message(u32::MAX, 31, 0, 7),
        message(4, 2, 42, 8),
        message(5, 2, 43, 9),
    ];
    for (i, m) in sent.iter().enumerate() {
        let h = if i % 2 == 0 { &mut a } else { &mut b };
        assert!(matches!(send(h, 7, m).unwrap(), Sent::Delivered { .. }));
    }
    // Other slots are separate rings.
    assert_eq!(take(&mut a, 6).unwrap(), vec![]);
    assert_eq!(take(&mut a, 7).unwrap(), sent);
    assert_eq!(take(&mut a, 7).unwrap(), vec![]);
    // take appends to what `out` holds.
    send(&mut b, 7, &sent[0]).unwrap();
    let mut out = vec![sent[1].clone()];
    a.mailbox_take(7, &mut out).unwrap();
    assert_eq!(out, vec![sent[1].clone(), sent[0].clone()]);

    assert!(send(&mut a, MAX_WORKERS, &sent[0]).is_err());
    assert!(take(&mut a, MAX_WORKERS).is_err());
    assert!(a.mailbox_reset(MAX_WORKERS).is_err());
}

#[test]
fn the_wake_flag_is_set_by_the_first_send_after_a_take() {
    let seg = TempSegment::new("mbox-wake");
    let store = open(&seg);
    let mut h = store.handle().unwrap();
    let m = message(1, 0, 1, 10);
    assert_eq!(send(&mut h, 0, &m).unwrap(), Sent::Delivered { wake: true });
    assert_eq!(
        send(&mut h, 0, &m).unwrap(),
        Sent::Delivered { wake: false }
    );
    assert_eq!(
        send(&mut h, 0, &m).unwrap(),
        Sent::Delivered { wake: false }
    );
    // Another slot has its own flag.
    assert_eq!(send(&mut h, 1, &m).unwrap(), Sent::Delivered { wake: true });
    assert_eq!(take(&mut h, 0).unwrap().len(), 3);
    assert_eq!(send(&mut h, 0, &m).unwrap(), Sent::Delivered { wake: true });
    assert_eq!(
        send(&mut h, 0, &m).unwrap(),
        Sent::Delivered { wake: false }
    );
    // An empty take clears it too.
    take(&mut h, 0).unwrap();
    take(&mut h, 0).unwrap();
    assert_eq!(send(&mut h, 0, &m).unwrap(), Sent::Delivered { wake: true });
    // A send that finds the ring full is owed no wake-up of its own.
    let max = h.mailbox_max_payload();
    take(&mut h, 0).unwrap();
    assert_eq!(
        send(&mut h, 0, &message(1, 0, 2, max)).unwrap(),
        Sent::Delivered { wake: true }
    );
    assert_eq!(send(&mut h, 0, &m).unwrap(), Sent::Full);
    assert_eq!(take(&mut h, 0).unwrap().len(), 1);
    assert_eq!(send(&mut h, 0, &m).unwrap(), Sent::Delivered { wake: true });
    take(&mut h, 0).unwrap();
    // A reset empties the ring and owes no wake-up.
    send(&mut h, 0, &m).unwrap();
    send(&mut h, 0, &m).unwrap();
    h.mailbox_reset(0).unwrap();
    assert_eq!(take(&mut h, 0).unwrap(), vec![]);
    assert_eq!(send(&mut h, 0, &m).unwrap(), Sent::Delivered { wake: true });
    assert_eq!(take(&mut h, 0).unwrap(), vec![m]);
}

#[test]
fn payload_size_limits() {
    let seg = TempSegment::new("mbox-size");
    let store = open(&seg);
    let mut h = store.handle().unwrap();
    let max = h.mailbox_max_payload();
    let cap = SegmentFile::open(&seg.path).ring_cap();
    assert_eq!(
        footprint(max),
        cap,
        "the largest payload fills the ring exactly"
    );

    assert!(matches!(
        h.mailbox_send(0, 1, 0, 0, &vec![0; max + 1]),
        Err(Error::TooLarge)
    ));
    assert!(matches!(
        h.mailbox_send(0, 1, 0, 0, &vec![0; 1 << 20]),
        Err(Error::TooLarge)
    ));
    // A refused send leaves no trace.
    assert_eq!(take(&mut h, 0).unwrap(), vec![]);

    // Exactly the maximum fits, at every offset of the ring, and then the
    // ring is full even for an empty message.
    for start in [0, 24, 32, 1000, cap as usize - 24, cap as usize - 8] {
        h.mailbox_reset(0).unwrap();
        let pad = start.saturating_sub(24);
        if start > 0 {
            let filler = message(0, 0, 0, pad);
            send(&mut h, 0, &filler).unwrap();
            assert_eq!(take(&mut h, 0).unwrap(), vec![filler]);
        }
        let big = message(3, 1, start as u64, max);
        assert!(matches!(
            send(&mut h, 0, &big).unwrap(),
            Sent::Delivered { .. }
        ));
        assert_eq!(send(&mut h, 0, &message(1, 1, 1, 0)).unwrap(), Sent::Full);
        assert_eq!(take(&mut h, 0).unwrap(), vec![big]);
    }
}

#[test]
fn many_messages_wrap_the_ring() {
    let seg = TempSegment::new("mbox-wrap");
    let store = open(&seg);
    let mut producer = store.handle().unwrap();
    let mut consumer = store.handle().unwrap();
    let mut model = VecDeque::new();
    let mut bytes = 0u64;
    for seq in 0..20_000u64 {
        let m = message(
            (seq % 5) as u32,
            (seq % 3) as u32,
            seq,
            (seq * 131 % 997) as usize,
        );
        match send(&mut producer, 9, &m).unwrap() {
            Sent::Delivered { .. } => {
                bytes += footprint(m.payload.len());
                model.push_back(m);
            }
            Sent::Full => {
                let got = take(&mut consumer, 9).unwrap();
                assert_eq!(got, model.drain(..).collect::<Vec<_>>(), "at seq {seq}");
                assert_eq!(
                    send(&mut producer, 9, &m).unwrap(),
                    Sent::Delivered { wake: true }
                );
                bytes += footprint(m.payload.len());
                model.push_back(m);
            }
        }
        if seq % 7 == 0 {
            let got = take(&mut consumer, 9).unwrap();
            assert_eq!(got, model.drain(..).collect::<Vec<_>>());
        }
    }
    let got = take(&mut consumer, 9).unwrap();
    assert_eq!(got, model.drain(..).collect::<Vec<_>>());
    let f = SegmentFile::open(&seg.path);
    assert!(bytes > 100 * f.ring_cap(), "wrapped only {bytes} bytes");
    assert_eq!(f.read64(f.mailbox(9) + M_TAIL), bytes);
}

#[derive(Clone, Debug)]
enum Op {
    Send { to: u32, kind: u32, len: usize },
    Take { slot: u32 },
    Reset { slot: u32 },
}

fn op(max: usize) -> impl Strategy<Value = Op> {
    let len = prop_oneof![
        6 => 0usize..64,
        3 => 0usize..1500,
        1 => Just(max),
        1 => (max - 40)..=max,
    ];
    prop_oneof![
        8 => (0u32..2, any::<u32>(), len).prop_map(|(to, kind, len)| Op::Send { to, kind, len }),
        2 => (0u32..2).prop_map(|slot| Op::Take { slot }),
        1 => (0u32..2).prop_map(|slot| Op::Reset { slot }),
    ]
}

/// What a mailbox should hold, by the rules in `src/ipc/mailbox.rs`.
#[derive(Default)]
struct Model {
    queue: VecDeque<Message>,
    used: u64,
    wake_owed: bool,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Sends, takes and resets on two mailboxes agree with a `VecDeque` per
    /// mailbox: FIFO order, `Full` exactly when the message does not fit in
    /// what is left of the ring, the wake flag, and recovery after a take.
    #[test]
    fn mailboxes_match_a_queue_model(ops in proptest::collection::vec(op(4008), 1..200)) {
        let seg = TempSegment::new("mbox-model");
        let store = open(&seg);
        let mut h = store.handle().unwrap();
        let max = h.mailbox_max_payload();
        prop_assert_eq!(max, 4008, "the strategy assumes a 4 KiB mailbox");
        let cap = footprint(max);
        let mut models = [Model::default(), Model::default()];
        for (seq, op) in ops.into_iter().enumerate() {
            match op {
                Op::Send { to, kind, len } => {
                    let m = message(kind, 1 - to, seq as u64, len);
                    let model = &mut models[to as usize];
                    let need = footprint(len);
                    let got = send(&mut h, to, &m).unwrap();
                    if model.used + need > cap {
                        prop_assert_eq!(got, Sent::Full);
                    } else {
                        prop_assert_eq!(got, Sent::Delivered { wake: !model.wake_owed });
                        model.wake_owed = true;
                        model.used += need;
                        model.queue.push_back(m);
                    }
                }
                Op::Take { slot } => {
                    let model = &mut models[slot as usize];
                    let got = take(&mut h, slot).unwrap();
                    prop_assert_eq!(got, model.queue.drain(..).collect::<Vec<_>>());
                    model.used = 0;
                    model.wake_owed = false;
                }
                Op::Reset { slot } => {
                    h.mailbox_reset(slot).unwrap();
                    models[slot as usize] = Model::default();
                }
            }
        }
        for slot in 0..2 {
            let got = take(&mut h, slot).unwrap();
            prop_assert_eq!(got, models[slot as usize].queue.drain(..).collect::<Vec<_>>());
        }
    }
}

// ---------- mailbox: concurrency and crashes ----------

/// Checks that `got` holds, per sender, whole messages with consecutive
/// sequence numbers continuing from `next[from]`; advances `next`.
fn check_stream(got: &[Message], next: &mut [u64]) {
    for m in got {
        let from = m.from as usize;
        assert!(from < next.len(), "message from unknown sender {}", m.from);
        assert_eq!(m.request, next[from], "sender {from}: lost or reordered");
        let len = (m.request * 53 % 700) as usize;
        assert_eq!(m.payload, payload(m.from, m.request, len), "torn payload");
        next[from] += 1;
    }
}

#[test]
fn concurrent_producers_lose_nothing_and_keep_their_order() {
    const THREADS: u32 = 4;
    const PER_THREAD: u64 = 3000;
    let seg = TempSegment::new("mbox-mpsc");
    let store = open(&seg);
    let producers: Vec<_> = (0..THREADS)
        .map(|from| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut h = store.handle().unwrap();
                let mut fulls = 0u64;
                for seq in 0..PER_THREAD {
                    let m = message(1, from, seq, (seq * 53 % 700) as usize);
                    while send(&mut h, 0, &m).unwrap() == Sent::Full {
                        fulls += 1;
                        std::thread::yield_now();
                    }
                }
                fulls
            })
        })
        .collect();
    let mut consumer = store.handle().unwrap();
    let mut next = vec![0u64; THREADS as usize];
    with_watchdog(120, "concurrent producers", || {
        while next.iter().any(|&n| n < PER_THREAD) {
            let got = take(&mut consumer, 0).unwrap();
            if got.is_empty() {
                std::thread::yield_now();
            }
            check_stream(&got, &mut next);
        }
    });
    let fulls: u64 = producers.into_iter().map(|p| p.join().unwrap()).sum();
    assert_eq!(take(&mut consumer, 0).unwrap(), vec![]);
    eprintln!(
        "{} messages, {fulls} sends found the ring full",
        THREADS as u64 * PER_THREAD
    );
}

#[test]
fn a_producer_dying_at_any_crash_point_leaves_the_mailbox_usable() {
    // mailbox_send passes three crash points: the lock taken, the message
    // written but not published, and the unlock after publishing.
    let mut k = 0;
    loop {
        assert!(k < 20, "more crash points than expected");
        let seg = TempSegment::new("mbox-crash");
        let store = open(&seg);
        let mut h = store.handle().unwrap();
        let before = message(2, 1, 1, 100);
        send(&mut h, 0, &before).unwrap();
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["child_entry", "--exact", "--nocapture", "--test-threads=1"])
            .env("SHOAL_WORKERS_CHILD", "crash-send")
            .env("SHOAL_SEGMENT", &seg.path)
            .env("SHOAL_CRASH_AT", k.to_string())
            .output()
            .unwrap();
        let completed = String::from_utf8_lossy(&out.stdout).contains("completed");
        if completed {
            assert!(out.status.success(), "crash point {k}: {out:?}");
        } else {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                out.status.signal(),
                Some(6),
                "crash point {k}: not an abort: {out:?}"
            );
        }

        // Either the child's message is there whole, or not at all.
        let theirs = message(9, 4, 1000, 300);
        let got = take(&mut h, 0).unwrap();
        assert_eq!(got[0], before, "crash point {k}");
        assert!(got.len() <= 2, "crash point {k}: {got:?}");
        if let Some(m) = got.get(1) {
            assert_eq!(m, &theirs, "crash point {k}: a partial message");
        }
        if completed {
            assert_eq!(got.len(), 2, "a completed send must be visible");
        }
        // The lock a dead producer held is recovered by the next producer
        // (a fresh handle, or the spinning sender's holder check).
        let after = message(3, 2, 2, 50);
        with_watchdog(30, "send after a crashed producer", || {
            let mut fresh = store.handle().unwrap();
            assert!(matches!(
                send(&mut fresh, 0, &after).unwrap(),
                Sent::Delivered { .. }
            ));
            assert!(matches!(
                send(&mut h, 0, &after).unwrap(),
                Sent::Delivered { .. }
            ));
        });
        assert_eq!(take(&mut h, 0).unwrap(), vec![after.clone(), after]);
        assert_eq!(store::testing::held_locks(&h).unwrap(), Vec::<u64>::new());
        drop(h);
        store.check().unwrap();
        if completed {
            break;
        }
        k += 1;
    }
    assert!(k >= 2, "only {k} crash points before the send completed");
}

#[test]
fn producers_killed_mid_stream_never_show_a_partial_message() {
    let seg = TempSegment::new("mbox-kill");
    let store = open(&seg);
    let mut consumer = store.handle().unwrap();
    // Each round's child continues the sequence of sender 1 where the last
    // one was killed, so every message of the stream must arrive in order.
    let mut next = vec![0u64; 2];
    let started = Instant::now();
    let mut rounds = 0;
    while rounds < 12 || started.elapsed() < Duration::from_secs(2) {
        rounds += 1;
        let mut child = spawn_child(
            "spam-send",
            &seg,
            &[
                ("SHOAL_FROM", "1".into()),
                ("SHOAL_FIRST_SEQ", next[1].to_string()),
            ],
        );
        wait_for_line(&mut child, "ready");
        let until = Instant::now() + Duration::from_millis(5 + rounds * 7 % 40);
        while Instant::now() < until {
            check_stream(&take(&mut consumer, 0).unwrap(), &mut next);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        check_stream(&take(&mut consumer, 0).unwrap(), &mut next);
        // This process can still send: the lock the child may have held is
        // recovered.
        with_watchdog(30, "send after a killed producer", || {
            let m = message(1, 0, next[0], (next[0] * 53 % 700) as usize);
            while send(&mut consumer, 0, &m).unwrap() == Sent::Full {
                check_stream(&take(&mut consumer, 0).unwrap(), &mut next);
            }
        });
        check_stream(&take(&mut consumer, 0).unwrap(), &mut next);
        if rounds > 200 {
            break;
        }
    }
    assert!(next[1] > 0, "the children sent nothing");
    assert_eq!(next[0], rounds);
    drop(consumer);
    store.check().unwrap();
}

// ---------- mailbox: scribbled words ----------

/// A mailbox with three messages of 1000 bytes in it, the last one wrapping
/// around the end of the ring.
fn filled(seg: &TempSegment) -> (Store, Handle, SegmentFile, u64) {
    let store = open(seg);
    let mut h = store.handle().unwrap();
    for i in 0..6 {
        send(&mut h, 0, &message(1, 0, i, 1000)).unwrap();
        if i == 2 {
            take(&mut h, 0).unwrap();
        }
    }
    let f = SegmentFile::open(&seg.path);
    let base = f.mailbox(0);
    (store, h, f, base)
}

/// After a scribble, the mailbox must work again once a take has reported
/// (or swallowed) the damage.
fn usable_again(h: &mut Handle) {
    let _ = take(h, 0);
    let m = message(7, 3, 77, 33);
    match send(h, 0, &m) {
        Ok(Sent::Delivered { .. }) => assert_eq!(take(h, 0).unwrap(), vec![m]),
        other => panic!("mailbox unusable after a take: {other:?}"),
    }
}

#[test]
fn scribbled_ring_words_give_errors() {
    // Each corruption must make take return an error (and drop what is
    // left), never panic, loop or hand out bytes no producer wrote.
    type Scribble = fn(&SegmentFile, u64, u64);
    let cases: [(&str, Scribble); 8] = [
        ("head past tail", |f, base, _| {
            let tail = f.read64(base + M_TAIL);
            f.write64(base + M_HEAD, tail + 8);
        }),
        ("head far behind tail", |f, base, cap| {
            let tail = f.read64(base + M_TAIL);
            f.write64(base + M_HEAD, tail - cap - 8);
        }),
        ("tail far ahead", |f, base, _| {
            f.write64(base + M_TAIL, u64::MAX)
        }),
        ("head at u64::MAX", |f, base, _| {
            f.write64(base + M_HEAD, u64::MAX)
        }),
        ("head just before a small tail modulo 2^64", |f, base, _| {
            f.write64(base + M_HEAD, u64::MAX - 7);
            f.write64(base + M_TAIL, 100);
        }),
        ("length beyond the tail", |f, base, cap| {
            let head = f.read64(base + M_HEAD);
            f.write32(base + M_RING + head % cap, 3 * 1024 + 1);
        }),
        ("length u32::MAX", |f, base, cap| {
            let head = f.read64(base + M_HEAD);
            f.write32(base + M_RING + head % cap, u32::MAX);
        }),
        ("last message's length one word too long", |f, base, cap| {
            // The third message starts two footprints after the head.
            let head = f.read64(base + M_HEAD) + 2 * footprint(1000);
            f.write32(base + M_RING + head % cap, 1000 + 8);
        }),
    ];
    for (what, scribble) in cases {
        let seg = TempSegment::new("mbox-scribble");
        let (_store, mut h, f, base) = filled(&seg);
        scribble(&f, base, f.ring_cap());
        with_watchdog(30, what, || {
            let mut out = Vec::new();
            let res = h.mailbox_take(0, &mut out);
            assert!(matches!(res, Err(Error::Corrupted(_))), "{what}: {res:?}");
            // Messages before the damage may be delivered; none after it.
            for m in &out {
                assert_eq!(m.payload, payload(m.from, m.request, 1000), "{what}");
            }
            if what == "tail far ahead" {
                // Positions that cannot grow need the owner's reset.
                let res = send(&mut h, 0, &message(1, 0, 1, 10));
                assert!(matches!(res, Err(Error::Corrupted(_))), "{what}: {res:?}");
                h.mailbox_reset(0).unwrap();
            }
            usable_again(&mut h);
        });
    }
}

/// A tail so close to `u64::MAX` that the next message's end overflows.
#[test]
fn a_tail_near_the_end_of_u64_is_an_error_not_an_overflow() {
    let seg = TempSegment::new("mbox-overflow");
    let (_store, mut h, f, base) = filled(&seg);
    take(&mut h, 0).unwrap();
    f.write64(base + M_HEAD, u64::MAX - 16);
    f.write64(base + M_TAIL, u64::MAX - 16);
    with_watchdog(30, "tail near u64::MAX", || {
        let res = send(&mut h, 0, &message(1, 0, 1, 100));
        assert!(matches!(res, Err(Error::Corrupted(_))), "{res:?}");
        assert_eq!(take(&mut h, 0).unwrap(), vec![]);
        // The slot's new owner resets it, which makes it usable again.
        h.mailbox_reset(0).unwrap();
        usable_again(&mut h);
    });
}

#[test]
fn a_lock_word_naming_no_context_is_an_error_not_a_hang() {
    let seg = TempSegment::new("mbox-lock");
    let (_store, mut h, f, base) = filled(&seg);
    f.write32(base + M_LOCK, u32::MAX);
    with_watchdog(30, "scribbled lock word", || {
        let res = send(&mut h, 0, &message(1, 0, 1, 10));
        assert!(matches!(res, Err(Error::Corrupted(_))), "{res:?}");
        // The consumer does not need the lock.
        assert_eq!(take(&mut h, 0).unwrap().len(), 3);
    });
    assert_eq!(store::testing::held_locks(&h).unwrap(), Vec::<u64>::new());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Arbitrary values in the head, tail and wake words and anywhere in the
    /// ring: take and send return (a value or an error), never panic or
    /// hang, and a take makes the mailbox usable again.
    #[test]
    fn scribbled_mailboxes_never_panic_or_hang(
        writes in proptest::collection::vec((0u64..4096, prop_oneof![
            any::<u64>(),
            Just(0u64),
            Just(u64::MAX),
            0u64..8192,
            (0u64..64).prop_map(|n| 1000 + n),
        ]), 1..8)
    ) {
        let seg = TempSegment::new("mbox-scribble-prop");
        let (_store, mut h, f, base) = filled(&seg);
        for &(pos, word) in &writes {
            // Skip the lock word: a lock word naming a live context is a
            // hang by design (see the lock's own tests).
            let off = (8 + pos % (f.ring_cap() + M_RING - 8)) & !7;
            f.write64(base + off.max(8), word);
        }
        with_watchdog(30, "scribbled mailbox", || {
            let _ = take(&mut h, 0);
            let _ = send(&mut h, 0, &message(1, 0, 9, 10));
            let _ = take(&mut h, 0);
            // A scribbled tail near u64::MAX needs the owner's reset.
            h.mailbox_reset(0).unwrap();
            usable_again(&mut h);
        });
    }
}
