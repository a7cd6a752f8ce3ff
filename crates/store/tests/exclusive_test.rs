//! Exclusive sections (docs/design.md I13) and what WATCH builds on: key
//! versions and the flush epoch. The holder works as usual inside; no other
//! thread or process ever sees half of a section; waiters sleep rather than
//! spin; a holder killed inside is recovered with the generation even and
//! its section undone.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
        "die-after-many" => {
            h.exclusive(|h| {
                // Far more records than one journal chunk holds.
                for i in 0..5000u32 {
                    h.set(0, format!("m{i}").as_bytes(), b"v", &SetOptions::default())?;
                }
                h.set(0, b"y", b"1", &SetOptions::default())?;
                println!("inside");
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
        "crash-many" => {
            let k: u64 = std::env::var("SHOAL_CRASH_AT").unwrap().parse().unwrap();
            store::testing::crash_after(&mut h, k);
            h.exclusive(many_writes).unwrap();
            drop(h);
            println!("completed");
        }
        "crash-in-place" => {
            // The first section completes; the second is the one killed.
            h.exclusive(in_place_first).unwrap();
            let k: u64 = std::env::var("SHOAL_CRASH_AT").unwrap().parse().unwrap();
            store::testing::crash_after(&mut h, k);
            h.exclusive(in_place_second).unwrap();
            drop(h);
            println!("completed");
        }
        "crash-churn" => {
            let k: u64 = std::env::var("SHOAL_CRASH_AT").unwrap().parse().unwrap();
            store::testing::crash_after(&mut h, k);
            h.exclusive(churn).unwrap();
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

/// The active expiry's work between requests runs while another context
/// holds a section (a worker's script looping until SCRIPT KILL): asking
/// whether any key expires and sweeping must return at once, or that
/// worker would serve none of its clients (the kill included) until the
/// section ends.
#[test]
fn the_expiry_sweep_never_waits_for_a_section() {
    let seg = TempSegment::new("excl-sweep");
    let store = seg.open(16 * MB);
    {
        let mut h = store.handle().unwrap();
        put(&mut h, 0, b"k", b"v");
        put(&mut h, 3, b"t", b"v");
        h.pexpire(3, b"t", 1, ExpireCondition::Always).unwrap();
    }
    thread::sleep(Duration::from_millis(5));
    let (entered, release) = (
        std::sync::mpsc::channel::<()>(),
        std::sync::mpsc::channel::<()>(),
    );
    let holder = {
        let (store, entered, release) = (store.clone(), entered.0, release.1);
        thread::spawn(move || {
            store
                .handle()
                .unwrap()
                .exclusive(|_| {
                    entered.send(()).unwrap();
                    // Held until the sweep below has returned (or the test
                    // gave up on it).
                    let _ = release.recv_timeout(Duration::from_secs(60));
                    Ok(())
                })
                .unwrap()
        })
    };
    entered.1.recv().unwrap();
    let (done, outcome) = std::sync::mpsc::channel();
    let sweeper = {
        let store = store.clone();
        thread::spawn(move || {
            let mut h = store.handle().unwrap();
            let any = h.any_expires().unwrap();
            let sweep = h.sweep_expired(1 << 20).unwrap();
            done.send((any, sweep.expired)).unwrap();
        })
    };
    let result = outcome.recv_timeout(Duration::from_secs(30));
    release.0.send(()).unwrap();
    holder.join().unwrap();
    sweeper.join().unwrap();
    let (any, expired) = result.expect("the sweep waited for the section");
    assert!(any, "db 3 has a key with an expiry");
    assert_eq!(
        expired, 0,
        "the sweep removed a key inside another's section"
    );
    // Once the section ends, the sweep removes it.
    let mut h = store.handle().unwrap();
    assert_eq!(h.sweep_expired(1 << 20).unwrap().expired, 1);
    assert!(!h.any_expires().unwrap());
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
    // The write the holder finished inside is undone with its section.
    assert_eq!(reader.join().unwrap(), (None, Some(b"0".to_vec())));
    let mut h = store.handle().unwrap();
    assert!(!h.in_exclusive());
    h.exclusive(|h| h.swap_db(0, 1)).unwrap();
    assert_eq!(h.get(1, b"y").unwrap(), Some(b"0".to_vec()));
    assert_eq!(h.get(1, b"x").unwrap(), None);
    drop(h);
    store.check().unwrap();
}

#[test]
fn a_crash_at_any_point_of_a_section_leaves_it_undone_or_done_and_an_open_map() {
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
        // SET a, SWAPDB, DEL b: all of them or none.
        let states = [
            (Some(b"old".to_vec()), None, None, Some(b"old b".to_vec())),
            (None, Some(b"new".to_vec()), None, None),
        ];
        let got = (a0, a1, b0, b1);
        assert!(
            states.contains(&got),
            "crash point {k}: a torn section: {got:?}"
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

fn big(i: usize) -> Vec<u8> {
    format!("{i:06}-{}", "v".repeat(150)).into_bytes()
}

/// The state `many_writes` starts from.
fn before_many(h: &mut Handle) {
    put(h, 0, b"s", b"old");
    put(h, 0, b"gone", b"soon");
    h.incr_by(0, b"n", 5).unwrap();
    h.write_collection::<List, _>(0, b"l", true, |l| {
        for i in 0..40 {
            l.push_back(&big(i))?;
        }
        Ok(())
    })
    .unwrap();
}

/// A section of many kinds of write: overwrite, new keys, INCR, APPEND,
/// EXPIRE, DEL, RENAME, a paged list changed in place, SWAPDB.
fn many_writes(h: &mut Handle) -> Result<()> {
    h.set(0, b"s", b"new", &SetOptions::default())?;
    for i in 0..6 {
        h.set(
            0,
            format!("k{i}").as_bytes(),
            &big(i),
            &SetOptions::default(),
        )?;
    }
    h.incr_by(0, b"n", 10)?;
    h.incr_by(0, b"n", 10)?;
    h.append(0, b"s", b"-tail")?;
    h.expire(0, b"k1", 100, ExpireCondition::Always)?;
    h.delete(0, b"gone")?;
    h.rename(0, b"k2", b"k2-renamed", false)?;
    h.write_collection::<List, _>(0, b"l", true, |l| {
        l.pop_front()?;
        l.push_back(&big(100))?;
        l.set(7, b"seven")?;
        Ok(())
    })?;
    h.swap_db(0, 3)?;
    Ok(())
}

/// Everything `many_writes` may touch, as one value to compare.
fn many_state(h: &mut Handle) -> Vec<Option<Vec<u8>>> {
    let mut out = Vec::new();
    for db in [0, 3] {
        out.push(Some(h.dbsize(db).unwrap().to_string().into_bytes()));
        for key in ["s", "gone", "n", "k0", "k1", "k2", "k2-renamed", "k5"] {
            out.push(h.get(db, key.as_bytes()).unwrap());
        }
        // Whether it has a time to live (its milliseconds move on).
        let ttl = format!("{:?}", h.ttl(db, b"k1").unwrap());
        out.push(Some(
            ttl.split('(').next().unwrap_or("").as_bytes().to_vec(),
        ));
        let list = h
            .read_collection::<List, _>(db, b"l", |l| l.range(0, l.len()))
            .unwrap();
        out.push(list.map(|items| items.concat()));
    }
    out
}

/// A crash-point sweep of one section: for k = 0, 1, … a fresh segment
/// gets `prepare`, then a child process runs `child` (see `child_entry`:
/// `lead` if any, then `section` dying at crash point k). After each crash
/// the store (recovered by attaching) must hold the state before `section`
/// (undone) or after it (finished past its commit point), as a model run in
/// this process has them, work on (`then`) and pass its check. With
/// `frees_all`, an undone section must also leave the arena's used bytes as
/// they were. Ends when the child completes.
struct Sweep<'a, S> {
    name: &'a str,
    child: &'a str,
    prepare: fn(&mut Handle),
    lead: Option<Section>,
    section: Section,
    state: fn(&mut Handle) -> S,
    then: fn(&mut Handle),
    frees_all: bool,
}

type Section = fn(&mut Handle) -> Result<()>;

impl<S: PartialEq + std::fmt::Debug> Sweep<'_, S> {
    /// The states before and after `section`, in this process.
    fn model(&self) -> (S, S) {
        let seg = TempSegment::new(&format!("{}-model", self.name));
        let store = seg.open(4 * MB);
        let mut h = store.handle().unwrap();
        (self.prepare)(&mut h);
        if let Some(lead) = self.lead {
            h.exclusive(lead).unwrap();
        }
        let before = (self.state)(&mut h);
        h.exclusive(self.section).unwrap();
        (before, (self.state)(&mut h))
    }

    fn run(&self) {
        let (before, after) = &self.model();
        assert_ne!(before, after);
        let (mut k, mut undone) = (0u64, 0u64);
        loop {
            assert!(k < 5000, "more than 5000 crash points?");
            let seg = TempSegment::new(self.name);
            let mut opts = seg.options(4 * MB);
            opts.contexts = 8;
            let store = Store::open(&opts).unwrap();
            (self.prepare)(&mut store.handle().unwrap());
            let used_before = store.arena_stats().unwrap().used_bytes;
            let out = Command::new(std::env::current_exe().unwrap())
                .args(["child_entry", "--exact", "--nocapture", "--test-threads=1"])
                .env("SHOAL_CHILD", self.child)
                .env("SHOAL_CRASH_AT", k.to_string())
                .env("SHOAL_SEGMENT", &seg.path)
                .output()
                .unwrap();
            let completed = String::from_utf8_lossy(&out.stdout).contains("completed");
            let mut h = store.handle().unwrap();
            assert!(!h.in_exclusive());
            let got = (self.state)(&mut h);
            if completed {
                assert!(got == *after, "the completed section differs");
            } else if got == *before {
                undone += 1;
                if self.frees_all {
                    // Every block the section allocated went back, once.
                    assert_eq!(
                        store.arena_stats().unwrap().used_bytes,
                        used_before,
                        "crash point {k}: the undone section leaked or freed twice"
                    );
                }
            } else {
                // Past its commit point the section is finished by recovery.
                assert!(
                    got == *after,
                    "crash point {k}: neither before nor after: {got:?}"
                );
            }
            drop(h);
            store
                .check()
                .unwrap_or_else(|e| panic!("crash point {k}: {e}"));
            // The store works on.
            (self.then)(&mut store.handle().unwrap());
            store
                .check()
                .unwrap_or_else(|e| panic!("crash point {k} (after): {e}"));
            if completed {
                assert!(out.status.success(), "child failed: {out:?}");
                break;
            }
            assert!(!out.status.success(), "child neither completed nor crashed");
            k += 1;
        }
        assert!(
            undone > 50,
            "only {undone} of {k} crash points came before the commit"
        );
    }
}

#[test]
fn a_crash_at_any_point_of_a_section_of_many_writes_leaves_it_undone_or_done() {
    Sweep {
        name: "excl-many",
        child: "crash-many",
        prepare: before_many,
        lead: None,
        section: many_writes,
        state: many_state,
        then: |h| {
            h.exclusive(many_writes).unwrap();
            put(h, 0, b"after", b"1");
        },
        frees_all: false,
    }
    .run();
}

#[test]
fn a_section_larger_than_one_journal_chunk_is_undone_whole() {
    let seg = TempSegment::new("excl-big");
    let store = seg.open(64 * MB);
    put(&mut store.handle().unwrap(), 0, b"y", b"0");
    let mut child = spawn_child(&seg, &[("SHOAL_CHILD", "die-after-many".to_string())]);
    wait_for_line(&mut child, "inside");
    child.kill().unwrap();
    child.wait().unwrap();
    let mut h = store.handle().unwrap();
    assert_eq!(h.dbsize(0).unwrap(), 1);
    assert_eq!(h.get(0, b"y").unwrap(), Some(b"0".to_vec()));
    drop(h);
    store.check().unwrap();
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

/// A section that frees blocks it allocated itself (freed at once, not at
/// its end) between writes to keys from before it (whose old blocks wait):
/// a value overwritten three times, a key set then deleted, a list built
/// and mostly popped again, an old list's new items popped.
fn churn(h: &mut Handle) -> Result<()> {
    for round in 0..3 {
        h.set(0, b"s", &big(200 + round), &SetOptions::default())?;
    }
    h.set(0, b"t", &big(300), &SetOptions::default())?;
    h.delete(0, b"t")?;
    h.write_collection::<List, _>(0, b"fresh", true, |l| {
        for i in 0..30 {
            l.push_back(&big(400 + i))?;
        }
        for _ in 0..25 {
            l.pop_front()?;
        }
        Ok(())
    })?;
    h.write_collection::<List, _>(0, b"l", true, |l| {
        for i in 0..20 {
            l.push_back(&big(500 + i))?;
        }
        for _ in 0..20 {
            l.pop_back()?;
        }
        l.pop_front()?;
        Ok(())
    })?;
    h.incr_by(0, b"n", 1)?;
    Ok(())
}

/// Everything `churn` may touch.
fn churn_state(h: &mut Handle) -> Vec<Option<Vec<u8>>> {
    let mut out = vec![Some(h.dbsize(0).unwrap().to_string().into_bytes())];
    for key in ["s", "t", "n"] {
        out.push(h.get(0, key.as_bytes()).unwrap());
    }
    for key in ["fresh", "l"] {
        let list = h
            .read_collection::<List, _>(0, key.as_bytes(), |l| l.range(0, l.len()))
            .unwrap();
        out.push(list.map(|items| items.concat()));
    }
    out
}

#[test]
fn a_crash_at_any_point_of_a_section_that_frees_its_own_blocks_leaves_it_undone_or_done() {
    Sweep {
        name: "excl-churn",
        child: "crash-churn",
        prepare: before_many,
        lead: None,
        section: churn,
        state: churn_state,
        then: |h| {
            h.exclusive(churn).unwrap();
            put(h, 0, b"after", b"1");
        },
        frees_all: true,
    }
    .run();
}

#[test]
fn a_snapshot_never_reads_a_write_of_a_running_section() {
    // A section's write is committed (its bucket unlocked) before the
    // section ends, and undone if its holder dies: a snapshot under way
    // when the section starts must wait for it rather than read the write.
    let seg = TempSegment::new("excl-snapshot");
    let store = seg.open(4 * MB);
    let mut h = store.handle().unwrap();
    for i in 0..200 {
        put(&mut h, 0, format!("key:{i}").as_bytes(), b"before");
    }
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let emitted = Arc::new(AtomicUsize::new(0));
    let snapshot = {
        let (store, emitted) = (store.clone(), emitted.clone());
        thread::spawn(move || {
            let mut h = store.handle().unwrap();
            let mut records = Vec::new();
            h.snapshot_records(&mut |_, payload| {
                if records.is_empty() {
                    // Past its first bucket: the section starts now.
                    started_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                }
                records.push(payload.to_vec());
                emitted.store(records.len(), Ordering::SeqCst);
                Ok(())
            })
            .unwrap()
            .unwrap();
            records
        })
    };
    started_rx.recv().unwrap();
    let (inside_tx, inside_rx) = std::sync::mpsc::channel();
    let (leave_tx, leave_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let store = store.clone();
        thread::spawn(move || {
            let mut h = store.handle().unwrap();
            h.exclusive(|h| {
                for i in 0..200 {
                    put(h, 0, format!("key:{i}").as_bytes(), b"inside");
                }
                inside_tx.send(()).unwrap();
                leave_rx.recv().unwrap();
                Ok(())
            })
            .unwrap();
        })
    };
    inside_rx.recv().unwrap();
    go_tx.send(()).unwrap();
    thread::sleep(Duration::from_millis(300));
    // Still at the first bucket's record: it waits at the next bucket.
    assert_eq!(
        emitted.load(Ordering::SeqCst),
        1,
        "the snapshot read on while the section ran"
    );
    leave_tx.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(snapshot.join().unwrap().len(), 200);
    drop(h);
    store.check().unwrap();
}

#[test]
fn sections_reuse_one_journal_chunk_and_leaving_frees_it() {
    let seg = TempSegment::new("excl-spare");
    let store = seg.open(4 * MB);
    let empty = store.arena_stats().unwrap().used_bytes;
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"k", b"0");
    h.exclusive(|h| h.incr_by(0, b"k", 1).map(|_| ())).unwrap();
    let kept = store.arena_stats().unwrap().used_bytes;
    // The section's chunk stayed as the spare: the store checks clean.
    store.check().unwrap();
    for _ in 0..100 {
        h.exclusive(|h| h.incr_by(0, b"k", 1).map(|_| ())).unwrap();
    }
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"101".to_vec()));
    assert_eq!(store.arena_stats().unwrap().used_bytes, kept);
    store.check().unwrap();
    h.delete(0, b"k").unwrap();
    // A handle that leaves gives the spare back with the rest.
    drop(h);
    store.check().unwrap();
    assert_eq!(store.arena_stats().unwrap().used_bytes, empty);
}

#[test]
fn a_section_rewriting_one_key_needs_no_more_memory_than_its_last_value() {
    // 200 overwrites of 100 KB in a 4 MB segment: 20 MB in all, but each
    // value the section wrote goes back when the next replaces it.
    let seg = TempSegment::new("excl-rewrite");
    let store = seg.open(4 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"k", &vec![b'o'; 100_000]);
    // The first section leaves its journal's chunk as the next one's spare.
    h.exclusive(|_| Ok(())).unwrap();
    let used_before = store.arena_stats().unwrap().used_bytes;
    h.exclusive(|h| {
        for i in 0..200u32 {
            h.set(
                0,
                b"k",
                &vec![b'a' + (i % 26) as u8; 100_000],
                &SetOptions::default(),
            )?;
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(
        h.get(0, b"k").unwrap(),
        Some(vec![b'a' + (199 % 26) as u8; 100_000])
    );
    drop(h);
    store.check().unwrap();
    let used_after = store.arena_stats().unwrap().used_bytes;
    assert!(
        used_after <= used_before + 4096,
        "{used_before} bytes used before, {used_after} after"
    );
}

fn item(tag: &str, i: usize) -> Vec<u8> {
    format!("{tag}-{i:03}-{}", "q".repeat(i % 13)).into_bytes()
}

/// A paged list whose end leaves have room (pushed one write at a time,
/// at both ends, so its pushes and pops at either end go in place), and
/// a counter.
fn before_in_place(h: &mut Handle) {
    h.write_collection::<List, _>(0, b"q", true, |l| {
        for i in 0..300 {
            l.push_back(&item("mid", i))?;
        }
        Ok(())
    })
    .unwrap();
    for i in 0..6 {
        h.write_collection::<List, _>(0, b"q", false, |l| l.push_back(&item("t", i)))
            .unwrap();
        h.write_collection::<List, _>(0, b"q", false, |l| l.push_front(&item("h", i)))
            .unwrap();
    }
    h.incr_by(0, b"n", 1).unwrap();
    // As the log test's writers build theirs: one RPUSH a write, an LPOP
    // now and then (by copying: the head leaf has its room at the tail).
    for i in 0..400 {
        h.write_collection::<List, _>(0, b"p", true, |l| l.push_back(&item("p", i)))
            .unwrap();
        if i % 7 == 0 {
            h.write_collection::<List, _>(0, b"p", false, |l| l.pop_front())
                .unwrap();
        }
    }
}

fn p_write(h: &mut Handle, i: usize) -> Result<()> {
    h.write_collection::<List, _>(0, b"p", false, |l| l.push_back(&item("p", i)))?;
    h.write_collection::<List, _>(0, b"p", false, |l| l.pop_front())?;
    Ok(())
}

fn rpush(h: &mut Handle, v: &[u8]) -> Result<()> {
    h.write_collection::<List, _>(0, b"q", false, |l| l.push_back(v))
        .map(drop)
}

fn lpush(h: &mut Handle, v: &[u8]) -> Result<()> {
    h.write_collection::<List, _>(0, b"q", false, |l| l.push_front(v))
        .map(drop)
}

fn rpop(h: &mut Handle) -> Result<()> {
    h.write_collection::<List, _>(0, b"q", false, |l| l.pop_back())
        .map(drop)
}

fn lpop(h: &mut Handle) -> Result<()> {
    h.write_collection::<List, _>(0, b"q", false, |l| l.pop_front())
        .map(drop)
}

/// A section of in-place pushes and pops at both ends of `q` (each its
/// own write, as in a MULTI), among other writes: it completes.
fn in_place_first(h: &mut Handle) -> Result<()> {
    rpush(h, b"s1-a")?;
    p_write(h, 1000)?;
    h.incr_by(0, b"n", 1)?;
    rpush(h, b"s1-b")?;
    lpush(h, b"s1-c")?;
    h.set(0, b"s", b"first", &SetOptions::default())?;
    rpop(h)?;
    lpop(h)?;
    rpush(h, b"s1-d")?;
    lpush(h, b"s1-e")?;
    Ok(())
}

/// The section killed at every point: pops whose room pushes of the same
/// section then write over (longer and shorter items), at both ends.
fn in_place_second(h: &mut Handle) -> Result<()> {
    p_write(h, 2000)?;
    rpop(h)?;
    rpop(h)?;
    rpush(h, b"s2-tail-longer-than-what-it-follows")?;
    h.incr_by(0, b"n", 1)?;
    lpop(h)?;
    lpop(h)?;
    lpush(h, b"s2-head-longer-than-what-it-follows")?;
    rpush(h, b"x")?;
    lpush(h, b"y")?;
    rpop(h)?;
    rpush(h, b"s2-z")?;
    p_write(h, 2001)?;
    h.set(0, b"s", b"second", &SetOptions::default())?;
    Ok(())
}

/// Everything the two sections touch.
fn in_place_state(h: &mut Handle) -> Vec<Option<Vec<u8>>> {
    let mut out = vec![h.get(0, b"n").unwrap(), h.get(0, b"s").unwrap()];
    let list = h
        .read_collection::<List, _>(0, b"q", |l| l.range(0, l.len()))
        .unwrap()
        .unwrap_or_default();
    out.extend(list.into_iter().map(Some));
    let p = h
        .read_collection::<List, _>(0, b"p", |l| l.range(0, l.len()))
        .unwrap()
        .unwrap_or_default();
    out.push(None);
    out.extend(p.into_iter().map(Some));
    out
}

#[test]
fn in_place_list_writes_in_a_killed_section_after_a_completed_one_leave_either_state() {
    Sweep {
        name: "excl-inplace",
        child: "crash-in-place",
        prepare: before_in_place,
        lead: Some(in_place_first),
        section: in_place_second,
        state: in_place_state,
        // The list takes more writes in place.
        then: |h| {
            h.exclusive(in_place_first).unwrap();
            rpush(h, b"after").unwrap();
        },
        frees_all: false,
    }
    .run();
}
