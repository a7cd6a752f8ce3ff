//! Helpers shared by the log crate's tests: temporary directories, log files
//! built byte by byte, and in-memory stand-ins for the ring and the store.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::file::{encode_file_header, log_file_name, FILE_HEADER, LOG_MAGIC};
use log::{FsyncPolicy, LogSource, SnapshotSource};
use store::log::frame::parse_frame;
use store::log::record::{encode_set_entry, set_continues};
use store::log::{encode_frame, frame_size};
use store::ValueType;

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("shoal-log-test-{}-{name}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The names of the files in the directory, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A `SetEntry` payload for `key` = `value` in db 0, group bit as given.
pub fn set(key: &str, value: &str, continues: bool) -> Vec<u8> {
    let mut out = Vec::new();
    encode_set_entry(
        &mut out,
        0,
        key.as_bytes(),
        ValueType::String,
        0,
        0,
        &[value.as_bytes()],
    );
    set_continues(&mut out, continues);
    out
}

/// Frames for `payloads`, the first at `lsn`; returns the bytes and the LSN
/// after them.
pub fn frames(lsn: u64, payloads: &[Vec<u8>]) -> (Vec<u8>, u64) {
    let mut out = Vec::new();
    let mut at = lsn;
    for p in payloads {
        encode_frame(at, p, &mut out);
        at += frame_size(p.len());
    }
    (out, at)
}

/// Writes a log file starting at `first_lsn` with `payloads`; returns its
/// path and end LSN.
pub fn write_log(dir: &Path, first_lsn: u64, payloads: &[Vec<u8>]) -> (PathBuf, u64) {
    let path = dir.join(log_file_name(first_lsn));
    let (body, end) = frames(first_lsn, payloads);
    let mut bytes = encode_file_header(LOG_MAGIC, first_lsn).to_vec();
    bytes.extend_from_slice(&body);
    fs::write(&path, bytes).unwrap();
    (path, end)
}

/// The byte offset in a log file starting at `first_lsn` of the frame at `lsn`.
pub fn offset_of(first_lsn: u64, lsn: u64) -> u64 {
    FILE_HEADER as u64 + (lsn - first_lsn)
}

/// Flips one bit of a file.
pub fn flip_bit(path: &Path, offset: u64) {
    let mut bytes = fs::read(path).unwrap();
    bytes[offset as usize] ^= 0x04;
    fs::write(path, bytes).unwrap();
}

/// Cuts `n` bytes off the end of a file.
pub fn chop(path: &Path, n: u64) {
    let len = fs::metadata(path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len - n)
        .unwrap();
}

/// What a test does when the writer waits.
pub type Step = Box<dyn FnMut(&mut FakeRing)>;

/// The ring in memory: frames from `base`, complete up to `visible`.
pub struct FakeRing {
    pub base: u64,
    pub bytes: Vec<u8>,
    pub visible: u64,
    pub released: u64,
    pub head: u64,
    pub release_calls: Vec<u64>,
    pub fsynced_calls: Vec<u64>,
    pub policy: FsyncPolicy,
    pub script: VecDeque<Step>,
    pub stop: Arc<AtomicBool>,
    /// Milliseconds on the writer's clock; each wait adds 100.
    pub clock_ms: Arc<AtomicU64>,
    pub waits: u64,
    pub reads: u64,
    /// Hand over every byte up to `visible` without looking at it (to test
    /// that the writer checks what the ring gives it).
    pub unchecked_reads: bool,
    /// An LSN the log is asked to restart at (a promotion), until taken.
    pub restart: Option<u64>,
}

impl FakeRing {
    /// A ring whose frames start at (and whose writer has released up to) `base`.
    pub fn new(base: u64, policy: FsyncPolicy) -> FakeRing {
        FakeRing {
            base,
            bytes: Vec::new(),
            visible: base,
            released: base,
            head: base,
            release_calls: Vec::new(),
            fsynced_calls: Vec::new(),
            policy,
            script: VecDeque::new(),
            stop: Arc::new(AtomicBool::new(false)),
            clock_ms: Arc::new(AtomicU64::new(0)),
            waits: 0,
            reads: 0,
            unchecked_reads: false,
            restart: None,
        }
    }

    /// Appends a complete frame; returns its LSN.
    pub fn push(&mut self, payload: &[u8]) -> u64 {
        let lsn = self.head;
        encode_frame(lsn, payload, &mut self.bytes);
        self.head += frame_size(payload.len());
        self.visible = self.head;
        lsn
    }

    /// Appends `n` frames of `key<i>` = a value of `size` bytes.
    pub fn push_many(&mut self, n: usize, size: usize) {
        for i in 0..n {
            self.push(&set(&format!("key{i}"), &"v".repeat(size), false));
        }
    }

    /// Then run `step` at the next wait.
    pub fn then(&mut self, step: impl FnMut(&mut FakeRing) + 'static) {
        self.script.push_back(Box::new(step));
    }

    /// A clock for the writer that reads `clock_ms`.
    pub fn clock(&self) -> Box<dyn FnMut() -> Instant + Send> {
        let base = Instant::now();
        let ms = Arc::clone(&self.clock_ms);
        Box::new(move || base + Duration::from_millis(ms.load(Ordering::Relaxed)))
    }
}

impl LogSource for FakeRing {
    fn released(&self) -> u64 {
        self.released
    }

    fn head(&self) -> u64 {
        self.head
    }

    fn read_frames(&mut self, from: u64, out: &mut Vec<u8>, max: usize) -> u64 {
        self.reads += 1;
        if self.unchecked_reads {
            out.extend_from_slice(&self.bytes[(from - self.base) as usize..]);
            return self.visible;
        }
        let mut at = from;
        let start_len = out.len();
        while at < self.visible && (out.len() == start_len || out.len() - start_len < max) {
            let offset = (at - self.base) as usize;
            let (_, _, size) = parse_frame(&self.bytes[offset..], at).unwrap();
            if out.len() > start_len && out.len() - start_len + size as usize > max {
                break;
            }
            out.extend_from_slice(&self.bytes[offset..offset + size as usize]);
            at += size;
        }
        at
    }

    fn release(&mut self, lsn: u64) {
        assert!(lsn >= self.released, "release went backwards");
        self.released = lsn;
        self.release_calls.push(lsn);
    }

    fn fsynced(&mut self, lsn: u64) {
        self.fsynced_calls.push(lsn);
    }

    fn wait(&mut self, _from: u64, _timeout: Duration) {
        self.waits += 1;
        self.clock_ms.fetch_add(100, Ordering::Relaxed);
        match self.script.pop_front() {
            Some(mut step) => step(self),
            None => self.stop.store(true, Ordering::Release),
        }
    }

    fn policy(&self) -> FsyncPolicy {
        self.policy
    }

    fn take_restart(&mut self, pos: u64) -> Option<u64> {
        if pos != self.head || self.released != pos {
            return None;
        }
        self.restart.take()
    }

    /// The ring moves to `lsn`: its frames now start there.
    fn restarted(&mut self, lsn: u64) {
        self.base = lsn;
        self.bytes.clear();
        self.head = lsn;
        self.visible = lsn;
        self.released = lsn;
    }
}

/// The store in memory: entries (lsn, payload) and the LSNs it reports.
pub struct FakeStore {
    pub start: u64,
    pub end: u64,
    pub entries: Vec<(u64, Vec<u8>)>,
    /// Fail after this many entries, as a disk error would.
    pub fail_after: Option<usize>,
}

impl SnapshotSource for FakeStore {
    fn start_lsn(&mut self) -> u64 {
        self.start
    }

    fn for_each(&mut self, f: &mut dyn FnMut(u64, &[u8]) -> io::Result<()>) -> io::Result<()> {
        for (i, (lsn, payload)) in self.entries.iter().enumerate() {
            if self.fail_after == Some(i) {
                return Err(io::Error::other("disk full"));
            }
            f(*lsn, payload)?;
        }
        Ok(())
    }

    fn end_lsn(&mut self) -> u64 {
        self.end
    }
}

/// Every (phase, lsn, payload) recovery applied.
pub type Applied = Vec<(log::Phase, u64, Vec<u8>)>;
