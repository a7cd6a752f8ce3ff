//! The log ring: a byte ring in the segment that every write appends its
//! frames to, and that the log writer (the supervisor) drains to files.
//!
//! LSN = byte offset in the log stream; a frame lives at ring offset
//! `lsn % size`. While the log is on, the segment's write counter is the
//! head: a write reserves its frames by moving it past their total size,
//! under the reserve lock and while it holds its keys' locks, so a key's
//! frames are in the order its writes land (docs/design.md I16).
//!
//! A write goes:
//! 1. stage its records ([`Handle::log_stage`]), then, under its locks and
//!    inside its transaction, reserve and fill the frames without their LSN
//!    words ([`Handle::log_reserve`]): `C_LOG_START/END` name them and
//!    `C_LOG_UNCOMMITTED` is 1;
//! 2. clear `C_LOG_UNCOMMITTED` through the undo log and commit;
//! 3. store each frame's LSN word (Release): the frame is complete, and only
//!    now does the bucket's seqlock turn even, so no reader sees a value
//!    whose record is not complete in the ring ([`Handle::log_complete`]).
//!
//! A crash between 1 and 2 rolls the write back and leaves
//! `C_LOG_UNCOMMITTED` at 1: recovery voids the frames (a `Pad` over them).
//! A crash between 2 and 3 leaves a committed write with incomplete frames:
//! recovery completes them (the redo). Either way store and log agree.
//!
//! The writer copies complete frames out, then zeroes their ring bytes
//! before it moves `H_LOG_RELEASED`, so a stale word can never look like
//! the LSN of a frame yet to come (LSN 0 is never used).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustix::thread::futex;

use super::frame::{decode_frame_header, encode_header_tail, frame_size, FRAME_HEADER};
use crate::error::{Error, Result};
use crate::keyspace::handle::Handle;
use crate::segment::context::{Backoff, Ctx, OwnerFate};
use crate::segment::journal::JOURNAL_ROLLED_BACK;
use crate::segment::layout::*;
use crate::segment::shm::Region;
use crate::segment::Shared;

/// The LSN of a log's very first frame: a log whose first file starts here
/// holds every write since the store was empty (LSN 0 is never used: a
/// zeroed ring word must never look like a complete frame).
pub const FIRST_LSN: u64 = 8;

/// `H_LOG_ENABLED`'s values besides 0 (off): the log writer drains the
/// ring to files, or the supervisor keeps its frames in memory only.
const LOG_TO_FILES: u64 = 1;
const LOG_TO_MEMORY: u64 = 2;

/// The kind byte's flag: the next frame belongs to the same group.
pub const GROUP_CONTINUES: u8 = 0x80;
/// The kind byte of a `Pad` record.
const KIND_PAD: u8 = 15;

/// The fsync policy clients' replies follow and the log writer keeps
/// (Redis's `appendfsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FsyncPolicy {
    /// Reply only after the fsync that covers the write's frames.
    Always,
    /// The writer fsyncs once a second.
    EverySec,
    /// The operating system decides.
    No,
}

impl std::fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `FsyncPolicy::from_str` got a name other than always, everysec or no.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl std::fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown fsync policy {:?} (always, everysec or no)",
            self.0
        )
    }
}

impl std::error::Error for UnknownPolicy {}

impl std::str::FromStr for FsyncPolicy {
    type Err = UnknownPolicy;

    /// Case-insensitive, as Redis takes CONFIG SET values.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        FsyncPolicy::from_name(s).ok_or_else(|| UnknownPolicy(s.to_string()))
    }
}

impl FsyncPolicy {
    /// The name `appendfsync` takes.
    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::EverySec => "everysec",
            FsyncPolicy::No => "no",
        }
    }

    /// Parses `always`, `everysec` or `no` (any case).
    pub fn from_name(s: &str) -> Option<FsyncPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(FsyncPolicy::Always),
            "everysec" => Some(FsyncPolicy::EverySec),
            "no" => Some(FsyncPolicy::No),
            _ => None,
        }
    }

    fn word(self) -> u64 {
        match self {
            FsyncPolicy::Always => 0,
            FsyncPolicy::EverySec => 1,
            FsyncPolicy::No => 2,
        }
    }

    fn from_word(w: u64) -> FsyncPolicy {
        match w {
            0 => FsyncPolicy::Always,
            2 => FsyncPolicy::No,
            _ => FsyncPolicy::EverySec,
        }
    }
}

/// The ring's bytes: offset and size in the segment.
#[derive(Clone, Copy)]
struct RingArea {
    off: u64,
    size: u64,
}

impl RingArea {
    fn of(sh: &Shared) -> RingArea {
        RingArea {
            off: sh.geo.log_off,
            size: sh.geo.log_size,
        }
    }

    /// Writes `bytes` at log position `lsn`, wrapping at the ring's end.
    fn write(&self, r: &Region, lsn: u64, bytes: &[u8]) -> Result<()> {
        let at = lsn % self.size;
        let first = ((self.size - at) as usize).min(bytes.len());
        r.write_bytes(self.off + at, &bytes[..first])?;
        if first < bytes.len() {
            r.write_bytes(self.off, &bytes[first..])?;
        }
        Ok(())
    }

    /// Appends `len` bytes at log position `lsn` to `out`.
    fn read(&self, r: &Region, lsn: u64, len: u64, out: &mut Vec<u8>) -> Result<()> {
        let at = lsn % self.size;
        let first = (self.size - at).min(len);
        r.read_bytes(self.off + at, first, out)?;
        if first < len {
            r.read_bytes(self.off, len - first, out)?;
        }
        Ok(())
    }

    fn zero(&self, r: &Region, lsn: u64, len: u64) -> Result<()> {
        let at = lsn % self.size;
        let first = (self.size - at).min(len);
        r.zero(self.off + at, first)?;
        if first < len {
            r.zero(self.off, len - first)?;
        }
        Ok(())
    }

    /// The size of the frame at `lsn`, from its header's length field.
    fn frame_size_at(&self, r: &Region, lsn: u64) -> Result<u64> {
        let mut bytes = Vec::with_capacity(FRAME_HEADER);
        self.read(r, lsn, FRAME_HEADER as u64, &mut bytes)?;
        let header: &[u8; FRAME_HEADER] = bytes[..]
            .try_into()
            .map_err(|_| Error::Corrupted(self.off + lsn % self.size))?;
        Ok(frame_size(decode_frame_header(header).len as usize))
    }

    /// The LSN word of a frame at `lsn` (8-aligned: every frame size is).
    fn lsn_word<'r>(&self, r: &'r Region, lsn: u64) -> Result<&'r AtomicU64> {
        r.a64(self.off + lsn % self.size)
    }

    /// The largest frame the ring takes: half of it, so a writer never
    /// waits for space that cannot come.
    fn max_frame(&self) -> u64 {
        self.size / 2
    }
}

/// Sleeps on a futex word until it differs from `seen` or `timeout` passes.
fn futex_wait(word: &AtomicU32, seen: u32, timeout: Duration) {
    let ts = rustix::time::Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    let _ = futex::wait(word, futex::Flags::empty(), seen, Some(&ts));
}

/// Whether a process with this pid runs (the word comes from shared
/// memory: anything that is not a pid is no process).
fn process_alive(pid: u64) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|pid| {
            !matches!(
                rustix::process::test_kill_process(pid),
                Err(rustix::io::Errno::SRCH)
            )
        })
}

/// Bumps a futex word and wakes everyone sleeping on it.
fn futex_bump(word: &AtomicU32) {
    word.fetch_add(1, Ordering::AcqRel);
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}

/// One frame's bytes before its LSN word: payload with the group flag set
/// as asked, and the len/crc word.
fn fill_frame(r: &Region, ring: RingArea, lsn: u64, payload: &mut [u8]) -> Result<u64> {
    let size = frame_size(payload.len());
    let tail = encode_header_tail(payload, lsn);
    ring.write(r, lsn + 8, &tail)?;
    ring.write(r, lsn + FRAME_HEADER as u64, payload)?;
    let pad = size - FRAME_HEADER as u64 - payload.len() as u64;
    if pad > 0 {
        ring.zero(r, lsn + FRAME_HEADER as u64 + payload.len() as u64, pad)?;
    }
    Ok(size)
}

/// A `Pad` frame covering `[lsn, end)` (at least a header's worth),
/// complete. `continues`: it does not close an open group.
fn write_pad(r: &Region, ring: RingArea, lsn: u64, end: u64, continues: bool) -> Result<()> {
    let len = (end - lsn - FRAME_HEADER as u64) as usize;
    let mut payload = vec![0u8; len];
    if let Some(b) = payload.first_mut() {
        *b = KIND_PAD | if continues { GROUP_CONTINUES } else { 0 };
    }
    // An empty payload cannot carry a kind: a Pad is always at least 8.
    if payload.is_empty() {
        return Err(Error::Corrupted(lsn));
    }
    fill_frame(r, ring, lsn, &mut payload)?;
    ring.lsn_word(r, lsn)?.store(lsn, Ordering::Release);
    Ok(())
}

/// What a handle does with the log.
#[derive(Default)]
pub(crate) struct LogState {
    /// Payloads staged for the next reservation, back to back.
    staged: Vec<u8>,
    /// Where each staged payload ends in `staged`.
    staged_ends: Vec<usize>,
    /// Frames reserved and filled, not yet complete: (first LSN, end).
    reserved: Option<(u64, u64)>,
    /// The LSN of each reserved frame.
    reserved_frames: Vec<u64>,
    /// An EXEC's group is open on this handle; whether it has frames.
    group: Option<bool>,
    /// Replaying a record of this LSN: writes stamp it and log nothing.
    pub(crate) replay_lsn: Option<u64>,
    /// Removals log nothing (FLUSHDB's record covers them).
    pub(crate) quiet: bool,
    /// The end of the last frame this handle completed (`appendfsync
    /// always` waits for the fsync past it).
    pub(crate) last_end: u64,
}

impl LogState {
    /// The staged payloads, back to back, unstaged (a snapshot reads them
    /// out instead of logging them).
    pub(crate) fn take_staged(&mut self) -> Vec<u8> {
        self.staged_ends.clear();
        std::mem::take(&mut self.staged)
    }
}

impl Ctx {
    /// Reserves `total` bytes of log: the LSN of the first. Waits while the
    /// ring has no room (the writer frees it as it writes files).
    fn log_reserve_bytes(&mut self, total: u64) -> Result<u64> {
        let ring = RingArea::of(&self.sh);
        if total > ring.max_frame() {
            return Err(Error::LogRecordTooLarge(total, ring.max_frame()));
        }
        let lsn = self.claim_log_bytes(total)?;
        let mut backoff = Backoff::new();
        loop {
            let r = self.region();
            let released = r.load64(H_LOG_RELEASED)?;
            if lsn + total <= released + ring.size {
                return Ok(lsn);
            }
            if backoff.snooze() {
                // Before sleeping: is anyone left to make room?
                let pid = r.load64(H_LOG_WRITER_PID)?;
                if !process_alive(pid) {
                    // These bytes are never filled, and nothing reads past
                    // them until a new log writer starts the ring afresh:
                    // the context owes the log nothing.
                    r.store64(self.off + C_LOG_START, 0)?;
                    return Err(Error::LogWriterGone(pid));
                }
                wake_writer(r, ring.size)?;
                let word = r.a32(H_LOG_SPACE_FUTEX)?;
                let seen = word.load(Ordering::Acquire);
                if r.load64(H_LOG_RELEASED)? == released {
                    futex_wait(word, seen, Duration::from_millis(50));
                }
            }
        }
    }

    /// Moves the head past `total` bytes and records them as this context's
    /// claim (`C_LOG_START/END`, uncommitted), under `H_LOG_RESERVE_LOCK`:
    /// the claim is recorded before the head moves, and nobody else moves
    /// the head meanwhile. So a process killed at any instruction leaves
    /// either no claim with the head unmoved, or a claim with the head moved
    /// or still at its start: whoever takes the lock over from the dead
    /// holder ([`Ctx::take_over_log_claim`]) moves the head past it, and the
    /// dead context's recovery voids it with a `Pad`. (A bare fetch-add
    /// followed by the stores would leave, killed between them, bytes that
    /// nobody fills and the log writer waits for forever.)
    fn claim_log_bytes(&mut self, total: u64) -> Result<u64> {
        self.lock_log_reserve(None)?;
        let r = self.region();
        let head = r.a64(H_WRITE_VERSION)?;
        let lsn = head.load(Ordering::Acquire);
        // Uncommitted before the claim is recorded: a claim recovery finds
        // while the word still says committed (the last write's 0) would be
        // "completed" over ring bytes nobody filled.
        r.store64(self.off + C_LOG_END, lsn + total)?;
        r.store64(self.off + C_LOG_UNCOMMITTED, 1)?;
        self.crash_point();
        r.store64(self.off + C_LOG_START, lsn + 1)?;
        self.crash_point();
        head.store(lsn + total, Ordering::Release);
        self.crash_point();
        r.a32(H_LOG_RESERVE_LOCK)?.store(0, Ordering::Release);
        Ok(lsn)
    }

    /// Takes `H_LOG_RESERVE_LOCK`: waits while a live context holds it,
    /// and takes it over from a dead one, settling that one's claim
    /// ([`Ctx::take_over_log_claim`]) before returning. `recovering` is the
    /// dead context this one recovers (its owner word), whose lock is taken
    /// at once (its fate reads "recovering" now); the caller settles its
    /// claim. Everything done under the lock, a takeover included, is over
    /// when this returns, so a claim read next is settled.
    fn lock_log_reserve(&mut self, recovering: Option<u32>) -> Result<()> {
        let me = self.owner_word();
        let mut backoff = Backoff::new();
        loop {
            let lock = self.region().a32(H_LOG_RESERVE_LOCK)?;
            let holder = lock.load(Ordering::Relaxed);
            let dead_claim = if holder == 0 || recovering == Some(holder) {
                None
            } else if holder == me {
                return Err(Error::Corrupted(H_LOG_RESERVE_LOCK));
            } else if !backoff.snooze() {
                continue;
            } else {
                match self.owner_fate(holder)? {
                    // Gone: recovered already (which released the lock)
                    // and the word read before that: try again.
                    OwnerFate::Alive | OwnerFate::Recovering | OwnerFate::Gone => continue,
                    OwnerFate::Dead(voff) => Some(voff),
                }
            };
            if lock
                .compare_exchange(holder, me, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            if let Some(voff) = dead_claim {
                if let Err(e) = self.take_over_log_claim(voff) {
                    lock.store(0, Ordering::Release);
                    return Err(e);
                }
            }
            return Ok(());
        }
    }

    /// Called by whoever took `H_LOG_RESERVE_LOCK` over from the dead
    /// context at `voff`: if it died after recording its claim but before
    /// moving the head, the head moves past the claim now, so the claim is
    /// as real as if it had finished (its recovery voids it).
    fn take_over_log_claim(&self, voff: u64) -> Result<()> {
        let r = self.region();
        let start = r.load64(voff + C_LOG_START)?;
        if start == 0 {
            return Ok(());
        }
        let end = r.load64(voff + C_LOG_END)?;
        let head = r.a64(H_WRITE_VERSION)?;
        if head.load(Ordering::Acquire) == start - 1 {
            if end < start || end - (start - 1) > RingArea::of(&self.sh).max_frame() {
                return Err(Error::Corrupted(voff + C_LOG_END));
            }
            head.store(end, Ordering::Release);
        }
        Ok(())
    }

    /// Makes the log agree with the store for the dead context at `voff`,
    /// after its undo log ran and while its locks still hold: frames of a
    /// rolled-back write become a `Pad`; frames of a committed write whose
    /// LSN words were not stored yet are completed (redo); an open EXEC
    /// group is closed.
    pub(crate) fn salvage_log(&mut self, voff: u64, owner: u32) -> Result<()> {
        let ring = RingArea::of(&self.sh);
        // First the claim must be settled. The reserve lock is taken, not
        // only when the dead context held it: a live context that took it
        // over from the dead one may be settling the claim right now.
        self.lock_log_reserve(Some(owner))?;
        let settled = self.take_over_log_claim(voff);
        self.region()
            .a32(H_LOG_RESERVE_LOCK)?
            .store(0, Ordering::Release);
        settled?;
        let start = self.region().load64(voff + C_LOG_START)?;
        let group_open = self.region().load64(voff + C_LOG_GROUP)? != 0;
        let mut voided = false;
        if start != 0 {
            let (start, end) = (start - 1, self.region().load64(voff + C_LOG_END)?);
            if end <= start || end - start > ring.max_frame() {
                return Err(Error::Corrupted(voff + C_LOG_END));
            }
            let rolled_back = self.region().load64(voff + C_LOG_UNCOMMITTED)? != 0;
            voided = rolled_back;
            self.complete_or_void(ring, start, end, rolled_back, group_open)?;
            self.region().store64(voff + C_LOG_START, 0)?;
        }
        let flush = self.region().load64(voff + C_LOG_FLUSH)?;
        if flush != 0 {
            // The flush's record stands (it was completed above or before):
            // the next handle removes the keys it had not reached.
            if !voided {
                let db = self.region().load64(voff + C_LOG_FLUSH_DB)?;
                self.region().store64(H_FLUSH_REDO_DB, db)?;
                self.region().store64(H_FLUSH_REDO, flush)?;
            }
            self.region().store64(voff + C_LOG_FLUSH, 0)?;
        }
        if group_open {
            // A section undone as a whole (segment/journal.rs) drops its
            // group; any other group is closed, applying its frames.
            let undone = self.region().load64(voff + C_JOURNAL_STATE)? == JOURNAL_ROLLED_BACK;
            let lsn = self.log_reserve_bytes(FRAME_HEADER as u64 + 8)?;
            let r = self.region();
            let end = lsn + FRAME_HEADER as u64 + 8;
            if undone {
                let mut payload = [KIND_PAD, super::record::PAD_DROPS_GROUP, 0, 0, 0, 0, 0, 0];
                fill_frame(r, ring, lsn, &mut payload)?;
                ring.lsn_word(r, lsn)?.store(lsn, Ordering::Release);
            } else {
                write_pad(r, ring, lsn, end, false)?;
            }
            r.store64(self.off + C_LOG_START, 0)?;
            r.store64(voff + C_LOG_GROUP, 0)?;
            wake_writer(r, ring.size)?;
        }
        Ok(())
    }

    fn complete_or_void(
        &mut self,
        ring: RingArea,
        start: u64,
        end: u64,
        rolled_back: bool,
        group_open: bool,
    ) -> Result<()> {
        if rolled_back && !wait_ring_room(self.region(), ring, end)? {
            // No log writer will ever read these bytes.
            return Ok(());
        }
        let r = self.region();
        if rolled_back {
            // The frames may be partly written: one Pad over all of them.
            if ring.lsn_word(r, start)?.load(Ordering::Acquire) != start {
                write_pad(r, ring, start, end, group_open)?;
            } else {
                // Already complete (a crash between step 3 and clearing the
                // words is impossible while rolled back): nothing to void.
            }
            return wake_writer(r, ring.size);
        }
        let mut pos = start;
        while pos < end {
            let size = ring.frame_size_at(r, pos)?;
            if pos + size > end {
                return write_pad(r, ring, pos, end, group_open)
                    .and_then(|_| wake_writer(r, ring.size));
            }
            ring.lsn_word(r, pos)?.store(pos, Ordering::Release);
            pos += size;
        }
        wake_writer(r, ring.size)
    }
}

/// Waits until the ring has room for bytes up to `end` (a claim whose owner
/// died while it waited for room may not be written over frames the writer
/// has not copied yet). False if the log writer is gone: nobody makes room.
fn wait_ring_room(r: &Region, ring: RingArea, end: u64) -> Result<bool> {
    let mut backoff = Backoff::new();
    loop {
        let released = r.load64(H_LOG_RELEASED)?;
        if end <= released + ring.size {
            return Ok(true);
        }
        if backoff.snooze() {
            if !process_alive(r.load64(H_LOG_WRITER_PID)?) {
                return Ok(false);
            }
            wake_writer(r, ring.size)?;
        }
    }
}

/// Wakes the log writer if it sleeps and someone needs it now: a client
/// under `appendfsync always` waits for its fsync, or the ring is past half
/// full. Otherwise it wakes by itself (100 ms) and takes many frames at
/// once, which costs writers no system call.
fn wake_writer(r: &Region, ring_size: u64) -> Result<()> {
    // Orders the frame's LSN store before this load, against the writer's
    // store of the flag before its load of the LSN word (Dekker).
    std::sync::atomic::fence(Ordering::SeqCst);
    let word = r.a32(H_LOG_WRITER_SLEEPING)?;
    if word.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let urgent = FsyncPolicy::from_word(r.load64(H_LOG_POLICY)?) == FsyncPolicy::Always
        || r.load64(H_WRITE_VERSION)?
            .saturating_sub(r.load64(H_LOG_RELEASED)?)
            > ring_size / 2;
    if urgent {
        word.store(0, Ordering::Release);
        let _ = futex::wake(word, futex::Flags::empty(), 1);
    }
    Ok(())
}

impl Handle {
    /// Whether this write must log: the log is on and this is not a replay.
    pub(crate) fn logging(&self) -> bool {
        self.log.replay_lsn.is_none()
            && self
                .ctx
                .region()
                .load64(H_LOG_ENABLED)
                .is_ok_and(|v| v != 0)
    }

    /// Stages one record for the next [`Handle::log_reserve`]; `encode`
    /// appends its payload.
    pub(crate) fn log_stage(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        encode(&mut self.log.staged);
        self.log.staged_ends.push(self.log.staged.len());
    }

    /// Whether records are staged.
    pub(crate) fn log_has_staged(&self) -> bool {
        !self.log.staged_ends.is_empty()
    }

    /// Reserves frames for the staged records (one fetch-add, so they are
    /// contiguous) and fills them, all but their LSN words. Call it under
    /// the keys' locks, inside the write's transaction, before anything is
    /// published; then [`Handle::log_committing`] before the commit and
    /// [`Handle::log_complete`] after it. Returns the last frame's LSN: the
    /// version the write stamps. Every frame of the write is at or below it,
    /// so recovery skips all of them for an entry a snapshot already has.
    pub(crate) fn log_reserve(&mut self) -> Result<u64> {
        let ends = std::mem::take(&mut self.log.staged_ends);
        let mut staged = std::mem::take(&mut self.log.staged);
        let mut total = 0;
        let mut begin = 0;
        for &end in &ends {
            total += frame_size(end - begin);
            begin = end;
        }
        if total == 0 {
            self.log.staged = staged;
            return Err(Error::Corrupted(0));
        }
        let res = (|| {
            let lsn = self.ctx.log_reserve_bytes(total)?;
            self.ctx.crash_point();
            let ring = RingArea::of(&self.ctx.sh);
            let in_group = self.log.group.is_some();
            let (mut pos, mut begin, mut last_lsn) = (lsn, 0, lsn);
            self.log.reserved_frames.clear();
            for (i, &end) in ends.iter().enumerate() {
                self.log.reserved_frames.push(pos);
                last_lsn = pos;
                let payload = &mut staged[begin..end];
                let is_last = i + 1 == ends.len();
                if let Some(kind) = payload.first_mut() {
                    if !is_last || in_group {
                        *kind |= GROUP_CONTINUES;
                    }
                }
                pos += fill_frame(self.ctx.region(), ring, pos, payload)?;
                begin = end;
            }
            if in_group {
                self.log.group = Some(true);
                self.ctx.region().store64(self.ctx.off + C_LOG_GROUP, 1)?;
            }
            self.log.reserved = Some((lsn, lsn + total));
            Ok(last_lsn)
        })();
        staged.clear();
        self.log.staged = staged;
        res
    }

    /// Inside the write's transaction, before its commit: the logged write
    /// that tells recovery the frames belong to a committed write.
    pub(crate) fn log_committing(&mut self) -> Result<()> {
        if self.log.reserved.is_some() {
            self.ctx.wlog64(self.ctx.off + C_LOG_UNCOMMITTED, 0)?;
        }
        Ok(())
    }

    /// After the commit: stores the reserved frames' LSN words, so the
    /// writer may take them.
    pub(crate) fn log_complete(&mut self) -> Result<()> {
        let Some((start, end)) = self.log.reserved.take() else {
            return Ok(());
        };
        let ring = RingArea::of(&self.ctx.sh);
        let r = self.ctx.region();
        debug_assert!(self.log.reserved_frames.first() == Some(&start));
        for &pos in &self.log.reserved_frames {
            self.ctx.crash_point();
            ring.lsn_word(r, pos)?.store(pos, Ordering::Release);
        }
        self.ctx.crash_point();
        r.store64(self.ctx.off + C_LOG_START, 0)?;
        self.log.last_end = end;
        wake_writer(r, ring.size)
    }

    /// After a failed write was rolled back: its reserved frames become a
    /// `Pad`, and nothing staged survives.
    pub(crate) fn log_cancel(&mut self) -> Result<()> {
        self.log.staged.clear();
        self.log.staged_ends.clear();
        let Some((start, end)) = self.log.reserved.take() else {
            return Ok(());
        };
        let ring = RingArea::of(&self.ctx.sh);
        let r = self.ctx.region();
        write_pad(r, ring, start, end, self.log.group.is_some())?;
        r.store64(self.ctx.off + C_LOG_START, 0)?;
        self.log.last_end = end;
        wake_writer(r, ring.size)
    }

    /// Logs the staged records as a write of their own (no store change
    /// goes with them: FLUSHDB's record, a version taken by pub/sub). The
    /// LSN of the last.
    pub(crate) fn log_now(&mut self) -> Result<u64> {
        let lsn = self.log_reserve()?;
        self.ctx
            .region()
            .store64(self.ctx.off + C_LOG_UNCOMMITTED, 0)?;
        self.log_complete()?;
        Ok(lsn)
    }

    /// Logs the function libraries' new set (a [`Record::Functions`]
    /// payload's `libraries`) as a write of its own, when this write logs.
    /// Call it inside the exclusive section that changed them, so the
    /// records of two changes are in the order they were made.
    ///
    /// [`Record::Functions`]: super::record::Record::Functions
    pub fn log_functions(&mut self, libraries: &[u8]) -> Result<()> {
        if !self.logging() {
            return Ok(());
        }
        self.log_stage(|out| super::record::encode_functions(out, libraries));
        self.log_now().map(|_| ())
    }

    /// Opens an EXEC's group: every frame until [`Handle::log_group_end`]
    /// replays as one unit.
    pub fn log_group_begin(&mut self) {
        self.log.group = Some(false);
    }

    /// Closes the group with a `Pad` frame, if it has frames.
    pub fn log_group_end(&mut self) -> Result<()> {
        let had_frames = self.log.group.take() == Some(true);
        if had_frames {
            self.log_stage(|out| out.extend_from_slice(&[KIND_PAD, 0, 0, 0, 0, 0, 0, 0]));
            self.log_now()?;
            self.ctx.region().store64(self.ctx.off + C_LOG_GROUP, 0)?;
        }
        Ok(())
    }

    /// The end LSN of the last frame this handle wrote: a client under
    /// `appendfsync always` gets its reply once `fsynced` passes it.
    pub fn log_last_end(&self) -> u64 {
        self.log.last_end
    }

    /// The log's shared state, for the writer, INFO and `always` waiters.
    pub fn log_ring(&self) -> LogRing {
        LogRing {
            sh: self.ctx.sh.clone(),
        }
    }
}

/// The log's shared words and the ring, as the log writer, INFO and
/// `appendfsync always` see them. Any process attached to the segment.
#[derive(Clone)]
pub struct LogRing {
    sh: Arc<Shared>,
}

/// The log's positions and settings, read together (INFO persistence).
#[derive(Clone, Copy, Debug)]
pub struct LogStatus {
    /// Whether the log goes to files (`--dir`: Redis's `appendonly yes`).
    pub enabled: bool,
    /// Whether writes put frames in the ring: with files, or for the
    /// in-memory backlog of a primary without them
    /// ([`LogRing::enable_for_replicas`]).
    pub ring_on: bool,
    /// The fsync policy.
    pub policy: FsyncPolicy,
    /// Bytes reserved so far: the next frame's LSN.
    pub head: u64,
    /// Written to files up to here.
    pub released: u64,
    /// Fsynced up to here.
    pub fsynced: u64,
    /// Whether the writer's last write failed.
    pub write_failed: bool,
    /// Snapshots: running since (ms, 0 = none), last finish time (ms), last
    /// failed, last start LSN, last duration (ms), requests, answered.
    pub snapshot_running_since: u64,
    /// Time the last snapshot finished (ms since the epoch).
    pub snapshot_last_ms: u64,
    /// Whether the last snapshot failed.
    pub snapshot_last_failed: bool,
    /// Start LSN of the last good snapshot.
    pub snapshot_start_lsn: u64,
    /// How long the last snapshot took (ms).
    pub snapshot_last_took_ms: u64,
    /// Snapshot requests made so far.
    pub snapshot_requests: u64,
    /// Snapshot requests answered so far.
    pub snapshot_answered: u64,
    /// The ring's size in bytes.
    pub ring_size: u64,
}

impl LogRing {
    pub(crate) fn new(sh: Arc<Shared>) -> LogRing {
        LogRing { sh }
    }

    fn r(&self) -> &Region {
        &self.sh.region
    }

    fn word(&self, off: u64) -> u64 {
        self.r().load64(off).unwrap_or(0)
    }

    /// Every position and setting at once.
    pub fn status(&self) -> LogStatus {
        LogStatus {
            enabled: self.word(H_LOG_ENABLED) == LOG_TO_FILES,
            ring_on: self.word(H_LOG_ENABLED) != 0,
            policy: FsyncPolicy::from_word(self.word(H_LOG_POLICY)),
            head: self.word(H_WRITE_VERSION),
            released: self.word(H_LOG_RELEASED),
            fsynced: self.word(H_LOG_FSYNCED),
            write_failed: self.word(H_LOG_WRITE_FAILED) != 0,
            snapshot_running_since: self.word(H_SNAP_RUNNING_SINCE),
            snapshot_last_ms: self.word(H_SNAP_LAST_MS),
            snapshot_last_failed: self.word(H_SNAP_LAST_FAILED) != 0,
            snapshot_start_lsn: self.word(H_SNAP_START_LSN),
            snapshot_last_took_ms: self.word(H_SNAP_LAST_TOOK_MS),
            snapshot_requests: self.word(H_SNAP_REQUESTS),
            snapshot_answered: self.word(H_SNAP_ANSWERED),
            ring_size: self.sh.geo.log_size,
        }
    }

    /// Turns logging on from `lsn` on (the end of the recovered log, or
    /// the current head when the segment was attached): the head moves
    /// there (8-aligned, never 0), and nothing before it is owed to files.
    /// Only while no worker writes (supervisor start). The calling process
    /// writes the log files: a write that waits for ring space fails with
    /// [`Error::LogWriterGone`] once this process is gone.
    pub fn enable(&self, lsn: u64, policy: FsyncPolicy) -> Result<u64> {
        self.turn_on(lsn, policy, LOG_TO_FILES)
    }

    /// Turns the ring on for a primary without log files, whose supervisor
    /// keeps the released frames in memory for its replicas
    /// (docs/replication.md, "A primary without --dir"). Unlike
    /// [`LogRing::enable`] it may run while workers write, but only inside
    /// an exclusive section of the store: no write is then between its
    /// check of the log word and its commit, so every write either has no
    /// frames and a version below the returned head, or is logged.
    /// [`LogStatus::enabled`] stays false (no `appendonly`, no snapshots).
    pub fn enable_for_replicas(&self, lsn: u64) -> Result<u64> {
        self.turn_on(lsn, FsyncPolicy::No, LOG_TO_MEMORY)
    }

    fn turn_on(&self, lsn: u64, policy: FsyncPolicy, mode: u64) -> Result<u64> {
        let r = self.r();
        let head = r.load64(H_WRITE_VERSION)?.max(lsn).max(FIRST_LSN);
        let head = align_up(head, 8);
        r.store64(H_WRITE_VERSION, head)?;
        RingArea::of(&self.sh).zero(r, 0, self.sh.geo.log_size)?;
        r.store64(H_LOG_RELEASED, head)?;
        r.store64(H_LOG_FSYNCED, head)?;
        r.store64(H_LOG_POLICY, policy.word())?;
        r.store64(H_LOG_WRITER_PID, u64::from(std::process::id()))?;
        r.store64(H_LOG_ENABLED, mode)?;
        Ok(head)
    }

    /// Moves the log's head, and with it the written and fsynced
    /// positions, forward to `lsn` (8-aligned): the LSNs in between are
    /// never used. A promoted replica does this so that its own writes get
    /// LSNs above the versions of the keys it replicated
    /// (docs/replication.md). Only the supervisor calls it, inside an
    /// exclusive section (no frame can be reserved meanwhile), once the log
    /// writer has written every frame before the head and started a file at
    /// `lsn`. Ring bytes outside `[released, head)` are already zero, so
    /// none of them looks like a frame at `lsn`. The head moves first: a
    /// supervisor killed before the other words leaves released behind the
    /// head, which the next log writer's start settles (its file at `lsn`
    /// exists, and `release` zeroes at most the ring). Returns the new
    /// head, or None (nothing moved) while frames before the head are not
    /// written.
    pub fn restart_at(&self, lsn: u64) -> Result<Option<u64>> {
        let r = self.r();
        let head = r.load64(H_WRITE_VERSION)?;
        if r.load64(H_LOG_RELEASED)? != head {
            return Ok(None);
        }
        let lsn = align_up(lsn.max(head), 8);
        r.store64(H_WRITE_VERSION, lsn)?;
        r.store64(H_LOG_RELEASED, lsn)?;
        r.store64(H_LOG_FSYNCED, lsn)?;
        futex_bump(r.a32(H_LOG_SPACE_FUTEX)?);
        futex_bump(r.a32(H_LOG_FSYNC_FUTEX)?);
        Ok(Some(lsn))
    }

    /// Turns logging off (the log's state stays for INFO).
    pub fn disable(&self) -> Result<()> {
        self.r().store64(H_LOG_ENABLED, 0)
    }

    /// Sets the fsync policy (CONFIG SET appendfsync).
    pub fn set_policy(&self, policy: FsyncPolicy) -> Result<()> {
        self.r().store64(H_LOG_POLICY, policy.word())
    }

    /// The fsync policy in force.
    pub fn policy(&self) -> FsyncPolicy {
        FsyncPolicy::from_word(self.word(H_LOG_POLICY))
    }

    /// The next frame's LSN.
    pub fn head(&self) -> u64 {
        self.word(H_WRITE_VERSION)
    }

    /// Appends the complete frames from `from` to `out`, about `max` bytes
    /// at most (one frame at least, if complete). The LSN after the last.
    pub fn read_frames(&self, from: u64, out: &mut Vec<u8>, max: usize) -> Result<u64> {
        let ring = RingArea::of(&self.sh);
        let r = self.r();
        let mut pos = from;
        let start_len = out.len();
        loop {
            if ring.lsn_word(r, pos)?.load(Ordering::Acquire) != pos {
                return Ok(pos);
            }
            let size = ring.frame_size_at(r, pos)?;
            if size > ring.max_frame() {
                return Err(Error::Corrupted(ring.off + pos % ring.size));
            }
            if out.len() > start_len && out.len() - start_len + size as usize > max {
                return Ok(pos);
            }
            ring.read(r, pos, size, out)?;
            pos += size;
        }
    }

    /// Everything before `lsn` is in files: zero its ring bytes, then let
    /// producers reuse them.
    pub fn release(&self, lsn: u64) -> Result<()> {
        let r = self.r();
        let released = r.load64(H_LOG_RELEASED)?;
        if lsn <= released {
            return Ok(());
        }
        // Past a restart of the log (`restart_at`) the span can exceed the
        // ring: zeroing it once is enough.
        let ring = RingArea::of(&self.sh);
        ring.zero(r, released, (lsn - released).min(ring.size))?;
        r.store64(H_LOG_RELEASED, lsn)?;
        futex_bump(r.a32(H_LOG_SPACE_FUTEX)?);
        Ok(())
    }

    /// Everything before `lsn` is fsynced: wakes `always` waiters.
    pub fn set_fsynced(&self, lsn: u64) -> Result<()> {
        let r = self.r();
        if lsn > r.load64(H_LOG_FSYNCED)? {
            r.store64(H_LOG_FSYNCED, lsn)?;
            futex_bump(r.a32(H_LOG_FSYNC_FUTEX)?);
        }
        Ok(())
    }

    /// Records whether the writer's last write failed.
    pub fn set_write_failed(&self, failed: bool) -> Result<()> {
        self.r().store64(H_LOG_WRITE_FAILED, failed as u64)
    }

    /// Fsynced up to here.
    pub fn fsynced(&self) -> u64 {
        self.word(H_LOG_FSYNCED)
    }

    /// Blocks until `fsynced` moves past `seen_fsynced` or `timeout`
    /// passes (a thread of the worker waits here for `always` clients).
    pub fn wait_fsynced(&self, seen_fsynced: u64, timeout: Duration) {
        let Ok(word) = self.r().a32(H_LOG_FSYNC_FUTEX) else {
            return;
        };
        let seen = word.load(Ordering::Acquire);
        if self.fsynced() != seen_fsynced {
            return;
        }
        futex_wait(word, seen, timeout);
    }

    /// The writer: sleeps until a frame at `from` may be complete, or
    /// `timeout` passes.
    pub fn wait_frames(&self, from: u64, timeout: Duration) {
        let ring = RingArea::of(&self.sh);
        let r = self.r();
        let Ok(word) = r.a32(H_LOG_WRITER_SLEEPING) else {
            return;
        };
        word.store(1, Ordering::SeqCst);
        let complete = ring
            .lsn_word(r, from)
            .map(|w| w.load(Ordering::SeqCst) == from)
            .unwrap_or(true);
        if !complete {
            futex_wait(word, 1, timeout);
        }
        word.store(0, Ordering::Release);
    }

    /// Asks the snapshot thread for a snapshot: the request's number, which
    /// [`LogRing::snapshot_answered`] reaches once one that started after
    /// it has finished.
    pub fn request_snapshot(&self) -> Result<u64> {
        let r = self.r();
        let n = r
            .a64(H_SNAP_REQUESTS)?
            .fetch_add(1, Ordering::AcqRel)
            .wrapping_add(1);
        futex_bump(r.a32(H_SNAP_FUTEX)?);
        Ok(n)
    }

    /// Requests made so far.
    pub fn snapshot_requests(&self) -> u64 {
        self.word(H_SNAP_REQUESTS)
    }

    /// Requests answered so far.
    pub fn snapshot_answered(&self) -> u64 {
        self.word(H_SNAP_ANSWERED)
    }

    /// Waits until the snapshot counters move or `timeout` passes.
    pub fn wait_snapshot_change(&self, timeout: Duration) {
        if let Ok(word) = self.r().a32(H_SNAP_FUTEX) {
            let seen = word.load(Ordering::Acquire);
            futex_wait(word, seen, timeout);
        }
    }

    /// Marks a snapshot as started (INFO rdb_bgsave_in_progress).
    pub fn snapshot_started(&self, now_ms: u64) -> Result<()> {
        self.r().store64(H_SNAP_RUNNING_SINCE, now_ms)
    }

    /// Records a finished snapshot, answering every request up to
    /// `answered`.
    pub fn snapshot_finished(
        &self,
        answered: u64,
        ok: bool,
        start_lsn: u64,
        now_ms: u64,
    ) -> Result<()> {
        let r = self.r();
        let since = r.load64(H_SNAP_RUNNING_SINCE)?;
        r.store64(H_SNAP_RUNNING_SINCE, 0)?;
        r.store64(H_SNAP_LAST_FAILED, !ok as u64)?;
        r.store64(H_SNAP_LAST_TOOK_MS, now_ms.saturating_sub(since))?;
        if ok {
            r.store64(H_SNAP_LAST_MS, now_ms)?;
            r.store64(H_SNAP_START_LSN, start_lsn)?;
        }
        r.a64(H_SNAP_ANSWERED)?
            .fetch_max(answered, Ordering::AcqRel);
        futex_bump(r.a32(H_SNAP_FUTEX)?);
        Ok(())
    }
}
