//! Startup recovery: snapshot choice, replay, groups, torn tails, damage,
//! gaps.

mod common;

use std::fs;

use common::*;
use log::file::{log_file_name, snapshot_file_name};
use log::{recover, write_snapshot, Error, ErrorKind, Phase, Progress, RecoverySummary};
use store::log::frame_size;
use store::log::record::{encode_pad, CONTINUES, KIND_PAD, PAD_DROPS_GROUP};

fn run(dir: &TempDir) -> (Result<RecoverySummary, Error>, Applied, Vec<Progress>) {
    let mut applied = Vec::new();
    let mut progress = Vec::new();
    let result = recover(
        dir.path(),
        &mut |phase, lsn, payload| {
            applied.push((phase, lsn, payload.to_vec()));
            Ok(())
        },
        &mut |p| progress.push(p),
    );
    (result, applied, progress)
}

/// (lsn, payload) of each payload laid out from `lsn`.
fn at(lsn: u64, payloads: &[Vec<u8>]) -> Vec<(Phase, u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut lsn = lsn;
    for p in payloads {
        out.push((Phase::Log, lsn, p.clone()));
        lsn += frame_size(p.len());
    }
    out
}

fn keys(n: usize, prefix: &str) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| set(&format!("{prefix}{i}"), "v", false))
        .collect()
}

#[test]
fn an_empty_directory_recovers_nothing() {
    let dir = TempDir::new("empty");
    let (summary, applied, _) = run(&dir);
    let summary = summary.unwrap();
    assert_eq!(summary.end_lsn, 0);
    assert!(applied.is_empty());
    assert!(summary.snapshot.is_none());
}

#[test]
fn logs_alone_replay_from_zero_across_files() {
    let dir = TempDir::new("logs");
    let a = keys(3, "a");
    let b = keys(4, "b");
    let (_, end_a) = write_log(dir.path(), 0, &a);
    let (_, end_b) = write_log(dir.path(), end_a, &b);
    let (summary, applied, progress) = run(&dir);
    let summary = summary.unwrap();
    let mut want = at(0, &a);
    want.extend(at(end_a, &b));
    assert_eq!(applied, want);
    assert_eq!(summary.end_lsn, end_b);
    assert_eq!((summary.log_files, summary.log_frames), (2, 7));
    assert!(summary.notices.is_empty(), "{:?}", summary.notices);
    let last = progress.last().unwrap();
    assert_eq!(last.done, last.total);
}

#[test]
fn snapshot_then_the_log_from_its_start() {
    let dir = TempDir::new("snap");
    let a = keys(3, "a");
    let b = keys(3, "b");
    let (_, end_a) = write_log(dir.path(), 0, &a);
    let (_, end_b) = write_log(dir.path(), end_a, &b);
    // The snapshot began at the second record of the second file.
    let start = end_a + frame_size(b[0].len());
    let entry = set("snap", "x", false);
    write_snapshot(
        dir.path(),
        &mut FakeStore {
            start,
            end: end_b,
            entries: vec![(8, entry.clone())],
            fail_after: None,
        },
    )
    .unwrap();
    let (summary, applied, _) = run(&dir);
    let summary = summary.unwrap();
    let mut want = vec![(Phase::Snapshot, 8, entry)];
    want.extend(at(start, &b[1..]));
    assert_eq!(applied, want);
    assert_eq!(
        summary.skipped_frames, 1,
        "the first file is wholly before the start"
    );
    assert_eq!(summary.log_files, 1);
    assert_eq!(summary.end_lsn, end_b);
    let snap = summary.snapshot.unwrap();
    assert_eq!(
        (snap.start_lsn, snap.end_lsn, snap.frames),
        (start, end_b, 1)
    );
}

#[test]
fn a_torn_tail_of_the_last_file_is_reported_and_cut() {
    let dir = TempDir::new("torn");
    let a = keys(5, "a");
    let (path, end) = write_log(dir.path(), 0, &a);
    chop(&path, 3);
    let last = end - frame_size(a[4].len());
    let (summary, applied, _) = run(&dir);
    let summary = summary.unwrap();
    assert_eq!(applied, at(0, &a[..4]));
    assert_eq!(summary.end_lsn, last);
    assert_eq!(summary.notices.len(), 1);
    let notice = &summary.notices[0];
    assert!(
        notice.contains(&format!("torn tail cut at byte {}", offset_of(0, last)))
            && notice.contains("frame truncated"),
        "{notice}"
    );
    assert_eq!(fs::metadata(&path).unwrap().len(), offset_of(0, last));
    // Recovering again finds nothing to cut.
    let (again, _, _) = run(&dir);
    assert!(again.unwrap().notices.is_empty());
}

#[test]
fn a_flipped_bit_in_the_last_file_ends_it_there() {
    let dir = TempDir::new("lastflip");
    let a = keys(6, "a");
    let (path, _) = write_log(dir.path(), 0, &a);
    let third = 2 * frame_size(a[0].len());
    flip_bit(&path, offset_of(0, third) + 19);
    let (summary, applied, _) = run(&dir);
    let summary = summary.unwrap();
    assert_eq!(applied, at(0, &a[..2]));
    assert_eq!(summary.end_lsn, third);
    assert!(
        summary.notices[0].contains("checksum mismatch"),
        "{:?}",
        summary.notices
    );
}

#[test]
fn damage_in_an_earlier_file_stops_recovery_naming_file_and_offset() {
    let dir = TempDir::new("midflip");
    let a = keys(6, "a");
    let (path, end_a) = write_log(dir.path(), 0, &a);
    write_log(dir.path(), end_a, &keys(2, "b"));
    let third = 2 * frame_size(a[0].len());
    flip_bit(&path, offset_of(0, third) + 19);
    let len_before = fs::metadata(&path).unwrap().len();
    let (result, _, _) = run(&dir);
    let err = result.unwrap_err();
    assert_eq!(err.path, path);
    assert_eq!(err.offset, Some(offset_of(0, third)));
    assert!(matches!(
        err.kind,
        ErrorKind::Corrupt {
            tail_repairable: false,
            ..
        }
    ));
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(
            "damaged before its end at byte {}",
            offset_of(0, third)
        )) && msg.contains("checksum mismatch")
            && msg.contains(&format!("shoal log verify --truncate {}", path.display()))
            && msg.contains("every later log file"),
        "{msg}"
    );
    assert_eq!(
        fs::metadata(&path).unwrap().len(),
        len_before,
        "nothing cut"
    );
}

#[test]
fn an_open_group_at_the_end_is_dropped_and_cut() {
    let dir = TempDir::new("group");
    let payloads = vec![
        set("a", "1", false),
        set("g1", "1", true),
        set("g2", "2", false),
        set("h1", "1", true),
        set("h2", "2", true),
    ];
    let (path, _) = write_log(dir.path(), 0, &payloads);
    let (summary, applied, _) = run(&dir);
    let summary = summary.unwrap();
    assert_eq!(applied, at(0, &payloads[..3]));
    let open = at(0, &payloads)[3].1;
    assert_eq!(summary.end_lsn, open);
    assert!(
        summary.notices[0].contains("2 records of an unfinished group"),
        "{:?}",
        summary.notices
    );
    assert_eq!(fs::metadata(&path).unwrap().len(), offset_of(0, open));
}

#[test]
fn a_group_spanning_files_is_applied_whole_or_not_at_all() {
    let dir = TempDir::new("span");
    let first = vec![set("a", "1", false), set("g1", "1", true)];
    let (path_a, end_a) = write_log(dir.path(), 0, &first);
    let second = vec![set("g2", "2", false)];
    let (_, end_b) = write_log(dir.path(), end_a, &second);
    let (summary, applied, _) = run(&dir);
    assert_eq!(summary.unwrap().end_lsn, end_b);
    let mut want = at(0, &first);
    want.extend(at(end_a, &second));
    assert_eq!(applied, want);

    // The same group, never finished: the later file held only its tail.
    let dir = TempDir::new("spantorn");
    let (path_a2, end_a) = write_log(dir.path(), 0, &first);
    let (path_b, _) = write_log(dir.path(), end_a, &[set("g2", "2", true)]);
    let (summary, applied, _) = run(&dir);
    let summary = summary.unwrap();
    assert_eq!(applied, at(0, &first[..1]));
    let group = at(0, &first)[1].1;
    assert_eq!(summary.end_lsn, group);
    assert!(!path_b.exists());
    assert_eq!(fs::metadata(&path_a2).unwrap().len(), offset_of(0, group));
    assert!(path_a.exists());
}

#[test]
fn a_pad_closes_a_group_and_is_never_applied() {
    let dir = TempDir::new("pad");
    let mut pad = Vec::new();
    encode_pad(&mut pad, 24);
    let payloads = vec![set("g1", "1", true), pad, set("b", "2", false)];
    let (_, end) = write_log(dir.path(), 0, &payloads);
    let (summary, applied, _) = run(&dir);
    assert_eq!(summary.unwrap().end_lsn, end);
    let all = at(0, &payloads);
    assert_eq!(applied, vec![all[0].clone(), all[2].clone()]);
}

/// The `Pad` over a write voided inside an exclusive section (its process
/// killed before the write committed) keeps the section's group open.
fn voided_in_group(len: usize) -> Vec<u8> {
    let mut pad = Vec::new();
    encode_pad(&mut pad, len);
    pad[0] |= CONTINUES;
    pad
}

#[test]
fn a_voided_write_inside_a_group_leaves_it_open_and_a_drop_drops_all_of_it() {
    let dir = TempDir::new("voiddrop");
    let drop_pad = vec![KIND_PAD, PAD_DROPS_GROUP, 0, 0, 0, 0, 0, 0];
    let payloads = vec![
        set("a", "1", false),
        set("g1", "1", true),
        set("g2", "2", true),
        voided_in_group(40),
        drop_pad,
        set("b", "2", false),
    ];
    let (_, end) = write_log(dir.path(), 0, &payloads);
    let (summary, applied, _) = run(&dir);
    assert_eq!(summary.unwrap().end_lsn, end);
    let all = at(0, &payloads);
    assert_eq!(applied, vec![all[0].clone(), all[5].clone()]);
}

#[test]
fn a_voided_write_inside_a_group_is_skipped_and_the_group_applied_at_its_end() {
    let dir = TempDir::new("voidclose");
    let mut close = Vec::new();
    encode_pad(&mut close, 8);
    let payloads = vec![
        set("g1", "1", true),
        voided_in_group(40),
        set("g2", "2", true),
        close,
    ];
    let (_, end) = write_log(dir.path(), 0, &payloads);
    let (summary, applied, _) = run(&dir);
    assert_eq!(summary.unwrap().end_lsn, end);
    let all = at(0, &payloads);
    assert_eq!(applied, vec![all[0].clone(), all[2].clone()]);
}

#[test]
fn a_gap_between_files_is_an_error_naming_both() {
    let dir = TempDir::new("gap");
    let (path_a, end_a) = write_log(dir.path(), 0, &keys(2, "a"));
    let (path_b, _) = write_log(dir.path(), end_a + 64, &keys(2, "b"));
    let (result, _, _) = run(&dir);
    let err = result.unwrap_err();
    assert_eq!(err.path, path_b);
    let msg = err.to_string();
    assert!(msg.contains("gap in the log"), "{msg}");
    assert!(msg.contains(&path_a.display().to_string()), "{msg}");
    assert!(msg.contains(&path_b.display().to_string()), "{msg}");
}

#[test]
fn a_gap_the_snapshot_covers_is_a_notice() {
    let dir = TempDir::new("covered");
    let (_, end_a) = write_log(dir.path(), 0, &keys(2, "a"));
    let restart = end_a + 64;
    let b = keys(2, "b");
    let (_, end_b) = write_log(dir.path(), restart, &b);
    write_snapshot(
        dir.path(),
        &mut FakeStore {
            start: 8,
            end: restart,
            entries: vec![],
            fail_after: None,
        },
    )
    .unwrap();
    let (summary, applied, _) = run(&dir);
    let summary = summary.unwrap();
    assert_eq!(summary.end_lsn, end_b);
    assert!(
        summary.notices[0].contains("covers it"),
        "{:?}",
        summary.notices
    );
    assert_eq!(applied.last().unwrap().1, at(restart, &b)[1].1);
}

#[test]
fn a_log_restarted_at_a_higher_lsn_replays_from_a_snapshot_after_the_restart() {
    // A promoted replica: its old log ends, its log restarts higher, and
    // the snapshot taken after the restart holds what lies between.
    let dir = TempDir::new("restarted");
    let (_, end_a) = write_log(dir.path(), 8, &keys(2, "a"));
    let restart = 1 << 20;
    let b = keys(3, "b");
    let (_, end_b) = write_log(dir.path(), restart, &b);
    // Before the snapshot: the gap is not covered, recovery refuses.
    let (result, _, _) = run(&dir);
    let msg = result.unwrap_err().to_string();
    assert!(msg.contains("gap in the log"), "{msg}");
    assert!(msg.contains("snapshot taken after the restart"), "{msg}");
    write_snapshot(
        dir.path(),
        &mut FakeStore {
            start: restart,
            end: restart,
            entries: vec![(restart - 64, set("replicated", "v", false))],
            fail_after: None,
        },
    )
    .unwrap();
    let (summary, applied, _) = run(&dir);
    let summary = summary.unwrap();
    assert_eq!(summary.end_lsn, end_b);
    assert!(end_a < restart);
    assert_eq!(
        applied[0],
        (Phase::Snapshot, restart - 64, set("replicated", "v", false))
    );
    assert_eq!(applied[1..].to_vec(), at(restart, &b));
}

#[test]
fn an_empty_file_after_an_uncovered_gap_is_removed() {
    // A promotion that created its new file and stopped there.
    let dir = TempDir::new("restart-empty");
    let a = keys(2, "a");
    let (_, end_a) = write_log(dir.path(), 8, &a);
    let (empty, _) = write_log(dir.path(), 1 << 20, &[]);
    let (summary, applied, _) = run(&dir);
    let summary = summary.unwrap();
    assert_eq!(summary.end_lsn, end_a);
    assert!(!empty.exists());
    assert_eq!(applied, at(8, &a));
}

#[test]
fn an_invalid_newest_snapshot_is_skipped_for_an_older_one() {
    let dir = TempDir::new("skip");
    let a = keys(4, "a");
    let (_, end) = write_log(dir.path(), 0, &a);
    let entry = |k: &str| vec![(0, set(k, "s", false))];
    write_snapshot(
        dir.path(),
        &mut FakeStore {
            start: 0,
            end: 0,
            entries: entry("old"),
            fail_after: None,
        },
    )
    .unwrap();
    let newer = write_snapshot(
        dir.path(),
        &mut FakeStore {
            start: 48,
            end: 48,
            entries: entry("new"),
            fail_after: None,
        },
    )
    .unwrap();
    chop(&newer.path, 1);
    let (summary, applied, _) = run(&dir);
    let summary = summary.unwrap();
    assert_eq!(summary.snapshot.unwrap().start_lsn, 0);
    assert!(
        summary.notices[0].contains(&snapshot_file_name(48))
            && summary.notices[0].contains("no trailer"),
        "{:?}",
        summary.notices
    );
    assert_eq!(applied[0].2, set("old", "s", false));
    assert_eq!(applied.len(), 5);
    assert_eq!(summary.end_lsn, end);
}

#[test]
fn only_invalid_snapshots_and_a_log_that_starts_late_is_an_error() {
    let dir = TempDir::new("late");
    write_log(dir.path(), 4096, &keys(2, "a"));
    let snap = write_snapshot(
        dir.path(),
        &mut FakeStore {
            start: 4096,
            end: 4096,
            entries: vec![(1, set("k", "v", false))],
            fail_after: None,
        },
    )
    .unwrap();
    flip_bit(&snap.path, snap.bytes - 12);
    let (result, applied, _) = run(&dir);
    let msg = result.unwrap_err().to_string();
    assert!(applied.is_empty());
    assert!(
        msg.contains("starts at LSN 4096, not 8")
            && msg.contains(&snap.path.display().to_string())
            && msg.contains("checksum mismatch"),
        "{msg}"
    );
}

#[test]
fn a_log_that_starts_late_without_a_snapshot_is_an_error() {
    let dir = TempDir::new("nosnap");
    write_log(dir.path(), 4096, &keys(1, "a"));
    let (result, _, _) = run(&dir);
    assert!(result
        .unwrap_err()
        .to_string()
        .contains("there is no snapshot"));
}

#[test]
fn a_log_ending_before_the_snapshot_does_continues_after_it() {
    let dir = TempDir::new("short");
    let (_, end) = write_log(dir.path(), 0, &keys(2, "a"));
    write_snapshot(
        dir.path(),
        &mut FakeStore {
            start: 48,
            end: 4096,
            entries: vec![],
            fail_after: None,
        },
    )
    .unwrap();
    let (summary, _, _) = run(&dir);
    let summary = summary.unwrap();
    assert_eq!(summary.end_lsn, 4096);
    assert!(summary.notices[0].contains(&format!("the log ends at LSN {end}")));
    assert!(
        dir.names().contains(&log_file_name(4096)),
        "{:?}",
        dir.names()
    );
    // And the next recovery accepts the files as they now are.
    let (again, _, _) = run(&dir);
    assert_eq!(again.unwrap().end_lsn, 4096);
}

#[test]
fn an_apply_error_names_file_and_offset() {
    let dir = TempDir::new("apply");
    let a = keys(3, "a");
    let (path, _) = write_log(dir.path(), 0, &a);
    let second = frame_size(a[0].len());
    let err = recover(
        dir.path(),
        &mut |_, lsn, _| {
            if lsn == second {
                Err("out of memory".into())
            } else {
                Ok(())
            }
        },
        &mut |_| {},
    )
    .unwrap_err();
    assert_eq!(
        (err.path.clone(), err.offset),
        (path, Some(offset_of(0, second)))
    );
    assert!(matches!(err.kind, ErrorKind::Apply(_)));
}

#[test]
fn a_half_created_last_file_is_removed() {
    let dir = TempDir::new("half");
    let (_, end) = write_log(dir.path(), 0, &keys(2, "a"));
    let half = dir.path().join(log_file_name(end));
    fs::write(&half, b"SHOALLOG\x01").unwrap();
    let (summary, applied, _) = run(&dir);
    let summary = summary.unwrap();
    assert_eq!(applied.len(), 2);
    assert_eq!(summary.end_lsn, end);
    assert!(!half.exists());
}

#[test]
fn error_messages_name_the_repair() {
    let torn = Error {
        path: "/d/log-0000000000000000.shlog".into(),
        offset: Some(96),
        kind: ErrorKind::Corrupt {
            what: "frame truncated".into(),
            tail_repairable: true,
        },
    };
    assert_eq!(
        torn.to_string(),
        "/d/log-0000000000000000.shlog: torn or corrupt tail at byte 96: frame truncated; \
         `shoal log verify --truncate /d/log-0000000000000000.shlog` cuts the file there"
    );
}
