//! Records: the logical, deterministic change one write made (docs/persistence.md),
//! the payload of one frame.
//!
//! ```text
//! byte 0   kind (1..=16) | 0x80 when the next frame continues the same group
//! then     the kind's fields, little-endian: byte strings as u32 len + bytes,
//!          counts as u32, f64 as its bits (u64), db as u8, booleans as u8 0/1
//! ```
//!
//! A group (MULTI/EXEC, or a large value split into chunks) is applied only
//! once its last frame, the one without 0x80, has been read. Decoding borrows
//! from the payload, checks every length against the bytes left, and rejects
//! trailing bytes: a record either decodes exactly or is an error.

use std::fmt;

use crate::keyspace::entry::ValueType;
use crate::segment::layout::NUM_DBS;

/// Bit of the kind byte: the next frame belongs to the same group.
pub const CONTINUES: u8 = 0x80;

/// Kind byte of [`Record::SetEntry`].
pub const KIND_SET_ENTRY: u8 = 1;
/// Kind byte of [`Record::Delete`].
pub const KIND_DELETE: u8 = 2;
/// Kind byte of [`Record::Expire`].
pub const KIND_EXPIRE: u8 = 3;
/// Kind byte of [`Record::StringAppend`].
pub const KIND_STRING_APPEND: u8 = 4;
/// Kind byte of [`Record::ListPush`].
pub const KIND_LIST_PUSH: u8 = 5;
/// Kind byte of [`Record::ListPop`].
pub const KIND_LIST_POP: u8 = 6;
/// Kind byte of [`Record::HashSet`].
pub const KIND_HASH_SET: u8 = 7;
/// Kind byte of [`Record::HashDel`].
pub const KIND_HASH_DEL: u8 = 8;
/// Kind byte of [`Record::SetAdd`].
pub const KIND_SET_ADD: u8 = 9;
/// Kind byte of [`Record::SetRem`].
pub const KIND_SET_REM: u8 = 10;
/// Kind byte of [`Record::ZSetAdd`].
pub const KIND_ZSET_ADD: u8 = 11;
/// Kind byte of [`Record::ZSetRem`].
pub const KIND_ZSET_REM: u8 = 12;
/// Kind byte of [`Record::FlushDb`].
pub const KIND_FLUSH_DB: u8 = 13;
/// Kind byte of [`Record::FlushAll`].
pub const KIND_FLUSH_ALL: u8 = 14;
/// Kind byte of [`Record::Pad`].
pub const KIND_PAD: u8 = 15;
/// Kind byte of [`Record::SwapDb`].
pub const KIND_SWAP_DB: u8 = 16;
/// Kind byte of [`Record::StreamPut`].
pub const KIND_STREAM_PUT: u8 = 17;
/// Kind byte of [`Record::StreamDel`].
pub const KIND_STREAM_DEL: u8 = 18;
/// [`Record::Functions`].
pub const KIND_FUNCTIONS: u8 = 19;

/// One logged change, borrowing its byte strings from the frame's payload.
#[derive(Clone, Debug, PartialEq)]
pub enum Record<'a> {
    /// A key's whole value: string bytes, or a collection's compact codec bytes.
    SetEntry {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// The value's type.
        vtype: ValueType,
        /// Memcached client flags.
        mc_flags: u32,
        /// Absolute expiry in ms since the epoch; 0 = none.
        expire_ms: u64,
        /// The value's bytes.
        value: &'a [u8],
    },
    /// The key was removed.
    Delete {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
    },
    /// The key's expiry changed.
    Expire {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// Absolute expiry in ms since the epoch; 0 = persist.
        expire_ms: u64,
    },
    /// Bytes appended to a string (also the chunks of a large string after
    /// its `SetEntry`, in the same group).
    StringAppend {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// The appended bytes.
        tail: &'a [u8],
    },
    /// Items pushed onto a list, in push order.
    ListPush {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// Pushed at the tail (RPUSH) rather than the head (LPUSH).
        tail: bool,
        /// The items.
        items: Vec<&'a [u8]>,
    },
    /// Items popped from a list.
    ListPop {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// Popped from the tail (RPOP) rather than the head (LPOP).
        tail: bool,
        /// How many items.
        count: u64,
    },
    /// Hash fields set.
    HashSet {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// (field, value) pairs.
        pairs: Vec<(&'a [u8], &'a [u8])>,
    },
    /// Hash fields removed.
    HashDel {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// The fields.
        fields: Vec<&'a [u8]>,
    },
    /// Items of a stream's map written (entries, its metadata, groups,
    /// consumers, pending entries: `collections::stream`).
    StreamPut {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// (map key, value) pairs.
        pairs: Vec<(&'a [u8], &'a [u8])>,
    },
    /// Items of a stream's map removed.
    StreamDel {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// The map keys.
        items: Vec<&'a [u8]>,
    },
    /// Set members added.
    SetAdd {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// The members.
        members: Vec<&'a [u8]>,
    },
    /// Set members removed (SREM, and the members SPOP chose).
    SetRem {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// The members.
        members: Vec<&'a [u8]>,
    },
    /// Sorted-set members added or rescored, with their final scores.
    ZSetAdd {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// (member, score) pairs.
        members: Vec<(&'a [u8], f64)>,
    },
    /// Sorted-set members removed.
    ZSetRem {
        /// Database number.
        db: u8,
        /// The key.
        key: &'a [u8],
        /// The members.
        members: Vec<&'a [u8]>,
    },
    /// Every key of one database removed.
    FlushDb {
        /// Database number.
        db: u8,
    },
    /// Every key of every database removed.
    FlushAll,
    /// Space whose writer died before filling it; replay ignores it, and it
    /// closes an open group.
    Pad,
    /// Two databases swapped.
    SwapDb {
        /// One database.
        a: u8,
        /// The other.
        b: u8,
    },
    /// The whole set of function libraries after a FUNCTION LOAD, DELETE,
    /// FLUSH or RESTORE: the engine's encoding of the library codes (with
    /// its own checksum). The store holds no libraries: whoever replays the
    /// log hands these bytes to the engine.
    Functions {
        /// The encoded library set.
        libraries: &'a [u8],
    },
}

/// Why a payload is not a record: what, and at which byte of the payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    /// Byte offset in the payload where decoding failed.
    pub offset: usize,
    /// What was wrong there.
    pub what: String,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad record: {} at byte {}", self.what, self.offset)
    }
}

impl std::error::Error for RecordError {}

/// Reads fields off a payload, each read checked against the bytes left.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn error<T>(&self, what: impl Into<String>) -> Result<T, RecordError> {
        Err(RecordError {
            offset: self.pos,
            what: what.into(),
        })
    }

    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], RecordError> {
        if self.left() < n {
            return self.error(format!(
                "{what} needs {n} bytes but {} are left",
                self.left()
            ));
        }
        let bytes = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn u8(&mut self, what: &str) -> Result<u8, RecordError> {
        Ok(self.take(1, what)?[0])
    }

    fn u32(&mut self, what: &str) -> Result<u32, RecordError> {
        let mut w = [0u8; 4];
        w.copy_from_slice(self.take(4, what)?);
        Ok(u32::from_le_bytes(w))
    }

    fn u64(&mut self, what: &str) -> Result<u64, RecordError> {
        let mut w = [0u8; 8];
        w.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(w))
    }

    fn bool(&mut self, what: &str) -> Result<bool, RecordError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            v => {
                self.pos -= 1;
                self.error(format!("{what} is {v}, not 0 or 1"))
            }
        }
    }

    fn db(&mut self) -> Result<u8, RecordError> {
        let db = self.u8("db")?;
        if db as usize >= NUM_DBS {
            self.pos -= 1;
            return self.error(format!("db {db} is not below {NUM_DBS}"));
        }
        Ok(db)
    }

    fn bytes(&mut self, what: &str) -> Result<&'a [u8], RecordError> {
        let len = self.u32(what)? as usize;
        self.take(len, what)
    }

    /// A count of elements each at least `min_size` bytes long: larger than
    /// the bytes left could hold is an error, so a damaged count never makes
    /// the decoder reserve more than the payload justifies.
    fn count(&mut self, what: &str, min_size: usize) -> Result<usize, RecordError> {
        let n = self.u32(what)? as usize;
        if n > self.left() / min_size {
            self.pos -= 4;
            return self.error(format!(
                "{what} count {n} cannot fit in the {} bytes left",
                self.left() - 4
            ));
        }
        Ok(n)
    }

    fn strings(&mut self, what: &str) -> Result<Vec<&'a [u8]>, RecordError> {
        let n = self.count(what, 4)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.bytes(what)?);
        }
        Ok(out)
    }
}

impl<'a> Record<'a> {
    /// Decodes one payload; the flag says whether the next frame continues the
    /// same group.
    pub fn decode(payload: &'a [u8]) -> Result<(Record<'a>, bool), RecordError> {
        let mut r = Reader {
            buf: payload,
            pos: 0,
        };
        let kind_byte = r.u8("kind")?;
        let continues = kind_byte & CONTINUES != 0;
        let record = match kind_byte & !CONTINUES {
            KIND_SET_ENTRY => {
                let db = r.db()?;
                let vtype_byte = r.u8("type")?;
                let Some(vtype) = ValueType::from_u8(vtype_byte) else {
                    r.pos -= 1;
                    return r.error(format!("unknown value type {vtype_byte}"));
                };
                let mc_flags = r.u32("flags")?;
                let expire_ms = r.u64("expire")?;
                let key = r.bytes("key")?;
                let value = r.bytes("value")?;
                Record::SetEntry {
                    db,
                    key,
                    vtype,
                    mc_flags,
                    expire_ms,
                    value,
                }
            }
            KIND_DELETE => Record::Delete {
                db: r.db()?,
                key: r.bytes("key")?,
            },
            KIND_EXPIRE => Record::Expire {
                db: r.db()?,
                key: r.bytes("key")?,
                expire_ms: r.u64("expire")?,
            },
            KIND_STRING_APPEND => Record::StringAppend {
                db: r.db()?,
                key: r.bytes("key")?,
                tail: r.bytes("tail")?,
            },
            KIND_LIST_PUSH => Record::ListPush {
                db: r.db()?,
                key: r.bytes("key")?,
                tail: r.bool("tail")?,
                items: r.strings("item")?,
            },
            KIND_LIST_POP => Record::ListPop {
                db: r.db()?,
                key: r.bytes("key")?,
                tail: r.bool("tail")?,
                count: r.u64("count")?,
            },
            KIND_HASH_SET => {
                let db = r.db()?;
                let key = r.bytes("key")?;
                let n = r.count("pair", 8)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    pairs.push((r.bytes("field")?, r.bytes("value")?));
                }
                Record::HashSet { db, key, pairs }
            }
            KIND_HASH_DEL => Record::HashDel {
                db: r.db()?,
                key: r.bytes("key")?,
                fields: r.strings("field")?,
            },
            KIND_STREAM_PUT => {
                let db = r.db()?;
                let key = r.bytes("key")?;
                let n = r.count("pair", 8)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    pairs.push((r.bytes("item")?, r.bytes("value")?));
                }
                Record::StreamPut { db, key, pairs }
            }
            KIND_STREAM_DEL => Record::StreamDel {
                db: r.db()?,
                key: r.bytes("key")?,
                items: r.strings("item")?,
            },
            KIND_SET_ADD => Record::SetAdd {
                db: r.db()?,
                key: r.bytes("key")?,
                members: r.strings("member")?,
            },
            KIND_SET_REM => Record::SetRem {
                db: r.db()?,
                key: r.bytes("key")?,
                members: r.strings("member")?,
            },
            KIND_ZSET_ADD => {
                let db = r.db()?;
                let key = r.bytes("key")?;
                let n = r.count("member", 12)?;
                let mut members = Vec::with_capacity(n);
                for _ in 0..n {
                    let member = r.bytes("member")?;
                    members.push((member, f64::from_bits(r.u64("score")?)));
                }
                Record::ZSetAdd { db, key, members }
            }
            KIND_ZSET_REM => Record::ZSetRem {
                db: r.db()?,
                key: r.bytes("key")?,
                members: r.strings("member")?,
            },
            KIND_FLUSH_DB => Record::FlushDb { db: r.db()? },
            KIND_FLUSH_ALL => Record::FlushAll,
            KIND_PAD => return Ok((Record::Pad, continues)),
            KIND_SWAP_DB => Record::SwapDb {
                a: r.db()?,
                b: r.db()?,
            },
            KIND_FUNCTIONS => Record::Functions {
                libraries: r.bytes("libraries")?,
            },
            kind => {
                r.pos = 0;
                return r.error(format!("unknown kind {kind}"));
            }
        };
        if r.left() != 0 {
            return r.error(format!("{} trailing bytes", r.left()));
        }
        Ok((record, continues))
    }

    /// The kind byte, without the group bit.
    pub fn kind(&self) -> u8 {
        match self {
            Record::SetEntry { .. } => KIND_SET_ENTRY,
            Record::Delete { .. } => KIND_DELETE,
            Record::Expire { .. } => KIND_EXPIRE,
            Record::StringAppend { .. } => KIND_STRING_APPEND,
            Record::ListPush { .. } => KIND_LIST_PUSH,
            Record::ListPop { .. } => KIND_LIST_POP,
            Record::HashSet { .. } => KIND_HASH_SET,
            Record::HashDel { .. } => KIND_HASH_DEL,
            Record::StreamPut { .. } => KIND_STREAM_PUT,
            Record::StreamDel { .. } => KIND_STREAM_DEL,
            Record::SetAdd { .. } => KIND_SET_ADD,
            Record::SetRem { .. } => KIND_SET_REM,
            Record::ZSetAdd { .. } => KIND_ZSET_ADD,
            Record::ZSetRem { .. } => KIND_ZSET_REM,
            Record::FlushDb { .. } => KIND_FLUSH_DB,
            Record::FlushAll => KIND_FLUSH_ALL,
            Record::Pad => KIND_PAD,
            Record::SwapDb { .. } => KIND_SWAP_DB,
            Record::Functions { .. } => KIND_FUNCTIONS,
        }
    }

    /// Appends the payload to `out`; `continues` sets the group bit.
    pub fn encode(&self, continues: bool, out: &mut Vec<u8>) {
        let start = out.len();
        out.reserve(self.encoded_len());
        match self {
            Record::SetEntry {
                db,
                key,
                vtype,
                mc_flags,
                expire_ms,
                value,
            } => encode_set_entry(out, *db, key, *vtype, *mc_flags, *expire_ms, &[value]),
            Record::Delete { db, key } => encode_delete(out, *db, key),
            Record::Expire { db, key, expire_ms } => encode_expire(out, *db, key, *expire_ms),
            Record::StringAppend { db, key, tail } => encode_string_append(out, *db, key, tail),
            Record::ListPush {
                db,
                key,
                tail,
                items,
            } => encode_list_push(out, *db, key, *tail, items),
            Record::ListPop {
                db,
                key,
                tail,
                count,
            } => encode_list_pop(out, *db, key, *tail, *count),
            Record::HashSet { db, key, pairs } => encode_hash_set(out, *db, key, pairs),
            Record::HashDel { db, key, fields } => encode_hash_del(out, *db, key, fields),
            Record::StreamPut { db, key, pairs } => encode_stream_put(out, *db, key, pairs),
            Record::StreamDel { db, key, items } => encode_stream_del(out, *db, key, items),
            Record::SetAdd { db, key, members } => encode_set_add(out, *db, key, members),
            Record::SetRem { db, key, members } => encode_set_rem(out, *db, key, members),
            Record::ZSetAdd { db, key, members } => encode_zset_add(out, *db, key, members),
            Record::ZSetRem { db, key, members } => encode_zset_rem(out, *db, key, members),
            Record::FlushDb { db } => encode_flush_db(out, *db),
            Record::FlushAll => encode_flush_all(out),
            Record::Pad => out.push(KIND_PAD),
            Record::SwapDb { a, b } => encode_swap_db(out, *a, *b),
            Record::Functions { libraries } => encode_functions(out, libraries),
        }
        set_continues(&mut out[start..], continues);
    }

    /// Bytes [`Record::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        let strings = |v: &[&[u8]]| 4 + v.iter().map(|s| 4 + s.len()).sum::<usize>();
        // kind + db + key
        let keyed = |key: &[u8]| 2 + 4 + key.len();
        match self {
            Record::SetEntry { key, value, .. } => keyed(key) + 1 + 4 + 8 + 4 + value.len(),
            Record::Delete { key, .. } => keyed(key),
            Record::Expire { key, .. } => keyed(key) + 8,
            Record::StringAppend { key, tail, .. } => keyed(key) + 4 + tail.len(),
            Record::ListPush { key, items, .. } => keyed(key) + 1 + strings(items),
            Record::ListPop { key, .. } => keyed(key) + 1 + 8,
            Record::HashSet { key, pairs, .. } => {
                keyed(key)
                    + 4
                    + pairs
                        .iter()
                        .map(|(f, v)| 8 + f.len() + v.len())
                        .sum::<usize>()
            }
            Record::HashDel { key, fields, .. } => keyed(key) + strings(fields),
            Record::StreamPut { key, pairs, .. } => {
                keyed(key)
                    + 4
                    + pairs
                        .iter()
                        .map(|(f, v)| 8 + f.len() + v.len())
                        .sum::<usize>()
            }
            Record::StreamDel { key, items, .. } => keyed(key) + strings(items),
            Record::SetAdd { key, members, .. } | Record::SetRem { key, members, .. } => {
                keyed(key) + strings(members)
            }
            Record::ZSetAdd { key, members, .. } => {
                keyed(key) + 4 + members.iter().map(|(m, _)| 12 + m.len()).sum::<usize>()
            }
            Record::ZSetRem { key, members, .. } => keyed(key) + strings(members),
            Record::FlushDb { .. } => 2,
            Record::FlushAll | Record::Pad => 1,
            Record::SwapDb { .. } => 3,
            Record::Functions { libraries } => 1 + 4 + libraries.len(),
        }
    }

    /// The database and key a single-key record changes.
    pub fn key(&self) -> Option<(u8, &'a [u8])> {
        match *self {
            Record::SetEntry { db, key, .. }
            | Record::Delete { db, key }
            | Record::Expire { db, key, .. }
            | Record::StringAppend { db, key, .. }
            | Record::ListPush { db, key, .. }
            | Record::ListPop { db, key, .. }
            | Record::HashSet { db, key, .. }
            | Record::HashDel { db, key, .. }
            | Record::StreamPut { db, key, .. }
            | Record::StreamDel { db, key, .. }
            | Record::SetAdd { db, key, .. }
            | Record::SetRem { db, key, .. }
            | Record::ZSetAdd { db, key, .. }
            | Record::ZSetRem { db, key, .. } => Some((db, key)),
            Record::FlushDb { .. }
            | Record::FlushAll
            | Record::Pad
            | Record::SwapDb { .. }
            | Record::Functions { .. } => None,
        }
    }
}

/// Sets or clears the group bit of an encoded payload (its first byte).
pub fn set_continues(payload: &mut [u8], continues: bool) {
    if let Some(kind) = payload.first_mut() {
        if continues {
            *kind |= CONTINUES;
        } else {
            *kind &= !CONTINUES;
        }
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    debug_assert!(len <= u32::MAX as usize);
    put_u32(out, len as u32);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_strings(out: &mut Vec<u8>, strings: &[&[u8]]) {
    put_len(out, strings.len());
    for s in strings {
        put_bytes(out, s);
    }
}

fn put_keyed(out: &mut Vec<u8>, kind: u8, db: u8, key: &[u8]) {
    debug_assert!((db as usize) < NUM_DBS);
    out.push(kind);
    out.push(db);
    put_bytes(out, key);
}

/// Appends a [`Record::Functions`] payload.
pub fn encode_functions(out: &mut Vec<u8>, libraries: &[u8]) {
    out.push(KIND_FUNCTIONS);
    put_bytes(out, libraries);
}

/// Appends a [`Record::SetEntry`] payload; the value is the concatenation of
/// `value_parts`.
pub fn encode_set_entry(
    out: &mut Vec<u8>,
    db: u8,
    key: &[u8],
    vtype: ValueType,
    mc_flags: u32,
    expire_ms: u64,
    value_parts: &[&[u8]],
) {
    debug_assert!((db as usize) < NUM_DBS);
    let value_len: usize = value_parts.iter().map(|p| p.len()).sum();
    out.reserve(2 + 1 + 4 + 8 + 4 + key.len() + 4 + value_len);
    out.push(KIND_SET_ENTRY);
    out.push(db);
    out.push(vtype as u8);
    put_u32(out, mc_flags);
    put_u64(out, expire_ms);
    put_bytes(out, key);
    put_len(out, value_len);
    for part in value_parts {
        out.extend_from_slice(part);
    }
}

/// Appends a [`Record::Delete`] payload.
pub fn encode_delete(out: &mut Vec<u8>, db: u8, key: &[u8]) {
    put_keyed(out, KIND_DELETE, db, key);
}

/// Appends a [`Record::Expire`] payload (`expire_ms` 0 = persist).
pub fn encode_expire(out: &mut Vec<u8>, db: u8, key: &[u8], expire_ms: u64) {
    put_keyed(out, KIND_EXPIRE, db, key);
    put_u64(out, expire_ms);
}

/// Appends a [`Record::StringAppend`] payload.
pub fn encode_string_append(out: &mut Vec<u8>, db: u8, key: &[u8], tail: &[u8]) {
    put_keyed(out, KIND_STRING_APPEND, db, key);
    put_bytes(out, tail);
}

/// Appends a [`Record::ListPush`] payload.
pub fn encode_list_push(out: &mut Vec<u8>, db: u8, key: &[u8], tail: bool, items: &[&[u8]]) {
    put_keyed(out, KIND_LIST_PUSH, db, key);
    out.push(tail as u8);
    put_strings(out, items);
}

/// Appends a [`Record::ListPop`] payload.
pub fn encode_list_pop(out: &mut Vec<u8>, db: u8, key: &[u8], tail: bool, count: u64) {
    put_keyed(out, KIND_LIST_POP, db, key);
    out.push(tail as u8);
    put_u64(out, count);
}

/// Appends a [`Record::HashSet`] payload.
pub fn encode_hash_set(out: &mut Vec<u8>, db: u8, key: &[u8], pairs: &[(&[u8], &[u8])]) {
    put_keyed(out, KIND_HASH_SET, db, key);
    put_len(out, pairs.len());
    for (field, value) in pairs {
        put_bytes(out, field);
        put_bytes(out, value);
    }
}

/// Appends a [`Record::HashDel`] payload.
pub fn encode_hash_del(out: &mut Vec<u8>, db: u8, key: &[u8], fields: &[&[u8]]) {
    put_keyed(out, KIND_HASH_DEL, db, key);
    put_strings(out, fields);
}

/// Appends a [`Record::StreamPut`] payload.
pub fn encode_stream_put(out: &mut Vec<u8>, db: u8, key: &[u8], pairs: &[(&[u8], &[u8])]) {
    put_keyed(out, KIND_STREAM_PUT, db, key);
    put_len(out, pairs.len());
    for (item, value) in pairs {
        put_bytes(out, item);
        put_bytes(out, value);
    }
}

/// Appends a [`Record::StreamDel`] payload.
pub fn encode_stream_del(out: &mut Vec<u8>, db: u8, key: &[u8], items: &[&[u8]]) {
    put_keyed(out, KIND_STREAM_DEL, db, key);
    put_strings(out, items);
}

/// Appends a [`Record::SetAdd`] payload.
pub fn encode_set_add(out: &mut Vec<u8>, db: u8, key: &[u8], members: &[&[u8]]) {
    put_keyed(out, KIND_SET_ADD, db, key);
    put_strings(out, members);
}

/// Appends a [`Record::SetRem`] payload.
pub fn encode_set_rem(out: &mut Vec<u8>, db: u8, key: &[u8], members: &[&[u8]]) {
    put_keyed(out, KIND_SET_REM, db, key);
    put_strings(out, members);
}

/// Appends a [`Record::ZSetAdd`] payload.
pub fn encode_zset_add(out: &mut Vec<u8>, db: u8, key: &[u8], members: &[(&[u8], f64)]) {
    put_keyed(out, KIND_ZSET_ADD, db, key);
    put_len(out, members.len());
    for (member, score) in members {
        put_bytes(out, member);
        put_u64(out, score.to_bits());
    }
}

/// Appends a [`Record::ZSetRem`] payload.
pub fn encode_zset_rem(out: &mut Vec<u8>, db: u8, key: &[u8], members: &[&[u8]]) {
    put_keyed(out, KIND_ZSET_REM, db, key);
    put_strings(out, members);
}

/// Appends a [`Record::FlushDb`] payload.
pub fn encode_flush_db(out: &mut Vec<u8>, db: u8) {
    debug_assert!((db as usize) < NUM_DBS);
    out.push(KIND_FLUSH_DB);
    out.push(db);
}

/// Appends a [`Record::FlushAll`] payload.
pub fn encode_flush_all(out: &mut Vec<u8>) {
    out.push(KIND_FLUSH_ALL);
}

/// Appends a [`Record::Pad`] payload of exactly `len` bytes (at least 1):
/// crash recovery fills a dead writer's reserved space with one.
pub fn encode_pad(out: &mut Vec<u8>, len: usize) {
    out.push(KIND_PAD);
    out.resize(out.len() + len.saturating_sub(1), 0);
}

/// Second byte of a `Pad` that closes an open group by dropping it: the
/// group's writer died inside an exclusive section whose every write the
/// recoverer undid (docs/design.md I13, I16), so none of it happened.
pub const PAD_DROPS_GROUP: u8 = 1;

/// Whether `payload` is a `Pad` that drops the open group instead of
/// closing it.
pub fn drops_group(payload: &[u8]) -> bool {
    payload.first().is_some_and(|k| k & !CONTINUES == KIND_PAD)
        && payload.get(1) == Some(&PAD_DROPS_GROUP)
}

/// Appends a [`Record::SwapDb`] payload.
pub fn encode_swap_db(out: &mut Vec<u8>, a: u8, b: u8) {
    debug_assert!((a as usize) < NUM_DBS && (b as usize) < NUM_DBS);
    out.push(KIND_SWAP_DB);
    out.push(a);
    out.push(b);
}

/// Bytes of a string shown before it is cut.
const SHOW_BYTES: usize = 64;
/// Items of a list shown before the rest are elided.
const SHOW_ITEMS: usize = 8;

/// Writes `bytes` quoted the way Redis's `sdscatrepr` does, cut after
/// [`SHOW_BYTES`] bytes.
fn write_quoted(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    f.write_str("\"")?;
    for &b in &bytes[..bytes.len().min(SHOW_BYTES)] {
        match b {
            b'\\' => f.write_str("\\\\")?,
            b'"' => f.write_str("\\\"")?,
            b'\n' => f.write_str("\\n")?,
            b'\r' => f.write_str("\\r")?,
            b'\t' => f.write_str("\\t")?,
            0x07 => f.write_str("\\a")?,
            0x08 => f.write_str("\\b")?,
            0x20..=0x7e => write!(f, "{}", b as char)?,
            _ => write!(f, "\\x{b:02x}")?,
        }
    }
    f.write_str("\"")?;
    if bytes.len() > SHOW_BYTES {
        write!(f, "…({} bytes)", bytes.len())?;
    }
    Ok(())
}

/// Writes ` N <noun>: ` and the first [`SHOW_ITEMS`] items.
fn write_list<T>(
    f: &mut fmt::Formatter<'_>,
    noun: &str,
    items: &[T],
    mut one: impl FnMut(&mut fmt::Formatter<'_>, &T) -> fmt::Result,
) -> fmt::Result {
    write!(f, " {} {noun}:", items.len())?;
    for item in items.iter().take(SHOW_ITEMS) {
        f.write_str(" ")?;
        one(f, item)?;
    }
    if items.len() > SHOW_ITEMS {
        f.write_str(" …")?;
    }
    Ok(())
}

fn write_strings(f: &mut fmt::Formatter<'_>, noun: &str, items: &[&[u8]]) -> fmt::Result {
    write_list(f, noun, items, |f, s| write_quoted(f, s))
}

impl fmt::Display for Record<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Record::SetEntry { .. } => "SET",
            Record::Delete { .. } => "DEL",
            Record::Expire { expire_ms: 0, .. } => "PERSIST",
            Record::Expire { .. } => "EXPIRE",
            Record::StringAppend { .. } => "APPEND",
            Record::ListPush { tail: false, .. } => "LPUSH",
            Record::ListPush { tail: true, .. } => "RPUSH",
            Record::ListPop { tail: false, .. } => "LPOP",
            Record::ListPop { tail: true, .. } => "RPOP",
            Record::HashSet { .. } => "HSET",
            Record::HashDel { .. } => "HDEL",
            Record::StreamPut { .. } => "XPUT",
            Record::StreamDel { .. } => "XDELITEMS",
            Record::SetAdd { .. } => "SADD",
            Record::SetRem { .. } => "SREM",
            Record::ZSetAdd { .. } => "ZADD",
            Record::ZSetRem { .. } => "ZREM",
            Record::FlushDb { .. } => "FLUSHDB",
            Record::FlushAll => "FLUSHALL",
            Record::Pad => "PAD",
            Record::SwapDb { .. } => "SWAPDB",
            Record::Functions { .. } => "FUNCTIONS",
        };
        f.write_str(name)?;
        if let Some((db, key)) = self.key() {
            write!(f, " db={db} key=")?;
            write_quoted(f, key)?;
        }
        match self {
            Record::SetEntry {
                vtype,
                mc_flags,
                expire_ms,
                value,
                ..
            } => {
                write!(
                    f,
                    " type={} flags={mc_flags} expire={expire_ms}",
                    vtype.name()
                )?;
                write_value(f, *vtype, value)
            }
            Record::Expire { expire_ms: 0, .. } | Record::Delete { .. } => Ok(()),
            Record::Expire { expire_ms, .. } => write!(f, " at={expire_ms}"),
            Record::StringAppend { tail, .. } => {
                f.write_str(" tail=")?;
                write_quoted(f, tail)
            }
            Record::ListPush { items, .. } => write_strings(f, "items", items),
            Record::ListPop { count, .. } => write!(f, " count={count}"),
            Record::HashSet { pairs, .. } => write_list(f, "fields", pairs, |f, (k, v)| {
                write_quoted(f, k)?;
                f.write_str("=")?;
                write_quoted(f, v)
            }),
            Record::HashDel { fields, .. } => write_strings(f, "fields", fields),
            Record::StreamPut { pairs, .. } => write_list(f, "items", pairs, |f, (k, v)| {
                write_quoted(f, k)?;
                f.write_str("=")?;
                write_quoted(f, v)
            }),
            Record::StreamDel { items, .. } => write_strings(f, "items", items),
            Record::SetAdd { members, .. }
            | Record::SetRem { members, .. }
            | Record::ZSetRem { members, .. } => write_strings(f, "members", members),
            Record::ZSetAdd { members, .. } => write_list(f, "members", members, |f, (m, s)| {
                write_quoted(f, m)?;
                write!(f, "={s}")
            }),
            Record::FlushDb { db } => write!(f, " db={db}"),
            Record::SwapDb { a, b } => write!(f, " {a} {b}"),
            Record::Functions { libraries } => write!(f, " bytes={}", libraries.len()),
            Record::FlushAll | Record::Pad => Ok(()),
        }
    }
}

/// A `SetEntry`'s value: a string quoted, a collection as its elements (its
/// compact codec bytes decoded), or the raw bytes if they do not decode.
fn write_value(f: &mut fmt::Formatter<'_>, vtype: ValueType, value: &[u8]) -> fmt::Result {
    use crate::collections::{Collection, Hash, List, Set, ZSet};
    let decoded = match vtype {
        ValueType::List => List::decode(value)
            .and_then(|l| l.range(0, l.len()))
            .map(|items| (items, Vec::new(), Vec::new())),
        ValueType::Set => Set::decode(value)
            .and_then(|s| s.members())
            .map(|items| (items, Vec::new(), Vec::new())),
        ValueType::Hash => Hash::decode(value)
            .and_then(|h| h.entries())
            .map(|pairs| (Vec::new(), pairs, Vec::new())),
        ValueType::ZSet => ZSet::decode(value)
            .and_then(|z| z.range(0, z.len()))
            .map(|scored| (Vec::new(), Vec::new(), scored)),
        ValueType::String | ValueType::Stream => {
            f.write_str(" value=")?;
            return write_quoted(f, value);
        }
    };
    let Ok((items, pairs, scored)) = decoded else {
        f.write_str(" value=")?;
        return write_quoted(f, value);
    };
    match vtype {
        ValueType::Hash => write_list(f, "fields", &pairs, |f, (k, v)| {
            write_quoted(f, k)?;
            f.write_str("=")?;
            write_quoted(f, v)
        }),
        ValueType::ZSet => write_list(f, "members", &scored, |f, (m, s)| {
            write_quoted(f, m)?;
            write!(f, "={s}")
        }),
        ValueType::Set => write_list(f, "members", &items, |f, m| write_quoted(f, m)),
        _ => write_list(f, "items", &items, |f, m| write_quoted(f, m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(record: &Record<'_>, continues: bool) {
        let mut out = Vec::new();
        record.encode(continues, &mut out);
        assert_eq!(out.len(), record.encoded_len(), "{record}");
        let (back, c) = Record::decode(&out).unwrap();
        assert_eq!(&back, record);
        assert_eq!(c, continues);
    }

    fn every_kind() -> Vec<Record<'static>> {
        vec![
            Record::SetEntry {
                db: 3,
                key: b"k",
                vtype: ValueType::Hash,
                mc_flags: 7,
                expire_ms: 1_700_000_000_000,
                value: b"codec bytes",
            },
            Record::Delete { db: 0, key: b"k" },
            Record::Expire {
                db: 15,
                key: b"k",
                expire_ms: 5,
            },
            Record::StringAppend {
                db: 1,
                key: b"k",
                tail: b"more",
            },
            Record::ListPush {
                db: 0,
                key: b"l",
                tail: true,
                items: vec![b"a", b"", b"ccc"],
            },
            Record::ListPop {
                db: 0,
                key: b"l",
                tail: false,
                count: 2,
            },
            Record::HashSet {
                db: 0,
                key: b"h",
                pairs: vec![(b"f", b"v"), (b"", b"")],
            },
            Record::HashDel {
                db: 0,
                key: b"h",
                fields: vec![b"f"],
            },
            Record::SetAdd {
                db: 0,
                key: b"s",
                members: vec![b"x", b"y"],
            },
            Record::SetRem {
                db: 0,
                key: b"s",
                members: vec![],
            },
            Record::ZSetAdd {
                db: 0,
                key: b"z",
                members: vec![(b"m", 1.5), (b"n", f64::NEG_INFINITY)],
            },
            Record::ZSetRem {
                db: 0,
                key: b"z",
                members: vec![b"m"],
            },
            Record::FlushDb { db: 3 },
            Record::FlushAll,
            Record::Pad,
            Record::SwapDb { a: 0, b: 1 },
            Record::StreamPut {
                db: 0,
                key: b"x",
                pairs: vec![(b"M", b"meta"), (b"", b"")],
            },
            Record::StreamDel {
                db: 0,
                key: b"x",
                items: vec![b"E"],
            },
            Record::Functions {
                libraries: b"encoded set",
            },
        ]
    }

    #[test]
    fn every_kind_round_trips_with_and_without_the_group_bit() {
        let all = every_kind();
        assert_eq!(all.len(), 19);
        for (i, record) in all.iter().enumerate() {
            assert_eq!(record.kind() as usize, i + 1);
            round_trip(record, false);
            round_trip(record, true);
        }
    }

    #[test]
    fn set_entry_field_order() {
        let mut out = Vec::new();
        encode_set_entry(
            &mut out,
            2,
            b"key",
            ValueType::String,
            9,
            10,
            &[b"va", b"", b"lue"],
        );
        let mut want = vec![1, 2, 1];
        want.extend_from_slice(&9u32.to_le_bytes());
        want.extend_from_slice(&10u64.to_le_bytes());
        want.extend_from_slice(&3u32.to_le_bytes());
        want.extend_from_slice(b"key");
        want.extend_from_slice(&5u32.to_le_bytes());
        want.extend_from_slice(b"value");
        assert_eq!(out, want);
    }

    #[test]
    fn pad_ignores_its_filler() {
        let mut out = Vec::new();
        encode_pad(&mut out, 40);
        assert_eq!(out.len(), 40);
        out[7] = 0xff;
        assert_eq!(Record::decode(&out), Ok((Record::Pad, false)));
        out[0] |= CONTINUES;
        assert_eq!(Record::decode(&out), Ok((Record::Pad, true)));
    }

    #[test]
    fn strict_decoding_names_what_and_where() {
        let err = |bytes: &[u8]| Record::decode(bytes).unwrap_err();
        assert_eq!(
            err(&[]).to_string(),
            "bad record: kind needs 1 bytes but 0 are left at byte 0"
        );
        assert_eq!(err(&[0]).what, "unknown kind 0");
        assert_eq!(err(&[20 | CONTINUES]).what, "unknown kind 20");
        let e = err(&[KIND_FLUSH_DB, 16]);
        assert_eq!((e.offset, e.what.as_str()), (1, "db 16 is not below 16"));
        let e = err(&[KIND_FLUSH_DB, 1, 0]);
        assert_eq!((e.offset, e.what.as_str()), (2, "1 trailing bytes"));

        let mut bad_type = Vec::new();
        encode_set_entry(&mut bad_type, 0, b"k", ValueType::String, 0, 0, &[]);
        bad_type[2] = 9;
        let e = err(&bad_type);
        assert_eq!((e.offset, e.what.as_str()), (2, "unknown value type 9"));

        let mut huge_count = Vec::new();
        encode_set_add(&mut huge_count, 0, b"k", &[]);
        let at = huge_count.len() - 4;
        huge_count[at..].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = err(&huge_count);
        assert_eq!(e.offset, at);
        assert!(
            e.what.starts_with("member count 4294967295 cannot fit"),
            "{e}"
        );

        let mut bad_bool = Vec::new();
        encode_list_pop(&mut bad_bool, 0, b"k", true, 1);
        bad_bool[7] = 2;
        assert_eq!(err(&bad_bool).what, "tail is 2, not 0 or 1");

        // A function record's length past its payload is refused, never
        // trusted.
        let mut long_set = Vec::new();
        encode_functions(&mut long_set, b"libs");
        long_set[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = err(&long_set);
        assert_eq!(
            (e.offset, e.what.as_str()),
            (5, "libraries needs 4294967295 bytes but 4 are left")
        );

        let mut short = Vec::new();
        encode_delete(&mut short, 0, b"key");
        short.pop();
        let e = err(&short);
        assert_eq!(
            (e.offset, e.what.as_str()),
            (6, "key needs 3 bytes but 2 are left")
        );
    }

    #[test]
    fn key_of_single_key_records() {
        for record in every_kind() {
            let keyed = !matches!(
                record,
                Record::FlushDb { .. }
                    | Record::FlushAll
                    | Record::Pad
                    | Record::SwapDb { .. }
                    | Record::Functions { .. }
            );
            assert_eq!(record.key().is_some(), keyed, "{record}");
        }
        assert_eq!(
            Record::Expire {
                db: 4,
                key: b"x",
                expire_ms: 0
            }
            .key(),
            Some((4, &b"x"[..]))
        );
    }

    #[test]
    fn display_reads_like_commands() {
        let shown: Vec<String> = every_kind().iter().map(|r| r.to_string()).collect();
        assert_eq!(
            shown,
            [
                "SET db=3 key=\"k\" type=hash flags=7 expire=1700000000000 value=\"codec bytes\"",
                "DEL db=0 key=\"k\"",
                "EXPIRE db=15 key=\"k\" at=5",
                "APPEND db=1 key=\"k\" tail=\"more\"",
                "RPUSH db=0 key=\"l\" 3 items: \"a\" \"\" \"ccc\"",
                "LPOP db=0 key=\"l\" count=2",
                "HSET db=0 key=\"h\" 2 fields: \"f\"=\"v\" \"\"=\"\"",
                "HDEL db=0 key=\"h\" 1 fields: \"f\"",
                "SADD db=0 key=\"s\" 2 members: \"x\" \"y\"",
                "SREM db=0 key=\"s\" 0 members:",
                "ZADD db=0 key=\"z\" 2 members: \"m\"=1.5 \"n\"=-inf",
                "ZREM db=0 key=\"z\" 1 members: \"m\"",
                "FLUSHDB db=3",
                "FLUSHALL",
                "PAD",
                "SWAPDB 0 1",
                "XPUT db=0 key=\"x\" 2 items: \"M\"=\"meta\" \"\"=\"\"",
                "XDELITEMS db=0 key=\"x\" 1 items: \"E\"",
                "FUNCTIONS bytes=11",
            ]
        );
        let persist = Record::Expire {
            db: 0,
            key: b"k",
            expire_ms: 0,
        };
        assert_eq!(persist.to_string(), "PERSIST db=0 key=\"k\"");
    }

    #[test]
    fn display_quotes_and_cuts() {
        let odd = Record::Delete {
            db: 0,
            key: b"a\"b\\c\n\r\t\x07\x08\x00\xff",
        };
        assert_eq!(
            odd.to_string(),
            r#"DEL db=0 key="a\"b\\c\n\r\t\a\b\x00\xff""#
        );
        let long = vec![b'x'; 100];
        let record = Record::Delete { db: 0, key: &long };
        assert_eq!(
            record.to_string(),
            format!("DEL db=0 key=\"{}\"…(100 bytes)", "x".repeat(64))
        );
        let items: Vec<&[u8]> = (0..10).map(|_| &b"i"[..]).collect();
        let push = Record::ListPush {
            db: 0,
            key: b"l",
            tail: false,
            items,
        };
        assert_eq!(
            push.to_string(),
            format!("LPUSH db=0 key=\"l\" 10 items:{} …", " \"i\"".repeat(8))
        );
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..12)
    }

    fn list() -> impl Strategy<Value = Vec<Vec<u8>>> {
        proptest::collection::vec(bytes(), 0..5)
    }

    /// Owned inputs for any record: (kind, db, db2, key, value, flag, number, list, list2).
    type Parts = (
        u8,
        u8,
        u8,
        Vec<u8>,
        Vec<u8>,
        bool,
        u64,
        Vec<Vec<u8>>,
        Vec<Vec<u8>>,
    );

    fn parts() -> impl Strategy<Value = Parts> {
        (
            1u8..=16,
            0u8..16,
            0u8..16,
            bytes(),
            bytes(),
            any::<bool>(),
            any::<u64>(),
            list(),
            list(),
        )
    }

    /// Builds the record of `p`, and the payload the free encoder writes.
    fn build(p: &Parts) -> (Record<'_>, Vec<u8>) {
        let (kind, db, db2, key, value, flag, n, list, list2) = p;
        let (db, key, flag, n) = (*db, &key[..], *flag, *n);
        let l: Vec<&[u8]> = list.iter().map(|v| &v[..]).collect();
        let pairs: Vec<(&[u8], &[u8])> = list
            .iter()
            .zip(list2)
            .map(|(a, b)| (&a[..], &b[..]))
            .collect();
        let scored: Vec<(&[u8], f64)> = list.iter().map(|v| (&v[..], f64::from_bits(n))).collect();
        let mut out = Vec::new();
        let record = match kind {
            1 => {
                let vtype = ValueType::from_u8(1 + (n % 6) as u8).unwrap();
                encode_set_entry(
                    &mut out,
                    db,
                    key,
                    vtype,
                    n as u32,
                    n,
                    &[&value[..1.min(value.len())], &value[1.min(value.len())..]],
                );
                Record::SetEntry {
                    db,
                    key,
                    vtype,
                    mc_flags: n as u32,
                    expire_ms: n,
                    value,
                }
            }
            2 => {
                encode_delete(&mut out, db, key);
                Record::Delete { db, key }
            }
            3 => {
                encode_expire(&mut out, db, key, n);
                Record::Expire {
                    db,
                    key,
                    expire_ms: n,
                }
            }
            4 => {
                encode_string_append(&mut out, db, key, value);
                Record::StringAppend {
                    db,
                    key,
                    tail: value,
                }
            }
            5 => {
                encode_list_push(&mut out, db, key, flag, &l);
                Record::ListPush {
                    db,
                    key,
                    tail: flag,
                    items: l,
                }
            }
            6 => {
                encode_list_pop(&mut out, db, key, flag, n);
                Record::ListPop {
                    db,
                    key,
                    tail: flag,
                    count: n,
                }
            }
            7 => {
                encode_hash_set(&mut out, db, key, &pairs);
                Record::HashSet { db, key, pairs }
            }
            8 => {
                encode_hash_del(&mut out, db, key, &l);
                Record::HashDel { db, key, fields: l }
            }
            9 => {
                encode_set_add(&mut out, db, key, &l);
                Record::SetAdd {
                    db,
                    key,
                    members: l,
                }
            }
            10 => {
                encode_set_rem(&mut out, db, key, &l);
                Record::SetRem {
                    db,
                    key,
                    members: l,
                }
            }
            11 => {
                encode_zset_add(&mut out, db, key, &scored);
                Record::ZSetAdd {
                    db,
                    key,
                    members: scored,
                }
            }
            12 => {
                encode_zset_rem(&mut out, db, key, &l);
                Record::ZSetRem {
                    db,
                    key,
                    members: l,
                }
            }
            13 => {
                encode_flush_db(&mut out, db);
                Record::FlushDb { db }
            }
            14 => {
                encode_flush_all(&mut out);
                Record::FlushAll
            }
            15 => {
                encode_pad(&mut out, 1);
                Record::Pad
            }
            _ => {
                encode_swap_db(&mut out, db, *db2);
                Record::SwapDb { a: db, b: *db2 }
            }
        };
        (record, out)
    }

    /// Equality that treats NaN scores as equal to themselves (bits compare).
    fn same(a: &Record<'_>, b: &Record<'_>) -> bool {
        match (a, b) {
            (
                Record::ZSetAdd {
                    members: x,
                    db: d1,
                    key: k1,
                },
                Record::ZSetAdd {
                    members: y,
                    db: d2,
                    key: k2,
                },
            ) => {
                d1 == d2
                    && k1 == k2
                    && x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|((m1, s1), (m2, s2))| m1 == m2 && s1.to_bits() == s2.to_bits())
            }
            _ => a == b,
        }
    }

    proptest! {
        #[test]
        fn decode_never_panics(payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Record::decode(&payload);
        }

        #[test]
        fn decode_never_panics_on_damaged_records(p in parts(), at: usize, byte: u8, cut: usize) {
            let (_, mut out) = build(&p);
            let at = at % out.len();
            out[at] = byte;
            let _ = Record::decode(&out);
            out.truncate(cut % (out.len() + 1));
            let _ = Record::decode(&out);
        }

        #[test]
        fn free_encoders_match_encode_and_round_trip(p in parts(), continues: bool) {
            let (record, free) = build(&p);
            let mut out = Vec::new();
            record.encode(false, &mut out);
            prop_assert_eq!(&out, &free);
            prop_assert_eq!(out.len(), record.encoded_len());
            set_continues(&mut out, continues);
            let (back, c) = Record::decode(&out).unwrap();
            prop_assert!(same(&back, &record), "{} != {}", back, record);
            prop_assert_eq!(c, continues);
            let _ = record.to_string();
        }
    }
}
