//! Writing a value in the encodings Redis 7.0 writes: strings as integers
//! when they are small canonical ones, lists as quicklist 2 of listpacks,
//! small hashes and sorted sets as listpacks, integer sets as intsets, the
//! rest as plain RDB collections (binary scores). Nothing is compressed.

use super::{canonical_int, intset, listpack, seal, Value};

pub(super) const TYPE_STRING: u8 = 0;
pub(super) const TYPE_LIST: u8 = 1;
pub(super) const TYPE_SET: u8 = 2;
pub(super) const TYPE_ZSET: u8 = 3;
pub(super) const TYPE_HASH: u8 = 4;
pub(super) const TYPE_ZSET_2: u8 = 5;
pub(super) const TYPE_HASH_ZIPMAP: u8 = 9;
pub(super) const TYPE_LIST_ZIPLIST: u8 = 10;
pub(super) const TYPE_SET_INTSET: u8 = 11;
pub(super) const TYPE_ZSET_ZIPLIST: u8 = 12;
pub(super) const TYPE_HASH_ZIPLIST: u8 = 13;
pub(super) const TYPE_LIST_QUICKLIST: u8 = 14;
pub(super) const TYPE_HASH_LISTPACK: u8 = 16;
pub(super) const TYPE_ZSET_LISTPACK: u8 = 17;
pub(super) const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub(super) const TYPE_STREAM_LISTPACKS: u8 = 15;
pub(super) const TYPE_STREAM_LISTPACKS_2: u8 = 19;
pub(super) const TYPE_STREAM_LISTPACKS_3: u8 = 21;

/// Quicklist node containers (RDB_TYPE_LIST_QUICKLIST_2).
pub(super) const CONTAINER_PLAIN: u64 = 1;
pub(super) const CONTAINER_PACKED: u64 = 2;

/// Length prefixes: the top two bits of the first byte.
pub(super) const LEN_6BIT: u8 = 0;
pub(super) const LEN_14BIT: u8 = 1;
pub(super) const LEN_32BIT: u8 = 0x80;
pub(super) const LEN_64BIT: u8 = 0x81;
/// A "length" whose low 6 bits name a special string encoding.
pub(super) const LEN_ENCODED: u8 = 3;
pub(super) const ENC_INT8: u8 = 0;
pub(super) const ENC_INT16: u8 = 1;
pub(super) const ENC_INT32: u8 = 2;
pub(super) const ENC_LZF: u8 = 3;

/// Redis 7.0's defaults for keeping hashes and sorted sets in a listpack
/// (`hash-max-listpack-entries` / `-value`, and the zset ones): a value
/// past them is written in the plain form Redis would have converted it to.
const LISTPACK_ENTRIES: usize = 128;
const LISTPACK_VALUE: usize = 64;
/// `set-max-intset-entries`.
const INTSET_ENTRIES: usize = 512;
/// `list-max-listpack-size -2`: 8 KiB a quicklist node.
const NODE_BYTES: usize = 8 * 1024;
/// An element this large goes in a plain node of its own (Redis 7.0's
/// default packed threshold, 1 GiB).
const PLAIN_THRESHOLD: usize = 1 << 30;

/// The DUMP payload of `value`: type, body, version and checksum.
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    match value {
        Value::String(s) => {
            out.push(TYPE_STRING);
            put_string(&mut out, s);
        }
        Value::List(items) => {
            out.push(TYPE_LIST_QUICKLIST_2);
            put_quicklist(&mut out, items);
        }
        Value::Set(members) => put_set(&mut out, members),
        Value::Hash(pairs) => put_hash(&mut out, pairs),
        Value::ZSet(pairs) => put_zset(&mut out, pairs),
        Value::Stream(stream) => {
            out.push(TYPE_STREAM_LISTPACKS_2);
            put_stream(&mut out, stream);
        }
    }
    seal(out)
}

/// An RDB length.
pub(super) fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push((LEN_6BIT << 6) | n as u8);
    } else if n < 1 << 14 {
        out.push((LEN_14BIT << 6) | (n >> 8) as u8);
        out.push(n as u8);
    } else if let Ok(n) = u32::try_from(n) {
        out.push(LEN_32BIT);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        out.push(LEN_64BIT);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// An RDB string: as an 8/16/32-bit integer when it is a canonical one
/// that fits (Redis's `rdbTryIntegerEncoding`), else length and bytes.
pub(super) fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = canonical_int(s) {
            let tag = |enc: u8| (LEN_ENCODED << 6) | enc;
            if let Ok(v) = i8::try_from(v) {
                out.push(tag(ENC_INT8));
                out.push(v as u8);
                return;
            }
            if let Ok(v) = i16::try_from(v) {
                out.push(tag(ENC_INT16));
                out.extend_from_slice(&v.to_le_bytes());
                return;
            }
            if let Ok(v) = i32::try_from(v) {
                out.push(tag(ENC_INT32));
                out.extend_from_slice(&v.to_le_bytes());
                return;
            }
        }
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A list as quicklist 2: listpack nodes of about 8 KiB, head first.
fn put_quicklist(out: &mut Vec<u8>, items: &[Vec<u8>]) {
    enum Node<'a> {
        Packed(&'a [Vec<u8>]),
        Plain(&'a [u8]),
    }
    let mut nodes = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        if item.len() >= PLAIN_THRESHOLD {
            if start < i {
                nodes.push(Node::Packed(&items[start..i]));
            }
            nodes.push(Node::Plain(item));
            (start, bytes) = (i + 1, 0);
            continue;
        }
        let size = listpack::entry_size(item);
        if start < i && bytes + size > NODE_BYTES {
            nodes.push(Node::Packed(&items[start..i]));
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < items.len() {
        nodes.push(Node::Packed(&items[start..]));
    }
    put_len(out, nodes.len() as u64);
    for node in nodes {
        match node {
            Node::Packed(run) => {
                put_len(out, CONTAINER_PACKED);
                let lp = listpack::encode(run.iter().map(Vec::as_slice));
                put_len(out, lp.len() as u64);
                out.extend_from_slice(&lp);
            }
            Node::Plain(item) => {
                put_len(out, CONTAINER_PLAIN);
                put_len(out, item.len() as u64);
                out.extend_from_slice(item);
            }
        }
    }
}

fn put_set(out: &mut Vec<u8>, members: &[Vec<u8>]) {
    if members.len() <= INTSET_ENTRIES {
        let ints: Option<Vec<i64>> = members.iter().map(|m| canonical_int(m)).collect();
        if let Some(mut ints) = ints {
            ints.sort_unstable();
            out.push(TYPE_SET_INTSET);
            let is = intset::encode(&ints);
            put_len(out, is.len() as u64);
            out.extend_from_slice(&is);
            return;
        }
    }
    out.push(TYPE_SET);
    put_len(out, members.len() as u64);
    for m in members {
        put_string(out, m);
    }
}

/// Whether pairs of this count and these element sizes stay a listpack.
fn fits_listpack<'a>(count: usize, mut sizes: impl Iterator<Item = &'a [u8]>) -> bool {
    count <= LISTPACK_ENTRIES && sizes.all(|s| s.len() <= LISTPACK_VALUE)
}

fn put_hash(out: &mut Vec<u8>, pairs: &[(Vec<u8>, Vec<u8>)]) {
    let elements = pairs.iter().flat_map(|(f, v)| [f.as_slice(), v.as_slice()]);
    if fits_listpack(pairs.len(), elements.clone()) {
        out.push(TYPE_HASH_LISTPACK);
        let lp = listpack::encode(elements);
        put_len(out, lp.len() as u64);
        out.extend_from_slice(&lp);
        return;
    }
    out.push(TYPE_HASH);
    put_len(out, pairs.len() as u64);
    for (f, v) in pairs {
        put_string(out, f);
        put_string(out, v);
    }
}

fn put_zset(out: &mut Vec<u8>, pairs: &[(Vec<u8>, f64)]) {
    let mut sorted: Vec<&(Vec<u8>, f64)> = pairs.iter().collect();
    sorted.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    if fits_listpack(pairs.len(), pairs.iter().map(|(m, _)| m.as_slice())) {
        // A listpack zset is member, score, … in score order: Redis reads
        // it as it is, without sorting.
        let scores: Vec<Vec<u8>> = sorted.iter().map(|(_, s)| score_text(*s)).collect();
        let elements = sorted
            .iter()
            .zip(&scores)
            .flat_map(|((m, _), s)| [m.as_slice(), s.as_slice()]);
        out.push(TYPE_ZSET_LISTPACK);
        let lp = listpack::encode(elements);
        put_len(out, lp.len() as u64);
        out.extend_from_slice(&lp);
        return;
    }
    // Highest score first, as Redis writes a skiplist (so that loading
    // inserts each at the head).
    out.push(TYPE_ZSET_2);
    put_len(out, pairs.len() as u64);
    for (m, s) in sorted.iter().rev() {
        put_string(out, m);
        out.extend_from_slice(&s.to_le_bytes());
    }
}

/// A score as a listpack element: an integer when it is a whole number
/// Redis would print as one, else the shortest text that reads back as the
/// same double (`strtod` reads all of them).
fn score_text(s: f64) -> Vec<u8> {
    if s.is_infinite() {
        return if s > 0.0 {
            b"inf".to_vec()
        } else {
            b"-inf".to_vec()
        };
    }
    if s == 0.0 && s.is_sign_negative() {
        return b"-0".to_vec();
    }
    if s == s.trunc() && s.abs() < (1u64 << 52) as f64 {
        return (s as i64).to_string().into_bytes();
    }
    let a = s.abs();
    if (1e-5..1e17).contains(&a) {
        format!("{s}").into_bytes()
    } else {
        format!("{s:e}").into_bytes()
    }
}

/// Entries per listpack node of a dumped stream (Redis's default
/// `stream-node-max-entries`).
const STREAM_NODE_ENTRIES: usize = 100;

/// A stream as Redis 7.0 writes it (type 19): nodes of up to 100 entries,
/// each a listpack whose master entry names the first entry's fields (the
/// entries with the same fields store only their values), then the
/// counters, then the groups with their pending entries and consumers.
fn put_stream(out: &mut Vec<u8>, v: &super::StreamValue) {
    let nodes: Vec<_> = v.entries.chunks(STREAM_NODE_ENTRIES).collect();
    put_len(out, nodes.len() as u64);
    for node in &nodes {
        let master = node[0].0;
        put_string(out, &master.to_bytes());
        let master_fields: Vec<&[u8]> = node[0].1.iter().step_by(2).map(|f| f.as_slice()).collect();
        let mut elems: Vec<Vec<u8>> = vec![
            node.len().to_string().into_bytes(),
            b"0".to_vec(),
            master_fields.len().to_string().into_bytes(),
        ];
        elems.extend(master_fields.iter().map(|f| f.to_vec()));
        elems.push(b"0".to_vec());
        for (id, pairs) in node.iter() {
            let fields: Vec<&[u8]> = pairs.iter().step_by(2).map(|f| f.as_slice()).collect();
            let same = fields == master_fields;
            elems.push(if same { b"2".to_vec() } else { b"0".to_vec() });
            // Deltas from the master ID, signed as Redis writes them.
            elems.push(
                (id.ms.wrapping_sub(master.ms) as i64)
                    .to_string()
                    .into_bytes(),
            );
            elems.push(
                (id.seq.wrapping_sub(master.seq) as i64)
                    .to_string()
                    .into_bytes(),
            );
            if same {
                elems.extend(pairs.iter().skip(1).step_by(2).cloned());
                elems.push((fields.len() + 3).to_string().into_bytes());
            } else {
                elems.push(fields.len().to_string().into_bytes());
                elems.extend(pairs.iter().cloned());
                elems.push((fields.len() * 2 + 4).to_string().into_bytes());
            }
        }
        put_string(out, &listpack::encode(elems.iter().map(|e| e.as_slice())));
    }
    put_len(out, v.entries.len() as u64);
    let first = v.entries.first().map(|e| e.0).unwrap_or_default();
    for n in [
        v.last_id.ms,
        v.last_id.seq,
        first.ms,
        first.seq,
        v.max_deleted.ms,
        v.max_deleted.seq,
        v.entries_added,
    ] {
        put_len(out, n);
    }
    put_len(out, v.groups.len() as u64);
    for g in &v.groups {
        put_string(out, &g.name);
        put_len(out, g.last_id.ms);
        put_len(out, g.last_id.seq);
        put_len(out, g.entries_read.unwrap_or(u64::MAX));
        put_len(out, g.pending.len() as u64);
        for (id, at, count) in &g.pending {
            out.extend_from_slice(&id.to_bytes());
            out.extend_from_slice(&at.to_le_bytes());
            put_len(out, *count);
        }
        put_len(out, g.consumers.len() as u64);
        for (name, seen, owned) in &g.consumers {
            put_string(out, name);
            out.extend_from_slice(&seen.to_le_bytes());
            put_len(out, owned.len() as u64);
            for id in owned {
                out.extend_from_slice(&id.to_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_as_redis_writes_them() {
        let body = |s: &[u8]| {
            let mut out = Vec::new();
            put_string(&mut out, s);
            out
        };
        assert_eq!(body(b"bar"), b"\x03bar");
        assert_eq!(body(b"1"), b"\xC0\x01");
        assert_eq!(body(b"-200"), b"\xC1\x38\xff");
        assert_eq!(body(b"100000"), b"\xC2\xa0\x86\x01\x00");
        // Too big for 32 bits, or not canonical: a plain string.
        assert_eq!(body(b"4294967296"), b"\x0a4294967296");
        assert_eq!(body(b"01"), b"\x0201");
        let long = vec![b'a'; 100];
        let mut want = vec![0x40, 100];
        want.extend_from_slice(&long);
        assert_eq!(body(&long), want);
    }

    #[test]
    fn lengths_use_the_shortest_prefix() {
        let len = |n: u64| {
            let mut out = Vec::new();
            put_len(&mut out, n);
            out
        };
        assert_eq!(len(63), [63]);
        assert_eq!(len(64), [0x40, 64]);
        assert_eq!(len(16383), [0x7f, 0xff]);
        assert_eq!(len(16384), [0x80, 0, 0, 0x40, 0]);
        assert_eq!(len(1 << 32), [0x81, 0, 0, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn scores_read_back_exactly() {
        for s in [
            0.0,
            -0.0,
            1.0,
            -3.0,
            1.5,
            0.1,
            1e-7,
            1e300,
            -2.5e-300,
            1e17,
            4503599627370497.0,
        ] {
            let t = score_text(s);
            let back: f64 = std::str::from_utf8(&t).unwrap().parse().unwrap();
            assert_eq!(
                back.to_bits(),
                s.to_bits(),
                "{}",
                String::from_utf8_lossy(&t)
            );
        }
        assert_eq!(score_text(f64::INFINITY), b"inf");
        assert_eq!(score_text(2.0), b"2");
    }
}
