//! Each collection type driven through a real segment by random operation
//! sequences and compared with a plain model (`VecDeque`, `HashMap`,
//! `BTreeSet`/`HashMap`). Sequences are long enough to cross the shape
//! thresholds OBJECT ENCODING reports (intset to hashtable and back, a
//! sorted set past 128 members), and the segment's own check runs after
//! each sequence.

mod common;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use common::TempSegment;
use proptest::prelude::*;
use store::*;

const SEGMENT: u64 = 8 << 20;

fn check(store: &Store) {
    store.check().expect("segment check");
}

#[derive(Clone, Debug)]
enum ListOp {
    PushFront(u16),
    PushBack(u16),
    PopFront,
    PopBack,
    Set(u16, u16),
    Insert(u16, u16),
    Remove(u16),
    Trim(u16, u16),
}

fn list_op() -> impl Strategy<Value = ListOp> {
    prop_oneof![
        4 => any::<u16>().prop_map(ListOp::PushFront),
        4 => any::<u16>().prop_map(ListOp::PushBack),
        2 => Just(ListOp::PopFront),
        2 => Just(ListOp::PopBack),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(i, v)| ListOp::Set(i, v)),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(i, v)| ListOp::Insert(i, v)),
        1 => any::<u16>().prop_map(ListOp::Remove),
        1 => (0u16..8, 0u16..400).prop_map(|(s, e)| ListOp::Trim(s, e)),
    ]
}

fn item(v: u16) -> Vec<u8> {
    format!("item-{v}").into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn lists_match_a_deque(ops in proptest::collection::vec(list_op(), 1..600)) {
        let seg = TempSegment::new("coll-list");
        let store = seg.open(SEGMENT);
        let mut h = store.handle().unwrap();
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        for op in ops {
            let len = model.len() as u64;
            let got = h.write_collection::<List, _>(0, b"l", true, |l| {
                Ok(match &op {
                    ListOp::PushFront(v) => { l.push_front(&item(*v))?; None }
                    ListOp::PushBack(v) => { l.push_back(&item(*v))?; None }
                    ListOp::PopFront => l.pop_front()?,
                    ListOp::PopBack => l.pop_back()?,
                    ListOp::Set(i, v) => { l.set(u64::from(*i) % (len + 1), &item(*v))?; None }
                    ListOp::Insert(i, v) => { l.insert(u64::from(*i) % (len + 1), &item(*v))?; None }
                    ListOp::Remove(i) => l.remove(u64::from(*i) % (len + 1))?,
                    ListOp::Trim(s, e) => { l.retain_range(u64::from(*s), u64::from(*e))?; None }
                })
            }).unwrap().flatten();
            let want = match op {
                ListOp::PushFront(v) => { model.push_front(item(v)); None }
                ListOp::PushBack(v) => { model.push_back(item(v)); None }
                ListOp::PopFront => model.pop_front(),
                ListOp::PopBack => model.pop_back(),
                ListOp::Set(i, v) => {
                    if let Some(slot) = model.get_mut((u64::from(i) % (len + 1)) as usize) {
                        *slot = item(v);
                    }
                    None
                }
                ListOp::Insert(i, v) => { model.insert((u64::from(i) % (len + 1)) as usize, item(v)); None }
                ListOp::Remove(i) => model.remove((u64::from(i) % (len + 1)) as usize),
                ListOp::Trim(s, e) => {
                    let (s, e) = (usize::from(s).min(model.len()), usize::from(e).min(model.len()));
                    model = model.iter().skip(s).take(e.saturating_sub(s)).cloned().collect();
                    None
                }
            };
            prop_assert_eq!(got, want);
            let all = h.read_collection::<List, _>(0, b"l", |l| l.range(0, l.len())).unwrap();
            let expect: Vec<Vec<u8>> = model.iter().cloned().collect();
            // An emptied list is removed, as in Redis.
            prop_assert_eq!(all.unwrap_or_default(), expect);
        }
        check(&store);
    }
}

#[derive(Clone, Debug)]
enum HashOp {
    Insert(u16, u16),
    Remove(u16),
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn hashes_match_a_hashmap(ops in proptest::collection::vec(prop_oneof![
        3 => (0u16..700, any::<u16>()).prop_map(|(f, v)| HashOp::Insert(f, v)),
        2 => (0u16..700).prop_map(HashOp::Remove),
    ], 1..1500)) {
        let seg = TempSegment::new("coll-hash");
        let store = seg.open(SEGMENT);
        let mut h = store.handle().unwrap();
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for op in ops {
            let got = h.write_collection::<Hash, _>(0, b"h", true, |hash| match &op {
                HashOp::Insert(f, v) => hash.insert(&item(*f), &item(*v)),
                HashOp::Remove(f) => hash.remove(&item(*f)),
            }).unwrap().unwrap();
            let want = match op {
                HashOp::Insert(f, v) => model.insert(item(f), item(v)).is_none(),
                HashOp::Remove(f) => model.remove(&item(f)).is_some(),
            };
            prop_assert_eq!(got, want);
        }
        let stored: HashMap<Vec<u8>, Vec<u8>> = h
            .read_collection::<Hash, _>(0, b"h", |hash| hash.entries())
            .unwrap()
            .unwrap_or_default()
            .into_iter()
            .collect();
        prop_assert_eq!(&stored, &model);
        for (f, v) in &model {
            let got = h.read_collection::<Hash, _>(0, b"h", |hash| hash.get(f)).unwrap();
            prop_assert_eq!(got.flatten(), Some(v.clone()));
        }
        check(&store);
    }

    #[test]
    fn sets_match_a_hashset_across_intset_and_back(
        ops in proptest::collection::vec((any::<bool>(), 0u16..900, any::<bool>()), 1..2000)
    ) {
        let seg = TempSegment::new("coll-set");
        let store = seg.open(SEGMENT);
        let mut h = store.handle().unwrap();
        let mut model: HashSet<Vec<u8>> = HashSet::new();
        for (add, n, textual) in ops {
            // Mostly integers, so the set moves between the intset shape
            // and the general one.
            let member = if textual && n % 8 == 0 { item(n) } else { n.to_string().into_bytes() };
            let got = h.write_collection::<Set, _>(0, b"s", true, |s| {
                if add { s.insert(&member) } else { s.remove(&member) }
            }).unwrap().unwrap();
            let want = if add { model.insert(member) } else { model.remove(&member) };
            prop_assert_eq!(got, want);
            let mut raw = Vec::new();
            if h.get_into(0, b"s", &mut raw).unwrap().is_some() {
                // Every shape along the way decodes and names itself.
                collections::encoding_name(ValueType::Set, &raw).unwrap();
            }
        }
        let members: HashSet<Vec<u8>> = h
            .read_collection::<Set, _>(0, b"s", |s| s.members())
            .unwrap()
            .unwrap_or_default()
            .into_iter()
            .collect();
        prop_assert_eq!(&members, &model);
        let all_ints = model.iter().all(|m| parse_i64(m).is_some());
        if all_ints && !model.is_empty() && model.len() <= 512 {
            let mut raw = Vec::new();
            h.get_into(0, b"s", &mut raw).unwrap();
            prop_assert_eq!(collections::encoding_name(ValueType::Set, &raw).unwrap(), "intset");
        }
        check(&store);
    }
}

#[derive(Clone, Debug)]
enum ZOp {
    Insert(u16, i16),
    Remove(u16),
    RemoveRange(u8, u8),
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn sorted_sets_match_a_btree(ops in proptest::collection::vec(prop_oneof![
        4 => (0u16..400, -50i16..50).prop_map(|(m, s)| ZOp::Insert(m, s)),
        2 => (0u16..400).prop_map(ZOp::Remove),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| ZOp::RemoveRange(a, b)),
    ], 1..1200)) {
        let seg = TempSegment::new("coll-zset");
        let store = seg.open(SEGMENT);
        let mut h = store.handle().unwrap();
        let mut scores: HashMap<Vec<u8>, i16> = HashMap::new();
        for op in &ops {
            let ordered: Vec<(i16, Vec<u8>)> = scores
                .iter()
                .map(|(m, s)| (*s, m.clone()))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let got = h.write_collection::<ZSet, _>(0, b"z", true, |z| Ok(match op {
                ZOp::Insert(m, s) => z.insert(&item(*m), f64::from(*s))?.map(|f| f as u64),
                ZOp::Remove(m) => Some(u64::from(z.remove(&item(*m))?)),
                ZOp::RemoveRange(a, b) => Some(z.remove_range(u64::from(*a), u64::from(*b))?),
            })).unwrap().flatten();
            let want = match *op {
                ZOp::Insert(m, s) => scores.insert(item(m), s).map(|f| f64::from(f) as u64),
                ZOp::Remove(m) => Some(u64::from(scores.remove(&item(m)).is_some())),
                ZOp::RemoveRange(a, b) => {
                    let (a, b) = (usize::from(a).min(ordered.len()), usize::from(b).min(ordered.len()));
                    for (_, m) in ordered.iter().take(b).skip(a) {
                        scores.remove(m);
                    }
                    Some(b.saturating_sub(a) as u64)
                }
            };
            prop_assert_eq!(got, want);
        }
        let ordered: Vec<(i16, Vec<u8>)> = scores
            .iter()
            .map(|(m, s)| (*s, m.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let stored = h
            .read_collection::<ZSet, _>(0, b"z", |z| z.range(0, z.len()))
            .unwrap()
            .unwrap_or_default();
        let expect: Vec<(Vec<u8>, f64)> = ordered.iter().map(|(s, m)| (m.clone(), f64::from(*s))).collect();
        prop_assert_eq!(&stored, &expect);
        h.read_collection::<ZSet, _>(0, b"z", |z| {
            for (rank, (s, m)) in ordered.iter().enumerate() {
                assert_eq!(z.rank(m)?, Some(rank as u64));
                assert_eq!(z.score(m)?, Some(f64::from(*s)));
                let below = ordered.iter().filter(|(x, _)| x < s).count() as u64;
                let at_or_below = ordered.iter().filter(|(x, _)| x <= s).count() as u64;
                assert_eq!(z.count_below_score(f64::from(*s), false)?, below);
                assert_eq!(z.count_below_score(f64::from(*s), true)?, at_or_below);
            }
            Ok(())
        }).unwrap();
        check(&store);
    }
}

#[test]
fn other_types_are_wrong_type_and_damaged_values_are_errors() {
    let seg = TempSegment::new("coll-misc");
    let store = seg.open(SEGMENT);
    let mut h = store.handle().unwrap();
    h.set(0, b"str", b"x", &SetOptions::default()).unwrap();
    assert!(matches!(
        h.write_collection::<List, _>(0, b"str", true, |l| l.push_back(b"a")),
        Err(Error::WrongType)
    ));
    assert!(matches!(
        h.read_collection::<Set, _>(0, b"str", |s| s.members()),
        Err(Error::WrongType)
    ));
    h.write_collection::<List, _>(0, b"l", true, |l| l.push_back(b"a"))
        .unwrap();
    assert!(matches!(h.get(0, b"l"), Err(Error::WrongType)));
    // Missing keys: reads say None, writes without `create` do not run.
    assert_eq!(
        h.read_collection::<Hash, _>(0, b"nope", |x| Ok(x.len()))
            .unwrap(),
        None
    );
    assert_eq!(
        h.write_collection::<Hash, _>(0, b"nope", false, |x| x.insert(b"f", b"v"))
            .unwrap(),
        None
    );
    assert!(!h.exists(0, b"nope").unwrap());
    // Garbage bytes under a collection type decode to an error, not a panic.
    for garbage in [
        &b""[..],
        b"\x01",
        b"\x01\x05",
        b"\x02\x01\x00",
        b"\x01\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
    ] {
        h.write_value(0, b"bad", ValueType::ZSet, garbage, &SetOptions::default())
            .unwrap();
        assert!(h
            .read_collection::<ZSet, _>(0, b"bad", |z| Ok(z.len()))
            .is_err());
        h.write_value(0, b"bad", ValueType::Set, garbage, &SetOptions::default())
            .unwrap();
        assert!(h
            .read_collection::<Set, _>(0, b"bad", |z| Ok(z.len()))
            .is_err());
    }
    // An emptied collection disappears; the expiry survives writes.
    h.write_collection::<Set, _>(0, b"s", true, |s| s.insert(b"m"))
        .unwrap();
    h.pexpire(0, b"s", 100_000, ExpireCondition::Always)
        .unwrap();
    h.write_collection::<Set, _>(0, b"s", true, |s| s.insert(b"n"))
        .unwrap();
    assert!(matches!(h.ttl(0, b"s").unwrap(), Ttl::Ms(_)));
    h.write_collection::<Set, _>(0, b"s", true, |s| {
        s.remove(b"m")?;
        s.remove(b"n")
    })
    .unwrap();
    assert!(!h.exists(0, b"s").unwrap());
    check(&store);
}
