//! memcached's command semantics over the store, shared by the text, meta,
//! binary and UDP front ends (which parse and format; this module decides).
//!
//! An item is a Redis string in database 0: a SET in Redis is a hit for
//! `get`, and an item set by memcached is a string for GET. The item's
//! 32-bit client flags live in the entry; its CAS value is the entry's
//! version, which every write stamps anew and no other write ever repeats.
//! Keys of other Redis types are misses for memcached reads (memcached has
//! no types); a write replaces them, as Redis's SET does.

use std::borrow::Cow;

use store::{Expiry, Meta, SetCondition, SetOptions, SetResult, Stat, Update, ValueType};

use crate::engine::Engine;
use crate::notify::class;

/// The version `version` and `stats` report: the memcached release whose
/// behaviour shoal follows.
pub const VERSION: &str = "1.6.21";

/// Longest key memcached accepts.
pub const KEY_MAX: usize = 250;

/// memcached's `REALTIME_MAXDELTA`: an exptime up to 30 days is relative
/// seconds, a larger one a unix time.
const RELATIVE_MAX_S: i64 = 60 * 60 * 24 * 30;

/// The database memcached commands act on.
const DB: u8 = 0;

/// Shared setting word holding a delayed `flush_all`'s deadline.
const FLUSH_AT_WORD: u64 = crate::config::word::MC_FLUSH_AT;

/// The counters `stats reset` starts again from zero: the store's figure
/// minus a baseline kept in shared setting words from [`RESET_BASE_WORD`] on,
/// in this order (memcached's `stats reset` zeroes the same ones).
const RESETTABLE: [&str; 19] = [
    "cmd_get",
    "get_hits",
    "cmd_set",
    "cmd_flush",
    "cmd_touch",
    "touch_hits",
    "delete_hits",
    "delete_misses",
    "incr_hits",
    "incr_misses",
    "decr_hits",
    "decr_misses",
    "cas_hits",
    "cas_misses",
    "cas_badval",
    "total_items",
    "evicted_keys",
    "expired_keys",
    "total_connections",
];

/// First of the shared setting words holding `stats reset` baselines.
const RESET_BASE_WORD: u64 = crate::config::word::MC_RESET_BASE;
const _: () = assert!(RESET_BASE_WORD + RESETTABLE.len() as u64 <= crate::config::word::SLOWLOG_ID);

/// What a read returns besides the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct McItem {
    /// The 32-bit client flags.
    pub flags: u32,
    /// The CAS value: unique per write.
    pub cas: u64,
    /// Absolute expiry in ms since the epoch, if any.
    pub expire_at_ms: Option<u64>,
    /// Unix seconds of the last access.
    pub last_access_s: u32,
    /// Value length in bytes.
    pub len: u64,
}

impl McItem {
    fn from_meta(m: &Meta) -> McItem {
        McItem {
            flags: m.mc_flags,
            cas: m.lsn,
            expire_at_ms: m.expire_at_ms,
            last_access_s: m.lru,
            len: m.len,
        }
    }
}

/// The storage commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McStore {
    /// set: store whatever was there.
    Set,
    /// add: only if nothing is there.
    Add,
    /// replace: only if something is there.
    Replace,
    /// append: add after the item's value.
    Append,
    /// prepend: add before the item's value.
    Prepend,
}

/// What a storage command did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McStored {
    /// STORED, with the item's new CAS value.
    Stored {
        /// The new CAS value.
        cas: u64,
    },
    /// NOT_STORED: add found an item, replace/append/prepend found none.
    NotStored,
    /// EXISTS: the CAS value did not match.
    Exists,
    /// NOT_FOUND: a CAS was given and there is no item.
    NotFound,
}

/// What a delete did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McDeleted {
    /// DELETED.
    Deleted,
    /// NOT_FOUND.
    NotFound,
    /// EXISTS: the CAS value did not match.
    Exists,
}

/// What incr/decr did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McArith {
    /// The new value and the item's new CAS value and expiry.
    Value {
        /// The number now stored.
        value: u64,
        /// The new CAS value.
        cas: u64,
        /// The item's expiry after the change, ms since the epoch.
        expire_at_ms: Option<u64>,
    },
    /// NOT_FOUND.
    NotFound,
    /// EXISTS: the CAS value did not match.
    Exists,
}

/// The failures a memcached client sees as a reply line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McError {
    /// The value is longer than `item-size-max`.
    TooLarge,
    /// The store is full and the eviction policy frees nothing.
    OutOfMemory,
    /// incr/decr of a value that is not a decimal u64.
    NonNumeric,
    /// Anything else the store reported (corruption, a bad segment).
    Failed(String),
}

impl McError {
    /// memcached's reply line for it, without the line end.
    pub fn line(&self) -> String {
        match self {
            McError::TooLarge => "SERVER_ERROR object too large for cache".into(),
            McError::OutOfMemory => "SERVER_ERROR out of memory storing object".into(),
            McError::NonNumeric => {
                "CLIENT_ERROR cannot increment or decrement non-numeric value".into()
            }
            McError::Failed(why) => format!("SERVER_ERROR {why}"),
        }
    }
}

impl From<store::Error> for McError {
    fn from(e: store::Error) -> McError {
        match e {
            store::Error::OutOfMemory => McError::OutOfMemory,
            e => McError::Failed(e.to_string()),
        }
    }
}

/// memcached's exptime as a store expiry: 0 never expires; a negative time
/// has already passed; up to 30 days is relative seconds; beyond, a unix time.
pub fn expiry_of(exptime: i64, now_ms: u64) -> Expiry {
    match exptime {
        0 => Expiry::Persist,
        e if e < 0 => Expiry::At(1),
        e if e <= RELATIVE_MAX_S => Expiry::At(now_ms.saturating_add(e as u64 * 1000)),
        e => Expiry::At((e as u64).saturating_mul(1000)),
    }
}

/// Parses an item as incr/decr reads it: decimal digits making a u64.
/// Trailing spaces are allowed (memcached pads a value that shrank).
fn parse_counter(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii_end();
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

impl Engine {
    /// `item-size-max` in force.
    pub fn mc_item_size_max(&self) -> u64 {
        self.config.item_size_max
    }

    /// get/gets/gat/gats and mg: the value into `value` (cleared first) and
    /// the item's facts; None on a miss. `touch`: gat's exptime.
    pub fn mc_get(
        &mut self,
        key: &[u8],
        touch: Option<i64>,
        value: &mut Vec<u8>,
    ) -> Result<Option<McItem>, McError> {
        self.h.count(Stat::McCmdGet, 1);
        if let Some(exptime) = touch {
            self.mc_touch(key, exptime)?;
        }
        let item = match self.h.get_into(DB, key, value)? {
            Some(m) if m.vtype == ValueType::String => Some(McItem::from_meta(&m)),
            found => {
                if found.is_none() {
                    self.notify_in(DB, class::KEY_MISS, "keymiss", key);
                }
                value.clear();
                None
            }
        };
        if item.is_some() {
            self.h.count(Stat::McGetHits, 1);
        }
        self.drain_key_log();
        Ok(item)
    }

    /// The item's facts without its value (mg without `v`); `touch` as in
    /// [`Engine::mc_get`].
    pub fn mc_peek(&mut self, key: &[u8], touch: Option<i64>) -> Result<Option<McItem>, McError> {
        self.h.count(Stat::McCmdGet, 1);
        if let Some(exptime) = touch {
            self.mc_touch(key, exptime)?;
        }
        let item = match self.h.meta(DB, key)? {
            Some(m) if m.vtype == ValueType::String => Some(McItem::from_meta(&m)),
            Some(_) => None,
            None => {
                self.notify_in(DB, class::KEY_MISS, "keymiss", key);
                None
            }
        };
        if item.is_some() {
            self.h.count(Stat::McGetHits, 1);
        }
        self.drain_key_log();
        Ok(item)
    }

    /// set/add/replace/append/prepend, and cas when `cas` is given (a
    /// missing item is NotFound, another version Exists). append/prepend
    /// keep the item's flags and expiry, as memcached does.
    pub fn mc_store(
        &mut self,
        mode: McStore,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: i64,
        cas: Option<u64>,
    ) -> Result<McStored, McError> {
        let max = self.config.item_size_max;
        if value.len() as u64 > max {
            return Err(self.mc_refused(mode, key));
        }
        self.h.count(Stat::McCmdSet, 1);
        let expiry = expiry_of(exptime, self.h.now_ms());
        let stored = match (mode, cas) {
            (McStore::Set | McStore::Add | McStore::Replace, None) => {
                let condition = match mode {
                    McStore::Add => SetCondition::IfAbsent,
                    McStore::Replace => SetCondition::IfPresent,
                    _ => SetCondition::Always,
                };
                let opts = SetOptions {
                    condition,
                    expiry,
                    get: false,
                    mc_flags: flags,
                };
                let r = self.h.set(DB, key, value, &opts)?;
                self.notify_set(DB, key, &opts, &r);
                if r.written {
                    McStored::Stored { cas: r.version }
                } else {
                    McStored::NotStored
                }
            }
            (McStore::Set | McStore::Add | McStore::Replace, Some(want)) => {
                let (outcome, version) = self.h.update(DB, key, false, |old| {
                    Ok(match old {
                        None => (Update::Keep, McStored::NotFound),
                        Some((_, m)) if m.lsn != want => (Update::Keep, McStored::Exists),
                        Some(_) if mode == McStore::Add => (Update::Keep, McStored::NotStored),
                        Some(_) => (
                            Update::Write {
                                value: Cow::Borrowed(value),
                                expiry,
                                mc_flags: Some(flags),
                            },
                            McStored::Stored { cas: 0 },
                        ),
                    })
                })?;
                if let McStored::Stored { .. } = outcome {
                    // A cas replaces a live item, as SET XX does.
                    let opts = SetOptions {
                        condition: SetCondition::IfPresent,
                        expiry,
                        get: false,
                        mc_flags: flags,
                    };
                    let done = SetResult {
                        written: true,
                        existed: true,
                        ..SetResult::default()
                    };
                    self.notify_set(DB, key, &opts, &done);
                }
                self.h.count(
                    match outcome {
                        McStored::Stored { .. } => Stat::McCasHits,
                        McStored::NotFound => Stat::McCasMisses,
                        _ => Stat::McCasBadval,
                    },
                    1,
                );
                with_cas(outcome, version)
            }
            (McStore::Append | McStore::Prepend, cas) => {
                let (outcome, version) = self.h.update(DB, key, true, |old| {
                    let Some((old, m)) = old else {
                        let missing = match cas {
                            Some(_) => McStored::NotFound,
                            None => McStored::NotStored,
                        };
                        return Ok((Update::Keep, missing));
                    };
                    if cas.is_some_and(|want| want != m.lsn) {
                        return Ok((Update::Keep, McStored::Exists));
                    }
                    if m.vtype != ValueType::String {
                        return Ok((Update::Keep, McStored::NotStored));
                    }
                    if (old.len() + value.len()) as u64 > max {
                        // memcached cannot allocate the joined item.
                        return Ok((Update::Keep, McStored::NotStored));
                    }
                    let joined = match mode {
                        McStore::Append => [old, value].concat(),
                        _ => [value, old].concat(),
                    };
                    Ok((
                        Update::Write {
                            value: Cow::Owned(joined),
                            expiry: Expiry::Keep,
                            mc_flags: None,
                        },
                        McStored::Stored { cas: 0 },
                    ))
                })?;
                if let McStored::Stored { .. } = outcome {
                    // Redis has no prepend: both concatenations are its
                    // APPEND's event.
                    self.notify_in(DB, class::STRING, "append", key);
                }
                with_cas(outcome, version)
            }
        };
        if let McStored::Stored { .. } = stored {
            self.h.count(Stat::McTotalItems, 1);
        }
        self.drain_key_log();
        Ok(stored)
    }

    /// A storage command whose value is over `item-size-max` (the front
    /// ends call this when they refuse a data block without reading it):
    /// counted as a set, and a set drops the old item rather than leave it
    /// stale, as memcached does. Returns the error to reply with.
    pub fn mc_refused(&mut self, mode: McStore, key: &[u8]) -> McError {
        self.h.count(Stat::McCmdSet, 1);
        if mode == McStore::Set {
            match self.h.delete(DB, key) {
                Ok(true) => self.notify_in(DB, class::GENERIC, "del", key),
                Ok(false) => {}
                Err(e) => return e.into(),
            }
        }
        self.drain_key_log();
        McError::TooLarge
    }

    /// delete and md; with `cas`, only that version.
    pub fn mc_delete(&mut self, key: &[u8], cas: Option<u64>) -> Result<McDeleted, McError> {
        let outcome = match cas {
            None => {
                if self.h.delete(DB, key)? {
                    McDeleted::Deleted
                } else {
                    McDeleted::NotFound
                }
            }
            Some(want) => {
                self.h
                    .update(DB, key, false, |old| {
                        Ok(match old {
                            None => (Update::Keep, McDeleted::NotFound),
                            Some((_, m)) if m.lsn != want => (Update::Keep, McDeleted::Exists),
                            Some(_) => (Update::Delete, McDeleted::Deleted),
                        })
                    })?
                    .0
            }
        };
        match outcome {
            McDeleted::Deleted => {
                self.h.count(Stat::McDeleteHits, 1);
                self.notify_in(DB, class::GENERIC, "del", key);
            }
            McDeleted::NotFound => self.h.count(Stat::McDeleteMisses, 1),
            McDeleted::Exists => {}
        }
        self.drain_key_log();
        Ok(outcome)
    }

    /// incr/decr and ma: incr wraps at 2^64, decr stops at 0. `vivify`
    /// creates a missing item with (initial value, exptime); `exptime`
    /// also sets the item's time to live.
    pub fn mc_arith(
        &mut self,
        key: &[u8],
        incr: bool,
        delta: u64,
        cas: Option<u64>,
        vivify: Option<(u64, i64)>,
        exptime: Option<i64>,
    ) -> Result<McArith, McError> {
        let now = self.h.now_ms();
        // The expiry the write set, for its events.
        let mut set_expiry = Expiry::Keep;
        let (outcome, version) = self.h.update(DB, key, true, |old| {
            let Some((old, m)) = old else {
                if let Some((_, exptime)) = vivify {
                    set_expiry = expiry_of(exptime, now);
                }
                return Ok(match vivify {
                    Some((initial, exptime)) => (
                        Update::Write {
                            value: Cow::Owned(initial.to_string().into_bytes()),
                            expiry: expiry_of(exptime, now),
                            mc_flags: Some(0),
                        },
                        Ok(McArith::Value {
                            value: initial,
                            cas: 0,
                            expire_at_ms: expire_at(expiry_of(exptime, now), None),
                        }),
                    ),
                    None => (Update::Keep, Ok(McArith::NotFound)),
                });
            };
            if cas.is_some_and(|want| want != m.lsn) {
                return Ok((Update::Keep, Ok(McArith::Exists)));
            }
            let current = match parse_counter(old) {
                Some(n) if m.vtype == ValueType::String => n,
                _ => return Ok((Update::Keep, Err(McError::NonNumeric))),
            };
            let value = if incr {
                current.wrapping_add(delta)
            } else {
                current.saturating_sub(delta)
            };
            let expiry = exptime.map_or(Expiry::Keep, |e| expiry_of(e, now));
            set_expiry = expiry;
            Ok((
                Update::Write {
                    value: Cow::Owned(value.to_string().into_bytes()),
                    expiry,
                    mc_flags: None,
                },
                Ok(McArith::Value {
                    value,
                    cas: 0,
                    expire_at_ms: expire_at(expiry, m.expire_at_ms),
                }),
            ))
        })?;
        if let Ok(McArith::Value { .. }) = outcome {
            // decr too: Redis names DECR and DECRBY "incrby" as well.
            self.notify_in(DB, class::STRING, "incrby", key);
            self.notify_expiry(key, set_expiry, now);
        }
        self.drain_key_log();
        let outcome = outcome?;
        let hit = matches!(outcome, McArith::Value { .. } | McArith::Exists);
        self.h.count(
            match (incr, hit) {
                (true, true) => Stat::McIncrHits,
                (true, false) => Stat::McIncrMisses,
                (false, true) => Stat::McDecrHits,
                (false, false) => Stat::McDecrMisses,
            },
            1,
        );
        Ok(match outcome {
            McArith::Value {
                value,
                expire_at_ms,
                ..
            } => McArith::Value {
                value,
                cas: version,
                expire_at_ms,
            },
            other => other,
        })
    }

    /// touch: a new exptime for the item; its facts, None on a miss. The
    /// CAS value stays, as memcached's does (a touch is not a new value).
    pub fn mc_touch(&mut self, key: &[u8], exptime: i64) -> Result<Option<McItem>, McError> {
        self.h.count(Stat::McCmdTouch, 1);
        let now = self.h.now_ms();
        let expiry = expiry_of(exptime, now);
        let mut had_expiry = false;
        let (item, _) = self.h.update(DB, key, false, |old| {
            Ok(match old {
                Some((_, m)) if m.vtype == ValueType::String => {
                    had_expiry = m.expire_at_ms.is_some();
                    let mut item = McItem::from_meta(&m);
                    item.expire_at_ms = match expiry {
                        Expiry::At(at) => Some(at),
                        _ => None,
                    };
                    (Update::Expire(expiry), Some(item))
                }
                _ => (Update::Keep, None),
            })
        })?;
        if item.is_some() {
            self.h.count(Stat::McTouchHits, 1);
            match expiry {
                // EXPIRE's events: a time past deletes the key.
                Expiry::At(at) if at <= now => self.notify_in(DB, class::GENERIC, "del", key),
                Expiry::At(_) => self.notify_in(DB, class::GENERIC, "expire", key),
                _ if had_expiry => self.notify_in(DB, class::GENERIC, "persist", key),
                _ => {}
            }
        }
        self.drain_key_log();
        Ok(item)
    }

    /// The events of an expiry an incr or decr set on `key` (ma's `T` and
    /// `N` flags): as EXPIRE's, or as a key expiring at once when the time
    /// has passed (the store removed it).
    fn notify_expiry(&mut self, key: &[u8], expiry: Expiry, now: u64) {
        if let Expiry::At(at) = expiry {
            self.notify_in(DB, class::GENERIC, "expire", key);
            if at <= now {
                self.notify_in(DB, class::EXPIRED, "expired", key);
            }
        }
    }

    /// flush_all: every item goes now, or once `delay_s` (an exptime) has
    /// passed. A later flush_all replaces a pending one.
    pub fn mc_flush_all(&mut self, delay_s: i64) -> Result<(), McError> {
        self.h.count(Stat::McCmdFlush, 1);
        let now = self.h.now_ms();
        match expiry_of(delay_s.max(0), now) {
            Expiry::At(at) if at > now => {
                self.store.set_config_word(FLUSH_AT_WORD, at)?;
            }
            _ => {
                self.store.set_config_word(FLUSH_AT_WORD, 0)?;
                self.h.flushdb(DB)?;
                self.keys_reset(Some(DB));
                self.tracking_flushed();
            }
        }
        Ok(())
    }

    /// Runs a delayed flush_all that has come due (on whichever worker sees
    /// it first). Called before each batch and on every tick.
    pub(crate) fn mc_flush_if_due(&mut self) {
        let at = self.store.config_word(FLUSH_AT_WORD).unwrap_or(0);
        if at != 0
            && at <= self.h.now_ms()
            && self
                .store
                .swap_config_word(FLUSH_AT_WORD, at, 0)
                .unwrap_or(false)
        {
            let _ = self.h.flushdb(DB);
            self.keys_reset(Some(DB));
            self.tracking_flushed();
        }
    }

    /// stats [group]: "" (general), "items", "slabs" or "settings"; None for
    /// a group shoal does not have. Every figure is the server's, summed
    /// over its workers.
    pub fn mc_stats(&mut self, group: &str) -> Option<Vec<(String, String)>> {
        let info = self.store.info().ok()?;
        let workers = self.store.workers().unwrap_or_default();
        let total_connections: u64 = workers.iter().map(|w| w.total_connections).sum();
        let stat = |name: &str| {
            let now = match name {
                "total_connections" => total_connections,
                _ => info
                    .stats
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(0, |(_, v)| *v),
            };
            now.saturating_sub(self.mc_reset_base(name))
        };
        let keys = info.keyspace.get(DB as usize).map_or(0, |k| k.0);
        let limit = match info.maxmemory {
            0 => info.arena.total_bytes,
            m => m,
        };
        let now_s = self.h.now_ms() / 1000;
        let mut out: Vec<(String, String)> = Vec::new();
        let mut put = |name: &str, value: String| out.push((name.to_string(), value));
        match group {
            "" => {
                put("pid", std::process::id().to_string());
                put("uptime", self.started.elapsed().as_secs().to_string());
                put("time", now_s.to_string());
                put("version", VERSION.to_string());
                put("pointer_size", (usize::BITS).to_string());
                put("max_connections", self.config.maxclients.to_string());
                put(
                    "curr_connections",
                    workers
                        .iter()
                        .map(|w| w.connections)
                        .sum::<u64>()
                        .to_string(),
                );
                put("total_connections", stat("total_connections").to_string());
                let (gets, hits) = (stat("cmd_get"), stat("get_hits"));
                let (touches, touch_hits) = (stat("cmd_touch"), stat("touch_hits"));
                put("cmd_get", gets.to_string());
                put("cmd_set", stat("cmd_set").to_string());
                put("cmd_flush", stat("cmd_flush").to_string());
                put("cmd_touch", touches.to_string());
                put("get_hits", hits.to_string());
                put("get_misses", gets.saturating_sub(hits).to_string());
                for name in [
                    "delete_misses",
                    "delete_hits",
                    "incr_misses",
                    "incr_hits",
                    "decr_misses",
                    "decr_hits",
                    "cas_misses",
                    "cas_hits",
                    "cas_badval",
                ] {
                    put(name, stat(name).to_string());
                }
                put("touch_hits", touch_hits.to_string());
                put(
                    "touch_misses",
                    touches.saturating_sub(touch_hits).to_string(),
                );
                put("threads", workers.len().to_string());
                put("bytes", info.arena.used_bytes.to_string());
                put("curr_items", keys.to_string());
                put("total_items", stat("total_items").to_string());
                put("expired_unfetched", "0".into());
                put("evictions", stat("evicted_keys").to_string());
                put("reclaimed", stat("expired_keys").to_string());
                put("limit_maxbytes", limit.to_string());
            }
            "items" => {
                // One class: shoal has no slab classes.
                put("items:1:number", keys.to_string());
                put("items:1:evicted", stat("evicted_keys").to_string());
                put("items:1:reclaimed", stat("expired_keys").to_string());
                put("items:1:outofmemory", "0".into());
            }
            "slabs" => {
                put("1:chunk_size", "8".into());
                put("1:used_chunks", info.arena.used_blocks.to_string());
                put("1:free_chunks", info.arena.free_blocks.to_string());
                put("active_slabs", "1".into());
                put("total_malloced", info.arena.used_bytes.to_string());
            }
            "settings" => {
                put("maxbytes", limit.to_string());
                put("maxconns", self.config.maxclients.to_string());
                put("tcpport", self.config.memcached_port.to_string());
                put("udpport", self.config.memcached_udp_port.to_string());
                put("inter", self.config.bind.clone());
                put("verbosity", "0".into());
                put("evictions", {
                    let on = info.policy != store::EvictionPolicy::NoEviction;
                    if on { "on" } else { "off" }.into()
                });
                put("cas_enabled", "yes".into());
                put("num_threads", workers.len().to_string());
                put("item_size_max", self.config.item_size_max.to_string());
                put("binding_protocol", "auto-negotiate".into());
            }
            _ => return None,
        }
        Some(out)
    }
}

/// The expiry an item has after a write with `expiry` (`current` is the
/// item's before it).
fn expire_at(expiry: Expiry, current: Option<u64>) -> Option<u64> {
    match expiry {
        Expiry::Keep => current,
        Expiry::Persist => None,
        Expiry::At(at) => Some(at),
    }
}

impl Engine {
    /// `stats reset`: the counters memcached resets read 0 from now on, on
    /// every worker (their baselines move to the current figures).
    pub fn mc_stats_reset(&mut self) -> Result<(), McError> {
        let info = self.store.info()?;
        let total_connections: u64 = self
            .store
            .workers()?
            .iter()
            .map(|w| w.total_connections)
            .sum();
        for (i, name) in RESETTABLE.iter().enumerate() {
            let now = match *name {
                "total_connections" => total_connections,
                _ => info
                    .stats
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or(0, |(_, v)| *v),
            };
            self.store
                .set_config_word(RESET_BASE_WORD + i as u64, now)?;
        }
        Ok(())
    }

    /// The baseline `stats reset` left for counter `name` (0 if it has none).
    fn mc_reset_base(&self, name: &str) -> u64 {
        RESETTABLE
            .iter()
            .position(|n| *n == name)
            .and_then(|i| self.store.config_word(RESET_BASE_WORD + i as u64).ok())
            .unwrap_or(0)
    }
}

/// A Stored outcome with the version the write stamped.
fn with_cas(outcome: McStored, version: u64) -> McStored {
    match outcome {
        McStored::Stored { .. } => McStored::Stored { cas: version },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exptime_follows_memcached() {
        let now = 1_700_000_000_000;
        assert_eq!(expiry_of(0, now), Expiry::Persist);
        assert_eq!(expiry_of(-1, now), Expiry::At(1));
        assert_eq!(expiry_of(10, now), Expiry::At(now + 10_000));
        assert_eq!(
            expiry_of(RELATIVE_MAX_S, now),
            Expiry::At(now + RELATIVE_MAX_S as u64 * 1000)
        );
        assert_eq!(
            expiry_of(RELATIVE_MAX_S + 1, now),
            Expiry::At((RELATIVE_MAX_S as u64 + 1) * 1000)
        );
    }

    #[test]
    fn counters_parse_as_memcached_reads_them() {
        assert_eq!(parse_counter(b"0"), Some(0));
        assert_eq!(parse_counter(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_counter(b"18446744073709551616"), None);
        assert_eq!(parse_counter(b"12  "), Some(12));
        assert_eq!(parse_counter(b""), None);
        assert_eq!(parse_counter(b"-1"), None);
        assert_eq!(parse_counter(b"1a"), None);
        assert_eq!(parse_counter(b" 1"), None);
    }
}
