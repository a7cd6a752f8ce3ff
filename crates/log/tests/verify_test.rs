//! Verifying, truncating and dumping log files.

mod common;

use std::fs;

use common::*;
use log::file::FILE_HEADER;
use log::{dump_log, truncate_log, verify_log, ProblemKind};
use store::log::record::encode_flush_db;
use store::log::{frame_size, FrameError};

#[test]
fn a_whole_file_is_valid() {
    let dir = TempDir::new("valid");
    let payloads = vec![set("a", "1", false), set("b", "2", false)];
    let (path, end) = write_log(dir.path(), 4096, &payloads);
    let report = verify_log(&path).unwrap();
    assert!(report.is_valid());
    assert_eq!(report.first_lsn, 4096);
    assert_eq!(report.records, 2);
    assert_eq!(report.end_lsn, end);
    assert_eq!(report.valid_bytes, report.file_bytes);
    assert_eq!(report.open_group_at, None);
}

#[test]
fn torn_tail_is_found_and_cut() {
    let dir = TempDir::new("torn");
    let payloads = vec![
        set("a", "1", false),
        set("b", "2", false),
        set("c", "3", false),
    ];
    let (path, end) = write_log(dir.path(), 0, &payloads);
    chop(&path, 5);
    let third = end - frame_size(payloads[2].len());
    let report = verify_log(&path).unwrap();
    assert_eq!(report.records, 2);
    assert_eq!(report.end_lsn, third);
    assert_eq!(report.valid_bytes, offset_of(0, third));
    let problem = report.problem.clone().unwrap();
    assert_eq!(problem.offset, offset_of(0, third));
    assert_eq!(problem.lsn, third);
    assert_eq!(problem.what, ProblemKind::Frame(FrameError::Truncated));

    assert_eq!(truncate_log(&path, &report).unwrap(), offset_of(0, third));
    let after = verify_log(&path).unwrap();
    assert!(after.is_valid());
    assert_eq!(after.records, 2);
    assert_eq!(after.file_bytes, offset_of(0, third));
}

#[test]
fn flipped_bit_in_the_middle_is_a_bad_crc_at_its_frame() {
    let dir = TempDir::new("flip");
    let payloads: Vec<Vec<u8>> = (0..10)
        .map(|i| set(&format!("k{i}"), "value", false))
        .collect();
    let (path, _) = write_log(dir.path(), 0, &payloads);
    let size = frame_size(payloads[0].len());
    let fifth = 4 * size;
    flip_bit(&path, offset_of(0, fifth) + 20);
    let report = verify_log(&path).unwrap();
    assert_eq!(report.records, 4);
    let problem = report.problem.unwrap();
    assert_eq!(
        (problem.offset, problem.lsn, problem.what),
        (
            offset_of(0, fifth),
            fifth,
            ProblemKind::Frame(FrameError::BadCrc)
        )
    );
}

#[test]
fn a_flipped_lsn_word_breaks_the_chain() {
    let dir = TempDir::new("lsn");
    let payloads = vec![set("a", "1", false), set("b", "2", false)];
    let (path, _) = write_log(dir.path(), 0, &payloads);
    let second = frame_size(payloads[0].len());
    flip_bit(&path, offset_of(0, second));
    let problem = verify_log(&path).unwrap().problem.unwrap();
    assert_eq!(
        problem.what,
        ProblemKind::Frame(FrameError::BadLsn {
            found: second ^ 0x04,
            expected: second
        })
    );
}

#[test]
fn an_open_group_at_the_end_is_reported_and_cut() {
    let dir = TempDir::new("group");
    let payloads = vec![
        set("a", "1", false),
        set("b", "2", true),
        set("c", "3", true),
    ];
    let (path, end) = write_log(dir.path(), 0, &payloads);
    let group = frame_size(payloads[0].len());
    let report = verify_log(&path).unwrap();
    assert!(report.is_valid(), "an open group is not damage");
    assert_eq!(report.end_lsn, end);
    assert_eq!(report.open_group_at, Some(group));
    assert_eq!(truncate_log(&path, &report).unwrap(), offset_of(0, group));
    let after = verify_log(&path).unwrap();
    assert_eq!((after.records, after.open_group_at), (1, None));
}

#[test]
fn a_closed_group_is_not_open() {
    let dir = TempDir::new("closed");
    let payloads = vec![set("a", "1", true), set("b", "2", false)];
    let (path, _) = write_log(dir.path(), 0, &payloads);
    assert_eq!(verify_log(&path).unwrap().open_group_at, None);
}

#[test]
fn header_damage_is_reported_and_truncation_refused() {
    let dir = TempDir::new("header");
    let (path, _) = write_log(dir.path(), 0, &[set("a", "1", false)]);
    flip_bit(&path, 18);
    let report = verify_log(&path).unwrap();
    assert_eq!(report.valid_bytes, 0);
    assert!(report.header_bad());
    let problem = report.problem.clone().unwrap();
    assert_eq!(problem.offset, 0);
    assert_eq!(
        problem.what,
        ProblemKind::Header("file header checksum mismatch".into())
    );
    let err = truncate_log(&path, &report).unwrap_err();
    assert!(
        err.to_string().contains("truncation cannot repair"),
        "{err}"
    );
}

#[test]
fn header_must_agree_with_the_name() {
    let dir = TempDir::new("name");
    let (path, _) = write_log(dir.path(), 64, &[set("a", "1", false)]);
    let renamed = dir.path().join(log::file::log_file_name(128));
    fs::rename(&path, &renamed).unwrap();
    let problem = verify_log(&renamed).unwrap().problem.unwrap();
    assert_eq!(
        problem.what,
        ProblemKind::Header("the header's first LSN 64 disagrees with the file name's 128".into())
    );
    // Under another name (copied for inspection) the header is taken as is.
    let copy = dir.path().join("copy.log");
    fs::copy(&renamed, &copy).unwrap();
    assert!(verify_log(&copy).unwrap().is_valid());
}

#[test]
fn a_short_file_is_a_truncated_header() {
    let dir = TempDir::new("short");
    let path = dir.path().join(log::file::log_file_name(0));
    fs::write(&path, b"SHOALLOG").unwrap();
    let report = verify_log(&path).unwrap();
    assert!(report.header_bad());
    assert_eq!(report.file_bytes, 8);
}

#[test]
fn a_frame_that_is_not_a_record_ends_the_valid_prefix() {
    let dir = TempDir::new("record");
    let mut bad = Vec::new();
    encode_flush_db(&mut bad, 0);
    bad[1] = 99;
    let (path, _) = write_log(dir.path(), 0, &[set("a", "1", false), bad]);
    let report = verify_log(&path).unwrap();
    assert_eq!(report.records, 1);
    match report.problem.unwrap().what {
        ProblemKind::Record(e) => {
            assert_eq!((e.offset, e.what.as_str()), (1, "db 99 is not below 16"))
        }
        other => panic!("expected a record problem, got {other:?}"),
    }
}

#[test]
fn truncate_refuses_a_file_that_changed_since_it_was_verified() {
    let dir = TempDir::new("changed");
    let (path, _) = write_log(dir.path(), 0, &[set("a", "1", false), set("b", "2", false)]);
    chop(&path, 3);
    let report = verify_log(&path).unwrap();
    chop(&path, 1);
    assert!(truncate_log(&path, &report).is_err());
}

#[test]
fn dump_prints_one_line_per_frame_then_counts() {
    let dir = TempDir::new("dump");
    let payloads = vec![set("a", "1", true), set("b", "2", false)];
    let (path, end) = write_log(dir.path(), 0, &payloads);
    let second = frame_size(payloads[0].len());
    let mut out = Vec::new();
    dump_log(&path, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let bytes = FILE_HEADER as u64 + end;
    assert_eq!(
        text,
        format!(
            "lsn=0 SET db=0 key=\"a\" type=string flags=0 expire=0 value=\"1\" +\n\
             lsn={second} SET db=0 key=\"b\" type=string flags=0 expire=0 value=\"2\"\n\
             # 2 records, {bytes} bytes, LSN 0..{end}\n"
        )
    );

    chop(&path, 1);
    let mut out = Vec::new();
    let report = dump_log(&path, &mut out).unwrap();
    assert!(!report.is_valid());
    let text = String::from_utf8(out).unwrap();
    let last = text.lines().last().unwrap();
    assert_eq!(
        last,
        format!(
            "# 1 valid records, valid prefix {} of {} bytes, then a problem at byte {} (LSN {second}): \
             frame truncated (the bytes end inside it); ends inside a group that began at LSN 0",
            offset_of(0, second),
            bytes - 1,
            offset_of(0, second)
        )
    );
}
