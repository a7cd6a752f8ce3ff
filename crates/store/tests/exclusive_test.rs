//! Exclusive sections (docs/design.md I13) and what WATCH builds on: key
//! versions and the flush epoch. The holder works as usual inside; no other
//! thread or process ever sees half of a section; waiters sleep rather than
//! spin; a holder killed inside is recovered with the generation even.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{put, spawn_child, wait_for_line, TempSegment};
use store::*;

const MB: u64 = 1 << 20;

fn num(h: &mut Handle, key: &[u8]) -> u64 {
    h.get(0, key)
        .unwrap()
        .map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap())
}

fn child_store() -> Store {
    let path = std::env::var("SHOAL_SEGMENT").unwrap();
    Store::open(&OpenOptions {
        location: Location::Path(path.into()),
        create: false,
        ..OpenOptions::default()
    })
    .expect("child attach")
}

/// Writes `x = i` then `y = i` in one exclusive section, for i in 1..=n.
fn write_pairs(h: &mut Handle, n: u64) {
    for i in 1..=n {
        h.exclusive(|h| {
            let v = i.to_string();
            h.set(0, b"x", v.as_bytes(), &SetOptions::default())?;
            h.set(0, b"y", v.as_bytes(), &SetOptions::default())?;
            Ok(())
        })
        .unwrap();
    }
}

/// Reads `x` then `y` until `x` reaches `n`. Outside a section `y` is never
/// behind `x`: had a reader run between the two writes it would see `x = i`
/// and `y = i - 1`.
fn check_pairs(h: &mut Handle, n: u64) -> u64 {
    let mut reads = 0;
    loop {
        let x = num(h, b"x");
        let y = num(h, b"y");
        assert!(y >= x, "saw x = {x} without its y (y = {y})");
        reads += 1;
        if x == n {
            return reads;
        }
    }
}

/// Not a test of its own: the body of the child processes.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var("SHOAL_CHILD") else {
        return;
    };
    let store = child_store();
    let mut h = store.handle().unwrap();
    match role.as_str() {
        "pairs" => {
            let n: u64 = std::env::var("SHOAL_N").unwrap().parse().unwrap();
            write_pairs(&mut h, n);
            println!("done");
        }
        "die-inside" => {
            h.exclusive(|h| {
                h.set(0, b"x", b"1", &SetOptions::default())?;
                println!("inside");
                // Killed here, holding the map lock with the generation odd.
                loop {
                    thread::sleep(Duration::from_millis(100));
                }
            })
            .unwrap()
        }
        "crash" => {
            let k: u64 = std::env::var("SHOAL_CRASH_AT").unwrap().parse().unwrap();
            store::testing::crash_after(&mut h, k);
            h.exclusive(|h| {
                h.set(0, b"a", b"new", &SetOptions::default())?;
                h.swap_db(0, 1)?;
                h.delete(0, b"b")?;
                Ok(())
            })
            .unwrap();
            drop(h);
            println!("completed");
        }
        other => panic!("unknown child role {other}"),
    }
}

#[test]
fn the_holder_works_as_usual_inside() {
    let seg = TempSegment::new("excl-holder");
    let store = seg.open(16 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"a", b"1");
    put(&mut h, 0, b"doomed", b"x");
    let got = h
        .exclusive(|h| {
            assert!(h.in_exclusive());
            let opts = SetOptions::default();
            h.set(0, b"b", b"2", &opts)?;
            assert_eq!(h.get(0, b"a")?, Some(b"1".to_vec()));
            assert_eq!(h.incr_by(0, b"a", 10)?, 11);
            h.modify(0, b"b", |old| {
                assert_eq!(old.map(|(v, _)| v.to_vec()), Some(b"2".to_vec()));
                Ok((Modify::Write(ValueType::String, b"22".to_vec()), ()))
            })?;
            assert_eq!(h.append(0, b"b", b"2")?, 3);
            assert!(h.delete(0, b"doomed")?);
            assert!(h.expire(0, b"b", 100, ExpireCondition::Always)?.unwrap());
            assert!(matches!(h.ttl(0, b"b")?, Ttl::Ms(_)));
            assert!(h.rename(0, b"b", b"c", false)?);
            assert!(h.copy(0, b"c", 2, b"c", false)?);
            assert!(h.move_key(0, b"c", 3)?);
            assert_eq!(h.dbsize(0)?, 1);
            assert_eq!(h.scan(0, 0, None, 100, None)?.keys, vec![b"a".to_vec()]);
            // Commands that take the map lock themselves, and a nested section.
            h.swap_db(0, 5)?;
            assert_eq!(h.get(5, b"a")?, Some(b"11".to_vec()));
            assert_eq!(h.dbsize(0)?, 0);
            h.flushdb(3)?;
            assert_eq!(h.dbsize(3)?, 0);
            h.exclusive(|h| h.swap_db(5, 0))?;
            assert!(h.in_exclusive());
            h.get(0, b"a")
        })
        .unwrap();
    assert_eq!(got, Some(b"11".to_vec()));
    assert!(!h.in_exclusive());
    assert_eq!(store::testing::held_locks(&h).unwrap(), Vec::<u64>::new());
    // Everything is visible to another handle afterwards.
    let mut other = store.handle().unwrap();
    assert_eq!(other.get(0, b"a").unwrap(), Some(b"11".to_vec()));
    assert_eq!(other.get(2, b"c").unwrap(), Some(b"222".to_vec()));
    assert_eq!(other.get(3, b"c").unwrap(), None);
    assert_eq!(other.get(0, b"doomed").unwrap(), None);
    // FLUSHALL works inside too.
    h.exclusive(|h| h.flushall()).unwrap();
    assert_eq!(other.dbsize(0).unwrap() + other.dbsize(2).unwrap(), 0);
    drop((h, other));
    store.check().unwrap();
}

#[test]
fn an_error_inside_leaves_the_section_and_keeps_finished_writes() {
    let seg = TempSegment::new("excl-error");
    let store = seg.open(16 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"s", b"text");
    let err = h
        .exclusive(|h| {
            put(h, 0, b"first", b"1");
            h.incr_by(0, b"s", 1)
        })
        .unwrap_err();
    assert!(matches!(err, Error::NotInteger), "{err:?}");
    assert!(!h.in_exclusive());
    assert_eq!(store::testing::held_locks(&h).unwrap(), Vec::<u64>::new());
    // Not a rollback: the write before the error stays.
    let mut other = store.handle().unwrap();
    assert_eq!(other.get(0, b"first").unwrap(), Some(b"1".to_vec()));
    drop((h, other));
    store.check().unwrap();
}

#[test]
fn key_versions_change_with_every_write_and_never_repeat() {
    let seg = TempSegment::new("excl-version");
    let (store, clock) = seg.open_with_clock(16 * MB, 1_000_000);
    let mut h = store.handle().unwrap();
    let mut other = store.handle().unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut version = |h: &mut Handle, key: &[u8]| {
        let v = h.key_version(0, key).unwrap().expect("key exists");
        assert!(
            seen.insert(v),
            "version {v} of {key:?} repeats one seen before"
        );
        v
    };
    assert_eq!(h.key_version(0, b"k").unwrap(), None);
    put(&mut h, 0, b"k", b"v");
    let v1 = version(&mut h, b"k");
    // Reads do not change it.
    h.get(0, b"k").unwrap();
    h.ttl(0, b"k").unwrap();
    assert_eq!(h.key_version(0, b"k").unwrap(), Some(v1));
    // Each kind of write does, whichever handle makes it.
    put(&mut other, 0, b"k", b"v");
    version(&mut h, b"k");
    h.append(0, b"k", b"w").unwrap();
    version(&mut h, b"k");
    h.append(0, b"k", b"x").unwrap(); // in place: the block has room now
    version(&mut h, b"k");
    h.expire(0, b"k", 100, ExpireCondition::Always).unwrap();
    version(&mut h, b"k");
    h.persist(0, b"k").unwrap();
    version(&mut h, b"k");
    h.incr_by(0, b"n", 1).unwrap();
    version(&mut h, b"n");
    h.rename(0, b"n", b"k", false).unwrap();
    version(&mut h, b"k");
    assert_eq!(h.key_version(0, b"n").unwrap(), None);
    // Gone when deleted, and when expired (without being removed by the look).
    h.pexpire(0, b"k", 10, ExpireCondition::Always).unwrap();
    version(&mut h, b"k");
    clock.fetch_add(11, Ordering::SeqCst);
    assert_eq!(h.key_version(0, b"k").unwrap(), None);
    put(&mut h, 0, b"k", b"again");
    version(&mut h, b"k");
    h.delete(0, b"k").unwrap();
    assert_eq!(h.key_version(0, b"k").unwrap(), None);
    // A version belongs to the logical db that holds the key.
    put(&mut h, 0, b"m", b"1");
    let vm = version(&mut h, b"m");
    h.swap_db(0, 4).unwrap();
    assert_eq!(h.key_version(4, b"m").unwrap(), Some(vm));
    assert_eq!(h.key_version(0, b"m").unwrap(), None);
    assert!(matches!(h.key_version(16, b"m"), Err(Error::BadDb)));
}

#[test]
fn the_flush_epoch_moves_on_flushdb_flushall_and_swapdb_only() {
    let seg = TempSegment::new("excl-epoch");
    let store = seg.open(16 * MB);
    let mut h = store.handle().unwrap();
    let e0 = h.flush_epoch().unwrap();
    put(&mut h, 0, b"k", b"v");
    h.delete(0, b"k").unwrap();
    h.swap_db(2, 2).unwrap();
    assert_eq!(h.flush_epoch().unwrap(), e0);
    h.flushdb(1).unwrap();
    assert_eq!(h.flush_epoch().unwrap(), e0 + 1);
    h.flushall().unwrap();
    assert_eq!(h.flush_epoch().unwrap(), e0 + 2);
    h.swap_db(0, 1).unwrap();
    let other = store.handle().unwrap();
    assert_eq!(other.flush_epoch().unwrap(), e0 + 3);
}

#[test]
fn threads_never_see_half_a_section() {
    const N: u64 = 3000;
    let seg = TempSegment::new("excl-threads");
    let store = seg.open(16 * MB);
    let writer = {
        let store = store.clone();
        thread::spawn(move || write_pairs(&mut store.handle().unwrap(), N))
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let store = store.clone();
            thread::spawn(move || check_pairs(&mut store.handle().unwrap(), N))
        })
        .collect();
    // A plain writer of another key keeps going meanwhile.
    let mut h = store.handle().unwrap();
    for _ in 0..N {
        h.incr_by(0, b"other", 1).unwrap();
    }
    writer.join().unwrap();
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(num(&mut h, b"other"), N);
    drop(h);
    store.check().unwrap();
}

#[test]
fn sections_exclude_each_other_and_plain_writers() {
    const THREADS: u64 = 4;
    const K: u64 = 500;
    let seg = TempSegment::new("excl-counter");
    let store = seg.open(16 * MB);
    let mut workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let store = store.clone();
            thread::spawn(move || {
                let mut h = store.handle().unwrap();
                for _ in 0..K {
                    // A read-modify-write of two keys: lost updates would
                    // show as a short count.
                    h.exclusive(|h| {
                        let n = num(h, b"c");
                        put(h, 0, b"c", (n + 1).to_string().as_bytes());
                        Ok(())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    workers.push({
        let store = store.clone();
        thread::spawn(move || {
            let mut h = store.handle().unwrap();
            for _ in 0..K {
                h.incr_by(0, b"c", 1).unwrap();
            }
        })
    });
    for w in workers {
        w.join().unwrap();
    }
    let mut h = store.handle().unwrap();
    assert_eq!(num(&mut h, b"c"), (THREADS + 1) * K);
}

#[test]
fn another_process_never_sees_half_a_section() {
    const N: u64 = 2000;
    let seg = TempSegment::new("excl-process");
    let store = seg.open(16 * MB);
    let mut h = store.handle().unwrap();
    let mut child = spawn_child(
        &seg,
        &[
            ("SHOAL_CHILD", "pairs".to_string()),
            ("SHOAL_N", N.to_string()),
        ],
    );
    assert!(check_pairs(&mut h, N) > 0);
    wait_for_line(&mut child, "done");
    assert!(child.wait().unwrap().success());
    drop(h);
    store.check().unwrap();
}

/// CPU time (user + system, in clock ticks) of the calling thread.
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the whole line: utime and stime.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn a_waiting_reader_sleeps_instead_of_spinning() {
    let seg = TempSegment::new("excl-polite");
    let store = seg.open(16 * MB);
    put(&mut store.handle().unwrap(), 0, b"k", b"v");
    let inside = Arc::new(AtomicBool::new(false));
    let holder = {
        let (store, inside) = (store.clone(), inside.clone());
        thread::spawn(move || {
            store
                .handle()
                .unwrap()
                .exclusive(|_| {
                    inside.store(true, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(600));
                    Ok(())
                })
                .unwrap()
        })
    };
    while !inside.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    let mut h = store.handle().unwrap();
    let (cpu, wall) = (thread_cpu_ticks(), Instant::now());
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"v".to_vec()));
    let (cpu, wall) = (thread_cpu_ticks() - cpu, wall.elapsed());
    holder.join().unwrap();
    assert!(wall >= Duration::from_millis(300), "the read did not wait");
    // A spinning or yielding waiter would burn the whole wait (60 ticks at
    // 100 Hz); a sleeping one a small part of it.
    assert!(cpu <= 15, "the waiting reader used {cpu} ticks of CPU");
}

#[test]
fn a_holder_killed_inside_is_recovered_by_a_waiting_reader() {
    let seg = TempSegment::new("excl-killed");
    let store = seg.open(16 * MB);
    put(&mut store.handle().unwrap(), 0, b"y", b"0");
    let mut child = spawn_child(&seg, &[("SHOAL_CHILD", "die-inside".to_string())]);
    wait_for_line(&mut child, "inside");
    let reader = {
        let store = store.clone();
        thread::spawn(move || {
            let mut h = store.handle().unwrap();
            (h.get(0, b"x").unwrap(), h.get(0, b"y").unwrap())
        })
    };
    thread::sleep(Duration::from_millis(100));
    assert!(!reader.is_finished(), "read during another's section");
    child.kill().unwrap();
    child.wait().unwrap();
    // The write the holder finished stays (isolation, not rollback).
    assert_eq!(
        reader.join().unwrap(),
        (Some(b"1".to_vec()), Some(b"0".to_vec()))
    );
    let mut h = store.handle().unwrap();
    assert!(!h.in_exclusive());
    h.exclusive(|h| h.swap_db(0, 1)).unwrap();
    assert_eq!(h.get(1, b"x").unwrap(), Some(b"1".to_vec()));
    drop(h);
    store.check().unwrap();
}

#[test]
fn a_crash_at_any_point_of_a_section_leaves_whole_writes_and_an_open_map() {
    let mut k = 0u64;
    loop {
        assert!(k < 1000, "more than 1000 crash points?");
        let seg = TempSegment::new("excl-crash");
        let mut opts = seg.options(2 * MB);
        opts.contexts = 8;
        let store = Store::open(&opts).unwrap();
        {
            let mut h = store.handle().unwrap();
            put(&mut h, 0, b"a", b"old");
            put(&mut h, 1, b"b", b"old b");
        }
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["child_entry", "--exact", "--nocapture", "--test-threads=1"])
            .env("SHOAL_CHILD", "crash")
            .env("SHOAL_CRASH_AT", k.to_string())
            .env("SHOAL_SEGMENT", &seg.path)
            .output()
            .unwrap();
        let completed = String::from_utf8_lossy(&out.stdout).contains("completed");
        // Attaching recovers the dead child; its section must not linger.
        let mut h = store.handle().unwrap();
        assert!(!h.in_exclusive());
        let a0 = h.get(0, b"a").unwrap();
        let a1 = h.get(1, b"a").unwrap();
        let b0 = h.get(0, b"b").unwrap();
        let b1 = h.get(1, b"b").unwrap();
        // The three steps land in order, each whole: SET a, SWAPDB, DEL b.
        let states = [
            (Some(b"old".to_vec()), None, None, Some(b"old b".to_vec())),
            (Some(b"new".to_vec()), None, None, Some(b"old b".to_vec())),
            (None, Some(b"new".to_vec()), Some(b"old b".to_vec()), None),
            (None, Some(b"new".to_vec()), None, None),
        ];
        let got = (a0, a1, b0, b1);
        assert!(
            states.contains(&got),
            "crash point {k}: a torn step: {got:?}"
        );
        // A writer is not held up by a lingering odd generation.
        put(&mut h, 0, b"after", b"1");
        drop(h);
        store
            .check()
            .unwrap_or_else(|e| panic!("crash point {k}: {e}"));
        if completed {
            assert!(out.status.success(), "child failed: {out:?}");
            break;
        }
        assert!(!out.status.success(), "child neither completed nor crashed");
        k += 1;
    }
    assert!(k > 5, "only {k} crash points");
}

#[test]
fn a_panic_inside_leaves_the_section() {
    let seg = TempSegment::new("excl-panic");
    let store = seg.open(16 * MB);
    let mut h = store.handle().unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        h.exclusive(|h| -> Result<()> {
            put(h, 0, b"k", b"v");
            panic!("a bug inside a section");
        })
    }));
    assert!(caught.is_err());
    // The handle lives on, outside the section, and others are not held up.
    assert!(!h.in_exclusive());
    let mut other = store.handle().unwrap();
    assert_eq!(other.get(0, b"k").unwrap(), Some(b"v".to_vec()));
    put(&mut h, 0, b"k", b"w");
}
