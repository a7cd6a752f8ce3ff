//! Startup recovery when the segment is gone: load the newest snapshot that
//! verifies, then replay the log from its start LSN, whole groups only.
//!
//! A torn or corrupt tail of the last log file (the valid prefix ends before
//! the file does, as kdb+ treats it) was never acknowledged under
//! `appendfsync always`: it is reported and cut. Damage anywhere else stops
//! recovery with an error naming the file and offset.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind};
use crate::file::{
    encode_file_header, fsync_dir, list_logs, list_snapshots, log_file_name, DirFile, FILE_HEADER,
    LOG_MAGIC,
};
use crate::snapshot::{read_verified, scan_snapshot, SnapshotReport};
use crate::verify::{corrupt, cut_file, scan_log, Scanned};

/// What recovery hands each record to: `(phase, lsn, payload)`; an `Err`
/// stops recovery with that message.
pub type ApplyFn<'a> = dyn FnMut(Phase, u64, &[u8]) -> Result<(), String> + 'a;

/// Which part of recovery a record comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// An entry of the snapshot.
    Snapshot,
    /// A record replayed from the log.
    Log,
}

/// How far recovery is, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The part being read.
    pub phase: Phase,
    /// Bytes read so far (snapshot and log files together).
    pub done: u64,
    /// Bytes to read in all.
    pub total: u64,
}

/// The snapshot recovery loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotLoad {
    /// Its path.
    pub path: PathBuf,
    /// Its start LSN: replay began there.
    pub start_lsn: u64,
    /// Its end LSN.
    pub end_lsn: u64,
    /// Frames loaded.
    pub frames: u64,
    /// File size in bytes.
    pub bytes: u64,
    /// Time to verify and load it.
    pub duration: Duration,
}

/// What recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoverySummary {
    /// The snapshot loaded, if any.
    pub snapshot: Option<SnapshotLoad>,
    /// Log files read.
    pub log_files: usize,
    /// Log frames applied (Pad frames not counted).
    pub log_frames: u64,
    /// Log frames skipped because the snapshot holds them (LSN before its
    /// start).
    pub skipped_frames: u64,
    /// Log bytes read.
    pub log_bytes: u64,
    /// Time to replay the log.
    pub log_duration: Duration,
    /// The LSN the next frame gets: the log continues here.
    pub end_lsn: u64,
    /// What an operator should know: snapshots skipped, tails cut, gaps the
    /// snapshot covers.
    pub notices: Vec<String>,
}

/// Where a group of frames began.
#[derive(Clone, Copy)]
struct GroupStart {
    file: usize,
    offset: u64,
    lsn: u64,
    frames: u64,
}

/// A frame of an unfinished group, kept until the group closes.
struct Pending {
    file: usize,
    offset: u64,
    lsn: u64,
    payload: Vec<u8>,
}

/// Rebuilds the store from the files of `dir`: `apply(phase, lsn, payload)`
/// gets every snapshot entry, then every log record from the snapshot's start
/// LSN on (a group only once its last frame is read; `Pad` frames never: a
/// `Pad` closes a group, applying the frames before it, as the segment had
/// published them). `apply` skips a record older than the entry it finds.
/// `progress` gets bytes read for a progress bar.
pub fn recover(
    dir: &Path,
    apply: &mut ApplyFn<'_>,
    progress: &mut dyn FnMut(Progress),
) -> Result<RecoverySummary, Error> {
    let mut summary = RecoverySummary::default();
    let dir_err = |e| Error::io(dir, e);

    let mut chosen: Option<(PathBuf, SnapshotReport)> = None;
    let mut bad = Vec::new();
    for snap in list_snapshots(dir).map_err(dir_err)?.iter().rev() {
        let report = scan_snapshot(&snap.path, &mut |_| Ok(()))?;
        match &report.problem {
            None => {
                chosen = Some((snap.path.clone(), report));
                break;
            }
            Some(problem) => {
                summary.notices.push(format!(
                    "{}: skipped, not a valid snapshot: {problem}",
                    snap.path.display()
                ));
                bad.push((snap.path.clone(), problem.clone()));
            }
        }
    }

    let logs = list_logs(dir).map_err(dir_err)?;
    // Without a snapshot the log is replayed from its very first frame
    // (checked below to be the store's first, `FIRST_LSN` at most).
    let start = chosen
        .as_ref()
        .map_or(logs.first().map_or(0, |l| l.lsn), |(_, r)| r.start_lsn);
    let first_needed = logs.iter().rposition(|l| l.lsn <= start).unwrap_or(0);
    let needed = &logs[first_needed..];

    if chosen.is_none() {
        let bad_names = || {
            bad.iter()
                .map(|(p, problem)| format!("{} ({problem})", p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match logs.first() {
            Some(first) if first.lsn > store::log::FIRST_LSN => {
                let why = if bad.is_empty() {
                    "there is no snapshot".to_string()
                } else {
                    format!("no snapshot verifies: {}", bad_names())
                };
                return Err(Error::inconsistent(
                    &first.path,
                    format!(
                        "the log starts at LSN {}, not {}, and {why}: the log cannot be \
                         replayed from the start",
                        first.lsn,
                        store::log::FIRST_LSN
                    ),
                ));
            }
            None if !bad.is_empty() => {
                return Err(Error::new(
                    &bad[0].0,
                    Some(bad[0].1.offset),
                    ErrorKind::BadSnapshot(format!(
                        "no snapshot verifies and there is no log to rebuild from: {}",
                        bad_names()
                    )),
                ));
            }
            _ => {}
        }
    }

    let log_total: u64 = needed
        .iter()
        .map(|l| fs::metadata(&l.path).map(|m| m.len()).unwrap_or(0))
        .sum();
    let snapshot_bytes = chosen.as_ref().map_or(0, |(_, r)| r.bytes);
    let total = snapshot_bytes + log_total;

    if let Some((path, report)) = &chosen {
        let began = Instant::now();
        read_verified(
            path,
            report,
            &mut |lsn, payload| apply(Phase::Snapshot, lsn, payload),
            &mut |done| {
                progress(Progress {
                    phase: Phase::Snapshot,
                    done,
                    total,
                })
            },
        )?;
        summary.snapshot = Some(SnapshotLoad {
            path: path.clone(),
            start_lsn: report.start_lsn,
            end_lsn: report.end_lsn,
            frames: report.frames,
            bytes: report.bytes,
            duration: began.elapsed(),
        });
    }

    let began = Instant::now();
    let snapshot_end = chosen.as_ref().map(|(_, r)| r.end_lsn);
    let mut replay = Replay {
        start,
        needed,
        apply,
        pending: Vec::new(),
        open_group: None,
        summary: &mut summary,
    };
    let files_end = replay.run(dir, snapshot_end, snapshot_bytes, total, progress)?;
    summary.log_duration = began.elapsed();

    summary.end_lsn = files_end
        .as_ref()
        .map_or(start, |(_, end)| (*end).max(start));
    if let Some(snapshot_end) = snapshot_end {
        if summary.end_lsn < snapshot_end {
            summary.notices.push(format!(
                "the log ends at LSN {}, before the snapshot's end LSN {snapshot_end}: writes \
                 logged in between were lost (not on disk); the log continues at {snapshot_end}",
                summary.end_lsn
            ));
            summary.end_lsn = snapshot_end;
        }
    }
    if let Some((path, end)) = files_end {
        if end < summary.end_lsn {
            // The newest file must end where the log continues, or the
            // writer would see files that miss data the ring never had.
            let next = start_empty_file(dir, summary.end_lsn)?;
            summary.notices.push(format!(
                "{} ends at LSN {end}; started {} at LSN {}",
                path.display(),
                next.display(),
                summary.end_lsn
            ));
        }
    }
    Ok(summary)
}

/// Creates an empty log file (header only) starting at `lsn`.
fn start_empty_file(dir: &Path, lsn: u64) -> Result<PathBuf, Error> {
    let path = dir.join(log_file_name(lsn));
    let io_err = |e| Error::io(&path, e);
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(io_err)?;
    file.write_all_at(&encode_file_header(LOG_MAGIC, lsn), 0)
        .map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    fsync_dir(dir).map_err(|e| Error::io(dir, e))?;
    Ok(path)
}

/// The log part of recovery.
struct Replay<'a, 'b> {
    start: u64,
    needed: &'a [DirFile],
    apply: &'b mut ApplyFn<'b>,
    pending: Vec<Pending>,
    open_group: Option<GroupStart>,
    summary: &'b mut RecoverySummary,
}

impl Replay<'_, '_> {
    fn apply_one(
        &mut self,
        file: usize,
        offset: u64,
        lsn: u64,
        payload: &[u8],
    ) -> Result<(), Error> {
        self.summary.log_frames += 1;
        (self.apply)(Phase::Log, lsn, payload)
            .map_err(|msg| Error::new(&self.needed[file].path, Some(offset), ErrorKind::Apply(msg)))
    }

    fn flush_group(&mut self) -> Result<(), Error> {
        for frame in std::mem::take(&mut self.pending) {
            self.apply_one(frame.file, frame.offset, frame.lsn, &frame.payload)?;
        }
        Ok(())
    }

    fn frame(&mut self, file: usize, f: &Scanned<'_>) -> Result<(), Error> {
        match &mut self.open_group {
            Some(group) => group.frames += 1,
            None if f.continues => {
                self.open_group = Some(GroupStart {
                    file,
                    offset: f.offset,
                    lsn: f.lsn,
                    frames: 1,
                })
            }
            None => {}
        }
        if !f.continues {
            self.open_group = None;
        }
        if f.lsn < self.start {
            self.summary.skipped_frames += 1;
            return Ok(());
        }
        let is_pad = matches!(f.record, store::log::Record::Pad);
        if f.continues || !self.pending.is_empty() {
            if !is_pad {
                self.pending.push(Pending {
                    file,
                    offset: f.offset,
                    lsn: f.lsn,
                    payload: f.payload.to_vec(),
                });
            }
            if is_pad && store::log::record::drops_group(f.payload) {
                // Its writer's exclusive section was undone as a whole.
                self.pending.clear();
            } else if !f.continues {
                self.flush_group()?;
            }
            Ok(())
        } else if is_pad {
            Ok(())
        } else {
            self.apply_one(file, f.offset, f.lsn, f.payload)
        }
    }

    /// Replays the needed log files; returns the last file and the LSN the
    /// files end at after any torn tail is cut.
    fn run(
        &mut self,
        dir: &Path,
        snapshot_end: Option<u64>,
        mut done: u64,
        total: u64,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Option<(PathBuf, u64)>, Error> {
        let mut cursor = self.start;
        let mut prev: Option<(usize, u64)> = None;
        let mut files_end = None;
        let last = self.needed.len().saturating_sub(1);
        let mut tail_problem = None;
        let needed = self.needed;
        for (i, log) in needed.iter().enumerate() {
            if log.lsn > cursor
                && i == last
                && snapshot_end.is_none_or(|end| log.lsn > end)
                && fs::metadata(&log.path).is_ok_and(|m| m.len() <= FILE_HEADER as u64)
            {
                // A restart of the log at a higher LSN (a promotion) that
                // never got past creating its file: it holds nothing.
                fs::remove_file(&log.path).map_err(|e| Error::io(&log.path, e))?;
                fsync_dir(dir).map_err(|e| Error::io(dir, e))?;
                self.summary.notices.push(format!(
                    "{}: removed an empty log file after a gap (a log restart that did not finish)",
                    log.path.display()
                ));
                break;
            }
            if log.lsn > cursor {
                let after = match prev {
                    Some((p, end)) => {
                        format!("{}, which ends at LSN {end}", needed[p].path.display())
                    }
                    None => format!("the replay start, LSN {}", self.start),
                };
                match snapshot_end {
                    Some(end) if log.lsn <= end => {
                        self.summary.notices.push(format!(
                            "gap in the log before {} (which starts at LSN {}), after {after}: \
                             the snapshot, which ends at LSN {end}, covers it",
                            log.path.display(),
                            log.lsn
                        ));
                        if let Some(group) = self.open_group.take() {
                            self.pending.clear();
                            self.summary.notices.push(format!(
                                "an unfinished group of {} records at LSN {} before the gap was dropped",
                                group.frames, group.lsn
                            ));
                        }
                        cursor = log.lsn;
                    }
                    _ => {
                        return Err(Error::inconsistent(
                            &log.path,
                            format!(
                                "gap in the log: this file starts at LSN {}, after {after}; \
                                 the records in between are missing (a promoted replica's log \
                                 restarts at a higher LSN: only a snapshot taken after the \
                                 restart holds the data replicated before it)",
                                log.lsn
                            ),
                        ))
                    }
                }
            }
            if let Some((p, end)) = prev {
                if log.lsn < end {
                    return Err(Error::inconsistent(
                        &log.path,
                        format!(
                            "this file starts at LSN {} inside {} (which ends at LSN {end})",
                            log.lsn,
                            needed[p].path.display()
                        ),
                    ));
                }
            }
            let base = done;
            let mut last_progress = base;
            let report = scan_log(&log.path, &mut |f| {
                let at = base + f.offset + f.size;
                if at - last_progress >= 8 << 20 {
                    last_progress = at;
                    progress(Progress {
                        phase: Phase::Log,
                        done: at,
                        total,
                    });
                }
                self.frame(i, f)
            })?;
            self.summary.log_files += 1;
            self.summary.log_bytes += report.valid_bytes;
            done += report.file_bytes;
            if report.header_bad() && i == last && report.file_bytes <= FILE_HEADER as u64 {
                fs::remove_file(&log.path).map_err(|e| Error::io(&log.path, e))?;
                fsync_dir(dir).map_err(|e| Error::io(dir, e))?;
                self.summary.notices.push(format!(
                    "{}: removed a log file whose header was never completed",
                    log.path.display()
                ));
                continue;
            }
            if let Some(problem) = &report.problem {
                if i != last || report.header_bad() {
                    return Err(corrupt(&log.path, problem, false));
                }
                tail_problem = Some((problem.clone(), report.valid_bytes));
            }
            cursor = cursor.max(report.end_lsn);
            prev = Some((i, report.end_lsn));
            files_end = Some((log.path.clone(), report.end_lsn));
        }
        progress(Progress {
            phase: Phase::Log,
            done: total,
            total,
        });
        if tail_problem.is_none() && self.open_group.is_none() {
            return Ok(files_end);
        }
        // A torn tail: cut at the start of an unfinished group, else where the
        // valid prefix ends.
        let (cut_file_index, cut_offset, cut_lsn, dropped) = match self.open_group.take() {
            Some(g) => (g.file, g.offset, g.lsn, g.frames),
            None => {
                let valid = tail_problem.as_ref().map_or(0, |t| t.1);
                (
                    last,
                    valid,
                    files_end.as_ref().map_or(self.start, |f| f.1),
                    0,
                )
            }
        };
        self.pending.clear();
        for later in &self.needed[cut_file_index + 1..] {
            if later.path.exists() {
                fs::remove_file(&later.path).map_err(|e| Error::io(&later.path, e))?;
                self.summary.notices.push(format!(
                    "{}: removed, it held only the tail of an unfinished group",
                    later.path.display()
                ));
            }
        }
        let path = &self.needed[cut_file_index].path;
        let len = fs::metadata(path).map_err(|e| Error::io(path, e))?.len();
        cut_file(path, len, cut_offset).map_err(|e| Error::io(path, e))?;
        fsync_dir(dir).map_err(|e| Error::io(dir, e))?;
        let why = match &tail_problem {
            Some((problem, _)) => format!("the valid prefix ends {problem}"),
            None => "the log ends inside a group".to_string(),
        };
        self.summary.notices.push(format!(
            "{}: torn tail cut at byte {cut_offset} (LSN {cut_lsn}), {} bytes dropped \
             ({dropped} records of an unfinished group): {why}",
            path.display(),
            len.saturating_sub(cut_offset)
        ));
        Ok(Some((path.clone(), cut_lsn)))
    }
}
