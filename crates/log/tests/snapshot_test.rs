//! Writing, verifying, reading and pruning snapshots.

mod common;

use std::fs;

use common::*;
use log::file::{log_file_name, snapshot_file_name, FILE_HEADER};
use log::{
    dump_snapshot, prune, prune_keeping, read_snapshot, verify_snapshot, write_snapshot, ErrorKind,
    ProblemKind, TRAILER,
};
use store::log::{frame_size, FrameError};

fn store(start: u64, end: u64, n: usize) -> FakeStore {
    FakeStore {
        start,
        end,
        entries: (0..n)
            .map(|i| {
                (
                    start.saturating_sub((i as u64 % 3) * 8),
                    set(&format!("k{i}"), &"x".repeat(i), false),
                )
            })
            .collect(),
        fail_after: None,
    }
}

fn read_all(path: &std::path::Path) -> Result<Vec<(u64, Vec<u8>)>, log::Error> {
    let mut seen = Vec::new();
    read_snapshot(path, &mut |lsn, payload| {
        seen.push((lsn, payload.to_vec()));
        Ok(())
    })?;
    Ok(seen)
}

#[test]
fn write_verify_read_round_trip() {
    let dir = TempDir::new("snap");
    let mut src = store(1000, 2000, 20);
    src.entries.push((1500, set("big", "part1", true)));
    src.entries.push((1500, set("big", "part2", false)));
    let info = write_snapshot(dir.path(), &mut src).unwrap();
    assert_eq!(info.path, dir.path().join(snapshot_file_name(1000)));
    assert_eq!(
        (info.start_lsn, info.end_lsn, info.frames),
        (1000, 2000, 22)
    );
    assert_eq!(info.bytes, fs::metadata(&info.path).unwrap().len());
    assert_eq!(dir.names(), [snapshot_file_name(1000)], "no .tmp left");

    let report = verify_snapshot(&info.path).unwrap();
    assert!(report.is_valid(), "{report:?}");
    assert_eq!(
        (report.start_lsn, report.end_lsn, report.frames),
        (1000, 2000, 22)
    );
    assert_eq!(read_all(&info.path).unwrap(), src.entries);
}

#[test]
fn an_empty_snapshot_is_valid() {
    let dir = TempDir::new("empty");
    let info = write_snapshot(dir.path(), &mut store(0, 0, 0)).unwrap();
    assert_eq!(info.bytes, (FILE_HEADER + TRAILER) as u64);
    assert!(verify_snapshot(&info.path).unwrap().is_valid());
    assert!(read_all(&info.path).unwrap().is_empty());
}

#[test]
fn a_failed_write_leaves_nothing() {
    let dir = TempDir::new("fail");
    let mut src = store(10, 20, 5);
    src.fail_after = Some(3);
    assert!(write_snapshot(dir.path(), &mut src).is_err());
    assert!(dir.names().is_empty());
}

#[test]
fn a_truncated_snapshot_is_detected_and_never_read() {
    let dir = TempDir::new("trunc");
    let info = write_snapshot(dir.path(), &mut store(64, 128, 10)).unwrap();
    for cut in [1, TRAILER as u64, info.bytes / 2, info.bytes - 40] {
        let copy = dir.path().join("copy.shsnap");
        fs::copy(&info.path, &copy).unwrap();
        chop(&copy, cut);
        let report = verify_snapshot(&copy).unwrap();
        assert_eq!(
            report.problem.as_ref().map(|p| &p.what),
            Some(&ProblemKind::NoTrailer),
            "cut {cut}"
        );
        let err = read_all(&copy).unwrap_err();
        assert!(matches!(err.kind, ErrorKind::BadSnapshot(_)), "{err}");
        assert!(err.to_string().contains("shoal snapshot verify"), "{err}");
    }
}

#[test]
fn a_bad_checksum_is_detected_and_never_read() {
    let dir = TempDir::new("crc");
    let info = write_snapshot(dir.path(), &mut store(64, 128, 10)).unwrap();
    // The end LSN in the trailer: no frame notices, only the file checksum.
    flip_bit(&info.path, info.bytes - 12);
    let report = verify_snapshot(&info.path).unwrap();
    let problem = report.problem.unwrap();
    assert!(
        matches!(problem.what, ProblemKind::BadChecksum { .. }),
        "{problem}"
    );
    assert_eq!(problem.offset, info.bytes - 8);
    assert!(read_all(&info.path).is_err());
}

#[test]
fn a_flipped_bit_in_a_frame_is_found_at_its_offset() {
    let dir = TempDir::new("frame");
    let mut src = store(64, 128, 4);
    let info = write_snapshot(dir.path(), &mut src).unwrap();
    let second = FILE_HEADER as u64 + frame_size(src.entries[0].1.len());
    flip_bit(&info.path, second + 17);
    let problem = verify_snapshot(&info.path).unwrap().problem.unwrap();
    assert_eq!(problem.offset, second);
    assert_eq!(problem.what, ProblemKind::Frame(FrameError::BadCrc));
    let mut applied = 0;
    assert!(read_snapshot(&info.path, &mut |_, _| {
        applied += 1;
        Ok(())
    })
    .is_err());
    assert_eq!(
        applied, 0,
        "nothing applied from a file that fails verification"
    );
}

#[test]
fn header_damage_is_detected() {
    let dir = TempDir::new("head");
    let info = write_snapshot(dir.path(), &mut store(64, 128, 2)).unwrap();
    flip_bit(&info.path, 3);
    let problem = verify_snapshot(&info.path).unwrap().problem.unwrap();
    assert!(matches!(problem.what, ProblemKind::Header(_)));
}

#[test]
fn an_apply_error_names_the_frame() {
    let dir = TempDir::new("apply");
    let info = write_snapshot(dir.path(), &mut store(64, 128, 3)).unwrap();
    let mut n = 0;
    let err = read_snapshot(&info.path, &mut |_, _| {
        n += 1;
        if n == 2 {
            Err("no memory".into())
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Apply(_)));
    assert!(err.offset.unwrap() > FILE_HEADER as u64);
    assert!(
        err.to_string().contains("cannot apply record: no memory"),
        "{err}"
    );
}

#[test]
fn dump_lists_entries() {
    let dir = TempDir::new("dump");
    let mut src = FakeStore {
        start: 100,
        end: 200,
        entries: vec![(40, set("a", "1", false))],
        fail_after: None,
    };
    let info = write_snapshot(dir.path(), &mut src).unwrap();
    let mut out = Vec::new();
    dump_snapshot(&info.path, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!(
            "lsn=40 SET db=0 key=\"a\" type=string flags=0 expire=0 value=\"1\"\n\
             # 1 frames, {} bytes, start LSN 100, end LSN 200\n",
            info.bytes
        )
    );
}

#[test]
fn prune_keeps_the_newest_snapshot_and_the_logs_it_needs() {
    let dir = TempDir::new("prune");
    let d = dir.path();
    let (_, e0) = write_log(d, 0, &[set("a", "1", false)]);
    let (_, e1) = write_log(d, e0, &[set("b", "1", false)]);
    let (_, e2) = write_log(d, e1, &[set("c", "1", false)]);
    let (_, e3) = write_log(d, e2, &[set("d", "1", false)]);
    write_snapshot(d, &mut store(e0, e0, 1)).unwrap();
    fs::write(d.join(format!("{}.tmp", snapshot_file_name(8))), b"junk").unwrap();
    // Starts inside the third file: the first two are wholly before it.
    let start = e1 + 8;
    write_snapshot(d, &mut store(start, e3, 2)).unwrap();
    let removed = prune(d, start, 1).unwrap();
    assert_eq!(removed.len(), 3, "{removed:?}");
    assert_eq!(
        dir.names(),
        [
            log_file_name(e0),
            log_file_name(e1),
            log_file_name(e2),
            snapshot_file_name(start)
        ]
    );
    let removed = prune(d, start, 0).unwrap();
    assert_eq!(removed, [d.join(log_file_name(e0))]);
    // The file holding the start LSN, and every later one, stay.
    assert_eq!(
        prune(d, start, 0).unwrap(),
        Vec::<std::path::PathBuf>::new()
    );
    assert_eq!(dir.names().len(), 3);
}

#[test]
fn prune_keeps_the_log_files_a_replica_still_needs() {
    let dir = TempDir::new("prune-replica");
    let d = dir.path();
    let (_, e0) = write_log(d, 0, &[set("a", "1", false)]);
    let (_, e1) = write_log(d, e0, &[set("b", "1", false)]);
    let (_, e2) = write_log(d, e1, &[set("c", "1", false)]);
    write_snapshot(d, &mut store(e2, e2, 1)).unwrap();
    // A replica acknowledged up to inside the second file: it and every
    // later file stay, the first goes.
    let removed = prune_keeping(d, e2, 0, e0 + 8).unwrap();
    assert_eq!(removed, [d.join(log_file_name(0))]);
    assert_eq!(
        dir.names(),
        [log_file_name(e0), log_file_name(e1), snapshot_file_name(e2)]
    );
    // Once it has everything, the snapshot decides alone.
    let removed = prune_keeping(d, e2, 0, e2).unwrap();
    assert_eq!(removed, [d.join(log_file_name(e0))]);
}

#[test]
fn prune_refuses_without_a_valid_snapshot() {
    let dir = TempDir::new("refuse");
    let d = dir.path();
    let (_, e0) = write_log(d, 0, &[set("a", "1", false)]);
    write_log(d, e0, &[set("b", "1", false)]);
    assert!(prune(d, e0, 0).is_err());
    let info = write_snapshot(d, &mut store(e0, e0, 1)).unwrap();
    chop(&info.path, 1);
    assert!(prune(d, e0, 0).is_err());
    assert_eq!(dir.names().len(), 3, "nothing removed");
}
