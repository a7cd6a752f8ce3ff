//! `shoal log` and `shoal snapshot`: check, repair and read the files
//! persistence writes (like kdb+'s `-11!(-2;log)` for its logs).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

/// Arguments of `shoal log`.
#[derive(Args)]
pub struct LogArgs {
    #[command(subcommand)]
    command: LogCommand,
}

#[derive(Subcommand)]
enum LogCommand {
    /// Counts the valid records of a log file and the length of its valid
    /// prefix; exits 1 if anything after it is not valid.
    Verify {
        /// The log file.
        file: PathBuf,
        /// Cut the file to its valid prefix (a torn tail).
        #[arg(long)]
        truncate: bool,
    },
    /// Prints every record of a log file, one per line.
    Dump {
        /// The log file.
        file: PathBuf,
    },
}

/// Arguments of `shoal snapshot`.
#[derive(Args)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    command: SnapshotCommand,
}

#[derive(Subcommand)]
enum SnapshotCommand {
    /// Checks a snapshot (frames, trailer, whole-file checksum); exits 1 if
    /// it must not be loaded.
    Verify {
        /// The snapshot file.
        file: PathBuf,
    },
    /// Prints every record of a snapshot, one per line.
    Dump {
        /// The snapshot file.
        file: PathBuf,
    },
}

/// Runs `shoal log`; the exit code says whether the file is whole.
pub fn run(args: LogArgs) -> Result<i32> {
    match args.command {
        LogCommand::Verify { file, truncate } => {
            let report =
                log::verify_log(&file).with_context(|| format!("read {}", file.display()))?;
            println!(
                "{}: {} valid records, {} valid bytes of {} (LSN {} to {})",
                file.display(),
                report.records,
                report.valid_bytes,
                report.file_bytes,
                report.first_lsn,
                report.end_lsn
            );
            if let Some(lsn) = report.open_group_at {
                println!("the valid prefix ends inside a group that began at LSN {lsn}");
            }
            let Some(problem) = &report.problem else {
                return Ok(0);
            };
            println!("invalid {problem}");
            if truncate {
                let len = log::truncate_log(&file, &report)
                    .with_context(|| format!("truncate {}", file.display()))?;
                println!("truncated {} to {len} bytes", file.display());
                return Ok(0);
            }
            println!(
                "to cut the file to its valid prefix: shoal log verify --truncate {}",
                file.display()
            );
            Ok(1)
        }
        LogCommand::Dump { file } => {
            let mut out = std::io::stdout().lock();
            let report = log::dump_log(&file, &mut out)
                .with_context(|| format!("read {}", file.display()))?;
            out.flush()?;
            Ok(if report.is_valid() { 0 } else { 1 })
        }
    }
}

/// Runs `shoal snapshot`.
pub fn run_snapshot(args: SnapshotArgs) -> Result<i32> {
    match args.command {
        SnapshotCommand::Verify { file } => {
            let report =
                log::verify_snapshot(&file).with_context(|| format!("read {}", file.display()))?;
            match &report.problem {
                None => {
                    println!(
                        "{}: valid snapshot, {} records, {} bytes, LSN {} to {}",
                        file.display(),
                        report.frames,
                        report.bytes,
                        report.start_lsn,
                        report.end_lsn
                    );
                    Ok(0)
                }
                Some(problem) => {
                    println!(
                        "{}: NOT a valid snapshot ({} bytes, {} valid records before the problem): {problem}",
                        file.display(),
                        report.bytes,
                        report.frames
                    );
                    Ok(1)
                }
            }
        }
        SnapshotCommand::Dump { file } => {
            let mut out = std::io::stdout().lock();
            let report = log::dump_snapshot(&file, &mut out)
                .with_context(|| format!("read {}", file.display()))?;
            out.flush()?;
            Ok(if report.is_valid() { 0 } else { 1 })
        }
    }
}
