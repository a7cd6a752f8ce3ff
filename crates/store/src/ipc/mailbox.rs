//! Worker mailboxes: one ring per worker slot in the segment, many producers
//! (any worker) and one consumer (the slot's worker). Producers append under
//! the ring's lock (I6: a dead producer's lock is recovered like any other)
//! and publish a message by advancing the tail with one release store, so a
//! producer killed halfway leaves nothing visible. The consumer reads without
//! the lock and validates every length it reads (I1). The wake flag tells a
//! producer whether the consumer still needs a wake-up (the server sends it,
//! e.g. a datagram that a tokio loop awaits); the consumer clears it before
//! draining, so no message is left unseen.

use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::keyspace::handle::Handle;
use crate::segment::layout::*;

/// One message taken from a mailbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// What the message is (the server's numbering).
    pub kind: u32,
    /// Slot of the sending worker.
    pub from: u32,
    /// Request id, to match replies to requests.
    pub request: u64,
    /// The bytes.
    pub payload: Vec<u8>,
}

/// What [`Handle::mailbox_send`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// Appended; `wake` says the consumer must be woken up.
    Delivered {
        /// True for the first message since the consumer last drained.
        wake: bool,
    },
    /// The ring has no room now; try again after the consumer drains.
    Full,
}

const fn pad8(n: u64) -> u64 {
    (n + 7) & !7
}

impl Handle {
    fn mailbox_off(&self, slot: u32) -> Result<u64> {
        if slot >= MAX_WORKERS {
            return Err(Error::Attach(format!("no mailbox for worker slot {slot}")));
        }
        let geo = &self.ctx.sh.geo;
        Ok(geo.mbox_off + slot as u64 * geo.mbox_size)
    }

    fn ring_cap(&self) -> u64 {
        self.ctx.sh.geo.mbox_size - M_RING
    }

    /// The largest payload one message can carry.
    pub fn mailbox_max_payload(&self) -> usize {
        (self.ring_cap() - MSG_HEADER) as usize
    }

    fn ring_write(&self, base: u64, pos: u64, bytes: &[u8]) -> Result<()> {
        let cap = self.ring_cap();
        let at = pos % cap;
        let first = (cap - at).min(bytes.len() as u64) as usize;
        let r = self.ctx.region();
        r.write_bytes(base + M_RING + at, &bytes[..first])?;
        if first < bytes.len() {
            r.write_bytes(base + M_RING, &bytes[first..])?;
        }
        Ok(())
    }

    fn ring_read(&self, base: u64, pos: u64, len: u64, out: &mut Vec<u8>) -> Result<()> {
        let cap = self.ring_cap();
        let at = pos % cap;
        let first = (cap - at).min(len);
        let r = self.ctx.region();
        // `read_bytes` appends: the part after the wrap follows the first.
        out.clear();
        r.read_bytes(base + M_RING + at, first, out)?;
        if first < len {
            r.read_bytes(base + M_RING, len - first, out)?;
        }
        Ok(())
    }

    /// Appends a message to the mailbox of worker `to`.
    pub fn mailbox_send(
        &mut self,
        to: u32,
        kind: u32,
        from: u32,
        request: u64,
        payload: &[u8],
    ) -> Result<Sent> {
        let base = self.mailbox_off(to)?;
        let need = MSG_HEADER + pad8(payload.len() as u64);
        if need > self.ring_cap() {
            return Err(Error::TooLarge);
        }
        self.ctx.lock(base + M_LOCK)?;
        let res = (|| {
            let r = self.ctx.region();
            let head = r.a64(base + M_HEAD)?.load(Ordering::Acquire);
            let tail = r.a64(base + M_TAIL)?.load(Ordering::Relaxed);
            let used = tail.wrapping_sub(head);
            if used > self.ring_cap() {
                return Err(Error::Corrupted(base + M_TAIL));
            }
            if used + need > self.ring_cap() {
                return Ok(Sent::Full);
            }
            // Positions never come near 2^64 honestly; a scribbled one waits
            // for the owner's `mailbox_reset`.
            let end = tail
                .checked_add(need)
                .ok_or(Error::Corrupted(base + M_TAIL))?;
            // Header, then payload, straight into the ring (the padding
            // after it is skipped unread).
            let mut header = [0u8; MSG_HEADER as usize];
            header[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
            header[4..8].copy_from_slice(&kind.to_le_bytes());
            header[8..12].copy_from_slice(&from.to_le_bytes());
            header[16..24].copy_from_slice(&request.to_le_bytes());
            self.ring_write(base, tail, &header)?;
            self.ring_write(base, tail + MSG_HEADER, payload)?;
            self.ctx.crash_point();
            r.a64(base + M_TAIL)?.store(end, Ordering::Release);
            let wake = r.a64(base + M_WAKE)?.swap(1, Ordering::AcqRel) == 0;
            Ok(Sent::Delivered { wake })
        })();
        self.ctx.unlock(base + M_LOCK)?;
        res
    }

    /// Takes every message in `slot`'s mailbox (call it only from the worker
    /// that owns the slot), appending them to `out`.
    pub fn mailbox_take(&mut self, slot: u32, out: &mut Vec<Message>) -> Result<()> {
        self.mailbox_take_each(slot, |kind, from, request, payload| {
            out.push(Message {
                kind,
                from,
                request,
                payload: payload.to_vec(),
            })
        })
    }

    /// [`Handle::mailbox_take`] without a copy per message: `each` gets
    /// every message's kind, sender slot, request id and payload in turn
    /// (the payload is only valid during the call).
    pub fn mailbox_take_each(
        &mut self,
        slot: u32,
        mut each: impl FnMut(u32, u32, u64, &[u8]),
    ) -> Result<()> {
        let base = self.mailbox_off(slot)?;
        let r = self.ctx.region();
        r.a64(base + M_WAKE)?.store(0, Ordering::SeqCst);
        let mut head = r.a64(base + M_HEAD)?.load(Ordering::Relaxed);
        let tail = r.a64(base + M_TAIL)?.load(Ordering::Acquire);
        let cap = self.ring_cap();
        if head > tail || tail - head > cap {
            r.a64(base + M_HEAD)?.store(tail, Ordering::Release);
            return Err(Error::Corrupted(base + M_HEAD));
        }
        let mut buf = Vec::new();
        let mut payload = Vec::new();
        while head < tail {
            self.ring_read(base, head, MSG_HEADER, &mut buf)?;
            let word = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
            let (len, kind, from) = (word(0) as u64, word(4), word(8));
            let mut req = [0u8; 8];
            req.copy_from_slice(&buf[16..24]);
            let need = MSG_HEADER + pad8(len);
            if need > tail - head {
                // A length no producer wrote: drop what is left.
                r.a64(base + M_HEAD)?.store(tail, Ordering::Release);
                return Err(Error::Corrupted(base + M_RING + head % cap));
            }
            self.ring_read(base, head + MSG_HEADER, len, &mut payload)?;
            each(kind, from, u64::from_le_bytes(req), &payload);
            head += need;
        }
        r.a64(base + M_HEAD)?.store(head, Ordering::Release);
        Ok(())
    }

    /// Empties `slot`'s mailbox for a new worker taking the slot over. Both
    /// positions restart at 0, which also repairs scribbled ones.
    pub fn mailbox_reset(&mut self, slot: u32) -> Result<()> {
        let base = self.mailbox_off(slot)?;
        self.ctx.lock(base + M_LOCK)?;
        let res = (|| {
            let r = self.ctx.region();
            // Under the lock no producer moves the tail, and the caller is
            // the only consumer.
            r.a64(base + M_TAIL)?.store(0, Ordering::Release);
            r.a64(base + M_HEAD)?.store(0, Ordering::Release);
            r.a64(base + M_WAKE)?.store(0, Ordering::Release);
            Ok(())
        })();
        self.ctx.unlock(base + M_LOCK)?;
        res
    }
}
