//! Crash at every point of every write: for each operation, a child process
//! runs it with `testing::crash_after(k)` for k = 0, 1, 2, … until it runs to
//! the end. After each crash a fresh handle recovers the dead context; the
//! segment must be exactly consistent and the keys must show the operation
//! either not done at all or done completely (docs/design.md I5–I10).

mod common;

use common::TempSegment;
use store::*;

const OLD_A: &[u8] = b"the old value of a, forty bytes long....";
const OLD_B: &[u8] = b"old b";

/// The state every run starts from.
fn setup(h: &mut Handle) {
    let opts = SetOptions::default();
    h.set(0, b"a", OLD_A, &opts).unwrap();
    h.set(0, b"b", OLD_B, &opts).unwrap();
    h.set(0, b"n", b"41", &opts).unwrap();
    // Two appends leave "s" with spare room, so the next append is in place.
    h.append(0, b"s", b"x").unwrap();
    h.append(0, b"s", b"y").unwrap();
    h.set(0, b"t", b"no ttl yet", &opts).unwrap();
    h.write_collection::<List, _>(0, b"L", true, |l| {
        for item in [&b"a"[..], b"b", b"c"] {
            l.push_back(item)?;
        }
        Ok(())
    })
    .unwrap();
    h.write_collection::<ZSet, _>(0, b"Z", true, |z| z.insert(b"m", 1.0))
        .unwrap();
    // Two collections large enough to be paged (trees of several nodes).
    h.write_collection::<List, _>(0, b"BIG", true, |l| {
        for item in big_items() {
            l.push_back(&item)?;
        }
        Ok(())
    })
    .unwrap();
    // A paged list whose end leaves were written with room (one push at
    // each end after the build): its next pushes go in place.
    h.write_collection::<List, _>(0, b"BIGQ", true, |l| {
        for item in big_items() {
            l.push_back(&item)?;
        }
        Ok(())
    })
    .unwrap();
    h.write_collection::<List, _>(0, b"BIGQ", false, |l| l.push_front(b"h0"))
        .unwrap();
    h.write_collection::<List, _>(0, b"BIGQ", false, |l| l.push_back(b"t0"))
        .unwrap();
    h.write_collection::<ZSet, _>(0, b"BZ", true, |z| {
        for (i, item) in big_items().iter().enumerate() {
            z.insert(item, (i % 7) as f64)?;
        }
        Ok(())
    })
    .unwrap();
}

fn big_items() -> Vec<Vec<u8>> {
    (0..200)
        .map(|i| format!("big-item-{i:04}-{}", "x".repeat(16)).into_bytes())
        .collect()
}

/// BIGQ as set up.
fn bigq_items() -> Vec<Vec<u8>> {
    [vec![b"h0".to_vec()], big_items(), vec![b"t0".to_vec()]].concat()
}

/// Pushes of one write that fill the head leaf (in place, then into a new
/// leaf by copying), with two at the tail in between ('b…' go there).
fn many_pushed() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = (0..40)
        .map(|i| format!("front-{i:02}-{}", "y".repeat(16)).into_bytes())
        .collect();
    out.push(b"back-1".to_vec());
    out.push(b"back-2".to_vec());
    out.extend((40..80).map(|i| format!("front-{i:02}-{}", "y".repeat(16)).into_bytes()));
    out
}

fn big_list(h: &mut Handle, db: u8, key: &[u8]) -> Option<Vec<Vec<u8>>> {
    h.read_collection::<List, _>(db, key, |l| l.range(0, l.len()))
        .unwrap()
}

fn big_zset(h: &mut Handle) -> Option<Vec<(Vec<u8>, f64)>> {
    h.read_collection::<ZSet, _>(0, b"BZ", |z| z.range(0, z.len()))
        .unwrap()
}

fn big_zset_model(extra: Option<(&[u8], f64)>) -> Vec<(Vec<u8>, f64)> {
    let mut all: Vec<(Vec<u8>, f64)> = big_items()
        .into_iter()
        .enumerate()
        .map(|(i, m)| (m, (i % 7) as f64))
        .collect();
    if let Some((m, s)) = extra {
        all.push((m.to_vec(), s));
    }
    all.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    all
}

/// BZ as set up, with the members of these indexes at these scores.
fn big_zset_moved(moves: &[(usize, f64)]) -> Vec<(Vec<u8>, f64)> {
    let items = big_items();
    let mut all = big_zset_model(None);
    for (m, s) in all.iter_mut() {
        if let Some((_, to)) = moves.iter().find(|(i, _)| &items[*i] == m) {
            *s = *to;
        }
    }
    all.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    all
}

/// Whether BZ's member tree gives each member the score its order does.
fn big_zset_scores_agree(h: &mut Handle) -> bool {
    h.read_collection::<ZSet, _>(0, b"BZ", |z| {
        let all = z.range(0, z.len())?;
        for (m, s) in &all {
            if z.score(m)? != Some(*s) {
                return Ok(false);
            }
        }
        Ok(true)
    })
    .unwrap()
        == Some(true)
}

fn list(h: &mut Handle) -> Option<Vec<Vec<u8>>> {
    h.read_collection::<List, _>(0, b"L", |l| l.range(0, l.len()))
        .unwrap()
}

fn zset(h: &mut Handle) -> Option<Vec<(Vec<u8>, f64)>> {
    h.read_collection::<ZSet, _>(0, b"Z", |z| z.range(0, z.len()))
        .unwrap()
}

/// The operations under test, by name.
const OPS: &[&str] = &[
    "set-new",
    "set-over",
    "set-same-size",
    "del",
    "incr",
    "append",
    "append-grow",
    "rename",
    "copy",
    "move",
    "expire",
    "setrange",
    "getdel",
    "flushdb",
    "swapdb",
    "list-push",
    "list-pop-last",
    "zset-add",
    "hash-store",
    "big-list-push",
    "bigq-lpush",
    "bigq-rpush",
    "bigq-push-many",
    "bigq-pops",
    "big-list-trim",
    "big-list-shrink",
    "big-zset-add",
    "big-zset-move",
    "big-zset-moves",
    "big-zset-remove-range",
    "big-del",
    "big-unlink",
    "big-copy",
    "big-rename",
    "big-overwrite",
];

fn run_op(h: &mut Handle, op: &str) {
    let opts = SetOptions::default();
    match op {
        "set-new" => drop(h.set(0, b"c", b"brand new", &opts).unwrap()),
        "set-over" => drop(h.set(0, b"a", &[b'N'; 300], &opts).unwrap()),
        "set-same-size" => drop(h.set(0, b"a", &[b'S'; 40], &opts).unwrap()),
        "del" => drop(h.delete(0, b"a").unwrap()),
        "incr" => drop(h.incr_by(0, b"n", 1).unwrap()),
        "append" => drop(h.append(0, b"s", b"z").unwrap()),
        "append-grow" => drop(h.append(0, b"a", &[b'G'; 100]).unwrap()),
        "rename" => drop(h.rename(0, b"a", b"b", false).unwrap()),
        "copy" => drop(h.copy(0, b"a", 2, b"c", true).unwrap()),
        "move" => drop(h.move_key(0, b"a", 1).unwrap()),
        "expire" => drop(
            h.pexpire(0, b"t", 100_000, ExpireCondition::Always)
                .unwrap(),
        ),
        "setrange" => drop(h.set_range(0, b"a", 2, b"ZZ").unwrap()),
        "getdel" => drop(h.get_del(0, b"a").unwrap()),
        "flushdb" => h.flushdb(0).unwrap(),
        "swapdb" => h.swap_db(0, 3).unwrap(),
        "list-push" => drop(
            h.write_collection::<List, _>(0, b"L", true, |l| l.push_front(b"new"))
                .unwrap(),
        ),
        "list-pop-last" => drop(
            h.write_collection::<List, _>(0, b"L", false, |l| l.retain_range(1, 1))
                .unwrap(),
        ),
        "zset-add" => drop(
            h.write_collection::<ZSet, _>(0, b"Z", true, |z| z.insert(b"n", 0.5))
                .unwrap(),
        ),
        "hash-store" => {
            let mut hash = Hash::empty();
            hash.insert(b"f", b"v").unwrap();
            h.store_collection(0, b"a", hash).unwrap()
        }
        "big-list-push" => drop(
            h.write_collection::<List, _>(0, b"BIG", false, |l| l.push_front(b"new"))
                .unwrap(),
        ),
        "bigq-lpush" => drop(
            h.write_collection::<List, _>(0, b"BIGQ", false, |l| l.push_front(b"new"))
                .unwrap(),
        ),
        "bigq-rpush" => drop(
            h.write_collection::<List, _>(0, b"BIGQ", false, |l| {
                l.push_back(b"new")?;
                l.push_back(b"new2")
            })
            .unwrap(),
        ),
        "bigq-push-many" => drop(
            h.write_collection::<List, _>(0, b"BIGQ", false, |l| {
                for item in many_pushed() {
                    match item.first() {
                        Some(b'b') => l.push_back(&item)?,
                        _ => l.push_front(&item)?,
                    }
                }
                Ok(())
            })
            .unwrap(),
        ),
        "bigq-pops" => drop(
            h.write_collection::<List, _>(0, b"BIGQ", false, |l| {
                l.pop_front()?;
                l.pop_front()?;
                l.pop_back()
            })
            .unwrap(),
        ),
        "big-list-trim" => drop(
            h.write_collection::<List, _>(0, b"BIG", false, |l| l.retain_range(100, 300))
                .unwrap(),
        ),
        "big-list-shrink" => drop(
            h.write_collection::<List, _>(0, b"BIG", false, |l| l.retain_range(0, 10))
                .unwrap(),
        ),
        "big-zset-add" => drop(
            h.write_collection::<ZSet, _>(0, b"BZ", false, |z| z.insert(b"new", 3.5))
                .unwrap(),
        ),
        // Score changes: the member tree's value is set in place.
        "big-zset-move" => drop(
            h.write_collection::<ZSet, _>(0, b"BZ", false, |z| z.insert(&big_items()[5], 9.5))
                .unwrap(),
        ),
        // A second change to the member tree in the same write makes the
        // first one by copying.
        "big-zset-moves" => drop(
            h.write_collection::<ZSet, _>(0, b"BZ", false, |z| {
                let items = big_items();
                z.insert(&items[5], 9.5)?;
                z.insert(&items[40], -1.0)?;
                z.insert(&items[5], 8.5)
            })
            .unwrap(),
        ),
        "big-zset-remove-range" => drop(
            h.write_collection::<ZSet, _>(0, b"BZ", false, |z| z.remove_range(10, 170))
                .unwrap(),
        ),
        "big-del" => drop(h.delete(0, b"BIG").unwrap()),
        "big-unlink" => {
            // Detached in the delete, freed afterwards a few blocks a step.
            h.set_lazy_free(true);
            assert!(h.delete(0, b"BIG").unwrap());
            h.set_lazy_free(false);
            while h.free_lazily(7).unwrap() {}
        }
        "big-copy" => drop(h.copy(0, b"BIG", 2, b"c", true).unwrap()),
        "big-rename" => drop(h.rename(0, b"BIG", b"BIG2", false).unwrap()),
        "big-overwrite" => {
            let mut z = ZSet::empty();
            for (i, item) in big_items().iter().enumerate() {
                z.insert(item, i as f64).unwrap();
            }
            h.store_collection(0, b"BIG", z).unwrap()
        }
        other => panic!("unknown op {other}"),
    }
}

/// Whether the keys show `op` not done or fully done.
fn before_or_after(h: &mut Handle, op: &str) -> Result<(), String> {
    // A key that became a collection reads as no string.
    let get = |h: &mut Handle, db: u8, k: &[u8]| match h.get(db, k) {
        Err(Error::WrongType) => None,
        other => other.unwrap(),
    };
    let a = get(h, 0, b"a");
    let old_a = Some(OLD_A.to_vec());
    let ok = match op {
        "set-new" => [None, Some(b"brand new".to_vec())].contains(&get(h, 0, b"c")),
        "set-over" => a == old_a || a == Some(vec![b'N'; 300]),
        "set-same-size" => a == old_a || a == Some(vec![b'S'; 40]),
        "del" | "getdel" => a == old_a || a.is_none(),
        "incr" => [Some(b"41".to_vec()), Some(b"42".to_vec())].contains(&get(h, 0, b"n")),
        "append" => [Some(b"xy".to_vec()), Some(b"xyz".to_vec())].contains(&get(h, 0, b"s")),
        "append-grow" => a == old_a || a == Some([OLD_A, &[b'G'; 100][..]].concat()),
        "rename" => {
            let b = get(h, 0, b"b");
            (a == old_a && b == Some(OLD_B.to_vec())) || (a.is_none() && b == old_a)
        }
        "copy" => a == old_a && [None, old_a.clone()].contains(&get(h, 2, b"c")),
        "move" => {
            let moved = get(h, 1, b"a");
            (a == old_a && moved.is_none()) || (a.is_none() && moved == old_a)
        }
        "expire" => {
            let ttl = h.ttl(0, b"t").unwrap();
            ttl == Ttl::Persistent || matches!(ttl, Ttl::Ms(ms) if ms > 90_000)
        }
        "setrange" => a == old_a || a == Some([&OLD_A[..2], b"ZZ", &OLD_A[4..]].concat()),
        // FLUSHDB removes key by key (as it may: no reader sees a torn key);
        // each key is either still there, whole, or gone.
        "flushdb" => a.is_none() || a == old_a,
        // SWAPDB is one committed word: db 0 and db 3 swapped whole, or not.
        "swapdb" => {
            let in3 = get(h, 3, b"a");
            let sizes = (h.dbsize(0).unwrap(), h.dbsize(3).unwrap());
            (a == old_a && in3.is_none() && sizes == (10, 0))
                || (a.is_none() && in3 == old_a && sizes == (0, 10))
        }
        "list-push" | "list-pop-last" => {
            let before: Vec<Vec<u8>> = vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()];
            let after = if op == "list-push" {
                Some([vec![b"new".to_vec()], before.clone()].concat())
            } else {
                None
            };
            let got = list(h);
            got == Some(before) || got == after
        }
        "zset-add" => {
            let got = zset(h);
            got == Some(vec![(b"m".to_vec(), 1.0)])
                || got == Some(vec![(b"n".to_vec(), 0.5), (b"m".to_vec(), 1.0)])
        }
        "hash-store" => {
            let stored = matches!(
                h.read_collection::<Hash, _>(0, b"a", |x| x.entries()),
                Ok(Some(e)) if e == vec![(b"f".to_vec(), b"v".to_vec())]
            );
            a == old_a || stored
        }
        "big-list-push" => {
            let got = big_list(h, 0, b"BIG");
            got == Some(big_items()) || got == Some([vec![b"new".to_vec()], big_items()].concat())
        }
        "bigq-lpush" | "bigq-rpush" | "bigq-push-many" | "bigq-pops" => {
            let got = big_list(h, 0, b"BIGQ");
            let mut after: std::collections::VecDeque<Vec<u8>> = bigq_items().into();
            match op {
                "bigq-pops" => {
                    after.pop_front();
                    after.pop_front();
                    after.pop_back();
                }
                "bigq-lpush" => after.push_front(b"new".to_vec()),
                "bigq-rpush" => after.extend([b"new".to_vec(), b"new2".to_vec()]),
                _ => {
                    for item in many_pushed() {
                        match item.first() {
                            Some(b'b') => after.push_back(item),
                            _ => after.push_front(item),
                        }
                    }
                }
            }
            got == Some(bigq_items()) || got == Some(after.into_iter().collect())
        }
        "big-list-trim" | "big-list-shrink" => {
            let got = big_list(h, 0, b"BIG");
            let (from, to) = if op == "big-list-trim" {
                (100, 200)
            } else {
                (0, 10)
            };
            got == Some(big_items()) || got == Some(big_items()[from..to].to_vec())
        }
        "big-zset-add" => {
            let got = big_zset(h);
            got == Some(big_zset_model(None)) || got == Some(big_zset_model(Some((b"new", 3.5))))
        }
        "big-zset-move" => {
            let got = big_zset(h);
            big_zset_scores_agree(h)
                && (got == Some(big_zset_model(None)) || got == Some(big_zset_moved(&[(5, 9.5)])))
        }
        "big-zset-moves" => {
            let got = big_zset(h);
            big_zset_scores_agree(h)
                && (got == Some(big_zset_model(None))
                    || got == Some(big_zset_moved(&[(5, 8.5), (40, -1.0)])))
        }
        "big-zset-remove-range" => {
            let got = big_zset(h);
            let all = big_zset_model(None);
            let cut = [&all[..10], &all[170..]].concat();
            got == Some(all) || got == Some(cut)
        }
        "big-del" | "big-unlink" => [None, Some(big_items())].contains(&big_list(h, 0, b"BIG")),
        "big-copy" => {
            big_list(h, 0, b"BIG") == Some(big_items())
                && [None, Some(big_items())].contains(&big_list(h, 2, b"c"))
        }
        "big-rename" => {
            let (old, new) = (big_list(h, 0, b"BIG"), big_list(h, 0, b"BIG2"));
            (old == Some(big_items()) && new.is_none())
                || (old.is_none() && new == Some(big_items()))
        }
        "big-overwrite" => {
            let list = h.read_collection::<List, _>(0, b"BIG", |l| Ok(l.len()));
            let zset = h.read_collection::<ZSet, _>(0, b"BIG", |z| Ok(z.len()));
            matches!(list, Ok(Some(200))) || matches!(zset, Ok(Some(200)))
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{op}: keys show a half-done write (a = {a:?})"))
    }
}

/// Which crash points of `op` are tried: every one, except for the
/// operations that free or build whole trees, whose thousands of points
/// repeat the same few steps once per node; a stride prime to that period
/// still lands on each step of it.
fn stride(op: &str) -> u64 {
    if op.starts_with("big-") || op == "flushdb" {
        3
    } else {
        1
    }
}

/// The body of the child process.
#[test]
fn crash_child_entry() {
    common::crash_child_body(run_op);
}

/// A fresh segment set up (with the log on if `log`), and a child process
/// that runs `op` until its `k`-th crash point: the segment, the store, the
/// child's output and whether it ran to the end.
fn crash_once(op: &str, k: u64, log: bool) -> (TempSegment, Store, std::process::Output, bool) {
    let (seg, store) = prepared(log);
    let (out, completed) = crash_child(&seg, op, k);
    (seg, store, out, completed)
}

/// A fresh segment set up, with the log on if `log`.
fn prepared(log: bool) -> (TempSegment, Store) {
    common::crash_segment(
        if log { "crashlog" } else { "crashpoint" },
        2 << 20,
        log,
        setup,
    )
}

/// Runs `op` in a child process on `seg` until its `k`-th crash point: its
/// output and whether it ran to the end.
fn crash_child(seg: &TempSegment, op: &str, k: u64) -> (std::process::Output, bool) {
    common::run_crash_child(seg, "crash_child_entry", op, k)
}

#[test]
fn every_write_is_all_or_nothing_at_every_crash_point() {
    let mut total_crashes = 0;
    for op in OPS {
        let mut k = 0u64;
        loop {
            assert!(k < 3000, "{op}: more than 3000 crash points?");
            let (_seg, store, out, completed) = crash_once(op, k, false);
            // Recovery happens when this fresh handle attaches.
            let mut h = store.handle().unwrap();
            before_or_after(&mut h, op).unwrap_or_else(|e| panic!("crash point {k}: {e}"));
            drop(h);
            store.check().unwrap_or_else(|e| {
                let mut h = store.handle().unwrap();
                panic!(
                    "{op}, crash point {k}: {e}\n{}\nBZ {:?} BIG {:?} dbsize {:?}",
                    String::from_utf8_lossy(&out.stderr),
                    h.key_type(0, b"BZ"),
                    h.key_type(0, b"BIG"),
                    h.dbsize(0)
                )
            });
            if completed {
                assert!(out.status.success(), "{op}: child failed: {:?}", out);
                break;
            }
            assert!(
                !out.status.success(),
                "{op}: child neither completed nor crashed"
            );
            total_crashes += 1;
            k += stride(op);
        }
        assert!(k > 0, "{op} passed no crash point");
        eprintln!("{op}: {k} crash points, every {} tried", stride(op));
    }
    eprintln!(
        "crash points exercised: {total_crashes} over {} operations",
        OPS.len()
    );
}

/// Replays every frame of the ring into a fresh store and dumps it.
fn replay_ring(h: &mut Handle) -> Vec<(u8, Vec<u8>, String)> {
    let frames = common::ring_frames(h, store::log::FIRST_LSN);
    let seg = TempSegment::new("crashreplay");
    let mut opts = seg.options(2 << 20);
    opts.contexts = 8;
    let fresh = Store::open(&opts).unwrap();
    let mut r = fresh.handle().unwrap();
    common::replay(&mut r, &frames);
    common::dump_all(&mut r)
}

/// With the log on, a crash anywhere in a write leaves the log agreeing with
/// the store once the dead context is recovered: replaying every frame into
/// an empty store gives exactly the recovered store (docs/design.md I16: frames of
/// a rolled-back write are voided, frames of a committed one completed).
#[test]
fn the_log_agrees_with_the_store_after_a_crash_at_every_point() {
    for op in OPS {
        let mut k = 0u64;
        loop {
            assert!(k < 3000, "{op}: more than 3000 crash points?");
            let (_seg, store, _, completed) = crash_once(op, k, true);
            let mut h = store.handle().unwrap();
            before_or_after(&mut h, op).unwrap_or_else(|e| panic!("crash point {k}: {e}"));
            let live = common::dump_all(&mut h);
            let replayed = replay_ring(&mut h);
            assert_eq!(
                live, replayed,
                "{op}, crash point {k}: store and log disagree"
            );
            if completed {
                break;
            }
            k += stride(op);
        }
    }
}

/// A writer that was attached before another process died in the middle of
/// a logged write (holding the log's reserve lock, at some of its crash
/// points) goes on writing without waiting for anyone to recover the dead
/// context: it takes the lock over and settles the dead claim. Once the
/// dead context is recovered, the log still agrees with the store (no hole
/// the log writer would wait at forever, nothing applied twice).
#[test]
fn a_live_writer_gets_past_a_dead_claim_at_every_point() {
    let op = "set-new";
    let mut k = 0u64;
    loop {
        assert!(k < 3000, "{op}: more than 3000 crash points?");
        let (seg, store) = prepared(true);
        let mut live = store.handle().unwrap();
        let (_, completed) = crash_child(&seg, op, k);
        drop(
            live.set(
                0,
                b"bystander",
                b"written past the dead claim",
                &SetOptions::default(),
            )
            .unwrap(),
        );
        drop(live);
        // Recovery of the dead context happens when this handle attaches.
        let mut h = store.handle().unwrap();
        before_or_after(&mut h, op).unwrap_or_else(|e| panic!("crash point {k}: {e}"));
        assert_eq!(
            h.get(0, b"bystander").unwrap().as_deref(),
            Some(&b"written past the dead claim"[..]),
            "crash point {k}"
        );
        let dumped = common::dump_all(&mut h);
        let replayed = replay_ring(&mut h);
        assert_eq!(
            dumped, replayed,
            "{op}, crash point {k}: store and log disagree"
        );
        if completed {
            break;
        }
        k += 1;
    }
}
