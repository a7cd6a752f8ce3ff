//! Client-side caching (Redis's CLIENT TRACKING), across workers.
//!
//! Each worker keeps its own tracking state: its tracking clients (mode,
//! redirect, prefixes) and the default mode's table, key → ids of this
//! worker's clients that read it. Writes are seen where keyspace
//! notifications and key subscriptions see them ([`Engine::key_written`] is
//! called from the same hook), collected per command, and after the
//! command sent once, as one routed pub/sub message, to every worker whose
//! bit in the shared `TRACKING_SLOTS` word says it tracks something (its
//! own worker handles it at once). Each worker then invalidates from its
//! own table and its own BCAST clients. An invalidation whose redirect
//! target lives on another worker is routed to that worker, which answers
//! with a "redirect broken" message when the target is gone.
//! See docs/pubsub.md, "Client-side caching".

use std::collections::{BTreeSet, HashMap};

use indexmap::IndexMap;
use proto::resp::{Protocol, ReplyWriter};

use crate::command::{Arg, CmdResult};
use crate::config::word;
use crate::engine::{Cx, Engine, Flow, ServerRequest};
use crate::error::{CmdError, SYNTAX};
use crate::parse;
use crate::pubsub::{Routed, Tag};
use crate::wire::{Reader, Writer};

/// The channel RESP2 redirect targets get invalidations on.
pub(crate) const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// What a routed tracking message carries (its `db` byte).
pub(crate) mod kind {
    /// Keys written: `data` is (writer id, key) pairs.
    pub const KEYS: u8 = 0;
    /// FLUSHDB / FLUSHALL: every tracking client gets `invalidate nil`.
    pub const FLUSH: u8 = 1;
    /// An invalidation for redirect target `seq`, on behalf of the
    /// tracking client whose id is `epoch`: `data` is the keys, or `name`
    /// is `n` for nil (a flush).
    pub const REDIRECT: u8 = 2;
    /// The redirect target of tracking client `epoch` (id `seq`) is gone.
    pub const BROKEN: u8 = 3;
    /// The receiver handled the sender's KEYS or FLUSH message `seq` (and
    /// sent the redirects it caused): `epoch` is the sender's incarnation.
    pub const ACK: u8 = 4;
}

/// One tracking client's mode.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClientTracking {
    bcast: bool,
    optin: bool,
    optout: bool,
    noloop: bool,
    /// CLIENT CACHING was given for the next command.
    caching: bool,
    /// The client invalidations go to (0: this one).
    redirect: u64,
    /// The worker slot the redirect target was found on.
    redirect_slot: u32,
    broken: bool,
    prefixes: BTreeSet<Vec<u8>>,
}

/// A key the running command wrote.
#[derive(Clone, Copy, Debug)]
struct Written {
    by: u64,
    table_done: bool,
}

/// A client of this worker as invalidations need it.
#[derive(Clone, Copy, Debug)]
struct Present {
    protocol: Protocol,
    subscribed: bool,
}

/// This worker's tracking state.
#[derive(Default)]
pub(crate) struct Tracking {
    clients: HashMap<u64, ClientTracking>,
    /// Default mode: key → ids of this worker's clients that read it. As in
    /// Redis, ids of clients that stopped tracking stay until the key is
    /// invalidated.
    table: HashMap<Vec<u8>, Vec<u64>>,
    items: u64,
    /// This worker's clients (those that ran a command), for redirects.
    present: HashMap<u64, Present>,
    /// Keys the running command wrote, with the client that wrote them (0:
    /// no client, or several: NOLOOP spares nobody) and whether this
    /// worker's table was already invalidated for the latest write.
    written: IndexMap<Vec<u8>, Written>,
    /// The running command flushed a db.
    flushed: bool,
    /// Frames for the client whose command runs: they follow its reply.
    after_reply: Vec<u8>,
    /// Whether this worker's bit in `TRACKING_SLOTS` is set.
    slot_bit: bool,
    /// The `TRACKING_FLUSHES` count this worker has acted on.
    flushes_seen: u64,
    /// Every worker's (clients, keys, items, prefixes), for INFO.
    pub(crate) totals: Option<[u64; 4]>,
    /// KEYS and FLUSH messages sent, per receiving slot: the `seq` of the
    /// latest. The writer's reply waits for their acknowledgements.
    sent: Vec<u64>,
    /// The latest `seq` each slot acknowledged.
    acked: Vec<u64>,
    /// Messages sent in all, and acknowledgements received in all: cheap
    /// "did anything change" checks for the runner and the mailbox loop.
    sent_total: u64,
    acks_total: u64,
}

/// What an invalidation says.
enum Invalidation<'a> {
    Keys(Vec<&'a [u8]>),
    Nil,
}

impl Invalidation<'_> {
    fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        if let Invalidation::Keys(keys) = self {
            w.u64(keys.len() as u64);
            for k in keys {
                w.bytes(k);
            }
        }
        w.0
    }
}

/// This process's mark on the messages it sends, so that a worker started
/// in the same slot ignores acknowledgements meant for its predecessor.
fn incarnation() -> u64 {
    u64::from(std::process::id())
}

fn decode_keys(data: &[u8]) -> Option<Vec<&[u8]>> {
    let mut r = Reader(data);
    let n = r.count(8)?;
    (0..n).map(|_| r.bytes()).collect()
}

impl Tracking {
    /// Numbers the next message sent to `slot`.
    fn next_seq(&mut self, slot: u32) -> u64 {
        let slot = slot as usize;
        if self.sent.len() <= slot {
            self.sent.resize(slot + 1, 0);
        }
        self.sent[slot] += 1;
        self.sent_total += 1;
        self.sent[slot]
    }

    fn acked(&mut self, slot: u32, seq: u64) {
        let slot = slot as usize;
        if self.acked.len() <= slot {
            self.acked.resize(slot + 1, 0);
        }
        self.acked[slot] = self.acked[slot].max(seq);
        self.acks_total += 1;
    }

    /// Whether this worker has any tracking client.
    pub(crate) fn any_client(&self) -> bool {
        !self.clients.is_empty()
    }

    /// This worker's numbers for INFO: clients, keys, items, prefixes.
    pub(crate) fn counts(&self) -> [u64; 4] {
        let prefixes: BTreeSet<&Vec<u8>> = self
            .clients
            .values()
            .flat_map(|c| c.prefixes.iter())
            .collect();
        [
            self.clients.len() as u64,
            self.table.len() as u64,
            self.items,
            prefixes.len() as u64,
        ]
    }
}

/// CLIENT TRACKING's arguments, checked for syntax.
struct TrackingArgs<'a> {
    on: bool,
    redirect: u64,
    bcast: bool,
    optin: bool,
    optout: bool,
    noloop: bool,
    prefixes: Vec<&'a [u8]>,
}

/// Parses `ON|OFF [options]` (the arguments after TRACKING).
fn parse_tracking<'a>(args: &[&'a [u8]]) -> Result<TrackingArgs<'a>, CmdError> {
    let mut t = TrackingArgs {
        on: false,
        redirect: 0,
        bcast: false,
        optin: false,
        optout: false,
        noloop: false,
        prefixes: Vec::new(),
    };
    let mut j = 1;
    while j < args.len() {
        let a = args[j];
        let more = j + 1 < args.len();
        if parse::is(a, "redirect") && more {
            j += 1;
            if t.redirect != 0 {
                return Err(CmdError::msg(
                    "ERR A client can only redirect to a single other client",
                ));
            }
            let id = store::parse_i64(args[j]).ok_or(CmdError::msg(crate::error::NOT_INTEGER))?;
            t.redirect = id as u64;
        } else if parse::is(a, "bcast") {
            t.bcast = true;
        } else if parse::is(a, "optin") {
            t.optin = true;
        } else if parse::is(a, "optout") {
            t.optout = true;
        } else if parse::is(a, "noloop") {
            t.noloop = true;
        } else if parse::is(a, "prefix") && more {
            j += 1;
            t.prefixes.push(args[j]);
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        j += 1;
    }
    if parse::is(args[0], "on") {
        t.on = true;
    } else if !parse::is(args[0], "off") {
        return Err(CmdError::msg(SYNTAX));
    }
    Ok(t)
}

/// Whether one of two prefixes starts the other (they would both match a key).
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// The gather tag CLIENT TRACKING uses to find a redirect target on
/// another worker (see diagnostics.rs).
pub(crate) const GATHER_REDIRECT: u64 = 100;

impl Engine {
    /// Every worker's tracking numbers when INFO gathered them, else this
    /// worker's.
    pub(crate) fn tracking_totals(&self) -> [u64; 4] {
        self.tracking
            .totals
            .unwrap_or_else(|| self.tracking.counts())
    }

    /// The slot bits of workers that track something.
    fn tracking_slots(&self) -> u64 {
        self.store.config_word(word::TRACKING_SLOTS).unwrap_or(0)
    }

    /// Clears this slot's bit in `TRACKING_SLOTS` (a new worker tracks
    /// nothing; its predecessor in the slot may have died with it set).
    pub(crate) fn tracking_reset_slot(&mut self) {
        self.tracking.slot_bit = true;
        self.update_tracking_bit();
    }

    /// Sets or clears this worker's bit in `TRACKING_SLOTS`: set while it
    /// has tracking clients or a non-empty table (a flush must reach it).
    fn update_tracking_bit(&mut self) {
        let want = !self.tracking.clients.is_empty() || !self.tracking.table.is_empty();
        if want == self.tracking.slot_bit {
            return;
        }
        let Some(bit) = 1u64.checked_shl(self.pubsub.slot()) else {
            return;
        };
        for _ in 0..64 {
            let now = self.tracking_slots();
            let new = if want { now | bit } else { now & !bit };
            if self
                .store
                .swap_config_word(word::TRACKING_SLOTS, now, new)
                .unwrap_or(true)
            {
                break;
            }
        }
        self.tracking.slot_bit = want;
    }

    /// Notes a client of this worker after its command: its protocol and
    /// whether it subscribes (a RESP2 redirect target must).
    pub(crate) fn tracking_note_client(&mut self, id: u64, protocol: Protocol, subscribed: bool) {
        if id == 0 {
            return;
        }
        self.tracking.present.insert(
            id,
            Present {
                protocol,
                subscribed,
            },
        );
    }

    /// A client of this worker is gone (closed, or QUIT).
    pub(crate) fn tracking_client_gone(&mut self, id: u64) {
        self.tracking.present.remove(&id);
        if self.tracking.clients.remove(&id).is_some() {
            self.update_tracking_bit();
        }
    }

    /// Whether client `id` of this worker has tracking on (its state cannot
    /// move to another worker).
    pub fn tracks_client(&self, id: u64) -> bool {
        self.tracking.clients.contains_key(&id)
    }

    /// CLIENT LIST's line for a client of this worker, with its tracking
    /// flags and redirect.
    pub fn client_line(&self, session: &crate::session::Session, now_ms: u64) -> String {
        let Some(c) = self.tracking.clients.get(&session.id) else {
            return session.client_line(now_ms);
        };
        let mut flags = String::from("t");
        if c.broken {
            flags.push('R');
        }
        if c.bcast {
            flags.push('B');
        }
        session.client_line_tracking(now_ms, &flags, c.redirect as i64)
    }

    /// A client of this worker is gone: it is no redirect target here any
    /// more, and its tracking ends.
    pub fn client_released(&mut self, id: u64) {
        self.tracking_client_gone(id);
    }

    /// RESET and CLIENT TRACKING OFF.
    pub(crate) fn tracking_disable(&mut self, id: u64) {
        if self.tracking.clients.remove(&id).is_some() {
            self.update_tracking_bit();
        }
    }

    /// After a command: CLIENT CACHING applies to one command (not to
    /// CLIENT's own, nor inside MULTI).
    pub(crate) fn tracking_after_command(&mut self, id: u64, cmd_name: &str, in_multi: bool) {
        if in_multi || cmd_name == "client" || cmd_name.starts_with("client|") {
            return;
        }
        if let Some(c) = self.tracking.clients.get_mut(&id) {
            c.caching = false;
        }
    }

    /// A read-only command ran: a default-mode tracking client remembers
    /// its keys (OPTIN only after CLIENT CACHING YES, OPTOUT unless after
    /// CLIENT CACHING NO).
    pub(crate) fn tracking_remember(&mut self, id: u64, keys: impl Iterator<Item = Vec<u8>>) {
        let Some(c) = self.tracking.clients.get(&id) else {
            return;
        };
        if c.bcast || (c.optin && !c.caching) || (c.optout && c.caching) {
            return;
        }
        // Writes before this read (an earlier command of EXEC, a key the
        // read found expired) invalidate first, as Redis does them as they
        // happen: the key read now stays tracked.
        self.drain_key_log();
        self.tracking_table_catch_up();
        for key in keys {
            let ids = self.tracking.table.entry(key).or_default();
            if !ids.contains(&id) {
                ids.push(id);
                self.tracking.items += 1;
            }
        }
        self.update_tracking_bit();
    }

    /// A write (or expiry, eviction) changed `key`; `by_client` is false
    /// when no client did it (NOLOOP then spares nobody).
    pub(crate) fn key_written(&mut self, key: &[u8], by_client: bool) {
        if self.tracking_slots() == 0 {
            return;
        }
        let writer = if by_client { self.pubsub.current() } else { 0 };
        match self.tracking.written.get_mut(key) {
            Some(w) => {
                if w.by != writer {
                    w.by = 0;
                }
                w.table_done = false;
            }
            None => {
                self.tracking.written.insert(
                    key.to_vec(),
                    Written {
                        by: writer,
                        table_done: false,
                    },
                );
            }
        }
    }

    /// Invalidates this worker's table for the keys written so far in the
    /// running command (the rest of the work waits for its end).
    fn tracking_table_catch_up(&mut self) {
        if self.tracking.written.values().all(|w| w.table_done) {
            return;
        }
        let mut written = std::mem::take(&mut self.tracking.written);
        let keys: Vec<(u64, &[u8])> = written
            .iter()
            .filter(|(_, w)| !w.table_done)
            .map(|(k, w)| (w.by, k.as_slice()))
            .collect();
        self.invalidate_table(&keys);
        for w in written.values_mut() {
            w.table_done = true;
        }
        // Keys written meanwhile (none: invalidating writes nothing) join.
        written.extend(std::mem::take(&mut self.tracking.written));
        self.tracking.written = written;
    }

    /// FLUSHDB or FLUSHALL ran.
    pub(crate) fn tracking_flushed(&mut self) {
        if self.tracking_slots() != 0 {
            for _ in 0..64 {
                let now = self.store.config_word(word::TRACKING_FLUSHES).unwrap_or(0);
                if self
                    .store
                    .swap_config_word(word::TRACKING_FLUSHES, now, now.wrapping_add(1))
                    .unwrap_or(true)
                {
                    break;
                }
            }
            self.tracking.flushed = true;
        }
    }

    /// Acts on flushes any worker did since this one last looked (before
    /// each batch, on ticks and gathers, and when a flush message comes):
    /// so a command never sees keys tracked before a flush that replied.
    pub(crate) fn tracking_sync_flushes(&mut self) {
        let now = self.store.config_word(word::TRACKING_FLUSHES).unwrap_or(0);
        if now == self.tracking.flushes_seen {
            return;
        }
        self.tracking.flushes_seen = now;
        if self.tracking.clients.is_empty() && self.tracking.table.is_empty() {
            return;
        }
        let ids: Vec<u64> = self.tracking.clients.keys().copied().collect();
        for id in ids {
            self.send_invalidation(id, Invalidation::Nil);
        }
        self.tracking.table.clear();
        self.tracking.items = 0;
        self.update_tracking_bit();
    }

    /// Sends what the command wrote to every tracking worker (handling it
    /// here at once), and applies `tracking-table-max-keys`. Returns frames
    /// for the running client, to follow its reply.
    pub(crate) fn tracking_flush(&mut self) -> Vec<u8> {
        let flushed = std::mem::take(&mut self.tracking.flushed);
        let written = std::mem::take(&mut self.tracking.written);
        if flushed || !written.is_empty() {
            let mask = self.tracking_slots();
            let own = self.pubsub.slot();
            if flushed {
                for slot in (0..64).filter(|s| mask & (1 << s) != 0) {
                    if slot == own {
                        self.tracking_flush_here();
                    } else {
                        self.send_acked_tracking(slot, kind::FLUSH, b"");
                    }
                }
            }
            if !written.is_empty() {
                let mut w = Writer::default();
                w.u64(written.len() as u64);
                for (k, written) in &written {
                    w.u64(written.by);
                    w.bytes(k);
                }
                for slot in (0..64).filter(|s| mask & (1 << s) != 0) {
                    if slot == own {
                        let keys: Vec<(u64, &[u8], bool)> = written
                            .iter()
                            .map(|(k, w)| (w.by, k.as_slice(), w.table_done))
                            .collect();
                        self.tracking_invalidate_here(&keys);
                    } else {
                        self.send_acked_tracking(slot, kind::KEYS, &w.0);
                    }
                }
            }
        }
        self.tracking_limit();
        std::mem::take(&mut self.tracking.after_reply)
    }

    /// Sends a KEYS or FLUSH message that `slot` acknowledges once handled.
    fn send_acked_tracking(&mut self, slot: u32, kind: u8, data: &[u8]) {
        let seq = self.tracking.next_seq(slot);
        self.send_tracking(slot, kind, seq, incarnation(), data);
    }

    /// Tracking messages sent since the engine started: it changes when a
    /// batch sent any (see [`Engine::tracking_unacked`]).
    pub fn tracking_sent_total(&self) -> u64 {
        self.tracking.sent_total
    }

    /// Tracking acknowledgements received since the engine started.
    pub fn tracking_acks_total(&self) -> u64 {
        self.tracking.acks_total
    }

    /// The latest message sent to each slot that has not acknowledged it
    /// yet, as (slot, seq). A write's reply waits for these: in Redis the
    /// invalidations a write causes are sent before its reply, so a client
    /// that saw the reply never reads an invalidated key from its cache,
    /// and invalidations reach a redirect target in the writes' order.
    pub fn tracking_unacked(&self) -> Vec<(u32, u64)> {
        let t = &self.tracking;
        t.sent
            .iter()
            .enumerate()
            .filter(|&(slot, &seq)| seq > t.acked.get(slot).copied().unwrap_or(0))
            .map(|(slot, &seq)| (slot as u32, seq))
            .collect()
    }

    /// Whether slot `slot` has acknowledged message `seq`.
    pub fn tracking_acked(&self, slot: u32, seq: u64) -> bool {
        self.tracking.acked.get(slot as usize).copied().unwrap_or(0) >= seq
    }

    fn send_tracking(&mut self, slot: u32, kind: u8, seq: u64, epoch: u64, data: &[u8]) {
        self.pubsub.send_routed(
            slot,
            &Routed {
                tag: Tag::Tracking,
                db: kind,
                seq,
                epoch,
                name: b"",
                data,
            },
        );
    }

    /// Evicts keys from the table past `tracking-table-max-keys` (0: no
    /// limit), invalidating them for their clients.
    pub(crate) fn tracking_limit(&mut self) {
        let max = self.config.tracking_table_max_keys;
        if max == 0 || self.tracking.table.len() as u64 <= max {
            return;
        }
        let excess = self.tracking.table.len() - max as usize;
        let victims: Vec<Vec<u8>> = self.tracking.table.keys().take(excess).cloned().collect();
        let keys: Vec<(u64, &[u8])> = victims.iter().map(|k| (0, k.as_slice())).collect();
        self.invalidate_table(&keys);
        self.update_tracking_bit();
    }

    /// Invalidates written keys (writer, key, table already done) for this
    /// worker's clients.
    fn tracking_invalidate_here(&mut self, keys: &[(u64, &[u8], bool)]) {
        let table: Vec<(u64, &[u8])> = keys
            .iter()
            .filter(|(_, _, done)| !done)
            .map(|&(by, k, _)| (by, k))
            .collect();
        self.invalidate_table(&table);
        let bcast: Vec<(u64, bool, Vec<Vec<u8>>)> = self
            .tracking
            .clients
            .iter()
            .filter(|(_, c)| c.bcast)
            .map(|(id, c)| (*id, c.noloop, c.prefixes.iter().cloned().collect()))
            .collect();
        for (id, noloop, prefixes) in bcast {
            for prefix in &prefixes {
                let matching: Vec<&[u8]> = keys
                    .iter()
                    .filter(|(by, k, _)| k.starts_with(prefix) && !(noloop && *by == id))
                    .map(|(_, k, _)| *k)
                    .collect();
                if !matching.is_empty() {
                    self.send_invalidation(id, Invalidation::Keys(matching));
                }
            }
        }
        self.update_tracking_bit();
    }

    /// The default-mode part: each key leaves the table, its clients are
    /// told once.
    fn invalidate_table(&mut self, keys: &[(u64, &[u8])]) {
        for &(by, key) in keys {
            let Some(ids) = self.tracking.table.remove(key) else {
                continue;
            };
            self.tracking.items = self.tracking.items.saturating_sub(ids.len() as u64);
            for id in ids {
                let Some(c) = self.tracking.clients.get(&id) else {
                    continue;
                };
                if c.bcast || (c.noloop && by == id) {
                    continue;
                }
                self.send_invalidation(id, Invalidation::Keys(vec![key]));
            }
        }
    }

    /// FLUSHDB / FLUSHALL: `invalidate nil` to every tracking client here;
    /// the table empties (Redis frees it on either). Each flush is acted on
    /// once, whichever of its message and the shared count comes first.
    fn tracking_flush_here(&mut self) {
        self.tracking_sync_flushes();
    }

    /// Sends an invalidation on behalf of tracking client `id`: to it
    /// (RESP3 only) or to its redirect target, wherever that is.
    fn send_invalidation(&mut self, id: u64, what: Invalidation<'_>) {
        let Some(c) = self.tracking.clients.get(&id) else {
            return;
        };
        let (redirect, slot) = (c.redirect, c.redirect_slot);
        if redirect == 0 {
            if self.protocol_here(id) == Some(Protocol::Resp3) {
                self.deliver_invalidation(id, &what, false);
            }
            return;
        }
        if slot == self.pubsub.slot() {
            if self.tracking.present.contains_key(&redirect) {
                self.deliver_invalidation(redirect, &what, true);
            } else {
                self.redirect_broken(id, redirect);
            }
            return;
        }
        let data = what.encode();
        let nil = matches!(what, Invalidation::Nil);
        // seq: the target; epoch: the tracking client; name "n": nil.
        self.pubsub.send_routed(
            slot,
            &Routed {
                tag: Tag::Tracking,
                db: kind::REDIRECT,
                seq: redirect,
                epoch: id,
                name: if nil { b"n" } else { b"" },
                data: &data,
            },
        );
    }

    fn protocol_here(&self, id: u64) -> Option<Protocol> {
        self.tracking.present.get(&id).map(|p| p.protocol)
    }

    /// Writes the invalidation frame for client `to` of this worker: a
    /// push in RESP3; a `__redis__:invalidate` message for a subscribed
    /// RESP2 redirect target; nothing otherwise.
    fn deliver_invalidation(&mut self, to: u64, what: &Invalidation<'_>, redirected: bool) {
        let Some(p) = self.tracking.present.get(&to).copied() else {
            return;
        };
        let mut frame = Vec::new();
        let mut w = ReplyWriter::new(&mut frame, p.protocol);
        if p.protocol == Protocol::Resp3 {
            w.push_len(2);
            w.bulk(b"invalidate");
        } else if redirected && p.subscribed {
            w.push_len(3);
            w.bulk(b"message");
            w.bulk(INVALIDATE_CHANNEL);
        } else {
            return;
        }
        match what {
            Invalidation::Keys(keys) => {
                w.array_len(keys.len());
                for k in keys {
                    w.bulk(k);
                }
            }
            Invalidation::Nil => w.null(),
        }
        self.emit_to(to, &frame);
    }

    /// A frame for a client of this worker: after the reply when its
    /// command is running, else through the outbox.
    fn emit_to(&mut self, to: u64, frame: &[u8]) {
        if to != 0 && to == self.pubsub.current() {
            self.tracking.after_reply.extend_from_slice(frame);
        } else {
            self.pubsub.queue_frame(to, frame);
        }
    }

    /// Tracking client `id`'s redirect target is gone: flag it and, in
    /// RESP3, tell the client.
    fn redirect_broken(&mut self, id: u64, redirect: u64) {
        let Some(c) = self.tracking.clients.get_mut(&id) else {
            return;
        };
        if c.redirect != redirect {
            return;
        }
        c.broken = true;
        if self.protocol_here(id) == Some(Protocol::Resp3) {
            let mut frame = Vec::new();
            let mut w = ReplyWriter::new(&mut frame, Protocol::Resp3);
            w.push_len(2);
            w.bulk(b"tracking-redir-broken");
            w.integer(redirect as i64);
            self.emit_to(id, &frame);
        }
    }

    /// A tracking message from worker `from`.
    pub(crate) fn receive_tracking(&mut self, from: u32, msg: &Routed<'_>) {
        match msg.db {
            kind::KEYS => {
                let mut r = Reader(msg.data);
                let Some(n) = r.count(16) else {
                    return;
                };
                let mut keys = Vec::with_capacity(n);
                for _ in 0..n {
                    let (Some(by), Some(k)) = (r.u64(), r.bytes()) else {
                        return;
                    };
                    keys.push((by, k, false));
                }
                self.tracking_invalidate_here(&keys);
                self.acknowledge_tracking(from, msg);
            }
            kind::FLUSH => {
                self.tracking_flush_here();
                self.acknowledge_tracking(from, msg);
            }
            kind::ACK if msg.epoch == incarnation() => self.tracking.acked(from, msg.seq),
            kind::REDIRECT => {
                let (target, id) = (msg.seq, msg.epoch);
                if !self.tracking.present.contains_key(&target) {
                    self.send_tracking(from, kind::BROKEN, target, id, b"");
                    return;
                }
                let what = if msg.name == b"n" {
                    Invalidation::Nil
                } else {
                    match decode_keys(msg.data) {
                        Some(keys) => Invalidation::Keys(keys),
                        None => return,
                    }
                };
                self.deliver_invalidation(target, &what, true);
            }
            kind::BROKEN => self.redirect_broken(msg.epoch, msg.seq),
            _ => {}
        }
    }

    /// Tells worker `from` that its message was handled: after the
    /// redirects it caused, so a redirect target on `from` gets them first.
    fn acknowledge_tracking(&mut self, from: u32, msg: &Routed<'_>) {
        if msg.seq != 0 {
            self.send_tracking(from, kind::ACK, msg.seq, msg.epoch, b"");
        }
    }

    /// Whether a client with this id is on this worker.
    pub(crate) fn client_here(&self, id: u64) -> bool {
        self.tracking.present.contains_key(&id)
    }

    /// CLIENT TRACKING once the redirect target's worker is known (`None`:
    /// no worker has it).
    pub(crate) fn tracking_command(
        &mut self,
        id: u64,
        words: &[&[u8]],
        redirect_slot: Option<u32>,
    ) -> Result<(), CmdError> {
        let t = parse_tracking(words)?;
        if t.redirect != 0 && redirect_slot.is_none() {
            return Err(CmdError::msg(
                "ERR The client ID you want redirect to does not exist",
            ));
        }
        if !t.on {
            self.tracking_disable(id);
            return Ok(());
        }
        if !t.bcast && !t.prefixes.is_empty() {
            return Err(CmdError::msg(
                "ERR PREFIX option requires BCAST mode to be enabled",
            ));
        }
        let current = self.tracking.clients.get(&id);
        if let Some(c) = current {
            if c.bcast != t.bcast {
                return Err(CmdError::msg("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."));
            }
        }
        if t.bcast && (t.optin || t.optout) {
            return Err(CmdError::msg(
                "ERR OPTIN and OPTOUT are not compatible with BCAST",
            ));
        }
        if t.optin && t.optout {
            return Err(CmdError::msg("ERR You can't use both OPTIN and OPTOUT"));
        }
        if let Some(c) = current {
            if (t.optin && c.optout) || (t.optout && c.optin) {
                return Err(CmdError::msg("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."));
            }
        }
        if t.bcast {
            let existing: Vec<&Vec<u8>> = current
                .map(|c| c.prefixes.iter().collect())
                .unwrap_or_default();
            for (i, p) in t.prefixes.iter().enumerate() {
                if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
                    return Err(CmdError::owned(format!(
                        "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(e)
                    )));
                }
                if let Some(q) = t.prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                    return Err(CmdError::owned(format!(
                        "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(q)
                    )));
                }
            }
        }
        let c = self.tracking.clients.entry(id).or_default();
        c.bcast = t.bcast;
        c.optin = t.optin;
        c.optout = t.optout;
        c.noloop = t.noloop;
        c.broken = false;
        c.redirect = t.redirect;
        c.redirect_slot = redirect_slot.unwrap_or(0);
        if t.bcast {
            if t.prefixes.is_empty() {
                c.prefixes.insert(Vec::new());
            }
            c.prefixes.extend(t.prefixes.iter().map(|p| p.to_vec()));
        }
        self.update_tracking_bit();
        Ok(())
    }
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP].
pub(crate) fn client_tracking(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let words: Vec<&[u8]> = args[2..].iter().map(|a| a.as_ref()).collect();
    let t = parse_tracking(&words)?;
    let own = cx.engine.pubsub.slot();
    let slot = if t.redirect == 0 || cx.engine.client_here(t.redirect) {
        Some(own)
    } else {
        // The target may be another worker's client: ask them all.
        let mut q = Writer::default();
        q.u64(GATHER_REDIRECT);
        q.u64(t.redirect);
        q.u64(words.len() as u64 + 1);
        q.bytes(&cx.session.id.to_le_bytes());
        for w in &words {
            q.bytes(w);
        }
        cx.flow = Flow::Server(ServerRequest::Gather(q.0));
        return Ok(());
    };
    cx.engine.tracking_command(cx.session.id, &words, slot)?;
    cx.out.simple(b"OK");
    Ok(())
}

impl Engine {
    /// This worker's answer to a redirect look-up: its slot, if it has the
    /// client.
    pub(crate) fn answer_redirect(&self, target: u64) -> Vec<u8> {
        let mut w = Writer::default();
        if self.client_here(target) {
            w.u64(self.pubsub.slot() as u64);
        }
        w.0
    }

    /// Finishes CLIENT TRACKING … REDIRECT with every worker's answer.
    pub(crate) fn finish_redirect(
        &mut self,
        words: &[Vec<u8>],
        answers: &[Vec<u8>],
        out: &mut ReplyWriter<'_>,
    ) {
        let Some((id, rest)) = words.split_first() else {
            out.error(b"ERR malformed request");
            return;
        };
        let id = id
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes);
        let slot = answers
            .iter()
            .find_map(|a| Reader(a).u64())
            .map(|s| s as u32);
        let rest: Vec<&[u8]> = rest.iter().map(Vec::as_slice).collect();
        match self.tracking_command(id, &rest, slot) {
            Ok(()) => out.simple(b"OK"),
            Err(e) => out.error(e.text().as_bytes()),
        }
    }
}

/// CLIENT CACHING YES|NO.
pub(crate) fn client_caching(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let Some(c) = cx.engine.tracking.clients.get_mut(&cx.session.id) else {
        return Err(CmdError::msg("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"));
    };
    if parse::is(&args[2], "yes") {
        if !c.optin {
            return Err(CmdError::msg(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if parse::is(&args[2], "no") {
        if !c.optout {
            return Err(CmdError::msg(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(CmdError::msg(SYNTAX));
    }
    c.caching = true;
    cx.out.simple(b"OK");
    Ok(())
}

/// CLIENT GETREDIR.
pub(crate) fn client_getredir(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let redirect = match cx.engine.tracking.clients.get(&cx.session.id) {
        Some(c) => c.redirect as i64,
        None => -1,
    };
    cx.out.integer(redirect);
    Ok(())
}

/// CLIENT TRACKINGINFO.
pub(crate) fn client_trackinginfo(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let c = cx.engine.tracking.clients.get(&cx.session.id).cloned();
    let mut flags: Vec<&[u8]> = Vec::new();
    match &c {
        None => flags.push(b"off"),
        Some(c) => {
            flags.push(b"on");
            if c.bcast {
                flags.push(b"bcast");
            }
            if c.optin {
                flags.push(b"optin");
                if c.caching {
                    flags.push(b"caching-yes");
                }
            }
            if c.optout {
                flags.push(b"optout");
                if c.caching {
                    flags.push(b"caching-no");
                }
            }
            if c.noloop {
                flags.push(b"noloop");
            }
            if c.broken {
                flags.push(b"broken_redirect");
            }
        }
    }
    let out = &mut cx.out;
    out.map_len(3);
    out.bulk(b"flags");
    out.set_len(flags.len());
    for f in flags {
        out.bulk(f);
    }
    out.bulk(b"redirect");
    out.integer(c.as_ref().map_or(-1, |c| c.redirect as i64));
    out.bulk(b"prefixes");
    match &c {
        Some(c) => {
            out.array_len(c.prefixes.len());
            for p in &c.prefixes {
                out.bulk(p);
            }
        }
        None => out.array_len(0),
    }
    Ok(())
}
