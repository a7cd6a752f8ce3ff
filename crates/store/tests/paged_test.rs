//! Large collections in their paged form (B+trees of arena blocks): deep
//! trees built from big items, every key operation that moves, copies or
//! drops a tree, and the segment check after each step.

mod common;

use common::TempSegment;
use proptest::prelude::*;
use store::*;

const SEGMENT: u64 = 64 << 20;

fn big(i: usize) -> Vec<u8> {
    format!("{i:06}-{}", "v".repeat(150)).into_bytes()
}

fn list(h: &mut Handle, db: u8, key: &[u8]) -> Option<Vec<Vec<u8>>> {
    h.read_collection::<List, _>(db, key, |l| l.range(0, l.len()))
        .unwrap()
}

fn encoding(h: &mut Handle, db: u8, key: &[u8]) -> Vec<u8> {
    let mut raw = Vec::new();
    h.get_into(db, key, &mut raw).unwrap();
    raw
}

#[test]
fn copy_rename_move_and_delete_keep_trees_whole() {
    let seg = TempSegment::new("paged-keys");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    let items: Vec<Vec<u8>> = (0..3000).map(big).collect();
    h.write_collection::<List, _>(0, b"l", true, |l| {
        for i in &items {
            l.push_back(i)?;
        }
        Ok(())
    })
    .unwrap();
    store.check().unwrap();
    assert_eq!(list(&mut h, 0, b"l").unwrap(), items);
    assert!(h.copy(0, b"l", 1, b"c", false).unwrap());
    store.check().unwrap();
    assert_eq!(list(&mut h, 1, b"c").unwrap(), items);
    h.rename(0, b"l", b"r", false).unwrap();
    store.check().unwrap();
    assert!(h.move_key(0, b"r", 2).unwrap());
    store.check().unwrap();
    assert_eq!(list(&mut h, 2, b"r").unwrap(), items);
    // Writing to the copy leaves the original alone.
    h.write_collection::<List, _>(1, b"c", false, |l| l.set(1500, b"changed"))
        .unwrap();
    assert_eq!(list(&mut h, 2, b"r").unwrap(), items);
    assert_eq!(list(&mut h, 1, b"c").unwrap()[1500], b"changed");
    store.check().unwrap();
    let used = store.info().unwrap().arena.used_blocks;
    assert!(h.delete(1, b"c").unwrap());
    h.set(2, b"r", b"a string now", &SetOptions::default())
        .unwrap();
    store.check().unwrap();
    assert!(store.info().unwrap().arena.used_blocks < used / 10);
    h.flushall().unwrap();
    store.check().unwrap();
    assert_eq!(encoding(&mut h, 0, b"l"), b"");
}

fn is_paged(raw: &[u8]) -> bool {
    raw.first() == Some(&3)
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u32, u16),
    Remove(u32),
    Set(u32, u16),
    Trim(u32, u32),
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    /// Lists of big items (trees three levels deep) against a deque, one
    /// write per operation, including the shrink back to compact.
    #[test]
    fn deep_lists_match_a_deque(
        start in 1500usize..4000,
        ops in proptest::collection::vec(prop_oneof![
            4 => (any::<u32>(), any::<u16>()).prop_map(|(i, v)| Op::Insert(i, v)),
            4 => any::<u32>().prop_map(Op::Remove),
            2 => (any::<u32>(), any::<u16>()).prop_map(|(i, v)| Op::Set(i, v)),
            1 => (any::<u32>(), any::<u32>()).prop_map(|(a, b)| Op::Trim(a, b)),
        ], 1..300)
    ) {
        let seg = TempSegment::new("paged-list");
        let store = seg.open(SEGMENT);
        let mut h = store.handle().unwrap();
        let mut model: std::collections::VecDeque<Vec<u8>> = (0..start).map(big).collect();
        h.write_collection::<List, _>(0, b"l", true, |l| {
            for i in &model {
                l.push_back(i)?;
            }
            Ok(())
        }).unwrap();
        prop_assert!(is_paged(&encoding(&mut h, 0, b"l")));
        for op in ops {
            let len = model.len() as u64;
            if len == 0 {
                break;
            }
            let at = |i: u32| u64::from(i) % len;
            h.write_collection::<List, _>(0, b"l", false, |l| match &op {
                Op::Insert(i, v) => l.insert(at(*i), &big(usize::from(*v))),
                Op::Remove(i) => l.remove(at(*i)).map(|_| ()),
                Op::Set(i, v) => l.set(at(*i), &big(usize::from(*v))).map(|_| ()),
                // Mostly small cuts, sometimes down to a compact list.
                Op::Trim(a, b) => {
                    let keep = if b % 5 == 0 { 40.min(len) } else { len - len / 8 };
                    let s = at(*a) % (len - keep + 1);
                    l.retain_range(s, s + keep)
                }
            }).unwrap();
            match op {
                Op::Insert(i, v) => model.insert(at(i) as usize, big(usize::from(v))),
                Op::Remove(i) => drop(model.remove(at(i) as usize)),
                Op::Set(i, v) => model[at(i) as usize] = big(usize::from(v)),
                Op::Trim(a, b) => {
                    let keep = if b % 5 == 0 { 40.min(len) } else { len - len / 8 };
                    let s = at(a) % (len - keep + 1);
                    model = model.iter().skip(s as usize).take(keep as usize).cloned().collect();
                }
            }
            let probe = model.len() as u64 / 2;
            let got = h.read_collection::<List, _>(0, b"l", |l| l.get(probe)).unwrap().flatten();
            prop_assert_eq!(got.as_ref(), model.get(probe as usize));
        }
        let all = list(&mut h, 0, b"l").unwrap_or_default();
        prop_assert_eq!(all, model.iter().cloned().collect::<Vec<_>>());
        if model.len() > 128 {
            prop_assert!(is_paged(&encoding(&mut h, 0, b"l")));
        }
        store.check().unwrap();
    }
}

#[test]
fn hscan_returns_every_field_present_throughout() {
    let seg = TempSegment::new("paged-hscan");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    let field = |i: usize| format!("field:{i}").into_bytes();
    h.write_collection::<Hash, _>(0, b"h", true, |hash| {
        for i in 0..5000 {
            hash.insert(&field(i), &big(i))?;
        }
        Ok(())
    })
    .unwrap();
    assert!(is_paged(&encoding(&mut h, 0, b"h")));
    let mut seen = std::collections::HashSet::new();
    let (mut cursor, mut steps) = (0u64, 0);
    loop {
        let (next, items) = h
            .read_collection::<Hash, _>(0, b"h", |hash| hash.scan(cursor, 10))
            .unwrap()
            .unwrap();
        for (f, v) in items {
            let i: usize = std::str::from_utf8(&f[6..]).unwrap().parse().unwrap();
            assert!(v == big(i) || v == b"new", "value of {f:?}");
            seen.insert(f);
        }
        // Writes between steps: new fields and removed ones (>= 5000).
        let n = 5000 + steps;
        h.write_collection::<Hash, _>(0, b"h", false, |hash| hash.insert(&field(n), b"new"))
            .unwrap();
        steps += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
        assert!(steps < 5000, "the cursor does not move on");
    }
    for i in 0..5000 {
        assert!(seen.contains(&field(i)), "field {i} missed");
    }
    // HGET, HRANDFIELD-style nth and removal of all but a few.
    h.write_collection::<Hash, _>(0, b"h", false, |hash| {
        let doomed: Vec<Vec<u8>> = (10..5000 + steps).map(field).collect();
        let refs: Vec<&[u8]> = doomed.iter().map(Vec::as_slice).collect();
        hash.remove_all(&refs)
    })
    .unwrap();
    assert!(!is_paged(&encoding(&mut h, 0, b"h")));
    let left = h
        .read_collection::<Hash, _>(0, b"h", |hash| hash.entries())
        .unwrap()
        .unwrap();
    assert_eq!(left.len(), 10);
    store.check().unwrap();
}

#[test]
fn deep_sorted_sets_rank_and_count_like_a_sorted_vec() {
    let seg = TempSegment::new("paged-zset");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    let member = |i: usize| format!("m{:05}-{}", (i * 7919) % 4000, "z".repeat(100)).into_bytes();
    let score = |i: usize| ((i * 31) % 17) as f64 - 8.0;
    let mut model: Vec<(f64, Vec<u8>)> = Vec::new();
    h.write_collection::<ZSet, _>(0, b"z", true, |z| {
        for i in 0..4000 {
            z.insert(&member(i), score(i))?;
        }
        Ok(())
    })
    .unwrap();
    for i in 0..4000 {
        model.push((score(i), member(i)));
    }
    // Move a third of them, one write each.
    for i in (0..4000).step_by(3) {
        let s = -score(i) * 2.5;
        h.write_collection::<ZSet, _>(0, b"z", false, |z| z.insert(&member(i), s))
            .unwrap();
        model[i].0 = s;
    }
    model.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then_with(|| a.1.cmp(&b.1)));
    h.read_collection::<ZSet, _>(0, b"z", |z| {
        assert_eq!(z.len(), 4000);
        for (rank, (s, m)) in model.iter().enumerate().step_by(37) {
            assert_eq!(z.rank(m)?, Some(rank as u64));
            assert_eq!(z.score(m)?, Some(*s));
            assert_eq!(z.nth(rank as u64)?, Some((m.clone(), *s)));
            let below = model.partition_point(|(x, _)| x < s) as u64;
            let at_or_below = model.partition_point(|(x, _)| x <= s) as u64;
            assert_eq!(z.count_below_score(*s, false)?, below);
            assert_eq!(z.count_below_score(*s, true)?, at_or_below);
        }
        let got = z.range(0, z.len())?;
        let want: Vec<(Vec<u8>, f64)> = model.iter().map(|(s, m)| (m.clone(), *s)).collect();
        assert_eq!(got, want);
        Ok(())
    })
    .unwrap();
    store.check().unwrap();
    let removed = h
        .write_collection::<ZSet, _>(0, b"z", false, |z| z.remove_range(20, 3970))
        .unwrap();
    assert_eq!(removed, Some(3950));
    model.drain(20..3970);
    assert!(!is_paged(&encoding(&mut h, 0, b"z")));
    let got = h
        .read_collection::<ZSet, _>(0, b"z", |z| z.range(0, z.len()))
        .unwrap()
        .unwrap();
    let want: Vec<(Vec<u8>, f64)> = model.iter().map(|(s, m)| (m.clone(), *s)).collect();
    assert_eq!(got, want);
    store.check().unwrap();
}

#[test]
fn a_set_goes_paged_and_back_to_an_intset() {
    let seg = TempSegment::new("paged-set");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    h.write_collection::<Set, _>(0, b"s", true, |s| {
        for i in 0..20_000 {
            s.insert(i.to_string().as_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    let raw = encoding(&mut h, 0, b"s");
    assert!(is_paged(&raw));
    assert_eq!(
        collections::encoding_name(ValueType::Set, &raw).unwrap(),
        "hashtable"
    );
    for i in (0..20_000).step_by(97) {
        let there = h
            .read_collection::<Set, _>(0, b"s", |s| s.contains(i.to_string().as_bytes()))
            .unwrap();
        assert_eq!(there, Some(true));
    }
    h.write_collection::<Set, _>(0, b"s", false, |s| {
        let doomed: Vec<Vec<u8>> = (100..20_000)
            .map(|i: i32| i.to_string().into_bytes())
            .collect();
        let refs: Vec<&[u8]> = doomed.iter().map(Vec::as_slice).collect();
        s.remove_all(&refs)
    })
    .unwrap();
    let raw = encoding(&mut h, 0, b"s");
    assert_eq!(
        collections::encoding_name(ValueType::Set, &raw).unwrap(),
        "intset"
    );
    store.check().unwrap();
}

#[test]
fn members_with_a_long_common_prefix_make_long_separators() {
    // Separators as long as the members: inner nodes of a few entries, split
    // and merged one insert and one removal at a time (one write each).
    let seg = TempSegment::new("paged-prefix");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    for len in [300usize, 3000] {
        let prefix = "X".repeat(len);
        let members: Vec<Vec<u8>> = (0..600)
            .map(|i| format!("{prefix}{i}").into_bytes())
            .collect();
        for m in &members {
            h.write_collection::<ZSet, _>(0, b"lz", true, |z| z.insert(m, 0.0))
                .unwrap();
        }
        let mut sorted = members.clone();
        sorted.sort();
        let got = h
            .read_collection::<ZSet, _>(0, b"lz", |z| z.range(0, z.len()))
            .unwrap()
            .unwrap();
        assert_eq!(
            got.iter().map(|(m, _)| m.clone()).collect::<Vec<_>>(),
            sorted
        );
        for (rank, m) in sorted.iter().enumerate().step_by(41) {
            let r = h
                .read_collection::<ZSet, _>(0, b"lz", |z| z.rank(m))
                .unwrap();
            assert_eq!(r, Some(Some(rank as u64)));
        }
        store.check().unwrap();
        for m in members.iter().step_by(2) {
            h.write_collection::<ZSet, _>(0, b"lz", false, |z| z.remove(m))
                .unwrap();
        }
        store.check().unwrap();
        assert!(h.delete(0, b"lz").unwrap());
        store.check().unwrap();
    }
}

#[test]
fn lazy_free_detaches_large_values_and_frees_them_in_steps() {
    let seg = TempSegment::new("paged-lazy");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    let fill = |h: &mut Handle, key: &[u8], n: usize| {
        h.write_collection::<List, _>(0, key, true, |l| {
            for i in 0..n {
                l.push_back(&big(i))?;
            }
            Ok(())
        })
        .unwrap();
    };
    let lazy_freed = |store: &Store| {
        store
            .info()
            .unwrap()
            .stats
            .iter()
            .find(|(n, _)| *n == "lazyfreed_objects")
            .unwrap()
            .1
    };
    let empty = store.info().unwrap().arena.used_bytes;
    fill(&mut h, b"big", 3000);
    fill(&mut h, b"other", 200);
    fill(&mut h, b"plain", 3000);
    let full = store.info().unwrap().arena.used_bytes;

    // A lazy removal unpublishes at once and keeps the trees for later.
    h.set_lazy_free(true);
    assert!(h.delete(0, b"big").unwrap());
    h.set_lazy_free(false);
    assert_eq!(encoding(&mut h, 0, b"big"), b"");
    assert_eq!(h.lazy_free_pending().unwrap(), 1);
    store.check().unwrap();
    assert!(store.info().unwrap().arena.used_bytes > full - full / 10);

    // A plain delete still frees its value before it returns.
    assert!(h.delete(0, b"plain").unwrap());
    assert_eq!(h.lazy_free_pending().unwrap(), 1);

    // Bounded steps, each leaving a segment that checks clean.
    let mut steps = 0;
    while h.free_lazily(16).unwrap() {
        steps += 1;
        if steps % 20 == 0 {
            store.check().unwrap();
        }
    }
    assert!(steps > 5, "{steps} steps");
    assert_eq!(h.lazy_free_pending().unwrap(), 0);
    assert_eq!(lazy_freed(&store), 1);
    store.check().unwrap();

    // FLUSHDB under a lazy free: only values past the effort threshold
    // (more than 64 items) wait.
    fill(&mut h, b"big", 3000);
    h.set(0, b"string", &big(1), &SetOptions::default())
        .unwrap();
    h.write_collection::<List, _>(0, b"few", true, |l| l.push_back(b"x"))
        .unwrap();
    h.set_lazy_free(true);
    h.flushdb(0).unwrap();
    h.set_lazy_free(false);
    assert_eq!(h.lazy_free_pending().unwrap(), 2);
    store.check().unwrap();
    while h.free_lazily(1000).unwrap() {}
    assert_eq!(lazy_freed(&store), 3);
    assert!(store.info().unwrap().arena.used_bytes <= empty + 4096);
    store.check().unwrap();
}

#[test]
fn a_dead_context_s_lazy_frees_are_finished_by_its_recoverer() {
    let seg = TempSegment::new("paged-lazy-dead");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    h.write_collection::<List, _>(0, b"big", true, |l| {
        for i in 0..3000 {
            l.push_back(&big(i))?;
        }
        Ok(())
    })
    .unwrap();
    h.set_lazy_free(true);
    assert!(h.delete(0, b"big").unwrap());
    assert!(h.free_lazily(10).unwrap());
    assert_eq!(h.lazy_free_pending().unwrap(), 1);
    // Leaving (as a recoverer would after a crash) frees the rest.
    drop(h);
    let h = store.handle().unwrap();
    assert_eq!(h.lazy_free_pending().unwrap(), 0);
    store.check().unwrap();
}

#[derive(Clone, Debug)]
enum End {
    Push(bool, u8, u16),
    Pop(bool, u8),
    Set(u32, u16),
    Insert(u32, u16),
}

fn item(size: u16, v: u16) -> Vec<u8> {
    let mut b = format!("{v}-").into_bytes();
    b.resize(1 + usize::from(size % 200), b'i');
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    /// Pushes at either end, which go in place into an end leaf with room
    /// or by copying (a full leaf, the other end, another change in the
    /// same write), interleaved with pops and changes in the middle: the
    /// list matches a deque and the segment checks clean after each write.
    #[test]
    fn pushes_in_place_and_by_copy_match_a_deque(
        start in 130usize..600,
        writes in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![
                6 => (any::<bool>(), 1u8..40, any::<u16>()).prop_map(|(t, n, v)| End::Push(t, n, v)),
                3 => (any::<bool>(), 1u8..30).prop_map(|(t, n)| End::Pop(t, n)),
                1 => (any::<u32>(), any::<u16>()).prop_map(|(i, v)| End::Set(i, v)),
                1 => (any::<u32>(), any::<u16>()).prop_map(|(i, v)| End::Insert(i, v)),
            ], 1..4),
            1..60,
        )
    ) {
        let seg = TempSegment::new("paged-ends");
        let store = seg.open(SEGMENT);
        let mut h = store.handle().unwrap();
        let mut model: std::collections::VecDeque<Vec<u8>> =
            (0..start).map(|i| item(i as u16, i as u16)).collect();
        h.write_collection::<List, _>(0, b"l", true, |l| {
            for i in &model {
                l.push_back(i)?;
            }
            Ok(())
        }).unwrap();
        for ops in writes {
            h.write_collection::<List, _>(0, b"l", true, |l| {
                for op in &ops {
                    let len = l.len();
                    match *op {
                        End::Push(tail, n, v) => {
                            for k in 0..u16::from(n) {
                                let x = item(v.wrapping_add(k), v ^ k);
                                if tail { l.push_back(&x)? } else { l.push_front(&x)? }
                            }
                        }
                        End::Pop(tail, n) => {
                            for _ in 0..n {
                                drop(if tail { l.pop_back()? } else { l.pop_front()? });
                            }
                        }
                        End::Set(i, v) if len > 0 => drop(l.set(u64::from(i) % len, &item(v, v))?),
                        End::Insert(i, v) => l.insert(u64::from(i) % (len + 1), &item(v, v))?,
                        End::Set(..) => {}
                    }
                }
                Ok(())
            }).unwrap();
            for op in &ops {
                let len = model.len();
                match *op {
                    End::Push(tail, n, v) => {
                        for k in 0..u16::from(n) {
                            let x = item(v.wrapping_add(k), v ^ k);
                            if tail { model.push_back(x) } else { model.push_front(x) }
                        }
                    }
                    End::Pop(tail, n) => {
                        for _ in 0..n {
                            drop(if tail { model.pop_back() } else { model.pop_front() });
                        }
                    }
                    End::Set(i, v) if len > 0 => model[i as usize % len] = item(v, v),
                    End::Insert(i, v) => model.insert(i as usize % (len + 1), item(v, v)),
                    End::Set(..) => {}
                }
            }
            let all = list(&mut h, 0, b"l").unwrap_or_default();
            prop_assert_eq!(all, model.iter().cloned().collect::<Vec<_>>());
            store.check().unwrap();
        }
        // A copy and a rename (the header moves to a key of another
        // length) keep taking pushes.
        if model.is_empty() {
            return Ok(());
        }
        h.copy(0, b"l", 0, b"copy-of-the-list", false).unwrap();
        h.rename(0, b"l", b"ll", false).unwrap();
        for key in [&b"copy-of-the-list"[..], b"ll"] {
            for _ in 0..3 {
                h.write_collection::<List, _>(0, key, false, |l| {
                    l.push_front(b"f")?;
                    l.push_back(b"b")
                }).unwrap();
            }
            let mut want: Vec<Vec<u8>> = vec![b"f".to_vec(); 3];
            want.extend(model.iter().cloned());
            want.extend(vec![b"b".to_vec(); 3]);
            prop_assert_eq!(list(&mut h, 0, key).unwrap_or_default(), want);
        }
        store.check().unwrap();
    }
}

/// Pops in place from leaves whose table was sized by their count (built
/// whole, never given room): the table keeps its size as the count drops.
#[test]
fn pops_in_place_from_leaves_built_whole() {
    let seg = TempSegment::new("paged-pops");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    let mut model: std::collections::VecDeque<Vec<u8>> =
        (0..400).map(|i| format!("{i}").into_bytes()).collect();
    h.write_collection::<List, _>(0, b"l", true, |l| {
        for i in &model {
            l.push_back(i)?;
        }
        Ok(())
    })
    .unwrap();
    for round in 0..120 {
        let tail = round % 3 != 0;
        h.write_collection::<List, _>(0, b"l", false, |l| {
            if tail {
                l.pop_back()
            } else {
                l.pop_front()
            }
        })
        .unwrap();
        if tail {
            model.pop_back();
        } else {
            model.pop_front();
        }
        assert_eq!(
            list(&mut h, 0, b"l").unwrap(),
            model.iter().cloned().collect::<Vec<_>>()
        );
    }
    store.check().unwrap();
}
