//! Several OS processes on one segment: concurrent writers checked against what
//! each wrote, a restart after every process is killed, and the kill -9
//! torture test. Child processes are this test binary run again with
//! `SHOAL_CHILD` set (see `child_entry`).

mod common;

use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{wait_for_line, TempSegment};
use store::*;

const MB: u64 = 1 << 20;

// ---------- values that prove they are whole ----------

/// A value that names its writer and sequence number and whose every byte
/// follows from them, so a torn or mixed value is always detected.
fn make_value(writer: u32, seq: u64, size: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + size);
    v.extend_from_slice(&writer.to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    v.extend_from_slice(&(size as u32).to_le_bytes());
    let seed = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ writer as u64;
    v.extend((0..size).map(|i| (seed.wrapping_add(i as u64 * 31) >> 3) as u8));
    v
}

fn valid_value(v: &[u8]) -> Result<(u32, u64), String> {
    if v.len() < 16 {
        return Err(format!(
            "value of {} bytes is shorter than its header",
            v.len()
        ));
    }
    let writer = u32::from_le_bytes(v[0..4].try_into().unwrap());
    let seq = u64::from_le_bytes(v[4..12].try_into().unwrap());
    let size = u32::from_le_bytes(v[12..16].try_into().unwrap()) as usize;
    if make_value(writer, seq, size) != v {
        return Err(format!(
            "torn value: writer {writer} seq {seq} size {size}, len {}",
            v.len()
        ));
    }
    Ok((writer, seq))
}

/// Appended chunks are `<writer:seq>|`; a list of whole chunks is valid.
fn valid_appends(v: &[u8]) -> Result<(), String> {
    let s = std::str::from_utf8(v).map_err(|_| "append value not utf-8".to_string())?;
    for chunk in s.split_terminator('|') {
        let ok = chunk.starts_with('<')
            && chunk.ends_with('>')
            && chunk[1..chunk.len() - 1]
                .split_once(':')
                .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u64>().is_ok());
        if !ok {
            return Err(format!("torn append chunk {chunk:?}"));
        }
    }
    if !s.is_empty() && !s.ends_with('|') {
        return Err("append value ends mid-chunk".into());
    }
    Ok(())
}

const KEYS: u64 = 64;
const APPEND_KEYS: u64 = 8;
const COUNTERS: u64 = 8;

fn vkey(i: u64) -> Vec<u8> {
    format!("v{i}").into_bytes()
}
fn akey(i: u64) -> Vec<u8> {
    format!("a{i}").into_bytes()
}
fn ckey(i: u64) -> Vec<u8> {
    format!("c{i}").into_bytes()
}

/// Checks every key family once; returns how many values were read.
fn check_all(h: &mut Handle) -> Result<u64, String> {
    let mut n = 0;
    for i in 0..KEYS {
        if let Some(v) = h.get(0, &vkey(i)).map_err(|e| e.to_string())? {
            valid_value(&v)?;
            n += 1;
        }
    }
    for i in 0..APPEND_KEYS {
        if let Some(v) = h.get(0, &akey(i)).map_err(|e| e.to_string())? {
            valid_appends(&v)?;
            n += 1;
        }
    }
    for i in 0..COUNTERS {
        if let Some(v) = h.get(0, &ckey(i)).map_err(|e| e.to_string())? {
            parse_i64(&v).ok_or_else(|| format!("counter holds {v:?}"))?;
            n += 1;
        }
    }
    Ok(n)
}

// ---------- child processes ----------

fn spawn_child(role: &str, seg: &TempSegment, id: u32, extra: &[(&str, String)]) -> Child {
    let mut env = vec![
        ("SHOAL_CHILD", role.to_string()),
        ("SHOAL_CHILD_ID", id.to_string()),
    ];
    env.extend(extra.iter().cloned());
    common::spawn_child(seg, &env)
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

/// Not a test of its own: the body of every child process.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var("SHOAL_CHILD") else {
        return;
    };
    let id: u32 = std::env::var("SHOAL_CHILD_ID").unwrap().parse().unwrap();
    let store = child_store();
    let mut h = store.handle().unwrap();
    match role.as_str() {
        "torture" => torture_writer(&mut h, id),
        "writer" => {
            let n: u64 = std::env::var("SHOAL_N").unwrap().parse().unwrap();
            for i in 0..n {
                let key = format!("w{id}:{i}");
                h.set(
                    0,
                    key.as_bytes(),
                    &make_value(id, i, (i % 300) as usize),
                    &SetOptions::default(),
                )
                .unwrap();
                h.incr_by(0, b"shared", 1).unwrap();
                h.append(
                    0,
                    format!("log{id}").as_bytes(),
                    format!("<{id}:{i}>|").as_bytes(),
                )
                .unwrap();
                if i % 3 == 0 {
                    assert!(h.delete(0, key.as_bytes()).unwrap());
                }
            }
            println!("done");
        }
        "hold" => {
            for i in 0..1000u64 {
                h.set(
                    0,
                    format!("r{i}").as_bytes(),
                    &make_value(id, i, 100),
                    &SetOptions::default(),
                )
                .unwrap();
            }
            println!("ready");
            // Stay attached until killed (or orphaned).
            let parent = std::os::unix::process::parent_id();
            while std::os::unix::process::parent_id() == parent {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        "enable-log" => {
            // The log's writer, as far as the segment knows; it exits at once.
            h.log_ring().enable(0, log::FsyncPolicy::No).unwrap();
        }
        "die-holding-allocator" => {
            store::testing::hold_allocator_lock(&mut h).unwrap();
            // No destructors: the context stays registered, lock held.
            std::process::exit(0);
        }
        other => panic!("unknown child role {other}"),
    }
}

fn torture_writer(h: &mut Handle, id: u32) {
    let mut rng = (id as u64).wrapping_mul(0x2545_F491_4F6C_DD1D) ^ std::process::id() as u64 | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    println!("ready");
    let parent = std::os::unix::process::parent_id();
    let mut seq = 0u64;
    loop {
        seq += 1;
        if seq.is_multiple_of(4096) && std::os::unix::process::parent_id() != parent {
            // The test that started us is gone; do not run on as an orphan.
            std::process::exit(1);
        }
        let r = next();
        let i = r % KEYS;
        match (r >> 32) % 16 {
            0..=5 => {
                let size = match (r >> 40) % 10 {
                    0 => (r >> 44) as usize % 20_000,
                    _ => (r >> 44) as usize % 600,
                };
                let opts = SetOptions {
                    expiry: if r >> 60 == 0 {
                        Expiry::Keep
                    } else {
                        Expiry::Persist
                    },
                    ..SetOptions::default()
                };
                h.set(0, &vkey(i), &make_value(id, seq, size), &opts)
                    .unwrap();
            }
            6 => {
                h.delete(0, &vkey(i)).unwrap();
            }
            7 => {
                h.pexpire(
                    0,
                    &vkey(i),
                    1 + (r >> 50) as i64 % 30,
                    ExpireCondition::Always,
                )
                .unwrap();
            }
            8 => {
                let other = vkey(next() % KEYS);
                match (r >> 50) % 4 {
                    0 => drop(h.rename(0, &vkey(i), &other, (r >> 54) & 1 == 0)),
                    1 => drop(h.copy(0, &vkey(i), 0, &other, (r >> 54) & 1 == 0)),
                    2 => drop(h.get_del(0, &vkey(i)).unwrap()),
                    _ => drop(h.get_ex(0, &vkey(i), Expiry::Persist).unwrap()),
                }
            }
            9 | 10 => {
                let k = akey(i % APPEND_KEYS);
                let len = h
                    .append(0, &k, format!("<{id}:{seq}>|").as_bytes())
                    .unwrap();
                if len > 4000 {
                    h.delete(0, &k).unwrap();
                }
            }
            11 | 12 => {
                let k = ckey(i % COUNTERS);
                if h.incr_by(0, &k, (r >> 50) as i64 % 1000 - 500).is_err() {
                    h.delete(0, &k).unwrap();
                }
            }
            13 => {
                h.sweep_expired(16).unwrap();
            }
            14 => {
                let _ = h.get(0, &vkey(i)).unwrap();
            }
            _ => {
                h.persist(0, &vkey(i)).unwrap();
            }
        }
    }
}

// ---------- the tests ----------

#[test]
fn writers_in_separate_processes_all_land() {
    let seg = TempSegment::new("procs");
    let store = seg.open(64 * MB);
    const WRITERS: u32 = 4;
    const N: u64 = 3000;
    let mut children: Vec<Child> = (0..WRITERS)
        .map(|id| spawn_child("writer", &seg, id, &[("SHOAL_N", N.to_string())]))
        .collect();
    // Read concurrently from this process while they write.
    let mut h = store.handle().unwrap();
    let mut reads = 0u64;
    while children.iter_mut().any(|c| c.try_wait().unwrap().is_none()) {
        for id in 0..WRITERS {
            if let Some(v) = h.get(0, format!("w{id}:{}", reads % N).as_bytes()).unwrap() {
                valid_value(&v).unwrap();
            }
        }
        reads += 1;
    }
    for c in &mut children {
        assert!(c.wait().unwrap().success());
    }
    assert_eq!(
        h.get(0, b"shared").unwrap(),
        Some((WRITERS as u64 * N).to_string().into_bytes())
    );
    for id in 0..WRITERS {
        for i in 0..N {
            let got = h.get(0, format!("w{id}:{i}").as_bytes()).unwrap();
            if i % 3 == 0 {
                assert_eq!(got, None);
            } else {
                assert_eq!(got, Some(make_value(id, i, (i % 300) as usize)));
            }
        }
        let log = h.get(0, format!("log{id}").as_bytes()).unwrap().unwrap();
        let expected: String = (0..N).map(|i| format!("<{id}:{i}>|")).collect();
        assert_eq!(log, expected.into_bytes());
    }
    let kept = N - N.div_ceil(3);
    assert_eq!(
        h.dbsize(0).unwrap(),
        WRITERS as u64 * kept + 1 + WRITERS as u64
    );
    drop(h);
    store.check().unwrap();
}

/// A writer waiting for the allocator lock recovers its dead holder; that
/// recovery takes the same lock again, nested inside the wait. Afterwards the
/// write has landed, no lock is recorded as held and the segment is whole.
#[test]
fn waiting_on_a_dead_allocator_holder_recovers_it() {
    let seg = TempSegment::new("dead-alloc");
    let store = seg.open(16 * MB);
    // Attached before the child dies, so attaching does not recover it: the
    // SET below meets the dead holder while waiting for the lock.
    let mut h = store.handle().unwrap();
    let mut child = spawn_child("die-holding-allocator", &seg, 7, &[]);
    assert!(child.wait().unwrap().success());
    h.set(0, b"after", b"the holder died", &SetOptions::default())
        .unwrap();
    assert_eq!(store::testing::held_locks(&h).unwrap(), Vec::<u64>::new());
    assert_eq!(
        h.get(0, b"after").unwrap(),
        Some(b"the holder died".to_vec())
    );
    drop(h);
    store.check().unwrap();
    let info = store.info().unwrap();
    assert_eq!(
        info.stats
            .iter()
            .find(|(n, _)| *n == "recovered_contexts")
            .unwrap()
            .1,
        1
    );
}

/// The log is on but the process that writes its files has exited (or a
/// scribble turned the log on): writes fill the ring, then fail with
/// `LogWriterGone` instead of waiting forever for room, and the failed
/// write leaves nothing behind.
#[test]
fn a_full_log_ring_without_its_writer_fails_writes() {
    let seg = TempSegment::new("writer-gone");
    let store = seg.open(32 * MB);
    let mut child = spawn_child("enable-log", &seg, 0, &[]);
    assert!(child.wait().unwrap().success());
    let mut h = store.handle().unwrap();
    assert!(h.log_ring().status().enabled);
    let value = vec![7u8; 1000];
    let failed = (0..100_000u32).find_map(|i| {
        h.set(
            0,
            format!("k{i}").as_bytes(),
            &value,
            &SetOptions::default(),
        )
        .err()
        .map(|e| (i, e))
    });
    let (i, e) = failed.expect("the ring never filled");
    assert!(
        matches!(e, Error::LogWriterGone(pid) if pid == u64::from(child.id())),
        "{e}"
    );
    assert!(i > 100, "only {i} writes fitted in the ring");
    assert_eq!(h.get(0, format!("k{i}").as_bytes()).unwrap(), None);
    assert_eq!(h.get(0, b"k0").unwrap(), Some(value));
    drop(h);
    store.check().unwrap();
}

#[test]
fn restart_after_every_process_is_killed_keeps_everything() {
    let seg = TempSegment::new("restart");
    {
        let store = seg.open(16 * MB);
        let mut h = store.handle().unwrap();
        h.set(3, b"mine", b"from the parent", &SetOptions::default())
            .unwrap();
    }
    let mut kids: Vec<Child> = (0..2)
        .map(|id| spawn_child("hold", &seg, id, &[]))
        .collect();
    for k in &mut kids {
        wait_for_line(k, "ready");
    }
    for k in &mut kids {
        k.kill().unwrap();
        k.wait().unwrap();
    }
    // Nobody is attached now; attach again as a fresh process would.
    let store = seg.open(16 * MB);
    assert!(!store.created());
    let mut h = store.handle().unwrap();
    assert_eq!(
        h.get(3, b"mine").unwrap(),
        Some(b"from the parent".to_vec())
    );
    for i in 0..1000u64 {
        let v = h
            .get(0, format!("r{i}").as_bytes())
            .unwrap()
            .expect("key survives");
        let (writer, seq) = valid_value(&v).unwrap();
        assert!(writer < 2 && seq == i);
    }
    assert_eq!(h.dbsize(0).unwrap(), 1000);
    drop(h);
    store.check().unwrap();
}

/// Writers SIGKILLed at random moments while this process reads. Every value
/// read must be whole, no read may hang, and afterwards the segment's
/// accounting must be exact. `SHOAL_TORTURE_KILLS` raises the kill count.
#[test]
fn kill_9_torture() {
    let kills: u32 = std::env::var("SHOAL_TORTURE_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seg = TempSegment::new("torture");
    let store = seg.open(32 * MB);
    const WRITERS: u32 = 3;
    let mut next_id = 0;
    let mut spawn = |seg: &TempSegment| {
        next_id += 1;
        let mut c = spawn_child("torture", seg, next_id, &[]);
        wait_for_line(&mut c, "ready");
        c
    };
    let mut writers: Vec<Child> = (0..WRITERS).map(|_| spawn(&seg)).collect();

    // The checker: reads everything in a loop in its own thread; a watchdog
    // fails the test if one pass ever takes longer than a generous bound
    // (a lock or seqlock left behind by a dead writer would hang it).
    let stop = Arc::new(AtomicBool::new(false));
    let pause = Arc::new(AtomicBool::new(false));
    let parked = Arc::new(AtomicBool::new(false));
    let passes = Arc::new(AtomicU64::new(0));
    let last_pass = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let checker = {
        let (pause, parked) = (pause.clone(), parked.clone());
        let (store, stop, passes, last_pass) = (
            store.clone(),
            stop.clone(),
            passes.clone(),
            last_pass.clone(),
        );
        std::thread::spawn(move || -> Result<u64, String> {
            let mut h = store.handle().map_err(|e| e.to_string())?;
            let mut values = 0;
            while !stop.load(Ordering::Relaxed) {
                if pause.load(Ordering::Acquire) {
                    parked.store(true, Ordering::Release);
                    while pause.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    parked.store(false, Ordering::Release);
                }
                values += check_all(&mut h)?;
                passes.fetch_add(1, Ordering::Relaxed);
                last_pass.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
            }
            Ok(values)
        })
    };
    let mut rng = 0x1234_5678_9abc_def1u64;
    let mut sigkills = 0u32;
    for kill in 1..=kills {
        if kill % 50 == 0 {
            // Every 50 kills, stop everything and check the accounting too.
            for w in &mut writers {
                w.kill().unwrap();
                w.wait().unwrap();
                sigkills += 1;
            }
            pause.store(true, Ordering::Release);
            while !parked.load(Ordering::Acquire) && !checker.is_finished() {
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(store.handle().unwrap());
            store
                .check()
                .unwrap_or_else(|e| panic!("after {kill} kills: {e}"));
            pause.store(false, Ordering::Release);
            for w in &mut writers {
                *w = spawn(&seg);
            }
            last_pass.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
            continue;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_micros(500 + rng % 15_000));
        let victim = (rng >> 32) as usize % writers.len();
        writers[victim].kill().unwrap();
        writers[victim].wait().unwrap();
        sigkills += 1;
        writers[victim] = spawn(&seg);
        let stalled = started.elapsed().as_millis() as u64 - last_pass.load(Ordering::Relaxed);
        assert!(
            stalled < 30_000,
            "the checker has not finished a pass for {stalled} ms"
        );
        assert!(
            !checker.is_finished(),
            "checker stopped: {:?}",
            checker.join()
        );
    }
    for w in &mut writers {
        w.kill().unwrap();
        w.wait().unwrap();
        sigkills += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let values = checker.join().unwrap().unwrap();
    assert!(passes.load(Ordering::Relaxed) > 0 && values > 0);

    // A new handle recovers the contexts of the last killed writers; after it
    // the segment must be exactly consistent and every value whole.
    let mut h = store.handle().unwrap();
    check_all(&mut h).unwrap();
    drop(h);
    let report = store.check().unwrap();
    let info = store.info().unwrap();
    let recovered = info
        .stats
        .iter()
        .find(|(n, _)| *n == "recovered_contexts")
        .unwrap()
        .1;
    eprintln!(
        "torture: {sigkills} SIGKILLs, {} checker passes, {values} values verified, {recovered} contexts recovered, {report:?}",
        passes.load(Ordering::Relaxed)
    );
    assert!(sigkills >= kills && recovered > 0);
}
