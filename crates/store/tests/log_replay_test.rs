//! The log carries every write exactly: a long random sequence of writes of
//! every type, drained from the ring as it goes, replays into an empty
//! store as the very same keys, types, values and expiries, in every db;
//! so does a fuzzy snapshot taken while the writes go on, followed by the
//! frames from its start. A write to a paged collection logs its changes
//! (an RPUSH of one item logs that item), not the whole value.

mod common;

use common::{dump_all, replay, Frame, TempSegment};
use proptest::prelude::*;
use store::log::frame::parse_frame;
use store::log::record::CONTINUES;
use store::log::{FsyncPolicy, LogRing, Record};
use store::*;

/// Big enough for a 2 MiB ring (frames of up to 1 MiB).
const SEGMENT: u64 = 32 << 20;
/// The dbs the workload writes to.
const DBS: u8 = 4;

/// The ring as a log writer drains it: frames copied out, space released.
struct Drain {
    ring: LogRing,
    pos: u64,
    frames: Vec<Frame>,
}

impl Drain {
    /// Turns the log on in `h`'s segment.
    fn enable(h: &Handle) -> Drain {
        let ring = h.log_ring();
        let pos = ring.enable(0, FsyncPolicy::No).unwrap();
        Drain {
            ring,
            pos,
            frames: Vec::new(),
        }
    }

    /// Takes every complete frame out of the ring and releases its space.
    /// Between writes of one thread every frame is complete.
    fn drain(&mut self) {
        let mut bytes = Vec::new();
        loop {
            bytes.clear();
            let end = self
                .ring
                .read_frames(self.pos, &mut bytes, 1 << 20)
                .unwrap();
            if end == self.pos {
                break;
            }
            let mut at = 0;
            while at < bytes.len() {
                let (_, payload, size) = parse_frame(&bytes[at..], self.pos).unwrap();
                self.frames.push((self.pos, payload.to_vec()));
                self.pos += size;
                at += size as usize;
            }
            assert_eq!(self.pos, end);
            self.ring.release(end).unwrap();
        }
        assert_eq!(
            self.pos,
            self.ring.head(),
            "an incomplete frame in the ring"
        );
    }
}

/// Asserts two dumps are equal, naming the first difference (values cut
/// around where they part).
fn assert_same(want: &[(u8, Vec<u8>, String)], got: &[(u8, Vec<u8>, String)], what: &str) {
    for (x, y) in want.iter().zip(got) {
        if x != y {
            let common =
                x.2.bytes()
                    .zip(y.2.bytes())
                    .take_while(|(a, b)| a == b)
                    .count();
            let cut = |s: &str| {
                let from = (common.saturating_sub(60)..=common)
                    .find(|&i| s.is_char_boundary(i))
                    .unwrap_or(0);
                let to = ((common + 120).min(s.len())..=s.len())
                    .find(|&i| s.is_char_boundary(i))
                    .unwrap_or(s.len());
                s[from..to].to_string()
            };
            panic!(
                "{what}: db {} key {:?} / db {} key {:?} part at byte {common}:\n want …{}\n  got …{}",
                x.0,
                String::from_utf8_lossy(&x.1),
                y.0,
                String::from_utf8_lossy(&y.1),
                cut(&x.2),
                cut(&y.2)
            );
        }
    }
    assert_eq!(want.len(), got.len(), "{what}: key counts differ");
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (0 when n is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, names: &[&'a str]) -> &'a [u8] {
        names[self.below(names.len() as u64) as usize].as_bytes()
    }
}

const LISTS: &[&str] = &["L0", "L1"];
const HASHES: &[&str] = &["H0", "H1"];
const SETS: &[&str] = &["S0", "S1"];
const ZSETS: &[&str] = &["Z0", "Z1"];
const STRINGS: &[&str] = &["K0", "K1", "K2"];
const COUNTERS: &[&str] = &["N0", "N1"];

/// What the workload saw, to check it covered what it means to.
#[derive(Default)]
struct Seen {
    longest_list: u64,
    /// Lists that were paged (longer than 128) and not small since.
    paged_lists: std::collections::HashSet<(u8, Vec<u8>)>,
    list_shrunk_after_paged: bool,
    biggest_hash: u64,
    biggest_set: u64,
    biggest_zset: u64,
}

/// A random sequence of writes of every type through the public API,
/// growing the collections past their paged thresholds and shrinking them
/// back, in phases.
struct Workload {
    rng: Rng,
    step: u64,
    /// Whether FLUSHDB and SWAPDB may run (not while a snapshot is written:
    /// a SWAPDB makes it start again).
    db_wide: bool,
    seen: Seen,
}

fn ok_or<T>(res: Result<T>, allowed: &[Error]) {
    if let Err(e) = res {
        assert!(
            allowed.iter().any(|a| a.to_string() == e.to_string()),
            "unexpected error {e}"
        );
    }
}

impl Workload {
    fn new(seed: u64) -> Workload {
        Workload {
            rng: Rng(seed | 1),
            step: 0,
            db_wide: true,
            seen: Seen::default(),
        }
    }

    /// Growing (pushes and inserts win) or shrinking (removals win).
    fn growing(&self) -> bool {
        (self.step / 700).is_multiple_of(2)
    }

    fn db(&mut self) -> u8 {
        if self.rng.chance(70) {
            0
        } else {
            self.rng.below(DBS as u64) as u8
        }
    }

    fn item(&mut self) -> Vec<u8> {
        if self.rng.chance(60) {
            format!("v{}", self.rng.below(40)).into_bytes()
        } else {
            let n = self.rng.below(30) as usize;
            (0..n).map(|_| self.rng.below(256) as u8).collect()
        }
    }

    fn op(&mut self, h: &mut Handle) {
        self.step += 1;
        let db = self.db();
        match self.rng.below(100) {
            0..=29 => self.list_op(h, db),
            30..=44 => self.hash_op(h, db),
            45..=59 => self.set_op(h, db),
            60..=74 => self.zset_op(h, db),
            75..=84 => self.string_op(h, db),
            _ => self.key_op(h, db),
        }
    }

    fn list_op(&mut self, h: &mut Handle, db: u8) {
        let key = self.rng.pick(LISTS);
        let grow = self.growing();
        let choice = self.rng.below(100);
        let len = h
            .read_collection::<List, _>(db, key, |l| Ok(l.len()))
            .unwrap()
            .unwrap_or(0);
        let items: Vec<Vec<u8>> = (0..1 + self.rng.below(12)).map(|_| self.item()).collect();
        let (a, b) = (self.rng.next(), self.rng.next());
        let count = 1 + self.rng.below(if grow { 8 } else { 24 });
        let from_tail = self.rng.chance(50);
        let push_share = if grow { 55 } else { 20 };
        let res = h.write_collection::<List, _>(db, key, true, |l| {
            let n = l.len().max(1);
            match choice {
                c if c < push_share => {
                    for item in &items {
                        if from_tail {
                            l.push_back(item)?;
                        } else {
                            l.push_front(item)?;
                        }
                    }
                }
                c if c < 70 => {
                    for _ in 0..count {
                        let popped = if from_tail {
                            l.pop_back()?
                        } else {
                            l.pop_front()?
                        };
                        if popped.is_none() {
                            break;
                        }
                    }
                }
                70..=74 => {
                    l.set(a % n, &items[0])?;
                }
                75..=79 => l.insert(a % (n + 1), &items[0])?,
                80..=83 => {
                    if let Some(x) = l.get(a % n)? {
                        l.remove_equal(&x, b % 3, from_tail)?;
                    }
                }
                84..=87 => {
                    // LTRIM: a little off one end or both.
                    let len = l.len();
                    l.retain_range(a % 3, len.saturating_sub(b % 3))?;
                }
                88..=91 => {
                    // LMOVE of a list onto itself: a pop and a push in one write.
                    if let Some(x) = l.pop_back()? {
                        l.push_front(&x)?;
                    }
                }
                92..=95 => {
                    l.remove(a % n)?;
                }
                _ => {
                    // LPUSH then LTRIM to a cap, in one write (as EXEC would).
                    l.push_front(&items[0])?;
                    l.retain_range(0, 150 + a % 50)?;
                }
            }
            Ok(l.len())
        });
        let after = res.unwrap().unwrap_or(0);
        self.seen.longest_list = self.seen.longest_list.max(after);
        let id = (db, key.to_vec());
        if len > 128 {
            self.seen.paged_lists.insert(id);
        } else if after < 64 && self.seen.paged_lists.remove(&id) {
            self.seen.list_shrunk_after_paged = true;
        }
    }

    fn field(&mut self) -> Vec<u8> {
        format!("f{}", self.rng.below(2000)).into_bytes()
    }

    fn hash_op(&mut self, h: &mut Handle, db: u8) {
        let key = self.rng.pick(HASHES);
        let insert = self.rng.chance(if self.growing() { 80 } else { 30 });
        let n = 1 + self.rng.below(if insert { 48 } else { 30 });
        let fields: Vec<Vec<u8>> = (0..n).map(|_| self.field()).collect();
        let values: Vec<Vec<u8>> = (0..n)
            .map(|_| {
                let len = self.rng.below(60) as usize;
                vec![b'a' + self.rng.below(26) as u8; len]
            })
            .collect();
        let one = self.rng.chance(30);
        let len = h
            .write_collection::<Hash, _>(db, key, true, |x| {
                if insert {
                    for (f, v) in fields.iter().zip(&values) {
                        x.insert(f, v)?;
                    }
                } else if one {
                    x.remove(&fields[0])?;
                } else {
                    let names: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
                    x.remove_all(&names)?;
                }
                Ok(x.len())
            })
            .unwrap()
            .unwrap_or(0);
        self.seen.biggest_hash = self.seen.biggest_hash.max(len);
    }

    fn member(&mut self) -> Vec<u8> {
        let n = self.rng.below(2000);
        if self.rng.chance(50) {
            n.to_string().into_bytes()
        } else {
            format!("m{n}").into_bytes()
        }
    }

    fn set_op(&mut self, h: &mut Handle, db: u8) {
        let key = self.rng.pick(SETS);
        let choice = self.rng.below(100);
        let add_share = if self.growing() { 75 } else { 30 };
        let n = 1 + self.rng.below(48);
        let members: Vec<Vec<u8>> = (0..n).map(|_| self.member()).collect();
        let (a, count) = (self.rng.next(), 1 + self.rng.below(8));
        let len = h
            .write_collection::<Set, _>(db, key, true, |s| {
                match choice {
                    c if c < add_share => {
                        for m in &members {
                            s.insert(m)?;
                        }
                    }
                    c if c < add_share + 10 => {
                        s.remove(&members[0])?;
                    }
                    c if c < add_share + 20 => {
                        // SPOP with a count: random positions.
                        let mut doomed = Vec::new();
                        for i in 0..count {
                            if let Some(m) = s.nth((a + i * 7919) % s.len().max(1))? {
                                doomed.push(m);
                            }
                        }
                        let names: Vec<&[u8]> = doomed.iter().map(|m| &m[..]).collect();
                        s.remove_all(&names)?;
                    }
                    _ => {
                        let names: Vec<&[u8]> = members.iter().map(|m| &m[..]).collect();
                        s.remove_all(&names)?;
                    }
                }
                Ok(s.len())
            })
            .unwrap()
            .unwrap_or(0);
        self.seen.biggest_set = self.seen.biggest_set.max(len);
    }

    fn score(&mut self) -> f64 {
        match self.rng.below(10) {
            0 => -0.0,
            1 => 0.0,
            2 => f64::INFINITY,
            3 => f64::NEG_INFINITY,
            4..=6 => self.rng.below(50) as f64,
            _ => (self.rng.next() as i64 as f64) / 1e15,
        }
    }

    fn zset_op(&mut self, h: &mut Handle, db: u8) {
        let key = self.rng.pick(ZSETS);
        let choice = self.rng.below(100);
        let add_share = if self.growing() { 70 } else { 30 };
        let n = 1 + self.rng.below(24);
        let members: Vec<(Vec<u8>, f64)> = (0..n)
            .map(|_| {
                (
                    format!("z{}", self.rng.below(600)).into_bytes(),
                    self.score(),
                )
            })
            .collect();
        let (a, b) = (self.rng.next(), 1 + self.rng.below(6));
        let len = h
            .write_collection::<ZSet, _>(db, key, true, |z| {
                match choice {
                    c if c < add_share => {
                        for (m, s) in &members {
                            z.insert(m, *s)?;
                        }
                    }
                    c if c < add_share + 10 => {
                        for (m, _) in &members {
                            z.remove(m)?;
                        }
                    }
                    c if c < add_share + 18 => {
                        // ZPOPMIN / ZPOPMAX.
                        let len = z.len();
                        if a.is_multiple_of(2) {
                            z.remove_range(0, b)?;
                        } else {
                            z.remove_range(len.saturating_sub(b), len)?;
                        }
                    }
                    _ => {
                        // ZREMRANGEBYRANK somewhere in the middle.
                        let start = a % z.len().max(1);
                        z.remove_range(start, start + b)?;
                    }
                }
                Ok(z.len())
            })
            .unwrap()
            .unwrap_or(0);
        self.seen.biggest_zset = self.seen.biggest_zset.max(len);
    }

    fn string_op(&mut self, h: &mut Handle, db: u8) {
        let key = self.rng.pick(STRINGS);
        let value = self.item();
        match self.rng.below(5) {
            0 => {
                let expiry = match self.rng.below(10) {
                    0..=2 => Expiry::At(h.now_ms() + 3_600_000 + self.rng.below(1000)),
                    3 => Expiry::Keep,
                    _ => Expiry::Persist,
                };
                let opts = SetOptions {
                    expiry,
                    mc_flags: self.rng.below(3) as u32,
                    ..SetOptions::default()
                };
                h.set(db, key, &value, &opts).unwrap();
            }
            1 => {
                h.append(db, key, &value).unwrap();
            }
            2 => {
                let off = self.rng.below(40);
                h.set_range(db, key, off, &value).unwrap();
            }
            _ => {
                let key = self.rng.pick(COUNTERS);
                let delta = self.rng.below(2000) as i64 - 1000;
                h.incr_by(db, key, delta).unwrap();
            }
        }
    }

    /// A key of any type's pool, and its pool (RENAME and COPY stay in it,
    /// so a name always holds one type).
    fn any_key(&mut self) -> (&'static [&'static str], &'static [u8]) {
        let pools: [&'static [&'static str]; 6] = [LISTS, HASHES, SETS, ZSETS, STRINGS, COUNTERS];
        let pool = pools[self.rng.below(6) as usize];
        (pool, self.rng.pick(pool))
    }

    fn key_op(&mut self, h: &mut Handle, db: u8) {
        let (pool, key) = self.any_key();
        let other = self.rng.pick(pool);
        let other_db = self.rng.below(DBS as u64) as u8;
        match self.rng.below(100) {
            0..=7 => {
                h.delete(db, key).unwrap();
            }
            8..=44 => {
                let now = h.now_ms() as i64;
                let at = now + 3_600_000 + self.rng.below(100_000) as i64;
                h.expire_at(db, key, at, ExpireCondition::Always).unwrap();
            }
            45..=46 => {
                // A time in the past removes the key.
                let now = h.now_ms() as i64;
                h.expire_at(db, key, now - 5, ExpireCondition::Always)
                    .unwrap();
            }
            47..=59 => {
                h.persist(db, key).unwrap();
            }
            60..=74 => ok_or(
                h.rename(db, key, other, self.rng.chance(30)),
                &[Error::NoSuchKey, Error::SameObject],
            ),
            75..=84 => ok_or(
                h.copy(db, key, other_db, other, self.rng.chance(50)),
                &[Error::SameObject],
            ),
            85..=94 => ok_or(h.move_key(db, key, other_db), &[Error::SameObject]),
            95..=96 if self.db_wide && self.rng.chance(40) => h.flushdb(other_db).unwrap(),
            97..=98 if self.db_wide => h.swap_db(db, other_db).unwrap(),
            _ => {
                h.delete(other_db, other).unwrap();
            }
        }
    }
}

/// Counts of the log's record kinds, by kind byte.
fn kinds(frames: &[Frame]) -> [u64; 17] {
    let mut n = [0u64; 17];
    for (_, payload) in frames {
        let (record, _) = Record::decode(payload).unwrap();
        n[record.kind() as usize] += 1;
    }
    n
}

#[test]
fn a_random_history_replays_into_the_same_store() {
    let seg = TempSegment::new("logreplay");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    let mut log = Drain::enable(&h);
    let mut work = Workload::new(0x5eed_0001);
    for _ in 0..5000 {
        work.op(&mut h);
        log.drain();
    }
    let seen = &work.seen;
    assert!(
        seen.longest_list > 128,
        "lists never paged: {}",
        seen.longest_list
    );
    assert!(seen.list_shrunk_after_paged, "no paged list shrank back");
    assert!(
        seen.biggest_hash > 512,
        "hashes never paged: {}",
        seen.biggest_hash
    );
    assert!(
        seen.biggest_set > 512,
        "sets never paged: {}",
        seen.biggest_set
    );
    assert!(
        seen.biggest_zset > 128,
        "sorted sets never paged: {}",
        seen.biggest_zset
    );
    let n = kinds(&log.frames);
    use store::log::record::*;
    for kind in [
        KIND_LIST_PUSH,
        KIND_LIST_POP,
        KIND_HASH_SET,
        KIND_HASH_DEL,
        KIND_SET_ADD,
        KIND_SET_REM,
        KIND_ZSET_ADD,
        KIND_ZSET_REM,
        KIND_SET_ENTRY,
        KIND_DELETE,
        KIND_EXPIRE,
        KIND_STRING_APPEND,
        KIND_FLUSH_DB,
        KIND_SWAP_DB,
    ] {
        assert!(
            n[kind as usize] > 0,
            "no record of kind {kind} was logged: {n:?}"
        );
    }

    let want = dump_all(&mut h);
    assert!(
        want.len() > 10,
        "the workload left too few keys: {}",
        want.len()
    );
    let replica_seg = TempSegment::new("logreplay-replica");
    let replica = replica_seg.open(SEGMENT);
    let mut r = replica.handle().unwrap();
    replay(&mut r, &log.frames);
    assert_same(&want, &dump_all(&mut r), "replayed log");
    replica.check().unwrap();
    store.check().unwrap();
}

#[test]
fn a_fuzzy_snapshot_and_the_log_after_its_start_rebuild_the_store() {
    let seg = TempSegment::new("logsnap");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    let mut other = store.handle().unwrap();
    let mut log = Drain::enable(&h);
    let mut work = Workload::new(0x5eed_0002);
    for _ in 0..2500 {
        work.op(&mut h);
        log.drain();
    }

    // The snapshot, while a second handle keeps writing between the
    // buckets it reads (nothing is locked while a record is handed out).
    let start = log.ring.status().released;
    let mut snapshot: Vec<Frame> = Vec::new();
    work.db_wide = false;
    let written_during = {
        let mut n = 0;
        h.snapshot_records(&mut |lsn, payload| {
            snapshot.push((lsn, payload.to_vec()));
            for _ in 0..3 {
                work.op(&mut other);
                n += 1;
            }
            log.drain();
            Ok(())
        })
        .unwrap()
        .unwrap();
        n
    };
    work.db_wide = true;
    assert!(
        written_during > 30,
        "only {written_during} writes during the snapshot"
    );
    let at_snapshot_end = dump_all(&mut h);
    let frames_at_snapshot_end = log.frames.len();

    for _ in 0..2500 {
        work.op(&mut h);
        log.drain();
    }
    let want = dump_all(&mut h);

    let first_after_start = log.frames.partition_point(|(lsn, _)| *lsn < start);
    assert!(first_after_start > 0);

    // The snapshot, then the log from its start to where it finished: the
    // store as it was when the snapshot finished.
    let seg_then = TempSegment::new("logsnap-then");
    let then = seg_then.open(SEGMENT);
    let mut r = then.handle().unwrap();
    replay(&mut r, &snapshot);
    replay(
        &mut r,
        &log.frames[first_after_start..frames_at_snapshot_end],
    );
    assert_same(
        &at_snapshot_end,
        &dump_all(&mut r),
        "snapshot + log to its end",
    );
    then.check().unwrap();

    // The snapshot and all the log from its start: the store now.
    let seg_now = TempSegment::new("logsnap-now");
    let now = seg_now.open(SEGMENT);
    let mut r = now.handle().unwrap();
    replay(&mut r, &snapshot);
    replay(&mut r, &log.frames[first_after_start..]);
    assert_same(&want, &dump_all(&mut r), "snapshot + log");
    now.check().unwrap();

    // The whole log gives the same.
    let seg_full = TempSegment::new("logsnap-full");
    let full = seg_full.open(SEGMENT);
    let mut r = full.handle().unwrap();
    replay(&mut r, &log.frames);
    assert_same(&want, &dump_all(&mut r), "whole log");
}

/// A list of `len` items of `item_len` bytes at `key`, built a thousand
/// items per write.
fn long_list(h: &mut Handle, key: &[u8], len: usize, item_len: usize) {
    let mut done = 0;
    while done < len {
        let n = (len - done).min(1000);
        h.write_collection::<List, _>(0, key, true, |l| {
            for i in 0..n {
                let mut item = format!("{:08}", done + i).into_bytes();
                item.resize(item_len.max(8), b'.');
                l.push_back(&item)?;
            }
            Ok(())
        })
        .unwrap();
        done += n;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// One push or pop on a long paged list logs one small record of that
    /// change, where the list's image would be hundreds of kilobytes.
    #[test]
    fn a_push_onto_a_long_list_logs_only_the_push(
        item in proptest::collection::vec(any::<u8>(), 0..64),
        tail: bool,
        len in 9_000usize..10_000,
    ) {
        let seg = TempSegment::new("logdelta");
        let store = seg.open(SEGMENT);
        let mut h = store.handle().unwrap();
        long_list(&mut h, b"big", len, 20);
        let mut log = Drain::enable(&h);

        h.write_collection::<List, _>(0, b"big", false, |l| {
            if tail { l.push_back(&item) } else { l.push_front(&item) }
        })
        .unwrap();
        log.drain();
        prop_assert_eq!(log.frames.len(), 1);
        let (_, payload) = &log.frames[0];
        prop_assert!(payload.len() < 200, "{} bytes logged", payload.len());
        let (record, continues) = Record::decode(payload).unwrap();
        prop_assert!(!continues);
        prop_assert_eq!(
            record,
            Record::ListPush { db: 0, key: b"big", tail, items: vec![&item[..]] }
        );

        log.frames.clear();
        h.write_collection::<List, _>(0, b"big", false, |l| {
            l.pop_front()?;
            l.pop_front()?;
            l.pop_back()
        })
        .unwrap();
        log.drain();
        let records: Vec<String> = log
            .frames
            .iter()
            .map(|(_, p)| Record::decode(p).unwrap().0.to_string())
            .collect();
        prop_assert_eq!(
            records,
            ["LPOP db=0 key=\"big\" count=2", "RPOP db=0 key=\"big\" count=1"]
        );
        prop_assert!(log.frames[0].1[0] & CONTINUES != 0, "one group");
    }
}

#[test]
fn changes_without_a_record_of_their_own_log_the_whole_value() {
    let seg = TempSegment::new("logopaque");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    long_list(&mut h, b"big", 300, 8);
    let mut log = Drain::enable(&h);
    h.write_collection::<List, _>(0, b"big", false, |l| {
        l.push_back(b"x")?;
        l.set(5, b"changed")
    })
    .unwrap();
    log.drain();
    assert_eq!(log.frames.len(), 1);
    match Record::decode(&log.frames[0].1).unwrap().0 {
        Record::SetEntry { vtype, .. } => assert_eq!(vtype, ValueType::List),
        other => panic!("an image was due, not {other}"),
    }
}

#[test]
fn a_long_run_of_changes_is_split_into_records_of_one_group() {
    let seg = TempSegment::new("logsplit");
    // A 16 MiB ring: room for one write of several MiB.
    let store = seg.open(256 << 20);
    let mut h = store.handle().unwrap();
    let mut log = Drain::enable(&h);
    long_list(&mut h, b"big", 200, 8);
    log.drain();
    let before = log.frames.len();
    let item = vec![b'i'; 1000];
    h.write_collection::<List, _>(0, b"big", false, |l| {
        for _ in 0..3000 {
            l.push_back(&item)?;
        }
        Ok(())
    })
    .unwrap();
    log.drain();
    let write = &log.frames[before..];
    assert_eq!(write.len(), 3, "3 MB of pushes in records under 1 MiB");
    let mut pushed = 0;
    for (i, (_, payload)) in write.iter().enumerate() {
        assert!(payload.len() <= (1 << 20) + 64, "{} bytes", payload.len());
        let (record, continues) = Record::decode(payload).unwrap();
        assert_eq!(continues, i + 1 < write.len());
        let Record::ListPush { tail, items, .. } = record else {
            panic!("a push was due, not {record}");
        };
        assert!(tail);
        pushed += items.len();
    }
    assert_eq!(pushed, 3000);

    let want = dump_all(&mut h);
    let replica_seg = TempSegment::new("logsplit-replica");
    let replica = replica_seg.open(256 << 20);
    let mut r = replica.handle().unwrap();
    replay(&mut r, &log.frames);
    assert_same(&want, &dump_all(&mut r), "split records");
}

/// A write whose records a snapshot already holds is skipped whole on
/// replay: every one of its frames is at or below the version it stamps.
#[test]
fn a_write_of_several_records_seen_by_a_snapshot_is_not_replayed_twice() {
    let seg = TempSegment::new("logsnaptwice");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    let mut log = Drain::enable(&h);
    long_list(&mut h, b"big", 300, 8);
    log.drain();
    // The snapshot starts; a write of two records (LMOVE of the list onto
    // itself) lands before it reads the key.
    let start = log.ring.status().released;
    h.write_collection::<List, _>(0, b"big", false, |l| {
        let x = l.pop_back()?.unwrap();
        l.push_front(&x)
    })
    .unwrap();
    log.drain();
    let mut snapshot: Vec<Frame> = Vec::new();
    h.snapshot_records(&mut |lsn, payload| {
        snapshot.push((lsn, payload.to_vec()));
        Ok(())
    })
    .unwrap()
    .unwrap();
    let want = dump_all(&mut h);
    let from = log.frames.partition_point(|(lsn, _)| *lsn < start);
    assert_eq!(log.frames.len() - from, 2, "the write's two records");

    let seg2 = TempSegment::new("logsnaptwice-rebuilt");
    let rebuilt = seg2.open(SEGMENT);
    let mut r = rebuilt.handle().unwrap();
    replay(&mut r, &snapshot);
    replay(&mut r, &log.frames[from..]);
    assert_same(&want, &dump_all(&mut r), "snapshot + log");
}

#[test]
fn a_log_restarted_past_replicated_versions_replays_writes_to_replicated_keys() {
    // A primary's frames, applied by a replica with the primary's LSNs as
    // versions (its own head stays lower), as replication does.
    let seg = TempSegment::new("logrestart-primary");
    let primary = seg.open(SEGMENT);
    let mut p = primary.handle().unwrap();
    let mut plog = Drain::enable(&p);
    for i in 0..200u32 {
        p.set(
            0,
            format!("k{i}").as_bytes(),
            b"old",
            &SetOptions::default(),
        )
        .unwrap();
    }
    plog.drain();
    let seg_r = TempSegment::new("logrestart-replica");
    let replica = seg_r.open(SEGMENT);
    let mut r = replica.handle().unwrap();
    let mut rlog = Drain::enable(&r);
    replay(&mut r, &plog.frames);
    let top = plog.ring.head();
    assert!(
        rlog.ring.head() < top,
        "the replica's own head is below the versions"
    );

    // Promotion: not while frames before the head are unwritten; once they
    // are, inside an exclusive section, the log moves past every version.
    r.set(0, b"early", b"1", &SetOptions::default()).unwrap();
    assert_eq!(rlog.ring.restart_at(top + 8).unwrap(), None);
    rlog.drain();
    let ring = rlog.ring.clone();
    let restarted = r
        .exclusive(|_| Ok(ring.restart_at(top + 8).unwrap().unwrap()))
        .unwrap();
    assert!(restarted > top && restarted.is_multiple_of(8));
    let status = ring.status();
    assert_eq!(
        (status.head, status.released, status.fsynced),
        (restarted, restarted, restarted)
    );
    rlog.pos = restarted;

    // The snapshot after the restart, then writes to replicated keys: the
    // snapshot plus the log from its start rebuild the promoted store.
    let mut snapshot: Vec<Frame> = Vec::new();
    r.snapshot_records(&mut |lsn, payload| {
        snapshot.push((lsn, payload.to_vec()));
        Ok(())
    })
    .unwrap()
    .unwrap();
    assert!(snapshot.iter().all(|(lsn, _)| *lsn < restarted));
    r.set(0, b"k0", b"new", &SetOptions::default()).unwrap();
    r.set(0, b"k1", b"new", &SetOptions::default()).unwrap();
    rlog.drain();
    assert!(rlog
        .frames
        .iter()
        .all(|(lsn, _)| *lsn < top || *lsn >= restarted));
    let want = dump_all(&mut r);
    let from = rlog.frames.partition_point(|(lsn, _)| *lsn < restarted);
    let seg2 = TempSegment::new("logrestart-rebuilt");
    let rebuilt = seg2.open(SEGMENT);
    let mut h = rebuilt.handle().unwrap();
    replay(&mut h, &snapshot);
    replay(&mut h, &rlog.frames[from..]);
    assert_same(&want, &dump_all(&mut h), "snapshot + log after the restart");
    assert_eq!(h.get(0, b"k0").unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(h.get(0, b"k5").unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(h.get(0, b"early").unwrap().as_deref(), Some(&b"1"[..]));
}
