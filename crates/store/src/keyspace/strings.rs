//! String operations: GET, SET and its options, INCRBY/DECRBY, APPEND,
//! GETRANGE, SETRANGE.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::keyspace::entry::{Meta, ValueType};
use crate::keyspace::handle::{check_len, Handle};
use crate::segment::layout::*;

/// SET's NX / XX.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SetCondition {
    /// Write whether or not the key exists.
    #[default]
    Always,
    /// NX: only if the key does not exist.
    IfAbsent,
    /// XX: only if the key exists.
    IfPresent,
}

/// What happens to the key's time to live on a write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Expiry {
    /// No expiry (a plain SET clears any TTL).
    #[default]
    Persist,
    /// KEEPTTL: keep whatever expiry the key had.
    Keep,
    /// Expire at this absolute time, ms since the epoch.
    At(u64),
}

/// Options of [`Handle::set`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SetOptions {
    /// NX / XX.
    pub condition: SetCondition,
    /// EX / PX / EXAT / PXAT / KEEPTTL.
    pub expiry: Expiry,
    /// GET: return the old value (an error if it is not a string).
    pub get: bool,
    /// Memcached client flags stored with the value.
    pub mc_flags: u32,
}

/// What [`Handle::set`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetResult {
    /// Whether the value was written (false when NX/XX said no).
    pub written: bool,
    /// The old value, when `get` was asked for and the key existed.
    pub old: Option<Vec<u8>>,
    /// Whether the key existed (and was live) before the write.
    pub existed: bool,
    /// The written entry's version (the memcached CAS value); 0 if nothing
    /// was written.
    pub version: u64,
}

/// What [`Handle::modify`]'s closure decides for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Modify {
    /// Leave the key as it is.
    Keep,
    /// Remove the key.
    Delete,
    /// Replace the value (and type), keeping the key's expiry and flags.
    Write(ValueType, Vec<u8>),
}

/// What [`Handle::update`]'s closure decides for a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update<'v> {
    /// Leave the key as it is.
    Keep,
    /// Remove the key.
    Delete,
    /// Make the key this string.
    Write {
        /// The new value.
        value: Cow<'v, [u8]>,
        /// Its expiry (`Keep`: the entry's; a time not in the future
        /// removes the key instead).
        expiry: Expiry,
        /// Its memcached flags (None: the entry's).
        mc_flags: Option<u32>,
    },
    /// Change only the expiry, in place, keeping the version: memcached's
    /// touch, after which the item's CAS value still holds.
    Expire(Expiry),
}

/// Parses a Redis integer exactly as Redis's `string2ll` does: optional `-`,
/// no `+`, no spaces, no leading zeros, within i64.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !(b'1'..=b'9').contains(&digits[0]) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// Writes `v` in decimal into the end of `buf` (20 bytes hold i64::MIN),
/// without allocating: INCR formats one per request.
fn format_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Resolves Redis's (start, end) range arguments against a length; None when
/// the range is empty.
pub fn resolve_range(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i64;
    if len == 0 {
        return None;
    }
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    if s < 0 {
        s = 0;
    }
    if e < 0 {
        e = 0;
    }
    if e >= len {
        e = len - 1;
    }
    if s > e || s >= len {
        return None;
    }
    Some((s as u64, e as u64))
}

impl Handle {
    /// GET: the string value of `key`. `WrongType` if it holds another type.
    pub fn get(&mut self, db: u8, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        Ok(match self.get_into(db, key, &mut out)? {
            Some(meta) if meta.vtype != ValueType::String => return Err(Error::WrongType),
            Some(_) => Some(out),
            None => None,
        })
    }

    /// Copies the value of `key` (any type) into `out` and returns its metadata.
    pub fn get_into(&mut self, db: u8, key: &[u8], out: &mut Vec<u8>) -> Result<Option<Meta>> {
        let got = self.lookup(db, key, |r, raw| {
            out.clear();
            r.read_bytes(raw.value_off(), raw.vallen, out)
        })?;
        match got {
            Some((raw, ())) => Ok(Some(raw.meta()?)),
            None => {
                out.clear();
                Ok(None)
            }
        }
    }

    /// The metadata of `key` without its value.
    pub fn meta(&mut self, db: u8, key: &[u8]) -> Result<Option<Meta>> {
        match self.lookup(db, key, |_, _| Ok(()))? {
            Some((raw, ())) => Ok(Some(raw.meta()?)),
            None => Ok(None),
        }
    }

    /// Read-modify-write of one key under its lock: `decide` sees the current
    /// value and metadata (None for a missing key) and says what to do; the
    /// change lands in one transaction, so no other writer, reader or crash
    /// sees a half-done update. Commands whose new value depends on the old
    /// one (SETBIT, INCRBYFLOAT, collection updates) are built on this.
    /// Returns what `decide` returned alongside its own result.
    pub fn modify<T>(
        &mut self,
        db: u8,
        key: &[u8],
        decide: impl FnOnce(Option<(&[u8], Meta)>) -> Result<(Modify, T)>,
    ) -> Result<T> {
        self.with_key(db, key, |h, l| {
            let old = match l.found {
                Some(f) => Some((h.read_value(&f.raw)?, f.raw.meta()?)),
                None => None,
            };
            let (action, out) = decide(old.as_ref().map(|(v, m)| (v.as_slice(), *m)))?;
            match (action, l.found) {
                (Modify::Keep, _) | (Modify::Delete, None) => {}
                (Modify::Delete, Some(f)) => h.remove_locked(l.pos.bucket, &f)?,
                (Modify::Write(vtype, bytes), found) => {
                    let (expire, flags) = found.map_or((0, 0), |f| (f.raw.expire, f.raw.mc_flags));
                    let fields = h.entry_fields(l.db, vtype, expire, flags);
                    let (blk, pending) = h.new_entry(&fields, key, &[&bytes], 0)?;
                    h.publish(l, blk, pending)?;
                }
            }
            Ok(out)
        })
    }

    /// A conditional write of one key under its lock, for commands that
    /// decide on the entry's metadata (memcached's cas, add, append, incr):
    /// `decide` sees the metadata and, when `read_value`, the value (else an
    /// empty slice) of a live key, None for a missing one. Returns what
    /// `decide` returned and the version now stamped on the key (0 when
    /// nothing was written or the key was removed).
    pub fn update<'v, T>(
        &mut self,
        db: u8,
        key: &[u8],
        read_value: bool,
        decide: impl FnOnce(Option<(&[u8], Meta)>) -> Result<(Update<'v>, T)>,
    ) -> Result<(T, u64)> {
        let now = self.now_ms();
        self.with_key(db, key, |h, l| {
            let old = match l.found {
                Some(f) if read_value => Some((h.read_value(&f.raw)?, f.raw.meta()?)),
                Some(f) => Some((Vec::new(), f.raw.meta()?)),
                None => None,
            };
            let (action, out) = decide(old.as_ref().map(|(v, m)| (v.as_slice(), *m)))?;
            let old_expire = l.found.map_or(0, |f| f.raw.expire);
            let expire_of = |expiry: Expiry| match expiry {
                Expiry::Keep => old_expire,
                Expiry::Persist => 0,
                Expiry::At(at) => at.max(1),
            };
            match (action, l.found) {
                (Update::Keep, _) | (Update::Delete, None) | (Update::Expire(_), None) => {}
                (Update::Delete, Some(f)) => h.remove_locked(l.pos.bucket, &f)?,
                (Update::Expire(expiry), Some(f)) => {
                    let expire = expire_of(expiry);
                    if expire != 0 && expire <= now {
                        h.remove_locked(l.pos.bucket, &f)?;
                    } else {
                        h.update_in_place_keep_version(l, &[(E_EXPIRE, expire)])?;
                        return Ok((out, f.raw.lsn));
                    }
                }
                (
                    Update::Write {
                        value,
                        expiry,
                        mc_flags,
                    },
                    found,
                ) => {
                    let expire = expire_of(expiry);
                    if expire != 0 && expire <= now {
                        if let Some(f) = found {
                            h.remove_locked(l.pos.bucket, &f)?;
                        }
                        return Ok((out, 0));
                    }
                    let flags = mc_flags.unwrap_or(found.map_or(0, |f| f.raw.mc_flags));
                    let fields = h.entry_fields(l.db, ValueType::String, expire, flags);
                    let (blk, pending) = h.new_entry(&fields, key, &[&value], 0)?;
                    h.publish(l, blk, pending)?;
                    return Ok((out, l.found.map_or(0, |f| f.raw.lsn)));
                }
            }
            Ok((out, 0))
        })
    }

    /// GETDEL: the string value of `key`, removed in the same step.
    pub fn get_del(&mut self, db: u8, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.with_key(db, key, |h, l| {
            let Some(f) = l.found else { return Ok(None) };
            let v = h.read_string(&f.raw)?;
            h.remove_locked(l.pos.bucket, &f)?;
            Ok(Some(v))
        })
    }

    /// GETEX: the string value of `key`, changing its expiry in the same step:
    /// `Keep` leaves it, `Persist` removes it (PERSIST), `At` sets it (a time
    /// not in the future deletes the key after reading it, as Redis does).
    pub fn get_ex(&mut self, db: u8, key: &[u8], expiry: Expiry) -> Result<Option<Vec<u8>>> {
        let now = self.now_ms();
        self.with_key(db, key, |h, l| {
            let Some(f) = l.found else { return Ok(None) };
            let v = h.read_string(&f.raw)?;
            match expiry {
                Expiry::Keep => {}
                Expiry::Persist if f.raw.expire == 0 => {}
                Expiry::Persist => h.update_in_place(l, &[(E_EXPIRE, 0)])?,
                Expiry::At(at) if at <= now => h.remove_locked(l.pos.bucket, &f)?,
                Expiry::At(at) => h.update_in_place(l, &[(E_EXPIRE, at)])?,
            }
            Ok(Some(v))
        })
    }

    /// SET with Redis's options.
    pub fn set(
        &mut self,
        db: u8,
        key: &[u8],
        value: &[u8],
        opts: &SetOptions,
    ) -> Result<SetResult> {
        self.write_value(db, key, ValueType::String, value, opts)
    }

    /// Writes a value of any type (SET semantics: replaces whatever was there).
    /// Collection types store their own encoded bytes through this.
    pub fn write_value(
        &mut self,
        db: u8,
        key: &[u8],
        vtype: ValueType,
        value: &[u8],
        opts: &SetOptions,
    ) -> Result<SetResult> {
        crate::keyspace::handle::check_db(db)?;
        let expire = match opts.expiry {
            Expiry::At(at) => at.max(1),
            _ => 0,
        };
        if let Expiry::At(at) = opts.expiry {
            if at <= self.now_ms() && !opts.get && opts.condition == SetCondition::Always {
                // Already expired: the write is a delete (as Redis does).
                let existed = self.delete(db, key)?;
                return Ok(SetResult {
                    written: true,
                    existed,
                    ..SetResult::default()
                });
            }
        }
        // Allocate and fill before locking, so the lock is held only to publish.
        let fields = self.entry_fields(self.phys_hint(db), vtype, expire, opts.mc_flags);
        let (blk, pending) = self.new_entry(&fields, key, &[value], 0)?;
        let res = self.with_key(db, key, |h, l| {
            if l.db != fields.db {
                // A SWAPDB moved the db since the block was filled: it is still
                // private, so a plain store fixes its physical db (I8, I11).
                let mut kind = fields;
                kind.db = l.db;
                crate::keyspace::entry::write_kind(h.ctx.region(), blk, &kind)?;
            }
            let mut out = SetResult {
                existed: l.found.is_some(),
                ..SetResult::default()
            };
            if let Some(f) = l.found {
                if opts.get {
                    out.old = Some(h.read_string(&f.raw)?);
                }
            }
            let allowed = match opts.condition {
                SetCondition::Always => true,
                SetCondition::IfAbsent => l.found.is_none(),
                SetCondition::IfPresent => l.found.is_some(),
            };
            if !allowed {
                return Ok(out);
            }
            if opts.expiry == Expiry::Keep {
                if let Some(f) = l.found {
                    // The block is still private: a plain store is enough.
                    h.ctx.region().store64(blk + E_EXPIRE, f.raw.expire)?;
                }
            }
            h.publish(l, blk, pending)?;
            out.written = true;
            out.version = l.found.map_or(0, |f| f.raw.lsn);
            Ok(out)
        });
        if !matches!(res, Ok(SetResult { written: true, .. })) {
            self.discard_new(blk, pending)?;
        }
        if let (Ok(r), Expiry::At(at)) = (&res, opts.expiry) {
            if r.written && at <= self.now_ms() {
                self.delete(db, key)?;
            }
        }
        res
    }

    /// INCRBY / DECRBY (negative `delta`): the new value.
    pub fn incr_by(&mut self, db: u8, key: &[u8], delta: i64) -> Result<i64> {
        self.with_key(db, key, |h, l| {
            let (current, expire, flags) = match l.found {
                None => (0, 0, 0),
                Some(f) => {
                    if f.raw.vtype != ValueType::String as u8 {
                        return Err(Error::WrongType);
                    }
                    if f.raw.vallen > 20 {
                        return Err(Error::NotInteger);
                    }
                    let v = parse_i64(&h.read_value(&f.raw)?).ok_or(Error::NotInteger)?;
                    (v, f.raw.expire, f.raw.mc_flags)
                }
            };
            let new = current.checked_add(delta).ok_or(Error::Overflow)?;
            let mut buf = [0; 20];
            let text = format_i64(new, &mut buf);
            let fields = h.entry_fields(l.db, ValueType::String, expire, flags);
            let (blk, pending) = h.new_entry(&fields, key, &[text], 0)?;
            h.publish(l, blk, pending)?;
            Ok(new)
        })
    }

    /// APPEND: the new length. Grows in place when the block has room, else
    /// moves to a block with twice the room, so appends cost amortized O(1).
    pub fn append(&mut self, db: u8, key: &[u8], tail: &[u8]) -> Result<u64> {
        self.with_key(db, key, |h, l| {
            let Some(f) = l.found else {
                let fields = h.entry_fields(l.db, ValueType::String, 0, 0);
                let (blk, pending) = h.new_entry(&fields, key, &[tail], 0)?;
                h.publish(l, blk, pending)?;
                return Ok(tail.len() as u64);
            };
            if f.raw.vtype != ValueType::String as u8 {
                return Err(Error::WrongType);
            }
            let new_len = f.raw.vallen + tail.len() as u64;
            check_len(new_len)?;
            if tail.is_empty() {
                return Ok(new_len);
            }
            if new_len <= f.raw.capacity() {
                // Bytes past the current length are invisible to readers until
                // the length word moves (I8).
                h.ctx
                    .region()
                    .write_bytes(f.raw.value_off() + f.raw.vallen, tail)?;
                h.update_in_place(l, &[(E_KEYLEN, f.raw.keylen | new_len << 32)])?;
                return Ok(new_len);
            }
            let fields = h.entry_fields(l.db, ValueType::String, f.raw.expire, f.raw.mc_flags);
            let (blk, pending) =
                h.new_growable_entry(&fields, key, new_len, (new_len * 2).min(MAX_VALUE_LEN))?;
            let r = h.ctx.region();
            r.copy_within(
                f.raw.value_off(),
                blk + E_KEY + key.len() as u64,
                f.raw.vallen,
            )?;
            r.write_bytes(blk + E_KEY + key.len() as u64 + f.raw.vallen, tail)?;
            r.store64(blk + E_KEYLEN, key.len() as u64 | new_len << 32)?;
            h.publish(l, blk, pending)?;
            Ok(new_len)
        })
    }

    /// GETRANGE: bytes `start..=end` of the string (Redis's index rules).
    pub fn get_range(&mut self, db: u8, key: &[u8], start: i64, end: i64) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let got = self.lookup(db, key, |r, raw| {
            out.clear();
            if raw.vtype != ValueType::String as u8 {
                return Ok(false);
            }
            if let Some((s, e)) = resolve_range(start, end, raw.vallen) {
                r.read_bytes(raw.value_off() + s, e - s + 1, &mut out)?;
            }
            Ok(true)
        })?;
        match got {
            Some((_, false)) => Err(Error::WrongType),
            Some((_, true)) => Ok(out),
            None => Ok(Vec::new()),
        }
    }

    /// SETRANGE: overwrites from `offset`, zero-padding; the new length.
    pub fn set_range(&mut self, db: u8, key: &[u8], offset: u64, bytes: &[u8]) -> Result<u64> {
        self.with_key(db, key, |h, l| {
            // Redis's order: type, then an empty patch, then the size limit.
            let (old_len, expire, flags) = match l.found {
                Some(f) if f.raw.vtype != ValueType::String as u8 => return Err(Error::WrongType),
                Some(f) => (f.raw.vallen, f.raw.expire, f.raw.mc_flags),
                None => (0, 0, 0),
            };
            if bytes.is_empty() {
                return Ok(old_len);
            }
            let end = offset
                .checked_add(bytes.len() as u64)
                .ok_or(Error::TooLarge)?;
            check_len(end)?;
            let new_len = old_len.max(end);
            let fields = h.entry_fields(l.db, ValueType::String, expire, flags);
            let (blk, pending) = h.new_entry(&fields, key, &[], new_len)?;
            let r = h.ctx.region();
            let val = blk + E_KEY + key.len() as u64;
            if let Some(f) = l.found {
                r.copy_within(f.raw.value_off(), val, old_len)?;
            }
            if offset > old_len {
                r.zero(val + old_len, offset - old_len)?;
            }
            r.write_bytes(val + offset, bytes)?;
            r.store64(blk + E_KEYLEN, key.len() as u64 | new_len << 32)?;
            h.publish(l, blk, pending)?;
            Ok(new_len)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_i64_matches_to_string() {
        for v in [0, 1, -1, 10, -10, i64::MAX, i64::MIN, i64::MIN + 1] {
            let mut buf = [0; 20];
            assert_eq!(format_i64(v, &mut buf), v.to_string().as_bytes());
        }
    }
}
