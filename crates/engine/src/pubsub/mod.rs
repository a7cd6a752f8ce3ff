//! Pub/sub across workers: channels, patterns, shard channels, retained
//! channels (last-value cache), key subscriptions with values, and MONITOR.
//!
//! Routing: each worker mirrors its clients' subscriptions into its table in
//! the segment (store pubsub.rs). A publisher reads the tables of the slots
//! that have any subscription, counts receivers, and appends the message
//! once to the mailbox ring of each other worker that has one (fragmented
//! when larger than a ring slice); subscribers on its own worker get frames
//! at once. A receiving worker turns one ring message into one frame per
//! local subscriber. A ring that is full keeps the rest of that worker's
//! messages, in order, in a backlog the server flushes as the ring drains,
//! so a slow worker never blocks the publisher.
//!
//! The engine only produces frames: [`PubSub::take_outbox`] hands them to
//! the server with the client ids they are for, [`PubSub::take_wakes`] the
//! workers whose rings got their first message since they last drained.

mod commands;
mod keys;
mod nats;
mod retained;

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use indexmap::IndexSet;
use proto::resp::{Protocol, ReplyWriter};
use store::glob::glob_match;
use store::{Handle, PatternSub, Receivers, Sent, Store, SubKind};

use crate::command::Arg;
use crate::engine::Engine;
use crate::session::Session;

pub(crate) use commands::COMMANDS;
pub use nats::queue_key;

/// Mailbox message kind of a whole pub/sub message, or its last fragment.
pub const MAILBOX_MESSAGE: u32 = 32;
/// Mailbox message kind of a fragment that more fragments follow.
pub const MAILBOX_FRAGMENT: u32 = 33;

/// Largest ring message the router writes; bigger messages are fragmented.
const FRAGMENT: usize = 16 << 10;
/// Bytes the backlog may hold for one worker before what is queued for it is
/// dropped (that worker is not draining at all).
const BACKLOG_LIMIT: usize = 64 << 20;

/// What a routed message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Tag {
    /// PUBLISH: channel, sequence (retained channels) and message.
    Channel = 1,
    /// SPUBLISH.
    Shard = 2,
    /// A key's new value: db, version, key, value.
    Key = 3,
    /// A MONITOR line.
    Monitor = 4,
    /// Every key of a db changed at once (FLUSHDB, FLUSHALL, SWAPDB,
    /// memcached flush_all; db 255: all): key subscribers read theirs again.
    KeyDb = 5,
    /// Client-side caching (tracking.rs): `db` says what the message is.
    Tracking = 6,
    /// PUBLISH from a NATS client with a reply subject or headers: the
    /// data is the envelope, then the message (nats.rs).
    Nats = 7,
    /// A message for one member of a NATS queue group on the receiver: the
    /// data is the group's record name, the envelope, the message.
    Queue = 8,
}

impl Tag {
    fn from_byte(b: u8) -> Option<Tag> {
        match b {
            1 => Some(Tag::Channel),
            2 => Some(Tag::Shard),
            3 => Some(Tag::Key),
            4 => Some(Tag::Monitor),
            5 => Some(Tag::KeyDb),
            6 => Some(Tag::Tracking),
            7 => Some(Tag::Nats),
            8 => Some(Tag::Queue),
            _ => None,
        }
    }
}

/// One routed message: what every worker's copy carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Routed<'a> {
    pub tag: Tag,
    /// The key's db (Tag::Key).
    pub db: u8,
    /// Retained channels' sequence number, or the key's version.
    pub seq: u64,
    /// Retained channels' numbering epoch: it grows when the numbering
    /// restarts (the retained key was removed), so a subscriber can tell a
    /// restart from a late message.
    pub epoch: u64,
    /// Channel or key.
    pub name: &'a [u8],
    /// Message, key value (RESP, empty when the key is gone) or MONITOR line.
    pub data: &'a [u8],
}

const WIRE_HEADER: usize = 28;

/// Tag::KeyDb's db for "every db".
const ALL_DBS: u8 = 255;

impl Routed<'_> {
    #[cfg(test)]
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// Writes the ring form into `out` (cleared first).
    fn encode_into(&self, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(WIRE_HEADER + self.name.len() + self.data.len());
        out.push(self.tag as u8);
        out.push(self.db);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&(self.name.len() as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(self.name);
        out.extend_from_slice(self.data);
    }

    /// Decodes a ring message (bytes another process wrote: I1).
    fn decode(bytes: &[u8]) -> Option<Routed<'_>> {
        let tag = Tag::from_byte(*bytes.first()?)?;
        let db = *bytes.get(1)?;
        let seq = u64::from_le_bytes(bytes.get(4..12)?.try_into().ok()?);
        let name_len = u32::from_le_bytes(bytes.get(12..16)?.try_into().ok()?) as usize;
        let epoch = u64::from_le_bytes(bytes.get(20..28)?.try_into().ok()?);
        let name_end = WIRE_HEADER.checked_add(name_len)?;
        Some(Routed {
            tag,
            db,
            seq,
            epoch,
            name: bytes.get(WIRE_HEADER..name_end)?,
            data: bytes.get(name_end..)?,
        })
    }
}

/// One client's subscriptions (kept in its session).
#[derive(Clone, Debug, Default)]
pub struct ClientSubs {
    pub(crate) channels: IndexSet<Vec<u8>>,
    pub(crate) patterns: IndexSet<Vec<u8>>,
    pub(crate) shard: IndexSet<Vec<u8>>,
    pub(crate) retained: IndexSet<Vec<u8>>,
    pub(crate) keys: IndexSet<(u8, Vec<u8>)>,
    pub(crate) key_patterns: IndexSet<(u8, Vec<u8>)>,
    /// NATS queue groups joined (nats.rs's record names).
    pub(crate) queues: IndexSet<Vec<u8>>,
    pub(crate) monitor: bool,
}

impl ClientSubs {
    /// The count subscribe replies carry: every kind but shard channels.
    pub(crate) fn count(&self) -> usize {
        self.channels.len()
            + self.patterns.len()
            + self.retained.len()
            + self.keys.len()
            + self.key_patterns.len()
    }

    /// Subscriptions of every kind: the client is in subscribed mode while
    /// this is non-zero.
    pub fn total(&self) -> usize {
        self.count() + self.shard.len() + self.queues.len()
    }

    /// Channels (SUBSCRIBE and LSUBSCRIBE), for CLIENT LIST's `sub`.
    pub fn channel_count(&self) -> usize {
        self.channels.len() + self.retained.len()
    }

    /// Patterns (channel and key), for CLIENT LIST's `psub`.
    pub fn pattern_count(&self) -> usize {
        self.patterns.len() + self.key_patterns.len()
    }

    /// Shard channels, for CLIENT LIST's `ssub`.
    pub fn shard_count(&self) -> usize {
        self.shard.len()
    }

    /// Whether the client is in MONITOR mode.
    pub fn monitoring(&self) -> bool {
        self.monitor
    }
}

/// A local subscriber that filters by a number (retained channels: the
/// last sequence delivered; keys: the last version).
#[derive(Clone, Copy, Debug)]
struct Since {
    client: u64,
    last: u64,
}

/// Client ids are small sequential integers: one multiply hashes them well
/// enough, where SipHash showed up in profiles (two lookups per frame).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// A key pattern's subscriber: its client and the last version it got of
/// each key.
type PatternSubscriber = (u64, HashMap<Vec<u8>, u64>);

/// A key (or key pattern) and its db.
type DbKey = (u8, Vec<u8>);

/// This worker's side of pub/sub: who subscribes to what here, and the
/// router that sends messages to the other workers.
pub struct PubSub {
    store: Store,
    /// A store context of its own for ring appends: a retained channel's
    /// messages are appended while the engine's handle holds its key lock.
    ring: Handle,
    slot: u32,
    channels: HashMap<Vec<u8>, Vec<u64>>,
    shard: HashMap<Vec<u8>, Vec<u64>>,
    retained: HashMap<Vec<u8>, retained::Local>,
    patterns: Vec<(Vec<u8>, Vec<u64>)>,
    keys: HashMap<DbKey, Vec<Since>>,
    key_patterns: Vec<(DbKey, Vec<PatternSubscriber>)>,
    monitors: Vec<u64>,
    protocols: IdMap<Protocol>,
    /// NATS clients (their frames carry reply subjects and headers), with
    /// whether they get their own messages (CONNECT's `echo`).
    nats_clients: IdMap<bool>,
    /// This worker's members of NATS queue groups, by record name.
    queues: HashMap<Vec<u8>, nats::Group>,
    /// Messages this worker routed to queue groups: picks the member.
    queue_turn: u64,
    /// The reply subject and headers the next PUBLISH carries (set by a
    /// NATS connection around its PUBLISH).
    envelope: Option<(Vec<u8>, Vec<u8>)>,
    /// Other slots' patterns as last read, with their generation.
    pattern_cache: Vec<(u64, Vec<PatternSub>)>,
    /// Frames for local clients, in order, gathered per client so that the
    /// server looks each client up once per flush, not once per frame.
    outbox: Vec<(u64, Vec<u8>)>,
    outbox_index: IdMap<usize>,
    /// Reused for the subscriber ids of one delivery.
    ids: Vec<u64>,
    /// Reused for a routed message's ring form.
    wire: Vec<u8>,
    /// Frames for the client whose command is running: they go before its
    /// reply, as Redis writes them.
    current: u64,
    current_frames: Vec<u8>,
    wakes: u32,
    backlog: VecDeque<(u32, u32, Vec<u8>)>,
    backlog_bytes: HashMap<u32, usize>,
    /// Called when output appears while none was pending, so the server
    /// flushes it whichever path (RESP, memcached, HTTP, a timer) caused it.
    on_output: Option<Box<dyn Fn()>>,
    signalled: bool,
    /// The version given to the key the running command removed, so that a
    /// command that empties a collection (a write, then a removal) sends one
    /// nil, not two.
    removal: Option<(u8, Vec<u8>, u64)>,
}

fn bits(mask: u32) -> impl Iterator<Item = u32> {
    (0..32).filter(move |s| mask & (1 << s) != 0)
}

/// Writes a pub/sub frame: a push in RESP3, an array in RESP2.
fn frame(protocol: Protocol, parts: &[Part<'_>]) -> Vec<u8> {
    // Sized up front: growing from empty cost several reallocations per
    // message in profiles.
    let size = parts
        .iter()
        .map(|p| match p {
            Part::Bulk(b) | Part::Raw(b) => b.len() + 16,
            Part::Int(_) => 24,
            Part::Null => 5,
        })
        .sum::<usize>();
    let mut out = Vec::with_capacity(size + 16);
    write_push(&mut ReplyWriter::new(&mut out, protocol), parts);
    out
}

/// Writes `parts` as one push (RESP3) or array (RESP2).
pub(crate) fn write_push(w: &mut ReplyWriter<'_>, parts: &[Part<'_>]) {
    w.push_len(parts.len());
    for p in parts {
        match p {
            Part::Bulk(b) => w.bulk(b),
            Part::Int(n) => w.integer(*n),
            Part::Null => w.null(),
            Part::Raw(r) => w.raw(r),
        }
    }
}

/// One element of a frame.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Part<'a> {
    Bulk(&'a [u8]),
    Int(i64),
    Null,
    /// Already RESP-encoded (a key's value).
    Raw(&'a [u8]),
}

/// Builds one frame per protocol, on first use.
struct Frames<'a> {
    parts: &'a [Part<'a>],
    made: [Option<Vec<u8>>; 2],
}

impl<'a> Frames<'a> {
    fn new(parts: &'a [Part<'a>]) -> Self {
        Frames {
            parts,
            made: [None, None],
        }
    }

    fn get(&mut self, protocol: Protocol) -> &[u8] {
        let i = (protocol == Protocol::Resp3) as usize;
        self.made[i].get_or_insert_with(|| frame(protocol, self.parts))
    }
}

impl PubSub {
    /// The pub/sub state of the worker in `slot`.
    pub(crate) fn new(store: Store, slot: u32) -> Result<PubSub, store::Error> {
        let ring = store.handle()?;
        Ok(PubSub {
            store,
            ring,
            slot,
            channels: HashMap::new(),
            shard: HashMap::new(),
            retained: HashMap::new(),
            patterns: Vec::new(),
            keys: HashMap::new(),
            key_patterns: Vec::new(),
            monitors: Vec::new(),
            protocols: IdMap::default(),
            nats_clients: IdMap::default(),
            queues: HashMap::new(),
            queue_turn: 0,
            envelope: None,
            pattern_cache: vec![(u64::MAX, Vec::new()); store::MAX_WORKERS as usize],
            outbox: Vec::new(),
            outbox_index: IdMap::default(),
            ids: Vec::new(),
            wire: Vec::new(),
            current: 0,
            current_frames: Vec::new(),
            wakes: 0,
            backlog: VecDeque::new(),
            backlog_bytes: HashMap::new(),
            on_output: None,
            signalled: false,
            removal: None,
        })
    }

    /// Sets what to call when frames, wake-ups or a backlog appear.
    pub fn set_on_output(&mut self, f: Box<dyn Fn()>) {
        self.on_output = Some(f);
    }

    fn signal(&mut self) {
        if !self.signalled {
            self.signalled = true;
            if let Some(f) = &self.on_output {
                f();
            }
        }
    }

    /// Frames for local clients since the last call, in order.
    pub fn take_outbox(&mut self) -> Vec<(u64, Vec<u8>)> {
        self.signalled = false;
        self.outbox_index.clear();
        std::mem::take(&mut self.outbox)
    }

    /// Appends a frame to the client's share of the outbox.
    fn queue(&mut self, client: u64, frame: &[u8]) {
        let i = *self.outbox_index.entry(client).or_insert_with(|| {
            // Room for a batch of frames at once: growing by doubling
            // showed up as realloc in profiles.
            self.outbox.push((client, Vec::with_capacity(16 << 10)));
            self.outbox.len() - 1
        });
        self.outbox[i].1.extend_from_slice(frame);
        self.signal();
    }

    /// Slots whose rings need a wake-up (bit per slot) since the last call.
    pub fn take_wakes(&mut self) -> u32 {
        std::mem::take(&mut self.wakes)
    }

    /// Whether messages wait for a full ring to drain.
    pub fn has_backlog(&self) -> bool {
        !self.backlog.is_empty()
    }

    /// A command starts: what the last one removed is forgotten.
    pub(crate) fn command_started(&mut self) {
        self.removal = None;
    }

    /// Marks the client whose command runs now (0: none).
    pub(crate) fn set_current(&mut self, client: u64) {
        self.current = client;
    }

    /// The client whose command runs now (0: none).
    pub(crate) fn current(&self) -> u64 {
        self.current
    }

    /// This worker's slot.
    pub(crate) fn slot(&self) -> u32 {
        self.slot
    }

    /// Queues a frame for a local client (tracking's invalidations).
    pub(crate) fn queue_frame(&mut self, client: u64, frame: &[u8]) {
        self.queue(client, frame);
    }

    /// Sends a routed message to one other worker.
    pub(crate) fn send_routed(&mut self, slot: u32, msg: &Routed<'_>) {
        let mut wire = std::mem::take(&mut self.wire);
        msg.encode_into(&mut wire);
        self.send(slot, &wire);
        self.wire = wire;
    }

    /// Frames for the running client, to go before its reply.
    pub(crate) fn take_current_frames(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.current_frames)
    }

    fn protocol_of(&self, client: u64) -> Protocol {
        self.protocols
            .get(&client)
            .copied()
            .unwrap_or(Protocol::Resp2)
    }

    /// The subscribers of `name` in `map`, copied into the reused id
    /// buffer (give it back through `self.ids`), so that frames can be
    /// emitted while iterating.
    fn ids_in(&mut self, shard: bool, name: &[u8]) -> Vec<u64> {
        let mut ids = std::mem::take(&mut self.ids);
        ids.clear();
        let map = if shard { &self.shard } else { &self.channels };
        if let Some(list) = map.get(name) {
            ids.extend_from_slice(list);
        }
        ids
    }

    fn emit(&mut self, client: u64, frames: &mut Frames<'_>) {
        let f = frames.get(self.protocol_of(client));
        if client == self.current && client != 0 {
            self.current_frames.extend_from_slice(f);
        } else {
            self.queue(client, f);
        }
    }

    /// Sends `msg` to every worker with a receiver and delivers it here;
    /// returns the number of receivers.
    pub(crate) fn route(&mut self, msg: &Routed<'_>) -> u64 {
        let mask = match msg.tag {
            Tag::Monitor => self.store.monitor_slots(),
            Tag::Key | Tag::KeyDb => self.store.key_subscriber_slots(),
            _ => self.store.pubsub_slots(),
        }
        .unwrap_or(0);
        let mut total = 0;
        let mut wire = std::mem::take(&mut self.wire);
        let mut encoded = false;
        for slot in bits(mask) {
            if slot == self.slot {
                total += self.deliver(msg);
                continue;
            }
            let (n, send) = self.remote_receivers(slot, msg);
            total += n;
            if send {
                if !encoded {
                    msg.encode_into(&mut wire);
                    encoded = true;
                }
                self.send(slot, &wire);
            }
        }
        self.wire = wire;
        if matches!(msg.tag, Tag::Channel | Tag::Nats) && mask != 0 {
            total += self.route_queues(mask, msg);
        }
        total
    }

    /// How many of `slot`'s clients receive `msg`, and whether to send it.
    fn remote_receivers(&mut self, slot: u32, msg: &Routed<'_>) -> (u64, bool) {
        let (kind, pattern_kind) = match msg.tag {
            Tag::Channel | Tag::Nats => (SubKind::Channel, Some(SubKind::Channel)),
            Tag::Shard => (SubKind::Shard, None),
            Tag::Key => (SubKind::Key(msg.db), Some(SubKind::Key(msg.db))),
            Tag::Monitor | Tag::KeyDb | Tag::Tracking => return (0, true),
            // Sent to the chosen worker only (route_queues).
            Tag::Queue => return (0, false),
        };
        let mut n = match self.store.subscribers(slot, kind, msg.name) {
            Ok(Receivers::Exactly(n)) => n as u64,
            Ok(Receivers::Unknown) => return (0, true),
            Err(_) => 0,
        };
        if let Some(pk) = pattern_kind {
            n += self
                .patterns_of(slot)
                .iter()
                .filter(|p| p.kind == pk && glob_match(&p.pattern, msg.name, false))
                .map(|p| p.count as u64)
                .sum::<u64>();
        }
        (n, n > 0)
    }

    /// `slot`'s pattern subscriptions, re-read when they changed.
    fn patterns_of(&mut self, slot: u32) -> &[PatternSub] {
        let Some(cached) = self.pattern_cache.get_mut(slot as usize) else {
            return &[];
        };
        let generation = self.store.patterns_generation(slot).unwrap_or(0);
        if cached.0 != generation {
            cached.0 = self.store.patterns(slot, &mut cached.1).unwrap_or(u64::MAX);
        }
        &cached.1
    }

    /// Appends one routed message to `slot`'s ring, in fragments when large.
    fn send(&mut self, slot: u32, bytes: &[u8]) {
        let pieces: Vec<&[u8]> = if bytes.is_empty() {
            vec![bytes]
        } else {
            bytes.chunks(FRAGMENT).collect()
        };
        let last = pieces.len() - 1;
        for (i, piece) in pieces.into_iter().enumerate() {
            let kind = if i == last {
                MAILBOX_MESSAGE
            } else {
                MAILBOX_FRAGMENT
            };
            self.send_piece(slot, kind, piece);
        }
    }

    fn send_piece(&mut self, slot: u32, kind: u32, piece: &[u8]) {
        let queued = self.backlog_bytes.get(&slot).copied().unwrap_or(0);
        if queued == 0 {
            match self.ring.mailbox_send(slot, kind, self.slot, 0, piece) {
                Ok(Sent::Delivered { wake }) => {
                    if wake {
                        self.wakes |= 1 << slot;
                        self.signal();
                    }
                    return;
                }
                Ok(Sent::Full) => {}
                Err(_) => return,
            }
        }
        if queued + piece.len() > BACKLOG_LIMIT {
            // That worker has not drained for a long while: drop what is
            // queued for it rather than grow without bound.
            self.drop_backlog(slot);
        }
        *self.backlog_bytes.entry(slot).or_default() += piece.len();
        self.backlog.push_back((slot, kind, piece.to_vec()));
        self.signal();
    }

    fn drop_backlog(&mut self, slot: u32) {
        self.backlog.retain(|(s, _, _)| *s != slot);
        self.backlog_bytes.remove(&slot);
    }

    /// Moves what waits in the backlog into rings with room, in order.
    /// Messages for workers no longer alive are dropped.
    pub fn flush_backlog(&mut self) {
        let alive: u32 = self
            .store
            .workers()
            .unwrap_or_default()
            .iter()
            .fold(0, |m, w| m | 1 << w.slot);
        let mut blocked = 0u32;
        let mut keep = VecDeque::new();
        while let Some((slot, kind, piece)) = self.backlog.pop_front() {
            if alive & (1 << slot) == 0 {
                continue;
            }
            if blocked & (1 << slot) != 0 {
                keep.push_back((slot, kind, piece));
                continue;
            }
            match self.ring.mailbox_send(slot, kind, self.slot, 0, &piece) {
                Ok(Sent::Delivered { wake }) => {
                    if wake {
                        self.wakes |= 1 << slot;
                    }
                }
                Ok(Sent::Full) => {
                    blocked |= 1 << slot;
                    keep.push_back((slot, kind, piece));
                }
                Err(_) => {}
            }
        }
        self.backlog_bytes.clear();
        for (slot, _, piece) in &keep {
            *self.backlog_bytes.entry(*slot).or_default() += piece.len();
        }
        self.backlog = keep;
    }

    /// Delivers a message to this worker's subscribers; returns how many.
    pub(crate) fn deliver(&mut self, msg: &Routed<'_>) -> u64 {
        match msg.tag {
            Tag::Channel | Tag::Nats => self.deliver_channel(msg),
            Tag::Queue => self.deliver_queue(msg),
            Tag::Shard => {
                let parts = [
                    Part::Bulk(b"smessage"),
                    Part::Bulk(msg.name),
                    Part::Bulk(msg.data),
                ];
                let mut frames = Frames::new(&parts);
                let clients = self.ids_in(true, msg.name);
                for &c in &clients {
                    self.emit(c, &mut frames);
                }
                let n = clients.len() as u64;
                self.ids = clients;
                n
            }
            Tag::Key => self.deliver_key(msg),
            // The engine reads the keys again (Engine::refresh_keys), or
            // handles tracking itself.
            Tag::KeyDb | Tag::Tracking => 0,
            Tag::Monitor => {
                let mut line = Vec::with_capacity(msg.data.len() + 3);
                line.push(b'+');
                line.extend_from_slice(msg.data);
                line.extend_from_slice(b"\r\n");
                let monitors = self.monitors.clone();
                for &c in &monitors {
                    self.queue(c, &line);
                }
                monitors.len() as u64
            }
        }
    }

    fn deliver_channel(&mut self, msg: &Routed<'_>) -> u64 {
        let (envelope, payload) = match msg.tag {
            Tag::Nats => match nats::decode(msg.data) {
                Some((env, payload)) => (Some(env), payload),
                None => return 0,
            },
            _ => (None, msg.data),
        };
        let mut n = 0;
        let clients = self.ids_in(false, msg.name);
        if !clients.is_empty() {
            let parts = [
                Part::Bulk(b"message"),
                Part::Bulk(msg.name),
                Part::Bulk(payload),
            ];
            let mut frames = Frames::new(&parts);
            let env = envelope.unwrap_or_default();
            let nats_parts = [
                Part::Bulk(b"message"),
                Part::Bulk(msg.name),
                Part::Bulk(payload),
                Part::Bulk(env.reply),
                Part::Bulk(env.headers),
            ];
            let mut nats_frames = Frames::new(&nats_parts);
            for &c in &clients {
                if envelope.is_some() && self.is_nats(c) {
                    self.emit(c, &mut nats_frames);
                } else {
                    self.emit(c, &mut frames);
                }
            }
            n += clients.len() as u64;
        }
        self.ids = clients;
        let retained = if self.retained.is_empty() {
            None
        } else {
            self.retained.remove(msg.name)
        };
        if let Some(mut local) = retained {
            n += local.subscribers.len() as u64;
            for (epoch, seq, data) in local.accept(msg.epoch, msg.seq, payload) {
                self.deliver_retained(msg.name, &mut local, epoch, seq, &data);
            }
            self.retained.insert(msg.name.to_vec(), local);
        }
        if self.patterns.is_empty() {
            return n;
        }
        let matching: Vec<(Vec<u8>, Vec<u64>)> = self
            .patterns
            .iter()
            .filter(|(p, _)| glob_match(p, msg.name, false))
            .cloned()
            .collect();
        let env = envelope.unwrap_or_default();
        for (pattern, clients) in matching {
            let parts = [
                Part::Bulk(b"pmessage"),
                Part::Bulk(&pattern),
                Part::Bulk(msg.name),
                Part::Bulk(payload),
            ];
            let mut frames = Frames::new(&parts);
            let nats_parts = [
                Part::Bulk(b"pmessage"),
                Part::Bulk(&pattern),
                Part::Bulk(msg.name),
                Part::Bulk(payload),
                Part::Bulk(env.reply),
                Part::Bulk(env.headers),
            ];
            let mut nats_frames = Frames::new(&nats_parts);
            for &c in &clients {
                if envelope.is_some() && self.is_nats(c) {
                    self.emit(c, &mut nats_frames);
                } else {
                    self.emit(c, &mut frames);
                }
            }
            n += clients.len() as u64;
        }
        n
    }

    /// Takes one ring message (or fragment) from another worker; returns
    /// the whole message once its last fragment came. `partial` holds the
    /// fragments so far per sending slot.
    fn reassemble<'p>(
        kind: u32,
        from: u32,
        payload: &'p [u8],
        partial: &mut HashMap<u32, Vec<u8>>,
    ) -> Option<std::borrow::Cow<'p, [u8]>> {
        if kind == MAILBOX_FRAGMENT {
            partial.entry(from).or_default().extend_from_slice(payload);
            return None;
        }
        Some(match partial.remove(&from) {
            Some(mut head) => {
                head.extend_from_slice(payload);
                std::borrow::Cow::Owned(head)
            }
            None => std::borrow::Cow::Borrowed(payload),
        })
    }

    /// Keys of `db` (None: every db) this worker's clients subscribe to,
    /// by KSUBSCRIBE or through a pattern.
    fn subscribed_keys(&self, db: Option<u8>) -> Vec<(u8, Vec<u8>)> {
        let mut keys: Vec<(u8, Vec<u8>)> = self
            .keys
            .keys()
            .filter(|(d, _)| db.is_none_or(|x| x == *d))
            .cloned()
            .collect();
        for ((d, _), subs) in &self.key_patterns {
            if db.is_some_and(|x| x != *d) {
                continue;
            }
            for (_, seen) in subs {
                keys.extend(seen.keys().map(|k| (*d, k.clone())));
            }
        }
        keys.sort();
        keys.dedup();
        keys
    }

    /// Forgets every subscription of a client that is going (closed, RESET).
    pub(crate) fn forget(&mut self, client: u64, subs: &mut ClientSubs) {
        for ch in std::mem::take(&mut subs.channels) {
            self.remove_channel(client, SubKind::Channel, &ch);
        }
        for ch in std::mem::take(&mut subs.shard) {
            self.remove_channel(client, SubKind::Shard, &ch);
        }
        for ch in std::mem::take(&mut subs.retained) {
            self.remove_retained(client, &ch);
        }
        for p in std::mem::take(&mut subs.patterns) {
            self.remove_pattern(client, &p);
        }
        for (db, key) in std::mem::take(&mut subs.keys) {
            self.remove_key(client, db, &key);
        }
        for (db, p) in std::mem::take(&mut subs.key_patterns) {
            self.remove_key_pattern(client, db, &p);
        }
        for key in std::mem::take(&mut subs.queues) {
            self.remove_queue_member(client, &key);
        }
        self.nats_clients.remove(&client);
        if std::mem::take(&mut subs.monitor) {
            self.monitors.retain(|&c| c != client);
            if self.monitors.is_empty() {
                let _ = self.store.set_monitoring(self.slot, false);
            }
        }
        self.protocols.remove(&client);
    }

    fn map_of(&mut self, kind: SubKind) -> &mut HashMap<Vec<u8>, Vec<u64>> {
        match kind {
            SubKind::Shard => &mut self.shard,
            _ => &mut self.channels,
        }
    }

    fn add_channel(&mut self, client: u64, kind: SubKind, channel: &[u8]) {
        self.map_of(kind)
            .entry(channel.to_vec())
            .or_default()
            .push(client);
        let _ = self.store.subscription_add(self.slot, kind, channel, 1);
    }

    fn remove_channel(&mut self, client: u64, kind: SubKind, channel: &[u8]) {
        let map = self.map_of(kind);
        if let Some(list) = map.get_mut(channel) {
            list.retain(|&c| c != client);
            if list.is_empty() {
                map.remove(channel);
            }
        }
        let _ = self.store.subscription_add(self.slot, kind, channel, -1);
    }

    fn add_pattern(&mut self, client: u64, pattern: &[u8]) {
        let count = match self.patterns.iter_mut().find(|(p, _)| p == pattern) {
            Some((_, list)) => {
                list.push(client);
                list.len()
            }
            None => {
                self.patterns.push((pattern.to_vec(), vec![client]));
                1
            }
        };
        let _ = self
            .store
            .set_pattern(self.slot, SubKind::Channel, pattern, count as u32);
    }

    fn remove_pattern(&mut self, client: u64, pattern: &[u8]) {
        let mut count = 0;
        if let Some(i) = self.patterns.iter().position(|(p, _)| p == pattern) {
            self.patterns[i].1.retain(|&c| c != client);
            count = self.patterns[i].1.len();
            if count == 0 {
                self.patterns.remove(i);
            }
        }
        let _ = self
            .store
            .set_pattern(self.slot, SubKind::Channel, pattern, count as u32);
    }

    /// Distinct channels (or shard channels) with subscribers here that
    /// match `pattern` (PUBSUB CHANNELS on every worker).
    pub fn channel_names(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let mut names: Vec<Vec<u8>> = if shard {
            self.shard.keys().cloned().collect()
        } else {
            self.channels
                .keys()
                .chain(self.retained.keys())
                .cloned()
                .collect()
        };
        if let Some(p) = pattern {
            names.retain(|n| glob_match(p, n, false));
        }
        names.sort();
        names.dedup();
        names
    }

    /// Channel patterns subscribed on every worker, counted once each
    /// (Redis's NUMPAT counts distinct patterns).
    fn distinct_patterns(&mut self) -> u64 {
        let mask = self.store.pubsub_slots().unwrap_or(0);
        let mut all: Vec<Vec<u8>> = self.patterns.iter().map(|(p, _)| p.clone()).collect();
        for slot in bits(mask) {
            if slot == self.slot {
                continue;
            }
            all.extend(
                self.patterns_of(slot)
                    .iter()
                    .filter(|p| p.kind == SubKind::Channel)
                    .map(|p| p.pattern.clone()),
            );
        }
        all.sort();
        all.dedup();
        all.len() as u64
    }

    /// INFO's pubsub_channels, pubsub_patterns and pubsubshard_channels:
    /// distinct channels, patterns and shard channels over every worker.
    pub(crate) fn info_counts(&self) -> (u64, u64, u64) {
        let mask = self.store.pubsub_slots().unwrap_or(0);
        let (mut channels, mut shard, mut patterns) = (Vec::new(), Vec::new(), Vec::new());
        let mut list = Vec::new();
        for slot in bits(mask) {
            let _ = self
                .store
                .subscribed_hashes(slot, SubKind::Channel, &mut channels);
            let _ = self
                .store
                .subscribed_hashes(slot, SubKind::Shard, &mut shard);
            if self.store.patterns(slot, &mut list).is_ok() {
                patterns.extend(
                    list.drain(..)
                        .filter(|p| p.kind == SubKind::Channel)
                        .map(|p| p.pattern),
                );
            }
        }
        fn distinct<T: Ord>(v: &mut Vec<T>) -> u64 {
            v.sort();
            v.dedup();
            v.len() as u64
        }
        (
            distinct(&mut channels),
            distinct(&mut patterns),
            distinct(&mut shard),
        )
    }

    /// Subscribers of `channel` on every worker (PUBSUB NUMSUB).
    fn count_everywhere(&self, kind: SubKind, channel: &[u8]) -> u64 {
        let mask = self.store.pubsub_slots().unwrap_or(0);
        bits(mask)
            .map(|slot| match self.store.subscribers(slot, kind, channel) {
                Ok(Receivers::Exactly(n)) => n as u64,
                _ => 0,
            })
            .sum()
    }

    /// Records the protocol the client's frames are written in.
    pub(crate) fn set_protocol(&mut self, client: u64, protocol: Protocol) {
        if let Some(p) = self.protocols.get_mut(&client) {
            *p = protocol;
        }
    }

    fn track(&mut self, client: u64, protocol: Protocol) {
        self.protocols.insert(client, protocol);
    }

    /// Starts MONITOR for a client.
    pub(crate) fn add_monitor(&mut self, client: u64, protocol: Protocol) {
        self.track(client, protocol);
        if !self.monitors.contains(&client) {
            self.monitors.push(client);
        }
        let _ = self.store.set_monitoring(self.slot, true);
    }

    /// Whether any worker has a MONITOR client (one load per command).
    pub(crate) fn monitored(&self) -> bool {
        self.store.monitor_slots().unwrap_or(0) != 0
    }
}

impl Engine {
    /// Publishes `message` on `channel` to every subscriber on every worker;
    /// returns how many clients receive it.
    pub(crate) fn publish(&mut self, channel: &[u8], message: &[u8]) -> u64 {
        // A retained channel keeps the payload alone: the envelope of a
        // NATS publish does not go through it.
        let envelope = self.pubsub.envelope.take();
        if !self.config.lvc_channels.is_empty() && self.is_retained(channel) {
            return self.publish_retained(channel, message);
        }
        if let Some((reply, headers)) = envelope {
            return self.publish_envelope(channel, message, &reply, &headers);
        }
        self.pubsub.route(&Routed {
            tag: Tag::Channel,
            db: 0,
            seq: 0,
            epoch: 0,
            name: channel,
            data: message,
        })
    }

    /// Takes one pub/sub ring message (or fragment) from another worker and
    /// delivers it here. `partial` holds fragments per sending slot.
    pub fn receive_pubsub(
        &mut self,
        kind: u32,
        from: u32,
        payload: &[u8],
        partial: &mut HashMap<u32, Vec<u8>>,
    ) {
        let Some(whole) = PubSub::reassemble(kind, from, payload, partial) else {
            return;
        };
        self.pubsub.command_started();
        match Routed::decode(&whole) {
            Some(msg) if msg.tag == Tag::KeyDb => {
                self.refresh_keys((msg.db != ALL_DBS).then_some(msg.db));
            }
            Some(msg) if msg.tag == Tag::Tracking => self.receive_tracking(from, &msg),
            Some(msg) => {
                self.pubsub.deliver(&msg);
            }
            None => {}
        }
    }

    /// Every key of `db` (None: all) changed at once: key subscribers on
    /// every worker get their keys' values again.
    pub(crate) fn keys_reset(&mut self, db: Option<u8>) {
        if self.store.key_subscriber_slots().unwrap_or(0) == 0 {
            return;
        }
        self.pubsub.route(&Routed {
            tag: Tag::KeyDb,
            db: db.unwrap_or(ALL_DBS),
            seq: 0,
            epoch: 0,
            name: b"",
            data: b"",
        });
        self.refresh_keys(db);
    }

    /// Sends this worker's key subscribers the values their keys have now.
    fn refresh_keys(&mut self, db: Option<u8>) {
        for (d, key) in self.pubsub.subscribed_keys(db) {
            let value = self.key_value(d, &key);
            self.pubsub.deliver_key(&Routed {
                tag: Tag::Key,
                db: d,
                seq: value.version,
                epoch: 0,
                name: &key,
                data: &value.resp,
            });
        }
    }

    /// This worker's pub/sub state (the server delivers its frames).
    pub fn pubsub(&mut self) -> &mut PubSub {
        &mut self.pubsub
    }

    /// A connection closed: its subscriptions go.
    pub fn client_closed(&mut self, session: &mut Session) {
        let mut subs = std::mem::take(&mut session.subs);
        self.pubsub.forget(session.id, &mut subs);
        self.tracking_client_gone(session.id);
    }

    /// Sends the MONITOR line of a command about to run.
    pub(crate) fn feed_monitors(&mut self, session: &Session, args: &[Arg<'_>]) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let from = if session.in_script {
            "lua"
        } else {
            &session.addr
        };
        let mut line = format!(
            "{}.{:06} [{} {from}]",
            now.as_secs(),
            now.subsec_micros(),
            session.db,
        );
        let redacted = redacted_args(args);
        for (i, a) in args.iter().enumerate() {
            line.push(' ');
            if redacted.contains(&i) {
                line.push_str("\"(redacted)\"");
            } else {
                quote(&mut line, a);
            }
        }
        self.pubsub.route(&Routed {
            tag: Tag::Monitor,
            db: 0,
            seq: 0,
            epoch: 0,
            name: b"",
            data: line.as_bytes(),
        });
    }
}

/// Whether MONITOR shows a command: not administrative ones (a container's
/// subcommand decides, e.g. CONFIG GET), as in Redis.
pub(crate) fn shown_in_monitor(cmd: &crate::command::Command, args: &[Arg<'_>]) -> bool {
    let flags = if cmd.subcommands.is_empty() || args.len() < 2 {
        cmd.flags
    } else {
        crate::command::find_sub(cmd, args).map_or(cmd.flags, |c| c.flags)
    };
    flags & (crate::command::flags::ADMIN | crate::command::flags::SKIP_MONITOR) == 0
}

/// Positions of secrets MONITOR must not show: AUTH's arguments and
/// HELLO's AUTH username and password, as Redis redacts them.
fn redacted_args(args: &[Arg<'_>]) -> Vec<usize> {
    let name = args.first().map(|a| a.to_ascii_lowercase());
    match name.as_deref() {
        Some(b"auth") => (1..args.len()).collect(),
        Some(b"hello") => args
            .iter()
            .position(|a| a.eq_ignore_ascii_case(b"auth"))
            .map(|i| (i + 1..(i + 3).min(args.len())).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Redis's `sdscatrepr`: a quoted, escaped argument for MONITOR lines.
pub(crate) fn quote(out: &mut String, arg: &[u8]) {
    out.push('"');
    for &b in arg {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routed_messages_survive_the_wire_and_garbage_is_refused() {
        let m = Routed {
            tag: Tag::Key,
            db: 7,
            seq: 42,
            epoch: 0,
            name: b"key",
            data: b"$1\r\nv\r\n",
        };
        let bytes = m.encode();
        assert_eq!(Routed::decode(&bytes), Some(m));
        assert_eq!(Routed::decode(&bytes[..10]), None);
        let mut bad = bytes.clone();
        bad[0] = 9;
        assert_eq!(Routed::decode(&bad), None);
        let mut long = bytes;
        long[12] = 200;
        assert_eq!(Routed::decode(&long), None);
        assert_eq!(Routed::decode(&[]), None);
    }

    proptest::proptest! {
        /// Ring messages are bytes another process wrote (I1): any bytes
        /// decode to a message or to nothing, never a panic, and a decoded
        /// message encodes back to the same bytes.
        #[test]
        fn any_ring_bytes_decode_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..96)) {
            if let Some(m) = Routed::decode(&bytes) {
                let again = m.encode();
                proptest::prop_assert_eq!(Routed::decode(&again), Some(m));
            }
        }
    }

    #[test]
    fn monitor_arguments_are_quoted_as_redis_does() {
        let mut s = String::new();
        quote(&mut s, b"a \"b\"\n\x01\\");
        assert_eq!(s, r#""a \"b\"\n\x01\\""#);
    }
}
