//! The entry block: metadata, key and value of one key, in one arena block.
//!
//! ```text
//! +0  u64 allocator header (size | flags)        alloc.rs
//! +8  u32 key length       +12 u32 value length  (one atomic word: append
//!                                                  publishes a longer value)
//! +16 u8 type, u8 db, u8 encoding, u8 0          +20 u32 memcached flags
//! +24 u64 absolute expiry, ms since epoch (0 = none)
//! +32 u64 version: the segment's write counter at the last write (WATCH)
//! +40 u32 LRU clock (seconds)                    +44 u32 LFU: counter u8 |
//!                                                  minutes u16 << 8 (lfu.rs)
//! +48 key bytes, then value bytes, then spare capacity
//! ```

use crate::error::{Error, Result};
use crate::segment::layout::*;
use crate::segment::shm::Region;

/// The encoding byte of a collection entry whose value is a paged header
/// (collections/paged.rs): the entry owns the trees it names.
pub(crate) const ENC_PAGED: u8 = 1;

/// The kind of value a key holds (Redis's TYPE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueType {
    /// A byte string.
    String = 1,
    /// A list.
    List = 2,
    /// A hash.
    Hash = 3,
    /// A set.
    Set = 4,
    /// A sorted set.
    ZSet = 5,
    /// A stream.
    Stream = 6,
}

impl ValueType {
    /// The name TYPE replies with.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::List => "list",
            ValueType::Hash => "hash",
            ValueType::Set => "set",
            ValueType::ZSet => "zset",
            ValueType::Stream => "stream",
        }
    }

    /// Parses a type name as SCAN TYPE takes it.
    pub fn from_name(name: &[u8]) -> Option<ValueType> {
        Some(match name.to_ascii_lowercase().as_slice() {
            b"string" => ValueType::String,
            b"list" => ValueType::List,
            b"hash" => ValueType::Hash,
            b"set" => ValueType::Set,
            b"zset" => ValueType::ZSet,
            b"stream" => ValueType::Stream,
            _ => return None,
        })
    }

    pub(crate) fn from_u8(v: u8) -> Option<ValueType> {
        Some(match v {
            1 => ValueType::String,
            2 => ValueType::List,
            3 => ValueType::Hash,
            4 => ValueType::Set,
            5 => ValueType::ZSet,
            6 => ValueType::Stream,
            _ => return None,
        })
    }
}

/// What is known about a key besides its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The value's type.
    pub vtype: ValueType,
    /// Value length in bytes.
    pub len: u64,
    /// Absolute expiry in ms since the epoch, if any.
    pub expire_at_ms: Option<u64>,
    /// The key's version: the segment's write counter when it was last
    /// written, unique across the segment (WATCH; doubles as the memcached
    /// CAS value).
    pub lsn: u64,
    /// Memcached client flags.
    pub mc_flags: u32,
    /// LRU clock (seconds since the epoch, truncated to 32 bits) of last access.
    pub lru: u32,
    /// LFU state: the logarithmic counter (low 8 bits) and the minute of its
    /// last decrement (next 16 bits), as Redis keeps them. See [`Meta::freq`].
    pub lfu: u32,
    /// The encoding byte the owning value type chose.
    pub encoding: u8,
}

impl Meta {
    /// OBJECT FREQ: the LFU counter decayed to `now_ms` by `decay_time`
    /// minutes a step (the store's `lfu-decay-time`), without touching the key.
    pub fn freq(&self, now_ms: u64, decay_time: u32) -> u8 {
        crate::keyspace::lfu::decayed(self.lfu, now_ms, decay_time)
    }

    /// OBJECT IDLETIME: seconds since the last access.
    pub fn idle_seconds(&self, now_ms: u64) -> u64 {
        ((now_ms / 1000) as u32).wrapping_sub(self.lru) as u64
    }
}

/// An entry's fields as read from shared memory (validated, maybe stale).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Raw {
    pub off: u64,
    pub keylen: u64,
    pub vallen: u64,
    pub vtype: u8,
    pub db: u8,
    pub encoding: u8,
    pub mc_flags: u32,
    pub expire: u64,
    pub lsn: u64,
    pub lru: u32,
    pub lfu: u32,
    pub block: u64,
}

impl Raw {
    pub fn read(r: &Region, off: u64) -> Result<Raw> {
        let block = r.load64(off)? & !7;
        let lens = r.load64(off + E_KEYLEN)?;
        let kind = r.load64(off + E_KIND)?;
        let lru = r.load64(off + E_LRU)?;
        let raw = Raw {
            off,
            keylen: lens & 0xFFFF_FFFF,
            vallen: lens >> 32,
            vtype: kind as u8,
            db: (kind >> 8) as u8,
            encoding: (kind >> 16) as u8,
            mc_flags: (kind >> 32) as u32,
            expire: r.load64(off + E_EXPIRE)?,
            lsn: r.load64(off + E_LSN)?,
            lru: lru as u32,
            lfu: (lru >> 32) as u32,
            block,
        };
        // Bytes of a block freed and reused under a racing reader can be any
        // value: bound every length by the block and the block by the segment.
        if E_KEY + raw.keylen + raw.vallen > block || off.saturating_add(block) > r.len() {
            return Err(Error::Corrupted(off));
        }
        Ok(raw)
    }

    /// The whole LRU word as stored.
    pub fn lru_word(&self) -> u64 {
        lru_word(self.lru, self.lfu)
    }

    pub fn value_off(&self) -> u64 {
        self.off + E_KEY + self.keylen
    }

    /// Bytes the value may grow to in place.
    pub fn capacity(&self) -> u64 {
        self.block - E_KEY - self.keylen
    }

    /// Redis's rule: a key is expired once now is past its time; at exactly
    /// its time it still exists (with a PTTL of 0).
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expire != 0 && self.expire < now_ms
    }

    pub fn meta(&self) -> Result<Meta> {
        Ok(Meta {
            vtype: ValueType::from_u8(self.vtype).ok_or(Error::Corrupted(self.off + E_KIND))?,
            len: self.vallen,
            expire_at_ms: (self.expire != 0).then_some(self.expire),
            lsn: self.lsn,
            mc_flags: self.mc_flags,
            lru: self.lru,
            lfu: self.lfu,
            encoding: self.encoding,
        })
    }
}

/// Fields of an entry about to be written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewEntry {
    pub db: u8,
    pub vtype: ValueType,
    pub encoding: u8,
    pub mc_flags: u32,
    pub expire: u64,
    pub lru: u32,
    pub lfu: u32,
}

/// The LRU word of an entry: LRU seconds low, LFU state high (lfu.rs).
pub(crate) fn lru_word(lru: u32, lfu: u32) -> u64 {
    lru as u64 | (lfu as u64) << 32
}

/// Writes header, key and value parts into a freshly allocated block that no
/// other process can reach yet.
pub(crate) fn write(
    r: &Region,
    blk: u64,
    e: &NewEntry,
    key: &[u8],
    parts: &[&[u8]],
) -> Result<u64> {
    let vallen: u64 = parts.iter().map(|p| p.len() as u64).sum();
    r.store64(blk + E_KEYLEN, key.len() as u64 | vallen << 32)?;
    write_kind(r, blk, e)?;
    r.store64(blk + E_EXPIRE, e.expire)?;
    // The version is stamped when the block is published (`publish_in_txn`).
    r.store64(blk + E_LSN, 0)?;
    r.store64(blk + E_LRU, lru_word(e.lru, e.lfu))?;
    r.write_bytes(blk + E_KEY, key)?;
    let mut pos = blk + E_KEY + key.len() as u64;
    for p in parts {
        r.write_bytes(pos, p)?;
        pos += p.len() as u64;
    }
    Ok(vallen)
}

/// Writes the type / db / encoding / flags word of a block not yet published.
pub(crate) fn write_kind(r: &Region, blk: u64, e: &NewEntry) -> Result<()> {
    r.store64(
        blk + E_KIND,
        e.vtype as u64 | (e.db as u64) << 8 | (e.encoding as u64) << 16 | (e.mc_flags as u64) << 32,
    )
}
