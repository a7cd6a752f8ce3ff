//! Helpers shared by the store's integration tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use store::{Clock, Location, OpenOptions, Store};

/// A segment file in the temp dir, removed on drop.
pub struct TempSegment {
    pub path: PathBuf,
}

impl TempSegment {
    pub fn new(tag: &str) -> TempSegment {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "shoal-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&path);
        TempSegment { path }
    }

    pub fn options(&self, size: u64) -> OpenOptions {
        OpenOptions {
            location: Location::Path(self.path.clone()),
            size,
            ..OpenOptions::default()
        }
    }

    pub fn open(&self, size: u64) -> Store {
        Store::open(&self.options(size)).expect("open segment")
    }

    /// Opens with a manual clock starting at `start_ms`.
    pub fn open_with_clock(&self, size: u64, start_ms: u64) -> (Store, Arc<AtomicU64>) {
        let clock = Arc::new(AtomicU64::new(start_ms));
        let mut opts = self.options(size);
        opts.clock = Clock::Manual(clock.clone());
        (Store::open(&opts).expect("open segment"), clock)
    }
}

impl Drop for TempSegment {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// SET options with an absolute expiry (ms since the epoch).
pub fn expiring_at(at_ms: u64) -> store::SetOptions {
    store::SetOptions {
        expiry: store::Expiry::At(at_ms),
        ..store::SetOptions::default()
    }
}

/// A plain SET that must succeed.
pub fn put(h: &mut store::Handle, db: u8, key: &[u8], value: &[u8]) {
    let r = h
        .set(db, key, value, &store::SetOptions::default())
        .expect("set");
    assert!(r.written, "plain SET must write");
}

/// A stat by its INFO name, summed over contexts.
pub fn stat(store: &Store, name: &str) -> u64 {
    store
        .info()
        .expect("info")
        .stats
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no stat named {name}"))
}

/// Every key of `db`, by a full SCAN (sorted).
pub fn all_keys(h: &mut store::Handle, db: u8) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    let mut cursor = 0;
    loop {
        let page = h.scan(db, cursor, None, 100, None).expect("scan");
        keys.extend(page.keys);
        cursor = page.cursor;
        if cursor == 0 {
            break;
        }
    }
    keys.sort();
    keys
}

/// Starts this test binary again as a child process that runs only its
/// `child_entry` test, on `seg`, with `env` telling it what to do.
pub fn spawn_child(seg: &TempSegment, env: &[(&str, String)]) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env("SHOAL_SEGMENT", &seg.path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn child")
}

/// Waits until the child prints `line` on stdout.
pub fn wait_for_line(child: &mut Child, line: &str) {
    let out = child.stdout.as_mut().unwrap();
    let mut reader = BufReader::new(out);
    let mut buf = String::new();
    loop {
        buf.clear();
        let n = reader.read_line(&mut buf).unwrap();
        assert!(n > 0, "child exited before printing {line:?}");
        // libtest prints "test child_entry ... " without a newline first.
        if buf.trim_end().ends_with(line) {
            return;
        }
    }
}

// ---------- the transaction log ----------

use store::log::Record;
use store::{Collection, Handle, Hash, List, Set, ValueType, ZSet, NUM_DBS};

/// A log frame: its LSN and its record.
pub type Frame = (u64, Vec<u8>);

/// Every complete frame of the ring from `from` on; fails if one the
/// store owes is still incomplete (the ring must end at its head).
pub fn ring_frames(h: &Handle, from: u64) -> Vec<Frame> {
    let ring = h.log_ring();
    let mut bytes = Vec::new();
    let end = ring.read_frames(from, &mut bytes, usize::MAX).unwrap();
    assert_eq!(
        end,
        ring.head(),
        "the ring has an incomplete frame at LSN {end}"
    );
    let (mut pos, mut at, mut out) = (from, 0usize, Vec::new());
    while at < bytes.len() {
        let (_, payload, size) = store::log::frame::parse_frame(&bytes[at..], pos).unwrap();
        out.push((pos, payload.to_vec()));
        pos += size;
        at += size as usize;
    }
    out
}

/// Applies frames in order as recovery does: a group once its last frame
/// arrives; `Pad`s are skipped (one without the group bit closes a group).
pub fn replay(h: &mut Handle, frames: &[Frame]) {
    let mut group: Vec<&Frame> = Vec::new();
    for frame in frames {
        let (record, continues) = Record::decode(&frame.1).unwrap();
        if record != Record::Pad {
            group.push(frame);
        }
        if store::log::record::drops_group(&frame.1) {
            // The section that wrote the group was undone.
            group.clear();
        } else if !continues {
            for (lsn, payload) in group.drain(..) {
                h.apply_record(*lsn, payload)
                    .unwrap_or_else(|e| panic!("record at LSN {lsn} ({record}): {e}"));
            }
        }
    }
    assert!(group.is_empty(), "the log ends inside a group");
}

/// Every key of every db: type, expiry, flags and value, comparable across
/// stores (hash and set members sorted: their order depends on the form).
pub fn dump_all(h: &mut Handle) -> Vec<(u8, Vec<u8>, String)> {
    let mut out = Vec::new();
    for db in 0..NUM_DBS as u8 {
        let mut cursor = 0;
        loop {
            let page = h.scan(db, cursor, None, 100, None).unwrap();
            for key in page.keys {
                let Some(meta) = h.meta(db, &key).unwrap() else {
                    continue;
                };
                let value = match meta.vtype {
                    ValueType::String => format!("{:?}", h.get(db, &key).unwrap()),
                    ValueType::List => format!(
                        "{:?}",
                        h.read_collection::<List, _>(db, &key, |l| l.range(0, l.len()))
                            .unwrap()
                    ),
                    ValueType::Hash => {
                        let mut all = h
                            .read_collection::<Hash, _>(db, &key, |x| x.entries())
                            .unwrap()
                            .unwrap_or_default();
                        all.sort();
                        format!("{all:?}")
                    }
                    ValueType::Set => {
                        let mut all = h
                            .read_collection::<Set, _>(db, &key, |x| x.members())
                            .unwrap()
                            .unwrap_or_default();
                        all.sort();
                        format!("{all:?}")
                    }
                    ValueType::ZSet => {
                        let all = h
                            .read_collection::<ZSet, _>(db, &key, |z| z.range(0, z.len()))
                            .unwrap()
                            .unwrap_or_default();
                        let bits: Vec<(Vec<u8>, u64)> =
                            all.into_iter().map(|(m, s)| (m, s.to_bits())).collect();
                        format!("{bits:?}")
                    }
                    ValueType::Stream => String::new(),
                };
                out.push((
                    db,
                    key,
                    format!(
                        "{} exp={:?} flags={} {value}",
                        meta.vtype.name(),
                        meta.expire_at_ms,
                        meta.mc_flags
                    ),
                ));
            }
            cursor = page.cursor;
            if cursor == 0 {
                break;
            }
        }
    }
    out.sort();
    out
}

// ---------- crash points ----------

/// The body of a crash-point child process (a test named `entry` in the
/// test binary): when `SHOAL_CRASH_OP` is set, opens the segment, arms
/// `testing::crash_after(SHOAL_CRASH_AT)` and runs the operation; prints
/// "completed" when it got to the end without crashing.
pub fn crash_child_body(run_op: impl FnOnce(&mut Handle, &str)) {
    let Ok(op) = std::env::var("SHOAL_CRASH_OP") else {
        return;
    };
    let k: u64 = std::env::var("SHOAL_CRASH_AT").unwrap().parse().unwrap();
    let path = std::env::var("SHOAL_SEGMENT").unwrap();
    let store = Store::open(&OpenOptions {
        location: Location::Path(path.into()),
        create: false,
        ..OpenOptions::default()
    })
    .unwrap();
    let mut h = store.handle().unwrap();
    store::testing::crash_after(&mut h, k);
    run_op(&mut h, &op);
    drop(h);
    println!("completed");
}

/// A fresh segment of `size` bytes with 8 contexts, the log on if `log`,
/// prepared by `setup`.
pub fn crash_segment(
    tag: &str,
    size: u64,
    log: bool,
    setup: fn(&mut Handle),
) -> (TempSegment, Store) {
    let seg = TempSegment::new(tag);
    let mut opts = seg.options(size);
    opts.contexts = 8;
    let store = Store::open(&opts).unwrap();
    {
        let mut h = store.handle().unwrap();
        if log {
            h.log_ring().enable(0, store::log::FsyncPolicy::No).unwrap();
        }
        setup(&mut h);
    }
    (seg, store)
}

/// Runs `op` in a child process (this binary's test `entry`, see
/// [`crash_child_body`]) on `seg` until its `k`-th crash point: its output
/// and whether it ran to the end.
pub fn run_crash_child(
    seg: &TempSegment,
    entry: &str,
    op: &str,
    k: u64,
) -> (std::process::Output, bool) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([entry, "--exact", "--nocapture", "--test-threads=1"])
        .env("SHOAL_CRASH_OP", op)
        .env("SHOAL_CRASH_AT", k.to_string())
        .env("SHOAL_SEGMENT", &seg.path)
        .output()
        .unwrap();
    let completed = String::from_utf8_lossy(&out.stdout).contains("completed");
    (out, completed)
}
