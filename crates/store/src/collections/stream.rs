//! Streams: entries by ID, consumer groups, their consumers and pending
//! entries, all in one keyed map whose keys start with a kind byte.
//!
//! - `E` + ID (16 big-endian bytes): an entry, its field/value pairs.
//! - `M`: the stream's metadata (last ID, entries added, max deleted ID,
//!   live entry count).
//! - `N` + first ID: a node as Redis's listpack nodes group entries, so
//!   `~` trimming removes what Redis would (whole nodes) and
//!   `stream-node-max-entries`/`-bytes` mean what they mean there.
//! - `G` + name: a consumer group (last delivered ID, entries read, PEL size).
//! - `C` + group + consumer: a consumer (seen time, pending count).
//! - `P` + group + ID: a pending entry (consumer, delivery time and count).
//! - `Q` + group + consumer + ID: the consumer's own index of its pending
//!   entries (empty value), so its history reads in ID order.
//!
//! Group and consumer names inside keys are length-prefixed (4 bytes, big
//! endian), so one name is never a prefix of another's keys.
//!
//! A small stream is that map in process memory, encoded whole (`codec`); a
//! large one is a keyed tree (`tree`), so XADD and a range by ID cost
//! O(log n) nodes whatever the stream's length.

use std::collections::BTreeMap;

use super::codec::{self, Reader};
use super::tree::Tree;
use super::{Collection, Journal, Segment};
use crate::error::{Error, Result};
use crate::keyspace::entry::ValueType;

/// Tag of a stream's compact form.
const TAG_STREAM: u8 = 5;
/// A stream map with more items or bytes than this is paged.
const COMPACT_ITEMS: usize = 256;
const COMPACT_BYTES: usize = 32 * 1024;

const K_ENTRY: u8 = b'E';
const K_META: u8 = b'M';
const K_NODE: u8 = b'N';
const K_GROUP: u8 = b'G';
const K_CONSUMER: u8 = b'C';
const K_PENDING: u8 = b'P';
const K_OWNED: u8 = b'Q';

/// A stream entry ID: milliseconds and sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

impl StreamId {
    /// The smallest ID.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest ID.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// The ID as 16 big-endian bytes (byte order is ID order).
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// The ID of 16 big-endian bytes.
    pub fn from_bytes(b: &[u8]) -> Result<StreamId> {
        if b.len() != 16 {
            return Err(Error::BadValue);
        }
        let word = |r: &[u8]| u64::from_be_bytes(r.try_into().unwrap_or([0; 8]));
        Ok(StreamId {
            ms: word(&b[..8]),
            seq: word(&b[8..]),
        })
    }

    /// The next ID, None past the largest.
    pub fn next(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId {
                ms: self.ms,
                seq: self.seq + 1,
            })
        } else if self.ms < u64::MAX {
            Some(StreamId {
                ms: self.ms + 1,
                seq: 0,
            })
        } else {
            None
        }
    }

    /// The previous ID, None before the smallest.
    pub fn prev(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId {
                ms: self.ms,
                seq: self.seq - 1,
            })
        } else if self.ms > 0 {
            Some(StreamId {
                ms: self.ms - 1,
                seq: u64::MAX,
            })
        } else {
            None
        }
    }

    /// Whether it is 0-0.
    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// A stream's own counters, as XINFO STREAM shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamMeta {
    /// The last ID generated (or set by XSETID).
    pub last_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// The largest ID deleted (0-0: none).
    pub max_deleted: StreamId,
    /// Live entries.
    pub length: u64,
}

/// An entry: its ID and its field/value pairs, flat.
pub type StreamEntry = (StreamId, Vec<Vec<u8>>);

/// A consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamGroup {
    /// Its name.
    pub name: Vec<u8>,
    /// The last ID delivered to it.
    pub last_id: StreamId,
    /// Its logical read counter (None: unknown).
    pub entries_read: Option<u64>,
    /// Entries delivered and not acknowledged.
    pub pending: u64,
}

/// A consumer of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamConsumer {
    /// Its name.
    pub name: Vec<u8>,
    /// When it last read or claimed, ms since the epoch.
    pub seen_ms: u64,
    /// Its pending entries.
    pub pending: u64,
}

/// A pending entry of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The entry's ID.
    pub id: StreamId,
    /// The consumer it was delivered to.
    pub consumer: Vec<u8>,
    /// When it was last delivered, ms since the epoch.
    pub delivery_ms: u64,
    /// How many times it was delivered.
    pub deliveries: u64,
}

/// A listpack node as Redis would have it (see the module comment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Node {
    first: StreamId,
    last: StreamId,
    live: u64,
    deleted: u64,
    bytes: u64,
}

/// How XADD and XTRIM trim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop entries below this ID.
    MinId(StreamId),
}

/// The node limits of `stream-node-max-bytes` / `-entries` (0 = none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    /// Bytes of a node's listpack.
    pub max_bytes: u64,
    /// Entries of a node.
    pub max_entries: u64,
}

/// The map of a stream: in memory while small, a keyed tree once large.
#[derive(Debug)]
enum Kv {
    Mem(BTreeMap<Vec<u8>, Vec<u8>>),
    Paged(Tree),
}

impl Kv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self {
            Kv::Mem(m) => Ok(m.get(key).cloned()),
            Kv::Paged(t) => t.get(key),
        }
    }

    fn put(&mut self, key: &[u8], val: &[u8]) -> Result<()> {
        match self {
            Kv::Mem(m) => {
                m.insert(key.to_vec(), val.to_vec());
            }
            Kv::Paged(t) => {
                t.put_key(key, val)?;
            }
        }
        Ok(())
    }

    fn del(&mut self, key: &[u8]) -> Result<bool> {
        match self {
            Kv::Mem(m) => Ok(m.remove(key).is_some()),
            Kv::Paged(t) => Ok(t.remove_key(key)?.is_some()),
        }
    }

    /// Calls `f` for the items with keys in `lo..=hi` (backwards when
    /// `rev`) until it returns false.
    fn scan(
        &self,
        lo: &[u8],
        hi: &[u8],
        rev: bool,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        if lo > hi {
            return Ok(());
        }
        match self {
            Kv::Mem(m) => {
                let range = m.range::<[u8], _>((
                    std::ops::Bound::Included(lo),
                    std::ops::Bound::Included(hi),
                ));
                if rev {
                    for (k, v) in range.rev() {
                        if !f(k, v) {
                            break;
                        }
                    }
                } else {
                    for (k, v) in range {
                        if !f(k, v) {
                            break;
                        }
                    }
                }
                Ok(())
            }
            Kv::Paged(t) => {
                let from = t.count_below(lo, false)?;
                let to = t.count_below(hi, true)?;
                t.visit(from, to, rev, f)
            }
        }
    }

    /// The items with keys starting with `prefix`, in order.
    fn prefixed(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut hi = prefix.to_vec();
        hi.extend_from_slice(&[0xff; 24]);
        let mut out = Vec::new();
        self.scan(prefix, &hi, false, &mut |k, v| {
            if k.starts_with(prefix) {
                out.push((k.to_vec(), v.to_vec()));
            }
            true
        })?;
        Ok(out)
    }

    /// The last item with a key at or below `key`.
    fn last_at_or_below(&self, key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match self {
            Kv::Mem(m) => Ok(m
                .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Included(key)))
                .next_back()
                .map(|(k, v)| (k.clone(), v.clone()))),
            Kv::Paged(t) => {
                let rank = t.count_below(key, true)?;
                if rank == 0 {
                    return Ok(None);
                }
                t.nth(rank - 1)
            }
        }
    }

    fn items(&self) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        match self {
            Kv::Mem(m) => Ok(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
            Kv::Paged(t) => t.items(),
        }
    }
}

/// A stream value.
#[derive(Debug)]
pub struct Stream {
    kv: Kv,
    meta: StreamMeta,
    changed: bool,
    journal: Journal,
}

fn key_of(kind: u8, id: StreamId) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = kind;
    k[1..].copy_from_slice(&id.to_bytes());
    k
}

fn put_name(out: &mut Vec<u8>, name: &[u8]) {
    out.extend_from_slice(&(name.len() as u32).to_be_bytes());
    out.extend_from_slice(name);
}

fn group_key(kind: u8, group: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + group.len() + 17);
    k.push(kind);
    if kind == K_GROUP {
        k.extend_from_slice(group);
    } else {
        put_name(&mut k, group);
    }
    k
}

fn pending_key(group: &[u8], id: StreamId) -> Vec<u8> {
    let mut k = group_key(K_PENDING, group);
    k.extend_from_slice(&id.to_bytes());
    k
}

fn consumer_key(group: &[u8], consumer: &[u8]) -> Vec<u8> {
    let mut k = group_key(K_CONSUMER, group);
    k.extend_from_slice(consumer);
    k
}

fn owned_prefix(group: &[u8], consumer: &[u8]) -> Vec<u8> {
    let mut k = group_key(K_OWNED, group);
    put_name(&mut k, consumer);
    k
}

fn owned_key(group: &[u8], consumer: &[u8], id: StreamId) -> Vec<u8> {
    let mut k = owned_prefix(group, consumer);
    k.extend_from_slice(&id.to_bytes());
    k
}

/// The ID at the end of a key (its last 16 bytes).
fn id_at_end(key: &[u8]) -> Result<StreamId> {
    let at = key.len().checked_sub(16).ok_or(Error::BadValue)?;
    StreamId::from_bytes(&key[at..])
}

fn u64_at(b: &[u8], i: usize) -> Result<u64> {
    b.get(i * 8..i * 8 + 8)
        .and_then(|w| w.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or(Error::BadValue)
}

fn words(ws: &[u64]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn encode_fields(fields: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    codec::put_varint(&mut out, fields.len() as u64);
    for f in fields {
        codec::put_bytes(&mut out, f);
    }
    out
}

fn decode_fields(bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut r = Reader::over(bytes);
    let n = r.varint()?;
    if n > bytes.len() as u64 {
        return Err(Error::BadValue);
    }
    for _ in 0..n {
        out.push(r.bytes()?);
    }
    r.finish()?;
    Ok(out)
}

impl Node {
    fn decode(first: StreamId, v: &[u8]) -> Result<Node> {
        Ok(Node {
            first,
            last: StreamId {
                ms: u64_at(v, 0)?,
                seq: u64_at(v, 1)?,
            },
            live: u64_at(v, 2)?,
            deleted: u64_at(v, 3)?,
            bytes: u64_at(v, 4)?,
        })
    }

    fn encode(&self) -> Vec<u8> {
        words(&[
            self.last.ms,
            self.last.seq,
            self.live,
            self.deleted,
            self.bytes,
        ])
    }
}

/// About the bytes an entry takes in a listpack node: per field and value
/// its bytes and two of overhead, and a few for the entry's header.
fn listpack_bytes(fields: &[&[u8]]) -> u64 {
    4 + fields.iter().map(|f| f.len() as u64 + 2).sum::<u64>()
}

impl Collection for Stream {
    const TYPE: ValueType = ValueType::Stream;
    const KEYED: &'static [bool] = &[true];

    fn empty() -> Self {
        Stream {
            kv: Kv::Mem(BTreeMap::new()),
            meta: StreamMeta::default(),
            changed: false,
            journal: Journal::default(),
        }
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let (mut r, tag, n) = Reader::open(bytes)?;
        if tag != TAG_STREAM {
            return Err(Error::BadValue);
        }
        let mut map = BTreeMap::new();
        for _ in 0..n {
            let k = r.bytes()?;
            let v = r.bytes()?;
            map.insert(k, v);
        }
        r.finish()?;
        Stream::from_kv(Kv::Mem(map))
    }

    fn encode(&self, out: &mut Vec<u8>) {
        if let Kv::Mem(m) = &self.kv {
            codec::header(out, TAG_STREAM, m.len());
            for (k, v) in m {
                codec::put_bytes(out, k);
                codec::put_bytes(out, v);
            }
        }
    }

    fn encode_image(&self, out: &mut Vec<u8>) -> Result<()> {
        let items = self.kv.items()?;
        codec::header(out, TAG_STREAM, items.len());
        for (k, v) in &items {
            codec::put_bytes(out, k);
            codec::put_bytes(out, v);
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        self.meta.length
    }

    /// A stream stays when its last entry goes (its ID and groups remain).
    fn is_empty(&self) -> bool {
        false
    }

    fn changed(&self) -> bool {
        self.changed
    }

    fn encoding_name(&self) -> &'static str {
        "stream"
    }

    fn from_trees(mut trees: Vec<Tree>) -> Result<Self> {
        let tree = trees.pop().ok_or(Error::BadValue)?;
        Stream::from_kv(Kv::Paged(tree))
    }

    fn settle(&mut self, seg: &Segment) -> Result<()> {
        match &mut self.kv {
            Kv::Mem(m) => {
                let bytes: usize = m.iter().map(|(k, v)| k.len() + v.len()).sum();
                if m.len() > COMPACT_ITEMS || bytes > COMPACT_BYTES {
                    let tree = Tree::build(
                        seg.0.clone(),
                        true,
                        m.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
                    );
                    self.kv = Kv::Paged(tree);
                }
            }
            Kv::Paged(t) => {
                if t.len() as usize <= COMPACT_ITEMS / 2 {
                    let items = t.items()?;
                    let bytes: usize = items.iter().map(|(k, v)| k.len() + v.len()).sum();
                    if bytes <= COMPACT_BYTES / 2 {
                        self.kv = Kv::Mem(items.into_iter().collect());
                    }
                }
            }
        }
        Ok(())
    }

    fn trees_mut(&mut self) -> Vec<&mut Tree> {
        match &mut self.kv {
            Kv::Mem(_) => Vec::new(),
            Kv::Paged(t) => vec![t],
        }
    }

    fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }
}

impl Stream {
    fn from_kv(kv: Kv) -> Result<Stream> {
        let meta = match kv.get(&[K_META])? {
            Some(v) => StreamMeta {
                last_id: StreamId {
                    ms: u64_at(&v, 0)?,
                    seq: u64_at(&v, 1)?,
                },
                entries_added: u64_at(&v, 2)?,
                max_deleted: StreamId {
                    ms: u64_at(&v, 3)?,
                    seq: u64_at(&v, 4)?,
                },
                length: u64_at(&v, 5)?,
            },
            None => StreamMeta::default(),
        };
        Ok(Stream {
            kv,
            meta,
            changed: false,
            journal: Journal::default(),
        })
    }

    /// Marks a change (each item written or removed is its own log record).
    fn touch(&mut self) {
        self.changed = true;
    }

    fn put(&mut self, key: &[u8], val: &[u8]) -> Result<()> {
        self.changed = true;
        self.journal.stream_put(key, val);
        self.kv.put(key, val)
    }

    fn del(&mut self, key: &[u8]) -> Result<bool> {
        let removed = self.kv.del(key)?;
        if removed {
            self.changed = true;
            self.journal.stream_del(key);
        }
        Ok(removed)
    }

    /// Replays logged writes of map items (log replay).
    pub(crate) fn replay_put(&mut self, pairs: &[(&[u8], &[u8])]) -> Result<()> {
        for (k, v) in pairs {
            self.put(k, v)?;
        }
        self.reload_meta()
    }

    /// Replays logged removals of map items (log replay).
    pub(crate) fn replay_del(&mut self, items: &[&[u8]]) -> Result<()> {
        for k in items {
            self.del(k)?;
        }
        self.reload_meta()
    }

    fn reload_meta(&mut self) -> Result<()> {
        let kv = std::mem::replace(&mut self.kv, Kv::Mem(BTreeMap::new()));
        let fresh = Stream::from_kv(kv)?;
        self.kv = fresh.kv;
        self.meta = fresh.meta;
        Ok(())
    }

    fn save_meta(&mut self) -> Result<()> {
        let m = self.meta;
        self.touch();
        self.put(
            &[K_META],
            &words(&[
                m.last_id.ms,
                m.last_id.seq,
                m.entries_added,
                m.max_deleted.ms,
                m.max_deleted.seq,
                m.length,
            ]),
        )
    }

    /// Marks the stream written though nothing else changed (XADD MAXLEN 0
    /// of a new key, XGROUP CREATE MKSTREAM): the key is created.
    pub fn create(&mut self) -> Result<()> {
        self.save_meta()
    }

    /// The stream's counters.
    pub fn meta(&self) -> StreamMeta {
        self.meta
    }

    /// Sets the last ID, entries added and max deleted ID (XSETID).
    pub fn set_meta(
        &mut self,
        last_id: StreamId,
        entries_added: u64,
        max_deleted: StreamId,
    ) -> Result<()> {
        self.meta.last_id = last_id;
        self.meta.entries_added = entries_added;
        self.meta.max_deleted = max_deleted;
        self.save_meta()
    }

    /// The number of listpack nodes (XINFO's radix-tree-keys).
    pub fn node_count(&self) -> Result<u64> {
        Ok(self.kv.prefixed(&[K_NODE])?.len() as u64)
    }

    /// The first and last entries.
    pub fn first_entry(&self) -> Result<Option<StreamEntry>> {
        Ok(self
            .range(StreamId::MIN, StreamId::MAX, 1, false)?
            .into_iter()
            .next())
    }

    /// The last entry.
    pub fn last_entry(&self) -> Result<Option<StreamEntry>> {
        Ok(self
            .range(StreamId::MIN, StreamId::MAX, 1, true)?
            .into_iter()
            .next())
    }

    /// Up to `count` entries with IDs in `lo..=hi` (0: all), from `hi` down
    /// when `rev`.
    pub fn range(
        &self,
        lo: StreamId,
        hi: StreamId,
        count: u64,
        rev: bool,
    ) -> Result<Vec<StreamEntry>> {
        let mut out = Vec::new();
        let mut bad = false;
        self.kv.scan(
            &key_of(K_ENTRY, lo),
            &key_of(K_ENTRY, hi),
            rev,
            &mut |k, v| match (id_at_end(k), decode_fields(v)) {
                (Ok(id), Ok(fields)) => {
                    out.push((id, fields));
                    count == 0 || (out.len() as u64) < count
                }
                _ => {
                    bad = true;
                    false
                }
            },
        )?;
        if bad {
            return Err(Error::BadValue);
        }
        Ok(out)
    }

    /// The IDs of up to `count` entries in `lo..=hi` (0: all).
    fn ids(&self, lo: StreamId, hi: StreamId, count: u64) -> Result<Vec<StreamId>> {
        let mut out = Vec::new();
        self.kv.scan(
            &key_of(K_ENTRY, lo),
            &key_of(K_ENTRY, hi),
            false,
            &mut |k, _| {
                if let Ok(id) = id_at_end(k) {
                    out.push(id);
                }
                count == 0 || (out.len() as u64) < count
            },
        )?;
        Ok(out)
    }

    /// Whether entry `id` exists.
    pub fn contains(&self, id: StreamId) -> Result<bool> {
        Ok(self.kv.get(&key_of(K_ENTRY, id))?.is_some())
    }

    fn node_of(&self, id: StreamId) -> Result<Option<Node>> {
        match self.kv.last_at_or_below(&key_of(K_NODE, id))? {
            Some((k, v)) if k.first() == Some(&K_NODE) => {
                Ok(Some(Node::decode(id_at_end(&k)?, &v)?))
            }
            _ => Ok(None),
        }
    }

    fn put_node(&mut self, node: &Node) -> Result<()> {
        self.put(&key_of(K_NODE, node.first), &node.encode())
    }

    fn nodes(&self) -> Result<Vec<Node>> {
        self.kv
            .prefixed(&[K_NODE])?
            .iter()
            .map(|(k, v)| Node::decode(id_at_end(k)?, v))
            .collect()
    }

    /// Appends entry `id` (greater than the last ID: the caller checks)
    /// with these field/value pairs, in the tail node or a new one as the
    /// node limits say.
    pub fn append(&mut self, id: StreamId, fields: &[&[u8]], limits: NodeLimits) -> Result<()> {
        let bytes = listpack_bytes(fields);
        let tail = self.node_of(StreamId::MAX)?;
        let max_bytes = if limits.max_bytes == 0 || limits.max_bytes > (1 << 30) {
            1 << 30
        } else {
            limits.max_bytes
        };
        let node = match tail {
            Some(mut n)
                if n.bytes + bytes < max_bytes
                    && (limits.max_entries == 0 || n.live + n.deleted < limits.max_entries) =>
            {
                n.last = id;
                n.live += 1;
                n.bytes += bytes;
                n
            }
            _ => Node {
                first: id,
                last: id,
                live: 1,
                deleted: 0,
                bytes: 16 + bytes,
            },
        };
        self.put_node(&node)?;
        self.put(&key_of(K_ENTRY, id), &encode_fields(fields))?;
        self.meta.last_id = id;
        self.meta.entries_added += 1;
        self.meta.length += 1;
        self.save_meta()
    }

    /// Deletes entry `id`; whether it existed. A node left without live
    /// entries goes.
    pub fn delete(&mut self, id: StreamId) -> Result<bool> {
        if !self.del(&key_of(K_ENTRY, id))? {
            return Ok(false);
        }
        if let Some(mut node) = self.node_of(id)? {
            node.live = node.live.saturating_sub(1);
            node.deleted += 1;
            if node.live == 0 {
                self.del(&key_of(K_NODE, node.first))?;
            } else {
                self.put_node(&node)?;
            }
        }
        self.meta.length = self.meta.length.saturating_sub(1);
        if id > self.meta.max_deleted {
            self.meta.max_deleted = id;
        }
        self.save_meta()?;
        Ok(true)
    }

    /// Trims as Redis's `streamTrim`: whole nodes from the head while the
    /// target allows; then, unless `approx`, entries of the next node until
    /// the target is met. `limit` (0: none) caps the entries removed. The
    /// number of entries removed.
    pub fn trim(&mut self, trim: Trim, approx: bool, limit: u64) -> Result<u64> {
        match trim {
            Trim::MaxLen(n) if self.meta.length <= n => return Ok(0),
            _ => {}
        }
        let mut deleted = 0u64;
        for node in self.nodes()? {
            if limit > 0 && deleted >= limit {
                break;
            }
            if limit > 0 && deleted + node.live > limit {
                break;
            }
            let remove_node = match trim {
                Trim::MaxLen(n) => self.meta.length - node.live >= n,
                Trim::MinId(min) => node.last < min,
            };
            let hi = node_end(&self.kv, node.first)?;
            if remove_node {
                for id in self.ids(node.first, hi, 0)? {
                    self.del(&key_of(K_ENTRY, id))?;
                }
                self.del(&key_of(K_NODE, node.first))?;
                self.meta.length -= node.live;
                deleted += node.live;
                self.touch();
                continue;
            }
            if approx {
                break;
            }
            let mut node = node;
            for id in self.ids(node.first, hi, 0)? {
                let done = match trim {
                    Trim::MaxLen(n) => self.meta.length <= n,
                    Trim::MinId(min) => id >= min,
                };
                if done {
                    break;
                }
                self.del(&key_of(K_ENTRY, id))?;
                node.live -= 1;
                node.deleted += 1;
                self.meta.length -= 1;
                deleted += 1;
            }
            if node.live == 0 {
                self.del(&key_of(K_NODE, node.first))?;
            } else {
                self.put_node(&node)?;
            }
            break;
        }
        if deleted > 0 {
            self.save_meta()?;
        }
        Ok(deleted)
    }

    /// The consumer groups, by name.
    pub fn groups(&self) -> Result<Vec<StreamGroup>> {
        self.kv
            .prefixed(&[K_GROUP])?
            .iter()
            .map(|(k, v)| decode_group(&k[1..], v))
            .collect()
    }

    /// The group `name`.
    pub fn group(&self, name: &[u8]) -> Result<Option<StreamGroup>> {
        self.kv
            .get(&group_key(K_GROUP, name))?
            .map(|v| decode_group(name, &v))
            .transpose()
    }

    /// Writes group `g` (new or changed).
    pub fn put_group(&mut self, g: &StreamGroup) -> Result<()> {
        self.touch();
        let read = g.entries_read.map_or(u64::MAX, |r| r);
        self.put(
            &group_key(K_GROUP, &g.name),
            &words(&[g.last_id.ms, g.last_id.seq, read, g.pending]),
        )
    }

    /// Removes group `name` with its consumers and pending entries; whether
    /// it existed.
    pub fn remove_group(&mut self, name: &[u8]) -> Result<bool> {
        if !self.del(&group_key(K_GROUP, name))? {
            return Ok(false);
        }
        self.touch();
        for kind in [K_CONSUMER, K_PENDING, K_OWNED] {
            for (k, _) in self.kv.prefixed(&group_key(kind, name))? {
                self.del(&k)?;
            }
        }
        Ok(true)
    }

    /// The consumers of `group`, by name.
    pub fn consumers(&self, group: &[u8]) -> Result<Vec<StreamConsumer>> {
        let prefix = group_key(K_CONSUMER, group);
        self.kv
            .prefixed(&prefix)?
            .iter()
            .map(|(k, v)| decode_consumer(&k[prefix.len()..], v))
            .collect()
    }

    /// Consumer `name` of `group`.
    pub fn consumer(&self, group: &[u8], name: &[u8]) -> Result<Option<StreamConsumer>> {
        self.kv
            .get(&consumer_key(group, name))?
            .map(|v| decode_consumer(name, &v))
            .transpose()
    }

    /// Writes consumer `c` of `group` (new or changed).
    pub fn put_consumer(&mut self, group: &[u8], c: &StreamConsumer) -> Result<()> {
        self.touch();
        self.put(
            &consumer_key(group, &c.name),
            &words(&[c.seen_ms, c.pending]),
        )
    }

    /// Removes consumer `name` of `group` and its pending entries; how many
    /// it had pending, None when it did not exist.
    pub fn remove_consumer(&mut self, group: &[u8], name: &[u8]) -> Result<Option<u64>> {
        let Some(c) = self.consumer(group, name)? else {
            return Ok(None);
        };
        let owned = self.kv.prefixed(&owned_prefix(group, name))?;
        let mut removed = 0;
        for (k, _) in &owned {
            let id = id_at_end(k)?;
            self.del(k)?;
            if self.del(&pending_key(group, id))? {
                removed += 1;
            }
        }
        self.del(&consumer_key(group, name))?;
        self.touch();
        if let Some(mut g) = self.group(group)? {
            g.pending = g.pending.saturating_sub(removed);
            self.put_group(&g)?;
        }
        Ok(Some(c.pending))
    }

    /// The pending entry `id` of `group`.
    pub fn pending(&self, group: &[u8], id: StreamId) -> Result<Option<Pending>> {
        self.kv
            .get(&pending_key(group, id))?
            .map(|v| decode_pending(id, &v))
            .transpose()
    }

    /// Up to `count` (0: all) pending entries of `group` in `lo..=hi`, only
    /// `consumer`'s when given.
    pub fn pending_range(
        &self,
        group: &[u8],
        consumer: Option<&[u8]>,
        lo: StreamId,
        hi: StreamId,
        count: u64,
    ) -> Result<Vec<Pending>> {
        let prefix = match consumer {
            Some(c) => owned_prefix(group, c),
            None => group_key(K_PENDING, group),
        };
        let (mut from, mut to) = (prefix.clone(), prefix);
        from.extend_from_slice(&lo.to_bytes());
        to.extend_from_slice(&hi.to_bytes());
        let mut ids = Vec::new();
        let mut out = Vec::new();
        self.kv.scan(&from, &to, false, &mut |k, v| {
            match consumer {
                Some(_) => ids.push(k.to_vec()),
                None => out.push((k.to_vec(), v.to_vec())),
            }
            count == 0 || ((ids.len() + out.len()) as u64) < count
        })?;
        if consumer.is_some() {
            let mut res = Vec::with_capacity(ids.len());
            for k in ids {
                let id = id_at_end(&k)?;
                if let Some(p) = self.pending(group, id)? {
                    res.push(p);
                }
            }
            return Ok(res);
        }
        out.iter()
            .map(|(k, v)| decode_pending(id_at_end(k)?, v))
            .collect()
    }

    /// Writes pending entry `p` of `group`, moving it from its previous
    /// consumer if it had one, and keeps the group's and consumers' counts.
    pub fn put_pending(&mut self, group: &[u8], p: &Pending) -> Result<()> {
        let old = self.pending(group, p.id)?;
        let mut v = words(&[p.delivery_ms, p.deliveries]);
        v.extend_from_slice(&p.consumer);
        self.touch();
        self.put(&pending_key(group, p.id), &v)?;
        match &old {
            Some(o) if o.consumer == p.consumer => return Ok(()),
            Some(o) => {
                self.del(&owned_key(group, &o.consumer, p.id))?;
                if let Some(mut c) = self.consumer(group, &o.consumer)? {
                    c.pending = c.pending.saturating_sub(1);
                    self.put_consumer(group, &c)?;
                }
            }
            None => {
                if let Some(mut g) = self.group(group)? {
                    g.pending += 1;
                    self.put_group(&g)?;
                }
            }
        }
        self.put(&owned_key(group, &p.consumer, p.id), &[])?;
        if let Some(mut c) = self.consumer(group, &p.consumer)? {
            c.pending += 1;
            self.put_consumer(group, &c)?;
        }
        Ok(())
    }

    /// Removes pending entry `id` of `group` (XACK); whether it was there.
    pub fn remove_pending(&mut self, group: &[u8], id: StreamId) -> Result<bool> {
        let Some(old) = self.pending(group, id)? else {
            return Ok(false);
        };
        self.touch();
        self.del(&pending_key(group, id))?;
        self.del(&owned_key(group, &old.consumer, id))?;
        if let Some(mut c) = self.consumer(group, &old.consumer)? {
            c.pending = c.pending.saturating_sub(1);
            self.put_consumer(group, &c)?;
        }
        if let Some(mut g) = self.group(group)? {
            g.pending = g.pending.saturating_sub(1);
            self.put_group(&g)?;
        }
        Ok(true)
    }

    /// Entry `id`'s fields, None when it was deleted.
    pub fn entry(&self, id: StreamId) -> Result<Option<Vec<Vec<u8>>>> {
        self.kv
            .get(&key_of(K_ENTRY, id))?
            .map(|v| decode_fields(&v))
            .transpose()
    }
}

/// The last ID a node starting at `first` may hold: just below the next
/// node's first ID.
fn node_end(kv: &Kv, first: StreamId) -> Result<StreamId> {
    let Some(after) = first.next() else {
        return Ok(StreamId::MAX);
    };
    let mut next = None;
    kv.scan(
        &key_of(K_NODE, after),
        &key_of(K_NODE, StreamId::MAX),
        false,
        &mut |k, _| {
            next = id_at_end(k).ok();
            false
        },
    )?;
    Ok(next.and_then(StreamId::prev).unwrap_or(StreamId::MAX))
}

fn decode_group(name: &[u8], v: &[u8]) -> Result<StreamGroup> {
    let read = u64_at(v, 2)?;
    Ok(StreamGroup {
        name: name.to_vec(),
        last_id: StreamId {
            ms: u64_at(v, 0)?,
            seq: u64_at(v, 1)?,
        },
        entries_read: (read != u64::MAX).then_some(read),
        pending: u64_at(v, 3)?,
    })
}

fn decode_consumer(name: &[u8], v: &[u8]) -> Result<StreamConsumer> {
    Ok(StreamConsumer {
        name: name.to_vec(),
        seen_ms: u64_at(v, 0)?,
        pending: u64_at(v, 1)?,
    })
}

fn decode_pending(id: StreamId, v: &[u8]) -> Result<Pending> {
    Ok(Pending {
        id,
        delivery_ms: u64_at(v, 0)?,
        deliveries: u64_at(v, 1)?,
        consumer: v.get(16..).ok_or(Error::BadValue)?.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: NodeLimits = NodeLimits {
        max_bytes: 4096,
        max_entries: 100,
    };

    fn id(ms: u64) -> StreamId {
        StreamId { ms, seq: 0 }
    }

    #[test]
    fn approximate_trim_removes_whole_nodes_only() {
        let mut s = Stream::empty();
        for i in 1..=1000 {
            s.append(id(i), &[b"f", b"v"], LIMITS).unwrap();
        }
        assert_eq!(s.node_count().unwrap(), 10);
        assert_eq!(s.trim(Trim::MaxLen(555), true, 0).unwrap(), 400);
        assert_eq!(s.len(), 600);
        assert_eq!(s.trim(Trim::MaxLen(555), false, 0).unwrap(), 45);
        assert_eq!(s.first_entry().unwrap().unwrap().0, id(446));
        assert_eq!(s.trim(Trim::MinId(id(900)), false, 0).unwrap(), 454);
        assert_eq!(s.len(), 101);
    }

    #[test]
    fn groups_consumers_and_pending_keep_their_counts() {
        let mut s = Stream::empty();
        s.append(id(1), &[b"a", b"1"], LIMITS).unwrap();
        s.append(id(2), &[b"a", b"2"], LIMITS).unwrap();
        let g = StreamGroup {
            name: b"g".to_vec(),
            last_id: StreamId::MIN,
            entries_read: None,
            pending: 0,
        };
        s.put_group(&g).unwrap();
        for c in [&b"alice"[..], b"bob"] {
            s.put_consumer(
                b"g",
                &StreamConsumer {
                    name: c.to_vec(),
                    seen_ms: 5,
                    pending: 0,
                },
            )
            .unwrap();
        }
        let p = |i, c: &[u8]| Pending {
            id: id(i),
            consumer: c.to_vec(),
            delivery_ms: 7,
            deliveries: 1,
        };
        s.put_pending(b"g", &p(1, b"alice")).unwrap();
        s.put_pending(b"g", &p(2, b"alice")).unwrap();
        s.put_pending(b"g", &p(2, b"bob")).unwrap();
        assert_eq!(s.group(b"g").unwrap().unwrap().pending, 2);
        assert_eq!(s.consumer(b"g", b"alice").unwrap().unwrap().pending, 1);
        let bobs = s
            .pending_range(b"g", Some(b"bob"), StreamId::MIN, StreamId::MAX, 0)
            .unwrap();
        assert_eq!(bobs, vec![p(2, b"bob")]);
        assert!(s.remove_pending(b"g", id(1)).unwrap());
        assert_eq!(s.remove_consumer(b"g", b"bob").unwrap(), Some(1));
        assert_eq!(s.group(b"g").unwrap().unwrap().pending, 0);
        let mut image = Vec::new();
        s.encode_image(&mut image).unwrap();
        let back = Stream::decode(&image).unwrap();
        assert_eq!(back.meta(), s.meta());
        assert_eq!(back.consumers(b"g").unwrap().len(), 1);
        assert!(s.remove_group(b"g").unwrap());
        assert!(s.groups().unwrap().is_empty());
    }
}
