//! Random operation sequences against a `HashMap` model, with a manual clock,
//! several dbs and a small segment (so overflow chains, in-place appends, block
//! reuse and coalescing all happen). After each sequence the segment's own
//! consistency check must pass.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use common::TempSegment;
use proptest::prelude::*;
use store::*;

#[derive(Clone, Debug)]
enum Op {
    Set {
        db: u8,
        key: u8,
        len: u16,
        ttl: Option<u16>,
        nx: bool,
    },
    Get {
        db: u8,
        key: u8,
    },
    Del {
        db: u8,
        key: u8,
    },
    Incr {
        db: u8,
        key: u8,
        by: i16,
    },
    Append {
        db: u8,
        key: u8,
        len: u8,
    },
    SetRange {
        db: u8,
        key: u8,
        offset: u16,
        len: u8,
    },
    Expire {
        db: u8,
        key: u8,
        ms: u16,
    },
    Persist {
        db: u8,
        key: u8,
    },
    Rename {
        db: u8,
        from: u8,
        to: u8,
    },
    Advance {
        ms: u16,
    },
    Sweep,
    FlushDb {
        db: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let db = 0u8..3;
    let key = 0u8..40;
    prop_oneof![
        4 => (db.clone(), key.clone(), 0u16..700, proptest::option::of(1u16..500), any::<bool>())
            .prop_map(|(db, key, len, ttl, nx)| Op::Set { db, key, len, ttl, nx }),
        3 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Get { db, key }),
        1 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Del { db, key }),
        1 => (db.clone(), key.clone(), any::<i16>()).prop_map(|(db, key, by)| Op::Incr { db, key, by }),
        2 => (db.clone(), key.clone(), 0u8..100).prop_map(|(db, key, len)| Op::Append { db, key, len }),
        1 => (db.clone(), key.clone(), 0u16..900, 0u8..50)
            .prop_map(|(db, key, offset, len)| Op::SetRange { db, key, offset, len }),
        1 => (db.clone(), key.clone(), 0u16..400).prop_map(|(db, key, ms)| Op::Expire { db, key, ms }),
        1 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Persist { db, key }),
        1 => (db.clone(), key.clone(), key.clone()).prop_map(|(db, from, to)| Op::Rename { db, from, to }),
        1 => (0u16..300).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Sweep),
        // Only one FLUSHDB op in twenty really flushes (db 100 is skipped).
        1 => (0u8..60).prop_map(|n| Op::FlushDb { db: if n < 3 { n } else { 100 } }),
    ]
}

#[derive(Clone, Debug, PartialEq)]
struct Item {
    value: Vec<u8>,
    expire: Option<u64>,
}

type Model = HashMap<(u8, Vec<u8>), Item>;

fn live<'a>(m: &'a mut Model, now: u64, db: u8, key: &[u8]) -> Option<&'a mut Item> {
    let k = (db, key.to_vec());
    if m.get(&k).is_some_and(|i| i.expire.is_some_and(|e| e < now)) {
        m.remove(&k);
    }
    m.get_mut(&k)
}

fn bytes(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| tag.wrapping_add(i as u8)).collect()
}

fn run(ops: &[Op]) {
    run_in_sections(ops, 0);
}

/// Runs `ops` against the store and the model, `section` of them at a time
/// inside one exclusive section (0: none): a section's writes, frees of
/// blocks it allocated itself among them, read back as any others.
fn run_in_sections(ops: &[Op], section: usize) {
    let seg = TempSegment::new("model");
    let (store, clock) = seg.open_with_clock(2 << 20, 1_000_000);
    let mut h = store.handle().unwrap();
    let mut m: Model = HashMap::new();
    if section == 0 {
        for (step, op) in ops.iter().enumerate() {
            apply(&mut h, &mut m, &clock, step, op);
        }
    } else {
        for (i, chunk) in ops.chunks(section).enumerate() {
            h.exclusive(|h| {
                for (j, op) in chunk.iter().enumerate() {
                    apply(h, &mut m, &clock, i * section + j, op);
                }
                Ok(())
            })
            .unwrap();
        }
    }
    check_against_model(&mut h, &mut m, &clock);
    drop(h);
    store.check().unwrap();
}

/// Runs one operation on the store and on the model.
fn apply(h: &mut Handle, m: &mut Model, clock: &AtomicU64, step: usize, op: &Op) {
    {
        let now = clock.load(Ordering::Relaxed);
        match *op {
            Op::Set {
                db,
                key,
                len,
                ttl,
                nx,
            } => {
                let k = [b'k', key];
                let v = bytes(step as u8, len as usize);
                let exists = live(m, now, db, &k).is_some();
                let opts = SetOptions {
                    condition: if nx {
                        SetCondition::IfAbsent
                    } else {
                        SetCondition::Always
                    },
                    expiry: ttl.map_or(Expiry::Persist, |t| Expiry::At(now + t as u64)),
                    ..SetOptions::default()
                };
                let r = h.set(db, &k, &v, &opts).unwrap();
                assert_eq!(r.written, !(nx && exists), "step {step}");
                if r.written {
                    m.insert(
                        (db, k.to_vec()),
                        Item {
                            value: v,
                            expire: ttl.map(|t| now + t as u64),
                        },
                    );
                }
            }
            Op::Get { db, key } => {
                let k = [b'k', key];
                let want = live(m, now, db, &k).map(|i| i.value.clone());
                assert_eq!(h.get(db, &k).unwrap(), want, "step {step}");
            }
            Op::Del { db, key } => {
                let k = [b'k', key];
                let had = live(m, now, db, &k).is_some();
                m.remove(&(db, k.to_vec()));
                assert_eq!(h.delete(db, &k).unwrap(), had, "step {step}");
            }
            Op::Incr { db, key, by } => {
                let k = [b'k', key];
                let cur = live(m, now, db, &k).map(|i| i.value.clone());
                let parsed = match &cur {
                    None => Some(0),
                    Some(v) => parse_i64(v),
                };
                let got = h.incr_by(db, &k, by as i64);
                match parsed.and_then(|p| p.checked_add(by as i64)) {
                    Some(n) => {
                        assert_eq!(got.unwrap(), n, "step {step}");
                        let expire = live(m, now, db, &k).and_then(|i| i.expire);
                        m.insert(
                            (db, k.to_vec()),
                            Item {
                                value: n.to_string().into_bytes(),
                                expire,
                            },
                        );
                    }
                    None => assert!(got.is_err(), "step {step}"),
                }
            }
            Op::Append { db, key, len } => {
                let k = [b'k', key];
                let tail = bytes(step as u8 ^ 0x55, len as usize);
                let item = live(m, now, db, &k);
                let new_len = match item {
                    Some(i) => {
                        i.value.extend_from_slice(&tail);
                        i.value.len()
                    }
                    None => {
                        m.insert(
                            (db, k.to_vec()),
                            Item {
                                value: tail.clone(),
                                expire: None,
                            },
                        );
                        tail.len()
                    }
                };
                assert_eq!(
                    h.append(db, &k, &tail).unwrap(),
                    new_len as u64,
                    "step {step}"
                );
            }
            Op::SetRange {
                db,
                key,
                offset,
                len,
            } => {
                let k = [b'k', key];
                let patch = bytes(step as u8 ^ 0xAA, len as usize);
                let got = h.set_range(db, &k, offset as u64, &patch).unwrap();
                let item = live(m, now, db, &k);
                let want = match item {
                    None if patch.is_empty() => 0,
                    None => {
                        let mut v = vec![0; offset as usize];
                        v.extend_from_slice(&patch);
                        let n = v.len();
                        m.insert(
                            (db, k.to_vec()),
                            Item {
                                value: v,
                                expire: None,
                            },
                        );
                        n
                    }
                    Some(i) => {
                        if !patch.is_empty() {
                            let end = offset as usize + patch.len();
                            if i.value.len() < end {
                                i.value.resize(end, 0);
                            }
                            i.value[offset as usize..end].copy_from_slice(&patch);
                        }
                        i.value.len()
                    }
                };
                assert_eq!(got, want as u64, "step {step}");
            }
            Op::Expire { db, key, ms } => {
                let k = [b'k', key];
                let exists = live(m, now, db, &k).is_some();
                let got = h
                    .pexpire(db, &k, ms as i64, ExpireCondition::Always)
                    .unwrap();
                assert_eq!(got, Some(exists), "step {step}");
                if ms == 0 {
                    m.remove(&(db, k.to_vec()));
                } else if let Some(i) = live(m, now, db, &k) {
                    i.expire = Some(now + ms as u64);
                }
            }
            Op::Persist { db, key } => {
                let k = [b'k', key];
                let had = live(m, now, db, &k).is_some_and(|i| i.expire.take().is_some());
                assert_eq!(h.persist(db, &k).unwrap(), had, "step {step}");
            }
            Op::Rename { db, from, to } => {
                let (f, t) = ([b'k', from], [b'k', to]);
                let src = live(m, now, db, &f).cloned();
                let got = h.rename(db, &f, &t, false);
                match src {
                    None => assert!(matches!(got, Err(Error::NoSuchKey)), "step {step}"),
                    Some(item) => {
                        assert!(got.unwrap(), "step {step}");
                        m.remove(&(db, f.to_vec()));
                        m.insert((db, t.to_vec()), item);
                    }
                }
            }
            Op::Advance { ms } => {
                clock.fetch_add(ms as u64, Ordering::Relaxed);
            }
            Op::Sweep => {
                h.sweep_expired(1 << 20).unwrap();
                m.retain(|_, i| i.expire.is_none_or(|e| e >= now));
            }
            Op::FlushDb { db } => {
                if db < 100 {
                    h.flushdb(db).unwrap();
                    m.retain(|(d, _), _| *d != db);
                }
            }
        }
    }
}

/// Every model key reads back, nothing else exists.
fn check_against_model(h: &mut Handle, m: &mut Model, clock: &AtomicU64) {
    let now = clock.load(Ordering::Relaxed);
    m.retain(|_, i| i.expire.is_none_or(|e| e >= now));
    h.sweep_expired(1 << 20).unwrap();
    for db in 0..3u8 {
        let mut keys = Vec::new();
        let mut cursor = 0;
        loop {
            let page = h.scan(db, cursor, None, 7, None).unwrap();
            keys.extend(page.keys);
            cursor = page.cursor;
            if cursor == 0 {
                break;
            }
        }
        keys.sort();
        let mut want: Vec<Vec<u8>> = m
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect();
        want.sort();
        assert_eq!(keys, want);
        assert_eq!(h.dbsize(db).unwrap(), want.len() as u64);
        for k in want {
            assert_eq!(
                h.get(db, &k).unwrap().as_ref(),
                Some(&m[&(db, k.clone())].value)
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn store_matches_hashmap_model(ops in proptest::collection::vec(op(), 1..400)) {
        run(&ops);
    }

    /// The same inside exclusive sections of a few to all the operations:
    /// a section reads its own writes, and blocks it allocates and frees
    /// (a value overwritten twice, a key set and deleted) go back at once.
    #[test]
    fn store_in_sections_matches_hashmap_model(
        ops in proptest::collection::vec(op(), 1..400),
        section in 1usize..400,
    ) {
        run_in_sections(&ops, section);
    }
}

#[test]
fn overflow_chains_grow_and_shrink_back() {
    const N: u32 = 10_000;
    // 10,000 keys over 1024 buckets of six slots: most chains need overflow
    // nodes; deleting everything must unlink and free every node.
    let seg = TempSegment::new("chains");
    let mut opts = seg.options(1 << 20);
    opts.contexts = 8;
    let store = Store::open(&opts).unwrap();
    let mut h = store.handle().unwrap();
    for i in 0..N {
        h.set(
            0,
            &i.to_le_bytes(),
            &i.to_be_bytes(),
            &SetOptions::default(),
        )
        .unwrap();
    }
    for i in 0..N {
        assert_eq!(
            h.get(0, &i.to_le_bytes()).unwrap(),
            Some(i.to_be_bytes().to_vec())
        );
    }
    drop(h);
    assert_eq!(store.check().unwrap().keys, N as u64);
    let mut h = store.handle().unwrap();
    for i in 0..N {
        assert!(h.delete(0, &i.to_le_bytes()).unwrap());
    }
    drop(h);
    let report = store.check().unwrap();
    assert_eq!((report.keys, report.nodes, report.used_blocks), (0, 0, 0));
    assert_eq!(
        store.arena_stats().unwrap().free_blocks,
        1,
        "freed space coalesces back into one block"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    /// Values from empty to hundreds of KB, written over and deleted in any
    /// order: every block is accounted for, and once all keys are gone the
    /// arena has coalesced back into one free block.
    #[test]
    fn arena_accounts_for_every_size_and_coalesces(
        ops in proptest::collection::vec(
            (0u8..30, prop_oneof![0u32..200, 0u32..5_000, 0u32..300_000], any::<bool>()),
            1..200,
        )
    ) {
        let seg = TempSegment::new("arena");
        let mut opts = seg.options(8 << 20);
        opts.contexts = 8;
        let store = Store::open(&opts).unwrap();
        let mut h = store.handle().unwrap();
        let mut model: HashMap<u8, u32> = HashMap::new();
        for (k, size, delete) in ops {
            if delete {
                prop_assert_eq!(h.delete(0, &[k]).unwrap(), model.remove(&k).is_some());
                continue;
            }
            match h.set(0, &[k], &vec![k; size as usize], &SetOptions::default()) {
                Ok(_) => {
                    model.insert(k, size);
                }
                Err(Error::OutOfMemory) => {}
                Err(e) => panic!("set of {size} bytes: {e}"),
            }
        }
        for (k, size) in &model {
            prop_assert_eq!(h.get(0, &[*k]).unwrap(), Some(vec![*k; *size as usize]));
        }
        drop(h);
        store.check().unwrap();
        let a = store.arena_stats().unwrap();
        prop_assert_eq!(a.used_bytes + a.free_bytes, (a.total_bytes - 8) & !7);
        let mut h = store.handle().unwrap();
        h.flushall().unwrap();
        drop(h);
        store.check().unwrap();
        let a = store.arena_stats().unwrap();
        prop_assert_eq!((a.used_bytes, a.used_blocks, a.free_blocks), (0, 0, 1));
    }
}
