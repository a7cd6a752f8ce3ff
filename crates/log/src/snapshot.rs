//! Fuzzy snapshots: every entry written with its LSN, while writers go on.
//!
//! ```text
//! +0   file header (magic "SHOALSNP", start LSN = the log head when it began)
//! +32  frames: lsn = the entry's LSN, payload = one record (groups allowed)
//! end  trailer: "SHOALEND", u64 frame count, u64 end LSN (the log head when
//!      it finished), u32 CRC32C of every byte before this field, u32 0
//! ```
//!
//! Written as `.tmp`, fsynced, renamed, directory fsynced: only a file with a
//! valid trailer is a snapshot. Recovery loads one, then replays the log from
//! its start LSN; the per-key LSN makes replay skip what the snapshot holds.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use store::log::frame::{encode_header_tail, MAX_RECORD};
use store::log::record::{CONTINUES, KIND_PAD};
use store::log::{frame_size, Record, FRAME_HEADER};

use crate::error::{Error, ErrorKind};
use crate::file::{
    decode_file_header, encode_file_header, fsync_dir, list_logs, list_snapshot_tmps,
    list_snapshots, parse_snapshot_name, snapshot_file_name, snapshot_tmp_name, u64_at,
    FILE_HEADER, SNAPSHOT_MAGIC, TRAILER_MAGIC,
};
use crate::stream::{FrameStream, Next};
use crate::verify::{Problem, ProblemKind, Scanned};

/// Bytes of a snapshot's trailer.
pub const TRAILER: usize = 32;

/// What a snapshot writer iterates: the store, without pausing writers.
pub trait SnapshotSource {
    /// The log position when the snapshot starts (the ring head).
    fn start_lsn(&mut self) -> u64;
    /// Calls `f(lsn, payload)` once per frame: an entry's LSN and one encoded
    /// record (a large entry may be a group of frames with the same LSN).
    fn for_each(&mut self, f: &mut dyn FnMut(u64, &[u8]) -> io::Result<()>) -> io::Result<()>;
    /// The log position when it finished.
    fn end_lsn(&mut self) -> u64;
}

/// What a snapshot's entries are handed to: `(lsn, payload)`; an `Err`
/// stops reading with that message.
pub type EntryFn<'a> = dyn FnMut(u64, &[u8]) -> Result<(), String> + 'a;

/// A snapshot [`write_snapshot`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// Where it is.
    pub path: PathBuf,
    /// The log position when it started.
    pub start_lsn: u64,
    /// The log position when it finished.
    pub end_lsn: u64,
    /// Frames written.
    pub frames: u64,
    /// File size in bytes.
    pub bytes: u64,
    /// How long writing it took.
    pub duration: Duration,
}

/// What [`verify_snapshot`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotReport {
    /// The log position when it started (from the header; the name's if the
    /// header is bad).
    pub start_lsn: u64,
    /// The log position when it finished (from the trailer; 0 without one).
    pub end_lsn: u64,
    /// Valid frames read.
    pub frames: u64,
    /// File size in bytes.
    pub bytes: u64,
    /// The first thing wrong; `None` = a valid snapshot.
    pub problem: Option<Problem>,
}

impl SnapshotReport {
    /// The snapshot is valid and may be loaded.
    pub fn is_valid(&self) -> bool {
        self.problem.is_none()
    }
}

/// A writer that keeps the CRC32C and count of every byte through it.
struct CrcWriter<W> {
    inner: W,
    crc: u32,
    bytes: u64,
}

impl<W: Write> CrcWriter<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)?;
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.bytes += bytes.len() as u64;
        Ok(())
    }
}

/// Writes a snapshot of `src` into `dir`: `.tmp` first, then fsync, rename
/// and directory fsync, so a crash leaves either the old set of snapshots or
/// the new one complete.
pub fn write_snapshot(dir: &Path, src: &mut dyn SnapshotSource) -> io::Result<SnapshotInfo> {
    let began = Instant::now();
    fs::create_dir_all(dir)?;
    let start_lsn = src.start_lsn();
    let tmp = dir.join(snapshot_tmp_name(start_lsn));
    let result = write_tmp(&tmp, start_lsn, src);
    let (frames, end_lsn, bytes) = match result {
        Ok(done) => done,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let path = dir.join(snapshot_file_name(start_lsn));
    fs::rename(&tmp, &path)?;
    fsync_dir(dir)?;
    Ok(SnapshotInfo {
        path,
        start_lsn,
        end_lsn,
        frames,
        bytes,
        duration: began.elapsed(),
    })
}

fn write_tmp(
    tmp: &Path,
    start_lsn: u64,
    src: &mut dyn SnapshotSource,
) -> io::Result<(u64, u64, u64)> {
    let file = File::create(tmp)?;
    let mut w = CrcWriter {
        inner: BufWriter::with_capacity(1 << 20, file),
        crc: 0,
        bytes: 0,
    };
    w.put(&encode_file_header(SNAPSHOT_MAGIC, start_lsn))?;
    let mut frames = 0u64;
    src.for_each(&mut |lsn, payload| {
        if payload.len() > MAX_RECORD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a snapshot frame of {} bytes exceeds the largest record ({MAX_RECORD} bytes)",
                    payload.len()
                ),
            ));
        }
        w.put(&lsn.to_le_bytes())?;
        w.put(&encode_header_tail(payload, lsn))?;
        w.put(payload)?;
        let padding = frame_size(payload.len()) as usize - FRAME_HEADER - payload.len();
        w.put(&[0u8; 8][..padding])?;
        frames += 1;
        Ok(())
    })?;
    let end_lsn = src.end_lsn();
    let mut trailer = [0u8; TRAILER];
    trailer[..8].copy_from_slice(TRAILER_MAGIC);
    trailer[8..16].copy_from_slice(&frames.to_le_bytes());
    trailer[16..24].copy_from_slice(&end_lsn.to_le_bytes());
    w.put(&trailer[..24])?;
    let crc = w.crc;
    trailer[24..28].copy_from_slice(&crc.to_le_bytes());
    w.put(&trailer[24..])?;
    let bytes = w.bytes;
    let file = w.inner.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok((frames, end_lsn, bytes))
}

/// Verifies a snapshot, calling `visit` for each valid frame on the way.
pub(crate) fn scan_snapshot(
    path: &Path,
    visit: &mut dyn FnMut(&Scanned<'_>) -> Result<(), Error>,
) -> Result<SnapshotReport, Error> {
    let io_err = |e| Error::io(path, e);
    let mut file = File::open(path).map_err(io_err)?;
    let bytes = file.metadata().map_err(io_err)?.len();
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_snapshot_name);
    let mut report = SnapshotReport {
        start_lsn: named.unwrap_or(0),
        end_lsn: 0,
        frames: 0,
        bytes,
        problem: None,
    };
    let problem = |offset, lsn, what| Some(Problem { offset, lsn, what });

    let mut head = [0u8; FILE_HEADER];
    let n = bytes.min(FILE_HEADER as u64) as usize;
    file.read_exact(&mut head[..n]).map_err(io_err)?;
    let start_lsn = match decode_file_header(SNAPSHOT_MAGIC, &head[..n]) {
        Ok(lsn) => lsn,
        Err(msg) => {
            report.problem = problem(0, report.start_lsn, ProblemKind::Header(msg));
            return Ok(report);
        }
    };
    report.start_lsn = start_lsn;
    if let Some(named) = named.filter(|&named| named != start_lsn) {
        report.problem = problem(
            0,
            start_lsn,
            ProblemKind::Header(format!(
                "the header's start LSN {start_lsn} disagrees with the file name's {named}"
            )),
        );
        return Ok(report);
    }

    let mut trailer = [0u8; TRAILER];
    let has_trailer = bytes >= (FILE_HEADER + TRAILER) as u64 && {
        file.seek(SeekFrom::Start(bytes - TRAILER as u64))
            .map_err(io_err)?;
        file.read_exact(&mut trailer).map_err(io_err)?;
        file.seek(SeekFrom::Start(FILE_HEADER as u64))
            .map_err(io_err)?;
        &trailer[..8] == TRAILER_MAGIC
    };
    let region_end = if has_trailer {
        bytes - TRAILER as u64
    } else {
        bytes
    };
    let mut stream = FrameStream::new(
        file,
        FILE_HEADER as u64,
        region_end - FILE_HEADER as u64,
        Some(crc32c::crc32c(&head)),
    );
    let mut last_lsn = start_lsn;
    let mut frames_end = FILE_HEADER as u64;
    let mut open_group: Option<u64> = None;
    let mut frame_problem = None;
    loop {
        match stream.next(None).map_err(io_err)? {
            Next::End => break,
            Next::Bad { offset, error } => {
                frame_problem = problem(offset, last_lsn, ProblemKind::Frame(error));
                break;
            }
            Next::Frame {
                offset,
                header,
                payload,
                size,
            } => {
                let (record, continues) = match Record::decode(payload) {
                    Ok(decoded) => decoded,
                    Err(e) => {
                        frame_problem = problem(offset, header.lsn, ProblemKind::Record(e));
                        break;
                    }
                };
                visit(&Scanned {
                    lsn: header.lsn,
                    offset,
                    size,
                    payload,
                    record: &record,
                    continues,
                })?;
                open_group = if continues {
                    open_group.or(Some(header.lsn))
                } else {
                    None
                };
                last_lsn = header.lsn;
                report.frames += 1;
                frames_end = offset + size;
            }
        }
    }
    if !has_trailer {
        report.problem = problem(frames_end, last_lsn, ProblemKind::NoTrailer);
        return Ok(report);
    }
    if frame_problem.is_some() {
        report.problem = frame_problem;
        return Ok(report);
    }
    let trailer_at = bytes - TRAILER as u64;
    let computed = crc32c::crc32c_append(stream.crc().unwrap_or(0), &trailer[..24]);
    let stored = u32::from_le_bytes([trailer[24], trailer[25], trailer[26], trailer[27]]);
    let count = u64_at(&trailer, 8);
    report.end_lsn = u64_at(&trailer, 16);
    let bad_trailer = |msg: String| problem(trailer_at, last_lsn, ProblemKind::BadTrailer(msg));
    report.problem = if computed != stored {
        problem(
            trailer_at + 24,
            last_lsn,
            ProblemKind::BadChecksum { stored, computed },
        )
    } else if trailer[28..].iter().any(|&b| b != 0) {
        bad_trailer("reserved trailer word is not zero".into())
    } else if count != report.frames {
        bad_trailer(format!(
            "it counts {count} frames but the file holds {}",
            report.frames
        ))
    } else if report.end_lsn < start_lsn {
        bad_trailer(format!(
            "end LSN {} is before the start LSN {start_lsn}",
            report.end_lsn
        ))
    } else if let Some(lsn) = open_group {
        bad_trailer(format!(
            "the frames end inside a group that began at LSN {lsn}"
        ))
    } else {
        None
    };
    Ok(report)
}

/// Checks a snapshot: header, every frame and record, trailer, frame count
/// and the whole-file checksum, in one streaming pass.
pub fn verify_snapshot(path: &Path) -> io::Result<SnapshotReport> {
    scan_snapshot(path, &mut |_| Ok(())).map_err(Error::into_io)
}

/// Loads a snapshot: verifies the whole file first, then streams its frames
/// to `f(lsn, payload)` (`Pad` frames skipped). Nothing reaches `f` from a
/// file that fails verification.
pub fn read_snapshot(path: &Path, f: &mut EntryFn<'_>) -> Result<SnapshotReport, Error> {
    let report = scan_snapshot(path, &mut |_| Ok(()))?;
    if let Some(problem) = &report.problem {
        return Err(bad_snapshot(path, problem));
    }
    read_verified(path, &report, f, &mut |_| {})?;
    Ok(report)
}

pub(crate) fn bad_snapshot(path: &Path, problem: &Problem) -> Error {
    Error::new(
        path,
        Some(problem.offset),
        ErrorKind::BadSnapshot(format!("invalid snapshot: {}", problem.what)),
    )
}

/// Streams the frames of a snapshot `report` says is valid; `progress` gets
/// the bytes read so far.
pub(crate) fn read_verified(
    path: &Path,
    report: &SnapshotReport,
    f: &mut EntryFn<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<(), Error> {
    let io_err = |e| Error::io(path, e);
    let mut file = File::open(path).map_err(io_err)?;
    let bytes = file.metadata().map_err(io_err)?.len();
    if bytes != report.bytes {
        return Err(Error::inconsistent(
            path,
            format!(
                "the snapshot changed while it was read ({} bytes, then {bytes})",
                report.bytes
            ),
        ));
    }
    file.seek(SeekFrom::Start(FILE_HEADER as u64))
        .map_err(io_err)?;
    let region = bytes - (FILE_HEADER + TRAILER) as u64;
    let mut stream = FrameStream::new(file, FILE_HEADER as u64, region, None);
    let mut last_progress = 0;
    loop {
        match stream.next(None).map_err(io_err)? {
            Next::End => break,
            Next::Bad { offset, error } => {
                return Err(Error::new(
                    path,
                    Some(offset),
                    ErrorKind::BadSnapshot(format!(
                        "invalid snapshot: {error} (the file changed after it was verified)"
                    )),
                ))
            }
            Next::Frame {
                offset,
                header,
                payload,
                size,
            } => {
                if payload.first().map(|k| k & !CONTINUES) != Some(KIND_PAD) {
                    f(header.lsn, payload)
                        .map_err(|msg| Error::new(path, Some(offset), ErrorKind::Apply(msg)))?;
                }
                if offset + size - last_progress >= 8 << 20 {
                    last_progress = offset + size;
                    progress(last_progress);
                }
            }
        }
    }
    progress(bytes);
    Ok(())
}

/// After a snapshot starting at `snapshot_start_lsn` is complete: removes
/// older snapshots (and unfinished `.tmp` ones) and the log files wholly
/// before its start, keeping the newest `keep_logs` of those. A log file is
/// wholly before the start if the next file's first LSN is at or before it.
/// Refuses (removing nothing) unless that snapshot exists and verifies.
/// Returns what was removed.
pub fn prune(dir: &Path, snapshot_start_lsn: u64, keep_logs: usize) -> io::Result<Vec<PathBuf>> {
    prune_keeping(dir, snapshot_start_lsn, keep_logs, u64::MAX)
}

/// [`prune`] that also keeps every log file holding an LSN at or after
/// `needed_from`: the position a connected replica still has to read
/// (docs/replication.md, "Log files and replicas").
pub fn prune_keeping(
    dir: &Path,
    snapshot_start_lsn: u64,
    keep_logs: usize,
    needed_from: u64,
) -> io::Result<Vec<PathBuf>> {
    let snapshots = list_snapshots(dir)?;
    let Some(newest) = snapshots.iter().find(|s| s.lsn == snapshot_start_lsn) else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no snapshot {} in {}: nothing pruned",
                snapshot_file_name(snapshot_start_lsn),
                dir.display()
            ),
        ));
    };
    let report = verify_snapshot(&newest.path)?;
    if let Some(problem) = &report.problem {
        return Err(bad_snapshot(&newest.path, problem).into_io());
    }
    let mut doomed: Vec<PathBuf> = snapshots
        .iter()
        .chain(list_snapshot_tmps(dir)?.iter())
        .filter(|s| s.lsn < snapshot_start_lsn)
        .map(|s| s.path.clone())
        .collect();
    let logs = list_logs(dir)?;
    let covered = snapshot_start_lsn.min(needed_from);
    let wholly_before = logs
        .windows(2)
        .take_while(|pair| pair[1].lsn <= covered)
        .count();
    let removable = wholly_before.saturating_sub(keep_logs);
    doomed.extend(logs[..removable].iter().map(|l| l.path.clone()));
    for path in &doomed {
        fs::remove_file(path)?;
    }
    if !doomed.is_empty() {
        fsync_dir(dir)?;
    }
    Ok(doomed)
}
