//! Printing a log file or a snapshot readably: one line per frame.

use std::io::{self, Write};
use std::path::Path;

use crate::error::Error;
use crate::snapshot::{scan_snapshot, SnapshotReport};
use crate::verify::{scan_log, LogReport, Scanned};

fn write_frame(out: &mut dyn Write, frame: &Scanned<'_>) -> io::Result<()> {
    let mark = if frame.continues { " +" } else { "" };
    // A dropped group is what a killed exclusive section leaves: worth
    // telling apart from a pad that closes (applies) its group.
    let drops = if store::log::record::drops_group(frame.payload) {
        " (drops its group)"
    } else {
        ""
    };
    writeln!(out, "lsn={} {}{drops}{mark}", frame.lsn, frame.record)
}

fn to_error(path: &Path) -> impl Fn(io::Error) -> Error + '_ {
    move |e| Error::io(path, e)
}

/// Prints every frame of a log file as `lsn=<n> <record>` (a ` +` suffix: the
/// next frame belongs to the same group), then a closing `#` line with the
/// counts or the problem that ends the valid prefix.
pub fn dump_log(path: &Path, out: &mut dyn Write) -> io::Result<LogReport> {
    let stdout_err = to_error(Path::new("output"));
    let report = scan_log(path, &mut |frame| {
        write_frame(out, frame).map_err(&stdout_err)
    })
    .map_err(Error::into_io)?;
    match &report.problem {
        None => write!(
            out,
            "# {} records, {} bytes, LSN {}..{}",
            report.records, report.valid_bytes, report.first_lsn, report.end_lsn
        )?,
        Some(problem) => write!(
            out,
            "# {} valid records, valid prefix {} of {} bytes, then a problem {problem}",
            report.records, report.valid_bytes, report.file_bytes
        )?,
    }
    if let Some(lsn) = report.open_group_at {
        write!(out, "; ends inside a group that began at LSN {lsn}")?;
    }
    writeln!(out)?;
    Ok(report)
}

/// Prints every frame of a snapshot as `lsn=<n> <record>`, then a closing `#`
/// line with the LSNs and counts, or the problem.
pub fn dump_snapshot(path: &Path, out: &mut dyn Write) -> io::Result<SnapshotReport> {
    let stdout_err = to_error(Path::new("output"));
    let report = scan_snapshot(path, &mut |frame| {
        write_frame(out, frame).map_err(&stdout_err)
    })
    .map_err(Error::into_io)?;
    match &report.problem {
        None => writeln!(
            out,
            "# {} frames, {} bytes, start LSN {}, end LSN {}",
            report.frames, report.bytes, report.start_lsn, report.end_lsn
        )?,
        Some(problem) => writeln!(
            out,
            "# {} frames read, then a problem {problem}: the snapshot is invalid",
            report.frames
        )?,
    }
    Ok(report)
}
