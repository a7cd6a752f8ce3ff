//! The replication backlog of a primary without `--dir` (docs/replication.md,
//! "A primary without --dir"): Redis's `repl-backlog-size` bytes of the
//! log, kept in the supervisor's memory instead of log files.
//!
//! The ring in the segment is off while no replica ever asked: writes then
//! cost nothing. The first `SHOAL.SYNC` turns it on inside an exclusive
//! section of the store ([`store::log::LogRing::enable_for_replicas`]), at
//! an LSN above every version a key carries, and starts a thread that
//! drains complete frames from the ring into the backlog (releasing them,
//! as the log writer does after writing files). Senders read whole frames
//! from the backlog. A sender pins the position it still has to send, so
//! the frames a full resync's walk is racing stay (up to
//! [`PINNED_MAX`] past the configured size, Redis's default
//! `client-output-buffer-limit replica` hard limit); a sender whose position
//! was dropped anyway closes its link and the replica syncs again.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use engine::replication as repl;
use store::log::frame::{decode_frame_header, frame_size, FRAME_HEADER, MAX_RECORD};
use store::log::LogRing;
use store::Store;

/// Frames the drain thread takes from the ring at once.
const DRAIN_CHUNK: usize = 1 << 20;
/// How far past `repl-backlog-size` the positions senders still have to
/// send may hold frames.
pub const PINNED_MAX: u64 = 256 << 20;
/// How often the drain thread looks for frames while replicas are linked
/// (otherwise it sleeps until a writer wakes it, or 100 ms).
const LINKED_POLL: Duration = Duration::from_millis(1);

/// The frames kept, from `first` to `first + bytes.len()`.
struct Frames {
    first: u64,
    bytes: VecDeque<u8>,
    /// Each sender's next position to send.
    pins: HashMap<u64, u64>,
    /// Set when the drain thread stopped (the ring was turned off or is
    /// damaged): senders close their links.
    ended: Option<String>,
}

impl Frames {
    fn end(&self) -> u64 {
        self.first + self.bytes.len() as u64
    }

    /// Appends `len` bytes at backlog index `at` to `out`.
    fn copy(&self, at: usize, len: usize, out: &mut Vec<u8>) {
        let (a, b) = self.bytes.as_slices();
        if at < a.len() {
            let from_a = len.min(a.len() - at);
            out.extend_from_slice(&a[at..at + from_a]);
            out.extend_from_slice(&b[..len - from_a]);
        } else {
            out.extend_from_slice(&b[at - a.len()..at - a.len() + len]);
        }
    }
}

/// The backlog: frames in memory, and the drain thread's state.
pub struct Backlog {
    frames: Mutex<Frames>,
    grew: Condvar,
    stop: AtomicBool,
}

impl Backlog {
    fn lock(&self) -> MutexGuard<'_, Frames> {
        self.frames.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first LSN held and the end (the next frame's LSN).
    pub fn span(&self) -> (u64, u64) {
        let f = self.lock();
        (f.first, f.end())
    }

    /// Pins the end for sender `id` and returns it: the start of a full
    /// resync (every frame before it belongs to a committed write, which a
    /// walk of the store that starts after this sees).
    pub fn pin_end(&self, id: u64) -> u64 {
        let mut f = self.lock();
        let end = f.end();
        f.pins.insert(id, end);
        end
    }

    /// Pins `lsn` for sender `id` if the backlog still holds it.
    pub fn pin(&self, id: u64, lsn: u64) -> bool {
        let mut f = self.lock();
        if lsn < f.first || lsn > f.end() {
            return false;
        }
        f.pins.insert(id, lsn);
        true
    }

    /// Sender `id` is gone.
    pub fn unpin(&self, id: u64) {
        self.lock().pins.remove(&id);
    }

    /// Appends the whole frames from `pos` on to `out`, about `max` bytes
    /// at most (one frame at least), waiting up to `wait` for one; moves
    /// sender `id`'s pin past them. The LSN after the last frame taken.
    /// An error when the backlog no longer holds `pos` (the sender fell
    /// behind by more than it may) or stopped.
    pub fn read(
        &self,
        id: u64,
        pos: u64,
        out: &mut Vec<u8>,
        max: usize,
        wait: Duration,
    ) -> Result<u64, String> {
        let mut f = self.lock();
        if f.end() <= pos && f.ended.is_none() {
            f = self
                .grew
                .wait_timeout(f, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if let Some(why) = &f.ended {
            return Err(why.clone());
        }
        if pos < f.first || pos > f.end() {
            return Err(format!(
                "the replica fell behind the backlog (LSN {pos}, the backlog holds {} to {})",
                f.first,
                f.end()
            ));
        }
        let (end, start_len) = (f.end(), out.len());
        let mut at = pos;
        while end - at >= FRAME_HEADER as u64 {
            let mut header = Vec::with_capacity(FRAME_HEADER);
            f.copy((at - f.first) as usize, FRAME_HEADER, &mut header);
            let Ok(header) = <[u8; FRAME_HEADER]>::try_from(header) else {
                break;
            };
            let size = frame_size(decode_frame_header(&header).len as usize);
            // A position that is not a frame's start reads a length that
            // makes no frame here: the caller's frame check refuses it.
            if size > (MAX_RECORD + FRAME_HEADER) as u64 || size > end - at {
                break;
            }
            if out.len() > start_len && out.len() - start_len + size as usize > max {
                break;
            }
            f.copy((at - f.first) as usize, size as usize, out);
            at += size;
        }
        f.pins.insert(id, at);
        Ok(at)
    }

    /// Appends drained frames and drops what is past the size kept.
    fn push(&self, frames: &[u8], keep: u64) {
        let mut f = self.lock();
        f.bytes.extend(frames);
        let end = f.end();
        let mut first = end.saturating_sub(keep);
        if let Some(&pinned) = f.pins.values().min() {
            first = first.min(pinned.max(end.saturating_sub(keep.saturating_add(PINNED_MAX))));
        }
        if first > f.first {
            let drop = (first - f.first) as usize;
            f.bytes.drain(..drop);
            f.first = first;
        }
        drop(f);
        self.grew.notify_all();
    }

    fn end_with(&self, why: String) {
        self.lock().ended = Some(why);
        self.grew.notify_all();
    }

    fn linked(&self) -> bool {
        !self.lock().pins.is_empty()
    }
}

/// The running backlog, if the ring was turned on for replicas.
static RUNNING: Mutex<Option<Arc<Backlog>>> = Mutex::new(None);

fn running() -> MutexGuard<'static, Option<Arc<Backlog>>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// The running backlog, without starting one.
pub fn current() -> Option<Arc<Backlog>> {
    running().clone()
}

/// The backlog, started if it is not running: the ring goes on at an LSN
/// above every version a key carries (a walk of the store finds the
/// highest: a promoted replica's keys carry its old primary's LSNs), so
/// that a replica's replay never skips a new frame.
pub fn start(store: &Store) -> Result<Arc<Backlog>, String> {
    let mut slot = running();
    if let Some(b) = slot.as_ref() {
        if b.lock().ended.is_none() {
            return Ok(b.clone());
        }
    }
    let mut h = store.handle().map_err(|e| e.to_string())?;
    let mut top = 0;
    h.snapshot_records(&mut |version, _| {
        top = top.max(version);
        Ok(())
    })
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    let ring = h.log_ring();
    // Inside the section no write is between its check of the log word
    // and its commit; those after it are logged, with LSNs from `head` on.
    let head = h
        .exclusive(|_| ring.enable_for_replicas(ring.head().max(top) + 1))
        .map_err(|e| e.to_string())?;
    drop(h);
    let backlog = Arc::new(Backlog {
        frames: Mutex::new(Frames {
            first: head,
            bytes: VecDeque::new(),
            pins: HashMap::new(),
            ended: None,
        }),
        grew: Condvar::new(),
        stop: AtomicBool::new(false),
    });
    let (b, store) = (backlog.clone(), store.clone());
    std::thread::Builder::new()
        .name("repl-backlog".into())
        .spawn(move || drain(&b, &ring, &store, head))
        .map_err(|e| format!("start the backlog thread: {e}"))?;
    println!(
        "shoal: the log ring is on for replicas from LSN {head} (an in-memory backlog: no --dir)"
    );
    *slot = Some(backlog.clone());
    Ok(backlog)
}

/// Turns the ring off again (this server became a replica: the writes it
/// applies are replays, and a later promotion starts a new history).
pub fn stop(store: &Store) {
    let Some(backlog) = running().take() else {
        return;
    };
    let ring = store.log_ring();
    if let Ok(mut h) = store.handle() {
        let _ = h.exclusive(|_| ring.disable());
    }
    backlog.stop.store(true, Ordering::Release);
    backlog.end_with("this server no longer keeps a backlog".into());
    println!("shoal: the log ring is off (the in-memory backlog is gone)");
}

/// Moves complete frames from the ring to the backlog until stopped.
fn drain(backlog: &Backlog, ring: &LogRing, store: &Store, mut pos: u64) {
    let mut chunk = Vec::with_capacity(DRAIN_CHUNK);
    let mut keep = repl::backlog_size(store);
    let mut keep_read = Instant::now();
    while !backlog.stop.load(Ordering::Acquire) {
        if keep_read.elapsed() >= Duration::from_millis(100) {
            keep = repl::backlog_size(store);
            keep_read = Instant::now();
        }
        chunk.clear();
        let end = match ring.read_frames(pos, &mut chunk, DRAIN_CHUNK) {
            Ok(end) => end,
            Err(e) => {
                eprintln!("shoal: the log ring is damaged at LSN {pos}: {e}");
                backlog.end_with(format!("the log ring is damaged at LSN {pos}"));
                return;
            }
        };
        if end > pos {
            backlog.push(&chunk, keep);
            // Released only once in the backlog, so a sender never misses
            // a frame between the two.
            let _ = ring.release(end);
            let _ = ring.set_fsynced(end);
            pos = end;
            continue;
        }
        if backlog.linked() {
            std::thread::sleep(LINKED_POLL);
        } else {
            ring.wait_frames(pos, Duration::from_millis(100));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::log::encode_frame;

    fn backlog_at(first: u64) -> Backlog {
        Backlog {
            frames: Mutex::new(Frames {
                first,
                bytes: VecDeque::new(),
                pins: HashMap::new(),
                ended: None,
            }),
            grew: Condvar::new(),
            stop: AtomicBool::new(false),
        }
    }

    #[test]
    fn reads_whole_frames_and_keeps_what_senders_still_need() {
        let b = backlog_at(64);
        let mut frames = Vec::new();
        let mut lsn = 64;
        let mut starts = Vec::new();
        for i in 0..20u8 {
            starts.push(lsn);
            let before = frames.len();
            encode_frame(lsn, &[0x0f, i, i, i], &mut frames);
            lsn += (frames.len() - before) as u64;
        }
        let size = starts[1] - starts[0];
        // A sender at the third frame holds it while the size kept is one
        // frame.
        assert!(b.pin(7, 64));
        b.push(&frames, size);
        assert_eq!(b.span(), (64, lsn));
        assert!(b.pin(7, starts[2]));
        b.push(&[], size);
        assert_eq!(b.span(), (starts[2], lsn));
        // At most two frames' worth per read, whole frames only.
        let mut out = Vec::new();
        let to = b
            .read(7, starts[2], &mut out, 2 * size as usize, Duration::ZERO)
            .unwrap();
        assert_eq!(to, starts[4]);
        assert_eq!(
            out,
            frames[(starts[2] - 64) as usize..(starts[4] - 64) as usize]
        );
        // Not a frame's start: no frame.
        let mut junk = Vec::new();
        let _ = b.read(8, starts[5] + 8, &mut junk, 1 << 20, Duration::ZERO);
        assert!(junk.is_empty() || !super::super::replication::frames_check(&junk, starts[5] + 8));
        // Nobody pinned: only the size kept stays, and a position before it
        // is an error.
        b.unpin(7);
        b.unpin(8);
        b.push(&[], size);
        assert_eq!(b.span(), (starts[19], lsn));
        assert!(b
            .read(7, starts[2], &mut out, 1 << 20, Duration::ZERO)
            .is_err());
        assert!(!b.pin(9, starts[2]));
        // The end waits, then reads nothing.
        let mut none = Vec::new();
        assert_eq!(
            b.read(9, lsn, &mut none, 1 << 20, Duration::from_millis(1)),
            Ok(lsn)
        );
        assert!(none.is_empty());
    }
}
