//! The log writer against an in-memory ring: files, rotation, group commit,
//! fsync policies, startup checks, write failures.

mod common;

use std::fs;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use log::file::{list_logs, log_file_name, FILE_HEADER};
use log::{verify_log, ErrorKind, FsyncPolicy, LogWriter};
use store::log::encode_frame;

/// A writer with a test clock, no retry pause, and notices collected.
fn writer(dir: &TempDir, ring: &FakeRing, limit: u64) -> (LogWriter, Arc<Mutex<Vec<String>>>) {
    let mut w = LogWriter::new(dir.path(), limit);
    w.set_clock(ring.clock());
    w.set_tuning(Duration::ZERO, 4 << 20);
    let notices = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&notices);
    w.on_notice(Box::new(move |msg| sink.lock().unwrap().push(msg)));
    (w, notices)
}

fn run(w: &mut LogWriter, ring: &mut FakeRing) {
    let stop = Arc::clone(&ring.stop);
    w.run(ring, &stop).unwrap();
}

/// The frame bytes of every log file in `dir`, concatenated, checking each
/// file verifies and starts where the previous one ended.
fn log_bytes(dir: &TempDir) -> Vec<u8> {
    let mut out = Vec::new();
    let mut expect = None;
    for file in list_logs(dir.path()).unwrap() {
        let report = verify_log(&file.path).unwrap();
        assert!(report.is_valid(), "{}: {report:?}", file.path.display());
        if let Some(expect) = expect {
            assert_eq!(file.lsn, expect, "files are contiguous");
        }
        expect = Some(report.end_lsn);
        out.extend_from_slice(&fs::read(&file.path).unwrap()[FILE_HEADER..]);
    }
    out
}

#[test]
fn policy_names_parse_and_print() {
    for (name, policy) in [
        ("always", FsyncPolicy::Always),
        ("everysec", FsyncPolicy::EverySec),
        ("no", FsyncPolicy::No),
    ] {
        assert_eq!(name.parse::<FsyncPolicy>().unwrap(), policy);
        assert_eq!(name.to_uppercase().parse::<FsyncPolicy>().unwrap(), policy);
        assert_eq!(policy.to_string(), name);
    }
    assert!("sometimes".parse::<FsyncPolicy>().is_err());
}

#[test]
fn frames_reach_the_file_byte_for_byte() {
    let dir = TempDir::new("basic");
    let mut ring = FakeRing::new(0, FsyncPolicy::EverySec);
    ring.push_many(10, 20);
    ring.then(|r| r.push_many(5, 3));
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    let status = w.status();
    run(&mut w, &mut ring);
    assert_eq!(log_bytes(&dir), ring.bytes);
    assert_eq!(ring.released, ring.head);
    assert_eq!(status.written_lsn(), ring.head);
    assert_eq!(status.fsynced_lsn(), ring.head, "stop fsyncs");
    assert_eq!(ring.fsynced_calls.last(), Some(&ring.head));
    assert_eq!(status.bytes_written(), ring.head);
    assert!(status.last_write_ok());
    assert_eq!(
        status.current_file(),
        Some(dir.path().join(log_file_name(0)))
    );
}

#[test]
fn rotation_starts_a_new_file_past_the_limit() {
    let dir = TempDir::new("rotate");
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push_many(40, 100);
    let (mut w, _) = writer(&dir, &ring, 1000);
    w.set_tuning(Duration::ZERO, 600);
    run(&mut w, &mut ring);
    let files = list_logs(dir.path()).unwrap();
    assert!(files.len() >= 4, "{files:?}");
    for file in &files[..files.len() - 1] {
        let len = fs::metadata(&file.path).unwrap().len();
        assert!(len >= 1000, "rotated only past the limit: {len}");
    }
    assert_eq!(log_bytes(&dir), ring.bytes);
    assert_eq!(w.status().files_created(), files.len() as u64);
}

#[test]
fn always_fsyncs_once_per_batch() {
    let dir = TempDir::new("group");
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push_many(100, 10);
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    let status = w.status();
    run(&mut w, &mut ring);
    // One batch held all 100 frames: one fsync covered them all.
    assert_eq!(status.fsyncs(), 1);
    // The first call, at start, covers what earlier runs wrote (nothing).
    assert_eq!(ring.fsynced_calls, [0, ring.head]);

    let dir = TempDir::new("batches");
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push_many(100, 10);
    let frame = ring.head / 100;
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    w.set_tuning(Duration::ZERO, (frame * 10) as usize);
    let status = w.status();
    run(&mut w, &mut ring);
    assert_eq!(status.fsyncs(), 10);
    let expect: Vec<u64> = (0..=10).map(|i| i * 10 * frame).collect();
    assert_eq!(ring.fsynced_calls, expect);
}

#[test]
fn everysec_fsyncs_once_a_second_of_the_clock() {
    let dir = TempDir::new("everysec");
    let mut ring = FakeRing::new(0, FsyncPolicy::EverySec);
    // A frame every wait (100 ms of the test clock) for 25 waits.
    for _ in 0..25 {
        ring.then(|r| {
            r.push_many(1, 5);
        });
    }
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    let status = w.status();
    run(&mut w, &mut ring);
    // 2.5 s of clock: fsyncs at 1 s and 2 s, then the one at stop.
    assert_eq!(status.fsyncs(), 3, "{:?}", ring.fsynced_calls);
    assert_eq!(ring.fsynced_calls.last(), Some(&ring.head));
    assert_eq!(log_bytes(&dir), ring.bytes);
}

#[test]
fn everysec_does_not_fsync_when_nothing_is_new() {
    let dir = TempDir::new("idle");
    let mut ring = FakeRing::new(0, FsyncPolicy::EverySec);
    for _ in 0..30 {
        ring.then(|_| {});
    }
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    run(&mut w, &mut ring);
    assert_eq!(w.status().fsyncs(), 0);
}

#[test]
fn no_never_fsyncs_until_stop() {
    let dir = TempDir::new("no");
    let mut ring = FakeRing::new(0, FsyncPolicy::No);
    for _ in 0..30 {
        ring.then(|r| r.push_many(1, 5));
    }
    ring.then(|r| assert_eq!(r.fsynced_calls, [0], "no fsync under `no`"));
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    run(&mut w, &mut ring);
    assert_eq!(ring.fsynced_calls, [0, ring.head], "only the one at stop");
}

#[test]
fn a_policy_change_takes_effect() {
    let dir = TempDir::new("change");
    let mut ring = FakeRing::new(0, FsyncPolicy::No);
    ring.push_many(3, 5);
    ring.then(|r| {
        r.policy = FsyncPolicy::Always;
        r.push_many(3, 5);
    });
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    run(&mut w, &mut ring);
    let head = ring.head;
    assert_eq!(ring.fsynced_calls, [0, head]);
    assert_eq!(w.status().fsyncs(), 1);
}

#[test]
fn stop_drains_what_is_complete() {
    let dir = TempDir::new("stop");
    let mut ring = FakeRing::new(0, FsyncPolicy::EverySec);
    ring.push_many(50, 10);
    ring.stop.store(true, Ordering::Release);
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    w.set_tuning(Duration::ZERO, 100);
    run(&mut w, &mut ring);
    assert_eq!(log_bytes(&dir), ring.bytes);
    assert_eq!(ring.waits, 0);
}

#[test]
fn failed_writes_are_retried_and_nothing_is_lost() {
    let dir = TempDir::new("retry");
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push_many(10, 10);
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    w.fail_next_writes(2);
    let status = w.status();
    run(&mut w, &mut ring);
    assert_eq!(status.write_errors(), 2);
    assert!(status.last_write_ok());
    assert!(status
        .last_error()
        .unwrap()
        .contains("injected write failure"));
    assert_eq!(log_bytes(&dir), ring.bytes);
}

#[test]
fn writes_failing_after_stop_give_up_without_releasing() {
    let dir = TempDir::new("giveup");
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push_many(10, 10);
    ring.stop.store(true, Ordering::Release);
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    w.fail_next_writes(100);
    let stop = Arc::clone(&ring.stop);
    let err = w.run(&mut ring, &stop).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Io(_)), "{err}");
    assert_eq!(ring.released, 0, "frames stay in the ring");
    assert!(!w.status().last_write_ok());
}

#[test]
fn start_cuts_a_torn_tail_and_continues_after_it() {
    let dir = TempDir::new("torn");
    let (path, end) = write_log(dir.path(), 0, &[set("a", "1", false), set("b", "2", false)]);
    // A third frame, torn.
    let mut torn = Vec::new();
    encode_frame(end, &set("c", "3", false), &mut torn);
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(&torn[..torn.len() - 4]);
    fs::write(&path, bytes).unwrap();

    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push(&set("a", "1", false));
    ring.push(&set("b", "2", false));
    ring.push(&set("c", "3", false));
    ring.released = 0;
    let (mut w, notices) = writer(&dir, &ring, 64 << 20);
    assert_eq!(w.start(&mut ring).unwrap(), end);
    assert_eq!(ring.release_calls, [end], "what the files hold is released");
    assert_eq!(
        ring.fsynced_calls,
        [end],
        "and fsynced: a dead writer may not have"
    );
    let notices = notices.lock().unwrap().clone();
    assert_eq!(notices.len(), 1);
    assert!(
        notices[0].contains("cut a torn tail of 44 bytes"),
        "{notices:?}"
    );
    run(&mut w, &mut ring);
    assert_eq!(dir.names(), [log_file_name(0), log_file_name(end)]);
    assert_eq!(log_bytes(&dir), ring.bytes);
}

#[test]
fn start_keeps_an_open_group_the_ring_will_finish() {
    let dir = TempDir::new("opengroup");
    let (_, end) = write_log(dir.path(), 0, &[set("a", "1", true)]);
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push(&set("a", "1", true));
    ring.push(&set("b", "2", false));
    ring.released = end;
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    assert_eq!(w.start(&mut ring).unwrap(), end);
    run(&mut w, &mut ring);
    assert_eq!(log_bytes(&dir), ring.bytes);
}

#[test]
fn start_refuses_files_that_lost_what_the_ring_released() {
    let dir = TempDir::new("lost");
    let (_, end) = write_log(dir.path(), 0, &[set("a", "1", false)]);
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push_many(3, 1);
    ring.released = ring.head;
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    let err = w.start(&mut ring).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Inconsistent(_)));
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("end at LSN {end}")) && msg.contains("already released"),
        "{msg}"
    );
}

#[test]
fn start_refuses_files_newer_than_the_ring() {
    let dir = TempDir::new("newer");
    write_log(dir.path(), 0, &[set("a", "1", false), set("b", "2", false)]);
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push(&set("a", "1", false));
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    let err = w.start(&mut ring).unwrap_err();
    assert!(err.to_string().contains("past the ring's head"), "{err}");
}

#[test]
fn start_without_files_begins_at_released() {
    let dir = TempDir::new("fresh");
    let mut ring = FakeRing::new(4096, FsyncPolicy::Always);
    ring.push_many(2, 1);
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    assert_eq!(w.start(&mut ring).unwrap(), 4096);
    run(&mut w, &mut ring);
    assert_eq!(dir.names(), [log_file_name(4096)]);
    assert_eq!(log_bytes(&dir), ring.bytes);
}

#[test]
fn a_restart_without_writes_reuses_the_empty_file() {
    let dir = TempDir::new("reuse");
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push_many(2, 1);
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    run(&mut w, &mut ring);
    for _ in 0..2 {
        ring.stop.store(false, Ordering::Release);
        let (mut w, _) = writer(&dir, &ring, 64 << 20);
        run(&mut w, &mut ring);
    }
    assert_eq!(dir.names(), [log_file_name(0), log_file_name(ring.head)]);
    assert_eq!(log_bytes(&dir), ring.bytes);
}

#[test]
fn a_half_created_newest_file_is_removed() {
    let dir = TempDir::new("halfcreated");
    let (_, end) = write_log(dir.path(), 0, &[set("a", "1", false)]);
    fs::write(dir.path().join(log_file_name(end)), b"SHOAL").unwrap();
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push(&set("a", "1", false));
    let (mut w, notices) = writer(&dir, &ring, 64 << 20);
    assert_eq!(w.start(&mut ring).unwrap(), end);
    assert!(notices.lock().unwrap()[0].contains("header was never completed"));
}

#[test]
fn a_damaged_header_stops_the_start() {
    let dir = TempDir::new("badheader");
    let (path, _) = write_log(dir.path(), 0, &[set("a", "1", false)]);
    flip_bit(&path, 20);
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    let err = w.start(&mut ring).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("damaged before its end at byte 0"), "{msg}");
    assert!(!msg.contains("--truncate"), "{msg}");
}

#[test]
fn bytes_from_the_ring_that_are_not_frames_stop_the_writer() {
    let dir = TempDir::new("ringbad");
    let mut ring = FakeRing::new(0, FsyncPolicy::Always);
    ring.push_many(3, 4);
    let second = ring.head / 3;
    ring.bytes[second as usize + 20] ^= 1;
    ring.unchecked_reads = true;
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    let stop = Arc::clone(&ring.stop);
    let err = w.run(&mut ring, &stop).unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Ring(_)), "{err}");
    assert_eq!(err.offset, Some(second));
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
    assert_eq!(ring.released, 0, "nothing written, nothing released");
    assert_eq!(log_bytes(&dir), b"");
}

#[test]
fn rotation_under_no_fsyncs_nothing_until_stop() {
    let dir = TempDir::new("rotateno");
    let mut ring = FakeRing::new(0, FsyncPolicy::No);
    ring.push_many(40, 100);
    let (mut w, _) = writer(&dir, &ring, 1000);
    w.set_tuning(Duration::ZERO, 600);
    run(&mut w, &mut ring);
    assert!(list_logs(dir.path()).unwrap().len() >= 4);
    assert_eq!(ring.fsynced_calls, [0, ring.head]);
    assert_eq!(w.status().fsyncs(), 1);
    assert_eq!(log_bytes(&dir), ring.bytes);
}

#[test]
fn a_restart_fsyncs_and_starts_a_file_at_the_higher_lsn() {
    let dir = TempDir::new("restart");
    let mut ring = FakeRing::new(8, FsyncPolicy::No);
    ring.push_many(10, 20);
    let old_head = ring.head;
    ring.restart = Some(1 << 20);
    ring.then(|r| r.push_many(5, 3));
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    let status = w.status();
    run(&mut w, &mut ring);
    let logs = list_logs(dir.path()).unwrap();
    assert_eq!(
        logs.iter().map(|l| l.lsn).collect::<Vec<_>>(),
        vec![8, 1 << 20]
    );
    // Everything before the restart was fsynced even under `no`.
    assert!(
        ring.fsynced_calls.contains(&old_head),
        "{:?}",
        ring.fsynced_calls
    );
    assert_eq!(verify_log(&logs[0].path).unwrap().end_lsn, old_head);
    let second = verify_log(&logs[1].path).unwrap();
    assert_eq!(second.records, 5);
    assert_eq!(second.end_lsn, ring.head);
    assert_eq!(status.written_lsn(), ring.head);
}

#[test]
fn an_empty_file_past_the_head_is_a_restart_that_never_happened() {
    let dir = TempDir::new("restart-undone");
    let mut ring = FakeRing::new(8, FsyncPolicy::Always);
    ring.push_many(3, 10);
    let (mut w, _) = writer(&dir, &ring, 64 << 20);
    run(&mut w, &mut ring);
    // The new file exists, but the ring still ends at its old head.
    write_log(dir.path(), 1 << 20, &[]);
    let mut ring2 = FakeRing::new(ring.head, FsyncPolicy::Always);
    ring2.push_many(2, 10);
    let (mut w, notices) = writer(&dir, &ring2, 64 << 20);
    run(&mut w, &mut ring2);
    assert!(
        notices.lock().unwrap()[0].contains("log restart that did not finish"),
        "{:?}",
        notices.lock().unwrap()
    );
    let logs = list_logs(dir.path()).unwrap();
    assert!(logs.iter().all(|l| l.lsn < 1 << 20));
    assert_eq!(
        verify_log(&logs.last().unwrap().path).unwrap().end_lsn,
        ring2.head
    );
}
