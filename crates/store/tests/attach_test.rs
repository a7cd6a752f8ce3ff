//! Creating and attaching segments: a second attacher sees the same data, and
//! every kind of bad file is refused with an `Error::Attach` that says why.

mod common;

use std::fs::OpenOptions as FsOpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;

use common::{put, TempSegment};
use store::*;

const MB: u64 = 1 << 20;

/// Creates a segment with one key, then closes it.
fn make_segment(seg: &TempSegment) -> u64 {
    let store = seg.open(4 * MB);
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"k", b"v");
    drop(h);
    store.check().unwrap();
    store.info().unwrap().segment_bytes
}

fn write_at(seg: &TempSegment, offset: u64, bytes: &[u8]) {
    let mut f = FsOpenOptions::new().write(true).open(&seg.path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

/// Opens without creating; must fail with `Error::Attach`. Returns the message.
fn attach_err(seg: &TempSegment) -> String {
    let mut opts = seg.options(4 * MB);
    opts.create = false;
    let err = match Store::open(&opts) {
        Ok(_) => panic!("attach of a bad segment succeeded"),
        Err(e) => e,
    };
    // With create set the answer must be the same: the file exists.
    let err2 = match Store::open(&seg.options(4 * MB)) {
        Ok(_) => panic!("open of a bad segment succeeded"),
        Err(e) => e,
    };
    assert_eq!(err.to_string(), err2.to_string());
    match err {
        Error::Attach(msg) => {
            assert_eq!(msg, err2.to_string());
            msg
        }
        other => panic!("expected Error::Attach, got {other:?}"),
    }
}

fn assert_mentions(msg: &str, words: &[&str]) {
    let lower = msg.to_lowercase();
    assert!(
        words.iter().any(|w| lower.contains(w)),
        "message {msg:?} mentions none of {words:?}"
    );
}

#[test]
fn a_second_attacher_sees_the_same_data() {
    let seg = TempSegment::new("attach-two");
    let a = seg.open(4 * MB);
    assert!(a.created());
    assert_eq!(a.path(), seg.path.as_path());
    // The size asked for by an attacher is ignored: the segment has its own.
    let b = seg.open(64 * MB);
    assert!(!b.created());
    assert_eq!(b.path(), seg.path.as_path());
    assert_eq!(
        a.info().unwrap().segment_bytes,
        b.info().unwrap().segment_bytes
    );
    assert_eq!(a.info().unwrap().segment_bytes, 4 * MB);
    let mut ha = a.handle().unwrap();
    let mut hb = b.handle().unwrap();
    assert_ne!(ha.context_id(), hb.context_id());
    put(&mut ha, 0, b"from-a", b"1");
    assert_eq!(hb.get(0, b"from-a").unwrap(), Some(b"1".to_vec()));
    put(&mut hb, 3, b"from-b", b"2");
    assert_eq!(ha.get(3, b"from-b").unwrap(), Some(b"2".to_vec()));
    assert_eq!(hb.incr_by(0, b"n", 5).unwrap(), 5);
    assert_eq!(ha.incr_by(0, b"n", 5).unwrap(), 10);
    assert!(ha.delete(0, b"from-a").unwrap());
    assert!(!hb.exists(0, b"from-a").unwrap());
    assert_eq!(ha.dbsize(3).unwrap(), 1);
    assert_eq!(hb.dbsize(0).unwrap(), 1);
    // Settings live in the segment.
    a.set_eviction_policy(EvictionPolicy::AllKeysLru).unwrap();
    assert_eq!(b.eviction_policy().unwrap(), EvictionPolicy::AllKeysLru);
    b.set_maxmemory(3 * MB).unwrap();
    assert_eq!(a.info().unwrap().maxmemory, 3 * MB);
    assert_eq!(a.info().unwrap().contexts_attached, 2);
    drop(ha);
    drop(hb);
    assert_eq!(b.check().unwrap().keys, 2);
    a.check().unwrap();
    drop(a);
    drop(b);
    // Data outlives every attacher.
    let c = seg.open(4 * MB);
    assert!(!c.created());
    let mut h = c.handle().unwrap();
    assert_eq!(h.get(3, b"from-b").unwrap(), Some(b"2".to_vec()));
    assert_eq!(h.get(0, b"n").unwrap(), Some(b"10".to_vec()));
    drop(h);
    c.check().unwrap();
}

#[test]
fn attach_without_create_to_a_missing_segment_fails() {
    let seg = TempSegment::new("attach-missing");
    let mut opts = seg.options(4 * MB);
    opts.create = false;
    match Store::open(&opts) {
        Err(Error::Attach(msg)) => assert_mentions(&msg, &["no segment", "not found", "exist"]),
        Err(e) => panic!("expected Error::Attach, got {e:?}"),
        Ok(_) => panic!("attached to nothing"),
    }
    assert!(!seg.path.exists(), "attach without create made a file");
}

#[test]
fn created_file_is_private_to_its_owner() {
    let seg = TempSegment::new("attach-mode");
    let _store = seg.open(4 * MB);
    let meta = std::fs::metadata(&seg.path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 4 * MB);
}

#[test]
fn wrong_magic_is_refused() {
    let seg = TempSegment::new("attach-magic");
    make_segment(&seg);
    write_at(&seg, 0, b"NOTSHOAL");
    let msg = attach_err(&seg);
    assert_mentions(&msg, &["magic", "not a shoal segment"]);
}

#[test]
fn a_file_of_zeros_is_refused() {
    let seg = TempSegment::new("attach-zeros");
    let f = std::fs::File::create(&seg.path).unwrap();
    f.set_len(4 * MB).unwrap();
    drop(f);
    let msg = attach_err(&seg);
    assert_mentions(&msg, &["magic", "not a shoal segment"]);
}

#[test]
fn wrong_layout_version_is_refused() {
    let seg = TempSegment::new("attach-version");
    make_segment(&seg);
    assert_ne!(LAYOUT_VERSION, 99);
    write_at(&seg, 8, &99u32.to_le_bytes());
    let msg = attach_err(&seg);
    assert_mentions(&msg, &["version"]);
    assert!(
        msg.contains("99"),
        "{msg:?} does not name the version found"
    );
    // A newer layout than this build's is refused the same way.
    write_at(&seg, 8, &(LAYOUT_VERSION + 1).to_le_bytes());
    let msg = attach_err(&seg);
    assert_mentions(&msg, &["version"]);
    // Restoring the version makes it attachable again.
    write_at(&seg, 8, &LAYOUT_VERSION.to_le_bytes());
    let store = seg.open(4 * MB);
    let mut h = store.handle().unwrap();
    assert_eq!(h.get(0, b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn truncated_segment_is_refused() {
    let seg = TempSegment::new("attach-truncated");
    let size = make_segment(&seg);
    for len in [size - 4096, size / 2, 64 * 1024] {
        let f = FsOpenOptions::new().write(true).open(&seg.path).unwrap();
        f.set_len(len).unwrap();
        drop(f);
        let msg = attach_err(&seg);
        assert_mentions(&msg, &["truncated"]);
    }
}

#[test]
fn a_file_too_short_for_a_header_is_refused() {
    let seg = TempSegment::new("attach-short");
    for len in [0u64, 1, 8, 12, 100, 4096, 16 * 1024 - 1] {
        let mut f = std::fs::File::create(&seg.path).unwrap();
        let bytes: Vec<u8> = b"SHOALSEG\x01\x00\x00\x00"
            .iter()
            .copied()
            .chain(std::iter::repeat(0))
            .take(len as usize)
            .collect();
        f.write_all(&bytes).unwrap();
        drop(f);
        let msg = attach_err(&seg);
        assert_mentions(&msg, &["truncated", "short", "header"]);
    }
}

#[test]
fn a_header_whose_geometry_does_not_add_up_is_refused() {
    // Offsets of the header words (segment/layout.rs): segment size at 16, context
    // count at 32, bucket count at 48, header size at 12.
    let cases: &[(u64, &[u8])] = &[
        (16, &0u64.to_le_bytes()),
        (16, &(MB / 2).to_le_bytes()),
        (32, &0u32.to_le_bytes()),
        (32, &1_000_000u32.to_le_bytes()),
        (48, &7u64.to_le_bytes()),
        (56, &u64::MAX.to_le_bytes()),
        (12, &1u32.to_le_bytes()),
    ];
    for (off, bytes) in cases {
        let seg = TempSegment::new("attach-geometry");
        make_segment(&seg);
        write_at(&seg, *off, bytes);
        let msg = attach_err(&seg);
        assert_mentions(
            &msg,
            &["geometry", "corrupt", "header", "truncated", "minimum"],
        );
    }
}

#[test]
fn a_segment_owned_by_another_user_is_refused() {
    let seg = TempSegment::new("attach-owner");
    make_segment(&seg);
    // Needs root to give the file away; skip quietly elsewhere.
    if std::os::unix::fs::chown(&seg.path, Some(65534), Some(65534)).is_err() {
        eprintln!("cannot chown (not root?): skipping");
        return;
    }
    let msg = attach_err(&seg);
    assert_mentions(&msg, &["owned", "owner", "uid"]);
    assert!(msg.contains("65534"), "{msg:?} does not name the owner");
    // Given back, it attaches again.
    let me = std::fs::metadata("/proc/self").unwrap();
    let uid = std::os::unix::fs::MetadataExt::uid(&me);
    std::os::unix::fs::chown(&seg.path, Some(uid), None).unwrap();
    let store = seg.open(4 * MB);
    assert!(!store.created());
}

#[test]
fn a_size_below_the_minimum_is_refused_and_leaves_no_file() {
    let seg = TempSegment::new("attach-tiny");
    for size in [0, 4096, MIN_SEGMENT - 4096] {
        match Store::open(&seg.options(size)) {
            Err(Error::Attach(msg)) => assert_mentions(&msg, &["minimum", "size", "room"]),
            Err(e) => panic!("expected Error::Attach, got {e:?}"),
            Ok(_) => panic!("a {size}-byte segment was created"),
        }
        assert!(!seg.path.exists(), "a failed create left {:?}", seg.path);
    }
    // The minimum with the default 256 contexts (1 MB of context records)
    // leaves no arena: refused with a message that says so.
    match Store::open(&seg.options(MIN_SEGMENT)) {
        Err(Error::Attach(msg)) => assert_mentions(&msg, &["room", "contexts"]),
        Err(e) => panic!("expected Error::Attach, got {e:?}"),
        Ok(_) => {}
    }
    let _ = std::fs::remove_file(&seg.path);
    // With few contexts the minimum works.
    let mut opts = seg.options(MIN_SEGMENT);
    opts.contexts = 8;
    let store = Store::open(&opts).unwrap();
    let mut h = store.handle().unwrap();
    put(&mut h, 0, b"k", b"v");
    drop(h);
    store.check().unwrap();
}

#[test]
fn bad_locations_are_errors_not_panics() {
    let seg = TempSegment::new("attach-dir");
    std::fs::create_dir(&seg.path).unwrap();
    let r = Store::open(&seg.options(4 * MB));
    assert!(r.is_err(), "a directory was opened as a segment");
    std::fs::remove_dir(&seg.path).unwrap();
    let missing_dir = seg.path.join("no").join("such").join("dir");
    let opts = OpenOptions {
        location: Location::Path(missing_dir),
        size: 4 * MB,
        ..OpenOptions::default()
    };
    assert!(Store::open(&opts).is_err());
}

#[test]
fn every_context_slot_taken_is_no_context() {
    let seg = TempSegment::new("attach-contexts");
    let mut opts = seg.options(4 * MB);
    opts.contexts = 2;
    let store = Store::open(&opts).unwrap();
    assert_eq!(store.info().unwrap().contexts, 2);
    let h1 = store.handle().unwrap();
    let h2 = store.handle().unwrap();
    assert!(matches!(store.handle(), Err(Error::NoContext)));
    drop(h1);
    let mut h3 = store.handle().unwrap();
    put(&mut h3, 0, b"k", b"v");
    drop(h2);
    drop(h3);
    store.check().unwrap();
}

#[test]
fn parse_size_understands_units() {
    assert_eq!(parse_size("64m"), Some(64 << 20));
    assert_eq!(parse_size("64M"), Some(64 << 20));
    assert_eq!(parse_size("64mb"), Some(64 << 20));
    assert_eq!(parse_size("1g"), Some(1 << 30));
    assert_eq!(parse_size("1G"), Some(1 << 30));
    assert_eq!(parse_size("512k"), Some(512 << 10));
    assert_eq!(parse_size("512kb"), Some(512 << 10));
    assert_eq!(parse_size("2t"), Some(2 << 40));
    assert_eq!(parse_size("1048576"), Some(1_048_576));
    assert_eq!(parse_size("0"), Some(0));
    assert_eq!(parse_size(" 64m "), Some(64 << 20));
    for bad in [
        "bad",
        "",
        " ",
        "m",
        "k",
        "b",
        "kb",
        "-1",
        "-1m",
        "1.5g",
        "64x",
        "m64",
        "0x10",
        "99999999999t",
        "18446744073709551616",
    ] {
        assert_eq!(parse_size(bad), None, "{bad:?}");
    }
}
