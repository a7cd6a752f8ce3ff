//! Streams cut at every crash point: XADD with trimming, XACK, XCLAIM and
//! XGROUP DESTROY on a paged stream with a group, consumers and pending
//! entries. A child process runs the write with `testing::crash_after(k)`
//! for k = 0, 1, 2, … until it completes; after each crash a fresh handle
//! recovers the dead context, the segment must check out and the stream
//! must read as before the write or after it. With the log on, replaying
//! the ring must give the recovered stream.

mod common;

use common::TempSegment;
use store::*;

const KEY: &[u8] = b"S";
const GROUP: &[u8] = b"g";

fn id(ms: u64) -> StreamId {
    StreamId { ms, seq: 0 }
}

const LIMITS: NodeLimits = NodeLimits {
    max_bytes: 4096,
    max_entries: 100,
};

/// A stream of 1000 entries (paged), group `g` with consumers alice and
/// bob, alice owning entries 1..=50.
fn setup(h: &mut Handle) {
    // Twenty entries a write, as XADDs would come: the stream turns paged
    // on the way, and every record stays small.
    for chunk in 0..50 {
        h.write_collection::<Stream, _>(0, KEY, true, |s| {
            for i in chunk * 20 + 1..=chunk * 20 + 20 {
                let v = format!("value-{i:05}");
                s.append(id(i), &[b"field", v.as_bytes()], LIMITS)?;
            }
            Ok(())
        })
        .unwrap();
    }
    h.write_collection::<Stream, _>(0, KEY, true, |s| {
        s.put_group(&StreamGroup {
            name: GROUP.to_vec(),
            last_id: id(50),
            entries_read: Some(50),
            pending: 0,
        })?;
        for name in [&b"alice"[..], b"bob"] {
            s.put_consumer(
                GROUP,
                &StreamConsumer {
                    name: name.to_vec(),
                    seen_ms: 7,
                    pending: 0,
                },
            )?;
        }
        for i in 1..=50 {
            s.put_pending(
                GROUP,
                &Pending {
                    id: id(i),
                    consumer: b"alice".to_vec(),
                    delivery_ms: 9,
                    deliveries: 1,
                },
            )?;
        }
        Ok(())
    })
    .unwrap();
}

const OPS: &[&str] = &["add-trim", "ack", "claim", "destroy"];

fn run_op(h: &mut Handle, op: &str) {
    h.write_collection::<Stream, _>(0, KEY, false, |s| {
        match op {
            "add-trim" => {
                s.append(id(1001), &[b"field", b"new"], LIMITS)?;
                s.trim(Trim::MaxLen(500), false, 0)?;
            }
            "ack" => {
                s.remove_pending(GROUP, id(5))?;
            }
            "claim" => {
                s.put_pending(
                    GROUP,
                    &Pending {
                        id: id(6),
                        consumer: b"bob".to_vec(),
                        delivery_ms: 11,
                        deliveries: 2,
                    },
                )?;
            }
            "destroy" => {
                s.remove_group(GROUP)?;
            }
            other => panic!("unknown op {other}"),
        }
        Ok(())
    })
    .unwrap();
}

/// Everything the stream holds, as text.
fn state(h: &mut Handle) -> Option<String> {
    h.read_collection::<Stream, _>(0, KEY, |s| {
        let entries = s.range(StreamId::MIN, StreamId::MAX, 0, false)?;
        let mut groups = Vec::new();
        for g in s.groups()? {
            let consumers = s.consumers(&g.name)?;
            let pending = s.pending_range(&g.name, None, StreamId::MIN, StreamId::MAX, 0)?;
            let mut owned = Vec::new();
            for c in &consumers {
                owned.push(s.pending_range(
                    &g.name,
                    Some(&c.name),
                    StreamId::MIN,
                    StreamId::MAX,
                    0,
                )?);
            }
            groups.push(format!("{g:?} {consumers:?} {pending:?} {owned:?}"));
        }
        Ok(format!(
            "{:?} nodes={} {entries:?} {groups:?}",
            s.meta(),
            s.node_count()?
        ))
    })
    .unwrap()
}

/// The stream before and after `op`, each computed in a segment of its own.
fn expected(op: &str) -> (Option<String>, Option<String>) {
    let seg = TempSegment::new("streammodel");
    let store = Store::open(&seg.options(16 << 20)).unwrap();
    let mut h = store.handle().unwrap();
    setup(&mut h);
    let before = state(&mut h);
    run_op(&mut h, op);
    (before, state(&mut h))
}

/// The body of the child process.
#[test]
fn stream_crash_child_entry() {
    common::crash_child_body(run_op);
}

fn crash_once(op: &str, k: u64, log: bool) -> (TempSegment, Store, bool) {
    let tag = if log { "streamcrashlog" } else { "streamcrash" };
    let (seg, store) = common::crash_segment(tag, 16 << 20, log, setup);
    let (out, completed) = common::run_crash_child(&seg, "stream_crash_child_entry", op, k);
    assert!(
        completed || !out.status.success(),
        "{op}: child neither completed nor crashed: {out:?}"
    );
    (seg, store, completed)
}

/// Crash points tried: every one for the small writes; every 7th for the
/// trim, whose thousands of points repeat the same steps once per node (7
/// is prime to that period, so each step is still hit).
fn stride(op: &str) -> u64 {
    if op == "add-trim" {
        7
    } else {
        1
    }
}

#[test]
fn stream_writes_are_all_or_nothing_at_every_crash_point() {
    for op in OPS {
        let (before, after) = expected(op);
        assert_ne!(before, after, "{op} changes nothing");
        let mut k = 0u64;
        loop {
            assert!(k < 20_000, "{op}: more than 20000 crash points?");
            let log = k % 2 == 1;
            let (_seg, store, completed) = crash_once(op, k, log);
            let mut h = store.handle().unwrap();
            let got = state(&mut h);
            assert!(
                got == before || got == after,
                "{op}, crash point {k}: the stream is half-written"
            );
            if log {
                // The ring, replayed into an empty store, gives the same.
                let frames = common::ring_frames(&h, store::log::FIRST_LSN);
                let fresh_seg = TempSegment::new("streamreplay");
                let mut fresh_opts = fresh_seg.options(16 << 20);
                fresh_opts.contexts = 8;
                let fresh = Store::open(&fresh_opts).unwrap();
                let mut r = fresh.handle().unwrap();
                common::replay(&mut r, &frames);
                let replayed = state(&mut r);
                if replayed != got {
                    let (a, b) = (
                        replayed.unwrap_or_default(),
                        got.clone().unwrap_or_default(),
                    );
                    let at = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
                    let from = at.saturating_sub(200);
                    panic!(
                        "{op}, crash point {k}: store and log disagree\nreplayed …{}\nstore    …{}",
                        &a[from..(at + 300).min(a.len())],
                        &b[from..(at + 300).min(b.len())]
                    );
                }
            }
            drop(h);
            store
                .check()
                .unwrap_or_else(|e| panic!("{op}, crash point {k}: {e}"));
            if completed {
                break;
            }
            k += stride(op);
        }
        eprintln!("{op}: {k} crash points, every {} tried", stride(op));
    }
}
