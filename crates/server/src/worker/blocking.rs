//! Blocked clients (BLPOP & co.). A blocking command that finds nothing ends
//! with `Flow::Block`; its connection registers here and parks (reads no
//! more requests) until one of three things happens: a key it waits on is
//! written and its command, run again, finds something; its deadline passes;
//! or it is closed, killed or unblocked.
//!
//! Each worker keeps its own registry: per (db, key) a queue of the clients
//! waiting on it, in the order they blocked. After every command (and every
//! re-run) the worker takes the keys the engine signalled ready and serves
//! their queues synchronously, as Redis does: waiters are tried in order, a
//! waiter whose command finds nothing again keeps its place (and ends the
//! round for that key: the key has nothing left), a waiter served leaves and
//! the next one tries.
//!
//! Other workers learn about a ready key through the waiter table in the
//! segment (`store::waiter_word`, design.md I14): one word per key hash, one
//! bit per worker slot with local waiters on a key of that hash. A writing
//! worker sends each worker whose bit is set a KEY_READY message; no wake-up
//! is lost because a blocking client sets its worker's bit before running
//! its command one last time before parking.
//!
//! The order is one across workers: a waiter's `seq` is its place in the
//! server-wide order of blocking, and each worker publishes the oldest
//! `seq` of each of its queues (per key and popped type) in the segment
//! (`Store::set_waiter_head`). A worker serving a ready key stops where
//! another worker's head is older than its own next waiter: that worker
//! got the same announcement and serves it. Whenever a waiter leaves (it
//! was served, timed out, closed or was unblocked), its keys are announced
//! again to the other workers with waiters on them, so the next in line,
//! wherever it is, gets its turn.
//!
//! Redis serves a whole chain of blocked clients (BLMOVE into a key another
//! client waits on, …) before the writing client gets its reply. Here the
//! chain may cross workers, so the wake-ups a command causes form a round:
//! the writing worker holds a weight of 2^62 for it, every announcement of
//! the round carries part of the weight it was sent with, and a worker that
//! has handled one sends back to the round's origin what it did not pass
//! on (`ROUND_DONE`). When all the weight is back, no wake-up of the round
//! is left anywhere, and the writer's reply goes out (`wait_round`). The
//! weights are powers of two carried in the message's request word; a
//! round too deep to split further goes on untracked (its reply may then
//! leave before the chain's end, as it did before rounds).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::rc::Rc;

use engine::command::{Arg, Command};
use engine::{BlockRequest, Engine, Flow, Session};
use store::{
    waiter_queue, waiter_word, Store, ValueType, WorkerCounter, MAX_WORKERS, WAITER_WORDS,
};
use tokio::sync::Notify;

/// How a blocked client's wait ended, when something other than its own
/// connection ended it.
pub(crate) enum Outcome {
    /// Its command ran again and was served: the reply, and what the
    /// connection does next.
    Served {
        /// The re-run's reply bytes.
        reply: Vec<u8>,
        /// The re-run's flow (never `Block`).
        flow: Flow,
    },
    /// CLIENT UNBLOCK: reply as on a timeout or, with `error`, -UNBLOCKED.
    Unblocked {
        /// ERROR rather than TIMEOUT.
        error: bool,
    },
}

/// One parked client.
struct Waiter {
    /// Its place in every queue it is in, server-wide (smaller blocked
    /// earlier).
    seq: u64,
    session: Rc<RefCell<Session>>,
    cmd: Option<&'static Command>,
    /// The blocking command, kept to run again.
    args: Vec<Arg<'static>>,
    db: u8,
    /// The type it pops from.
    wants: ValueType,
    /// The keys it waits on, without duplicates.
    keys: Vec<Vec<u8>>,
    wake: Rc<Notify>,
}

/// A queue's name: the db byte, then the key (so a `&[u8]` looks it up).
fn queue_name(db: u8, key: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(key.len() + 1);
    name.push(db);
    name.extend_from_slice(key);
    name
}

#[derive(Default)]
struct Registry {
    next_seq: u64,
    waiters: HashMap<u64, Waiter>,
    /// Per queue name, the waiting client ids by `seq`.
    queues: HashMap<Vec<u8>, BTreeMap<u64, u64>>,
    /// Per waiter-table word, how many (waiter, key) pairs of this worker
    /// hash there: the worker's bit is set while the count is not 0.
    words: Vec<u32>,
    /// Ends decided for clients whose connection has not looked yet.
    outcomes: HashMap<u64, Outcome>,
    /// Ready keys to announce to other workers, by round (0: none), then
    /// by slot.
    outbox: BTreeMap<u64, Announcements>,
    /// Weight this worker holds per round, to pass on or give back.
    held: BTreeMap<u64, u64>,
    /// Rounds started here whose weight is not all back: the weight out,
    /// and what a reply waiting for the round waits on.
    origins: BTreeMap<u64, (u64, Rc<Notify>)>,
    /// Rounds started so far (the round's number).
    rounds: u64,
}

/// Ready keys to announce, by worker slot.
pub(crate) type Announcements = BTreeMap<u32, BTreeSet<(u8, Vec<u8>)>>;

/// A round's whole weight.
const ROUND_WEIGHT: u64 = 1 << 62;
/// Rounds started here kept waiting for their weight at most (older ones
/// are forgotten: their weight was lost with a worker).
const MAX_ORIGINS: usize = 1024;
/// The announcement being handled came untracked: so does what it causes.
const UNTRACKED: u64 = 1;

/// A round's id: the origin's slot and its number, with the low 6 bits free
/// for the weight code of one message.
fn round_id(slot: u32, number: u64) -> u64 {
    (slot as u64) << 58 | (number & ((1 << 52) - 1)) << 6
}

/// The slot that started a round.
pub(crate) fn round_origin(round: u64) -> u32 {
    (round >> 58) as u32
}

/// A message's request word: its round and the weight it carries (code 0:
/// untracked; code c: 2^(c-1)).
pub(crate) fn round_request(round: u64, weight: u64) -> u64 {
    if round == 0 || !weight.is_power_of_two() {
        return 0;
    }
    round | (weight.trailing_zeros() as u64 + 1)
}

/// The round and weight of a message's request word (round 0: untracked).
pub(crate) fn round_of_request(request: u64) -> (u64, u64) {
    match request & 63 {
        0 => (0, 0),
        code => (request & !63, 1u64 << (code - 1).min(62)),
    }
}

/// Splits a held weight over `messages` messages: each one's weight (a
/// power of two; 0 when too small to split: the messages go untracked) and
/// what is left to give back.
pub(crate) fn split_weight(held: u64, messages: u64) -> (u64, u64) {
    if messages == 0 {
        return (0, held);
    }
    let share = held / (messages + 1);
    if share == 0 {
        return (0, held);
    }
    let each = 1u64 << (63 - share.leading_zeros());
    (each, held - each * messages)
}

/// What one flush of the outbox sends: announcements, and weights given
/// back to rounds' origins.
#[derive(Default)]
pub(crate) struct Flush {
    /// Per round (0: none) and slot, the keys to announce.
    pub announce: BTreeMap<u64, Announcements>,
    /// Weight held per round, to split over the round's messages.
    pub held: BTreeMap<u64, u64>,
}

/// What running a waiter's command again did.
enum Rerun {
    /// Nothing for it yet: it keeps its place.
    Blocked,
    /// Its session is in use (it is not really parked): skip it.
    Busy,
    /// It is no longer registered.
    Gone,
    /// It got its reply.
    Served(Vec<u8>, Flow),
}

/// This worker's blocked clients.
pub(crate) struct Blocking {
    slot: u32,
    store: Store,
    reg: RefCell<Registry>,
    /// Wakes the task that sends the outbox (see [`send_ready`]).
    pub outbox_ready: Notify,
    /// A waiter's re-run was held by CLIENT PAUSE (it pops: a write): its
    /// keys are tried again when the pause ends (`pause::timer`).
    held_by_pause: std::cell::Cell<bool>,
    /// Signalled when `held_by_pause` is set.
    pub held_notice: Notify,
    /// The round of the announcement being handled (0: none; [`UNTRACKED`]).
    handling: std::cell::Cell<u64>,
    /// Inside a command's own serving (not a handled announcement): its
    /// announcements start a round.
    local: std::cell::Cell<bool>,
    /// The round the current command's serving started (0: none).
    opened: std::cell::Cell<u64>,
    /// The round a connection's reply waits for (see [`Blocking::defer_reply`]).
    reply_round: std::cell::Cell<u64>,
}

impl Blocking {
    /// An empty registry for the worker in `slot`. Clears the slot's bits a
    /// killed predecessor may have left in the waiter table.
    pub fn new(slot: u32, store: Store) -> Result<Blocking, store::Error> {
        store.clear_waiters(slot)?;
        store.clear_waiter_heads(slot)?;
        Ok(Blocking {
            slot,
            store,
            reg: RefCell::new(Registry {
                next_seq: 1,
                words: vec![0; WAITER_WORDS as usize],
                ..Registry::default()
            }),
            outbox_ready: Notify::new(),
            held_by_pause: Default::default(),
            held_notice: Notify::new(),
            handling: Default::default(),
            local: Default::default(),
            opened: Default::default(),
            reply_round: Default::default(),
        })
    }

    /// Registers client `id` as blocked on `req`'s keys, at the back of each
    /// key's queue, and sets this worker's bits in the waiter table (I14:
    /// before the caller runs the command one last time).
    pub fn block(
        &self,
        session: Rc<RefCell<Session>>,
        id: u64,
        cmd: Option<&'static Command>,
        args: &[Arg<'_>],
        req: &BlockRequest,
    ) {
        let mut reg = self.reg.borrow_mut();
        if reg.waiters.contains_key(&id) {
            return;
        }
        let seq = match self.store.next_waiter_seq() {
            Ok(seq) => seq,
            // Unreachable with a sane segment; the local order still holds.
            Err(_) => reg.next_seq,
        };
        reg.next_seq = reg.next_seq.max(seq) + 1;
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(req.keys.len());
        for k in &req.keys {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
        for k in &keys {
            reg.queues
                .entry(queue_name(req.db, k))
                .or_default()
                .insert(seq, id);
            let word = waiter_word(req.db, k) as usize;
            reg.words[word] += 1;
            if reg.words[word] == 1 {
                let _ = self.store.add_waiter(word as u32, self.slot);
            }
        }
        let published: Vec<(u8, Vec<u8>)> = keys.iter().map(|k| (req.db, k.clone())).collect();
        reg.waiters.insert(
            id,
            Waiter {
                seq,
                session,
                cmd,
                args: match &req.rerun {
                    Some(again) => again.iter().map(|a| Cow::Owned(a.clone())).collect(),
                    None => args.iter().map(|a| Cow::Owned(a.to_vec())).collect(),
                },
                db: req.db,
                wants: req.wants,
                keys,
                wake: Rc::new(Notify::new()),
            },
        );
        // Before the caller's last look, like the bits (I14).
        self.publish_heads(&reg, &published, req.wants);
        let _ = self
            .store
            .add_worker_counter(self.slot, WorkerCounter::Blocked, 1);
    }

    /// Publishes this worker's oldest waiter popping `wants` on each of
    /// `keys` (or that it has none) for the other workers to order against.
    /// Stream readers each want their own part of a stream: no order.
    fn publish_heads(&self, reg: &Registry, keys: &[(u8, Vec<u8>)], wants: ValueType) {
        if wants == ValueType::Stream {
            return;
        }
        for (db, key) in keys {
            let oldest = reg.queues.get(&queue_name(*db, key)).and_then(|q| {
                q.iter()
                    .find(|(_, id)| reg.waiters.get(id).is_some_and(|w| w.wants == wants))
                    .map(|(&seq, _)| seq)
            });
            let queue = waiter_queue(*db, key, wants as u8);
            let _ = self.store.set_waiter_head(self.slot, queue, oldest);
        }
    }

    /// Takes client `id` out of every queue (idempotent); clears this
    /// worker's bit from words it no longer waits on, and announces its keys
    /// to the other workers with waiters on them (one may have been waiting
    /// for this one's turn to pass). Returns the waiter.
    fn remove(&self, id: u64) -> Option<Waiter> {
        let w = self.take_out(id)?;
        if w.wants != ValueType::Stream {
            let keys: Vec<(u8, Vec<u8>)> = w.keys.iter().map(|k| (w.db, k.clone())).collect();
            self.announce(&keys);
        }
        Some(w)
    }

    fn take_out(&self, id: u64) -> Option<Waiter> {
        let mut reg = self.reg.borrow_mut();
        let w = reg.waiters.remove(&id)?;
        for k in &w.keys {
            let name = queue_name(w.db, k);
            if let Some(q) = reg.queues.get_mut(&name) {
                q.remove(&w.seq);
                if q.is_empty() {
                    reg.queues.remove(&name);
                }
            }
            let word = waiter_word(w.db, k) as usize;
            reg.words[word] = reg.words[word].saturating_sub(1);
            if reg.words[word] == 0 {
                let _ = self.store.remove_waiter(word as u32, self.slot);
            }
        }
        let keys: Vec<(u8, Vec<u8>)> = w.keys.iter().map(|k| (w.db, k.clone())).collect();
        self.publish_heads(&reg, &keys, w.wants);
        if reg.waiters.is_empty() {
            // An overflowed table counts again once it is empty.
            let _ = self.store.reset_overflowed_waiter_heads(self.slot);
        }
        let _ = self
            .store
            .add_worker_counter(self.slot, WorkerCounter::Blocked, -1);
        Some(w)
    }

    /// Ends client `id`'s wait from its own connection (timeout, close,
    /// kill, or its last look found something).
    pub fn unblock(&self, id: u64) {
        self.remove(id);
    }

    /// The notifier that tells client `id`'s connection an [`Outcome`] is
    /// waiting (None once it is no longer blocked).
    pub fn waker(&self, id: u64) -> Option<Rc<Notify>> {
        self.reg.borrow().waiters.get(&id).map(|w| w.wake.clone())
    }

    /// The end decided for client `id`, if any.
    pub fn take_outcome(&self, id: u64) -> Option<Outcome> {
        self.reg.borrow_mut().outcomes.remove(&id)
    }

    /// Ends `id`'s wait with `outcome` and wakes its connection.
    fn finish(&self, id: u64, outcome: Outcome) -> bool {
        let Some(w) = self.remove(id) else {
            return false;
        };
        self.reg.borrow_mut().outcomes.insert(id, outcome);
        w.wake.notify_one();
        true
    }

    /// CLIENT UNBLOCK for a client of this worker: whether it was blocked.
    pub fn client_unblock(&self, id: u64, error: bool) -> bool {
        self.finish(id, Outcome::Unblocked { error })
    }

    /// The keys this worker's clients wait on whose table word is `word`
    /// (for a WORD_READY message).
    pub fn keys_of_word(&self, word: u32) -> Vec<(u8, Vec<u8>)> {
        self.reg
            .borrow()
            .queues
            .keys()
            .filter_map(|name| {
                let (&db, key) = name.split_first()?;
                (waiter_word(db, key) == word).then(|| (db, key.to_vec()))
            })
            .collect()
    }

    /// Every key some client here waits on.
    pub fn all_keys(&self) -> Vec<(u8, Vec<u8>)> {
        self.reg
            .borrow()
            .queues
            .keys()
            .filter_map(|name| {
                let (&db, key) = name.split_first()?;
                Some((db, key.to_vec()))
            })
            .collect()
    }

    /// Whether a waiter's re-run was held by a pause since the last call.
    pub fn take_held_by_pause(&self) -> bool {
        self.held_by_pause.take()
    }

    /// Takes the keys to announce to other workers and the weights held.
    pub fn take_flush(&self) -> Flush {
        let mut reg = self.reg.borrow_mut();
        Flush {
            announce: std::mem::take(&mut reg.outbox),
            held: std::mem::take(&mut reg.held),
        }
    }

    /// Serves the clients blocked on `keys` (ready keys another worker
    /// announced) and on every key the engine signalled ready: call it after
    /// each command. Keys written here are also announced to the other
    /// workers with waiters on them. Returns the round those announcements
    /// started, if any (a reply may wait for it: [`Blocking::wait_round`]).
    pub fn serve_ready(&self, engine: &mut Engine, keys: Vec<(u8, Vec<u8>)>) -> Option<u64> {
        let outer = self.handling.get() == 0 && !self.local.get();
        if outer {
            self.local.set(true);
        }
        let mut pending: VecDeque<(u8, Vec<u8>)> = keys.into();
        loop {
            let written = engine.take_ready_keys();
            if !written.is_empty() {
                self.announce(&written);
                pending.extend(written);
            }
            let Some((db, key)) = pending.pop_front() else {
                break;
            };
            self.serve_key(engine, db, &key);
        }
        if !outer {
            return None;
        }
        self.local.set(false);
        Some(self.opened.take()).filter(|&r| r != 0)
    }

    /// Serves the keys of an announcement from another worker, sent with
    /// `request` (its round and weight): what this causes joins the round,
    /// and the weight goes on with it or back to the origin.
    pub fn serve_announced(&self, engine: &mut Engine, keys: Vec<(u8, Vec<u8>)>, request: u64) {
        let (round, weight) = round_of_request(request);
        if round == 0 {
            self.handling.set(UNTRACKED);
        } else {
            *self.reg.borrow_mut().held.entry(round).or_default() += weight;
            self.handling.set(round);
        }
        self.serve_ready(engine, keys);
        self.handling.set(0);
        if round != 0 {
            self.outbox_ready.notify_one();
        }
    }

    /// The round new announcements belong to (0: none), starting one when
    /// a command's own serving makes its first.
    fn current_round(&self) -> u64 {
        match self.handling.get() {
            UNTRACKED => 0,
            0 if self.local.get() => {
                if self.opened.get() != 0 {
                    return self.opened.get();
                }
                let mut reg = self.reg.borrow_mut();
                reg.rounds += 1;
                let round = round_id(self.slot, reg.rounds);
                if reg.origins.len() >= MAX_ORIGINS {
                    reg.origins.pop_first();
                }
                reg.origins
                    .insert(round, (ROUND_WEIGHT, Rc::new(Notify::new())));
                *reg.held.entry(round).or_default() += ROUND_WEIGHT;
                self.opened.set(round);
                round
            }
            0 => 0,
            round => round,
        }
    }

    /// Weight of a round started here came back.
    pub fn round_done(&self, round: u64, weight: u64) {
        let mut reg = self.reg.borrow_mut();
        let Some((out, done)) = reg.origins.get_mut(&round) else {
            return;
        };
        *out = out.saturating_sub(weight);
        if *out == 0 {
            done.notify_one();
            reg.origins.remove(&round);
        }
    }

    /// Keeps `round` for the connection whose command started it: its
    /// reply waits for the round (taken with [`Blocking::take_reply_round`]).
    pub fn defer_reply(&self, round: u64) {
        self.reply_round.set(round);
    }

    /// The round the current connection's reply must wait for, if any.
    pub fn take_reply_round(&self) -> Option<u64> {
        Some(self.reply_round.take()).filter(|&r| r != 0)
    }

    /// Waits until every wake-up of `round` (started here) is handled,
    /// or `limit` passes (a worker that died mid-round never answers).
    pub async fn wait_round(&self, round: u64, limit: std::time::Duration) {
        let done = match self.reg.borrow().origins.get(&round) {
            Some((_, done)) => done.clone(),
            None => return,
        };
        let _ = tokio::time::timeout(limit, done.notified()).await;
        self.reg.borrow_mut().origins.remove(&round);
    }

    /// Queues `keys` for the other workers whose bit is set on their words.
    fn announce(&self, keys: &[(u8, Vec<u8>)]) {
        let mut any = false;
        for (db, key) in keys {
            // I14: the write that made the key ready is published; the fence
            // in `waiters_on` orders the read of the word after it.
            let Ok(bits) = self.store.waiters_on(waiter_word(*db, key)) else {
                continue;
            };
            let others = bits & !(1u32 << self.slot);
            if others == 0 {
                continue;
            }
            let round = self.current_round();
            let mut reg = self.reg.borrow_mut();
            for slot in (0..MAX_WORKERS).filter(|s| others & (1 << s) != 0) {
                reg.outbox
                    .entry(round)
                    .or_default()
                    .entry(slot)
                    .or_default()
                    .insert((*db, key.clone()));
                any = true;
            }
        }
        if any {
            self.outbox_ready.notify_one();
        }
    }

    /// Tries the clients waiting on one ready key, in the order they
    /// blocked, until one finds nothing.
    fn serve_key(&self, engine: &mut Engine, db: u8, key: &[u8]) {
        let name = queue_name(db, key);
        let mut after = 0;
        loop {
            let next = self
                .reg
                .borrow()
                .queues
                .get(&name)
                .and_then(|q| q.range(after..).next().map(|(&s, &id)| (s, id)));
            let Some((seq, id)) = next else {
                return;
            };
            after = seq + 1;
            if !self.wants_type_of(engine, id, db, key) {
                // The key now holds another type: this waiter keeps its
                // place without running (Redis 7.0).
                continue;
            }
            if self.older_elsewhere(id, seq, db, key) {
                // Its worker serves it, then announces the key again.
                return;
            }
            match self.rerun(engine, id) {
                // A stream's readers each want their own part of it (their
                // own group, or entries after their own ID): the next one
                // may find something.
                Rerun::Blocked if self.waits_for_stream(id) => continue,
                // The key has nothing left for anyone behind it either.
                Rerun::Blocked => return,
                Rerun::Busy | Rerun::Gone => continue,
                Rerun::Served(reply, flow) => {
                    self.finish(id, Outcome::Served { reply, flow });
                    // What the command wrote (BLMOVE's push) is ready in turn;
                    // `serve_ready` takes it after this key.
                }
            }
        }
    }

    /// Whether another worker has a client that blocked before waiter `id`
    /// (at `seq`) in the same queue of `key`.
    fn older_elsewhere(&self, id: u64, seq: u64, db: u8, key: &[u8]) -> bool {
        let wants = match self.reg.borrow().waiters.get(&id) {
            Some(w) if w.wants != ValueType::Stream => w.wants,
            _ => return false,
        };
        let Ok(slots) = self.store.waiters_on(waiter_word(db, key)) else {
            return false;
        };
        if slots & !(1u32 << self.slot) == 0 {
            return false;
        }
        let queue = waiter_queue(db, key, wants as u8);
        matches!(
            self.store.oldest_waiter_elsewhere(self.slot, queue, slots),
            Ok(Some(other)) if other < seq
        )
    }

    fn waits_for_stream(&self, id: u64) -> bool {
        self.reg
            .borrow()
            .waiters
            .get(&id)
            .is_some_and(|w| w.wants == ValueType::Stream)
    }

    /// Runs again the stream readers (XREADGROUP) one of whose keys was
    /// deleted or now holds another type, by DEL, an overwrite, FLUSHDB or
    /// SWAPDB on any worker: Redis ends their wait with an error. No write
    /// signals this, so the worker looks on each tick.
    pub fn serve_vanished_streams(&self, engine: &mut Engine) {
        let candidates: Vec<(u64, u8, Vec<Vec<u8>>)> = self
            .reg
            .borrow()
            .waiters
            .iter()
            .filter(|(_, w)| w.wants == ValueType::Stream)
            .map(|(&id, w)| (id, w.db, w.keys.clone()))
            .collect();
        for (id, db, keys) in candidates {
            let vanished = keys
                .iter()
                .any(|k| engine.key_type(db, k) != Some(ValueType::Stream));
            if !vanished {
                continue;
            }
            if let Rerun::Served(reply, flow) = self.rerun(engine, id) {
                self.finish(id, Outcome::Served { reply, flow });
            }
        }
    }

    /// Whether `key` holds the type waiter `id` pops from (or is missing).
    fn wants_type_of(&self, engine: &mut Engine, id: u64, db: u8, key: &[u8]) -> bool {
        let wants = match self.reg.borrow().waiters.get(&id) {
            Some(w) => w.wants,
            None => return true,
        };
        engine.key_type(db, key).is_none_or(|t| t == wants)
    }

    /// Runs waiter `id`'s command again.
    fn rerun(&self, engine: &mut Engine, id: u64) -> Rerun {
        let reg = self.reg.borrow();
        let Some(w) = reg.waiters.get(&id) else {
            return Rerun::Gone;
        };
        let Ok(mut session) = w.session.try_borrow_mut() else {
            return Rerun::Busy;
        };
        session.last_ms = engine.now_ms();
        let mut out = Vec::new();
        match engine.execute_resolved(&mut session, w.cmd, &w.args, &mut out) {
            Flow::Block(_) => Rerun::Blocked,
            // Paused: it stays blocked, its key is tried after the pause.
            Flow::Hold => {
                self.held_by_pause.set(true);
                self.held_notice.notify_one();
                Rerun::Blocked
            }
            flow => Rerun::Served(out, flow),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::{Config, ServerInfo};
    use store::{Location, OpenOptions};

    struct Fixture {
        engine: Engine,
        blocking: Blocking,
        store: Store,
        path: std::path::PathBuf,
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    fn fixture(tag: &str) -> Fixture {
        let path =
            std::env::temp_dir().join(format!("shoal-blocking-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = Store::open(&OpenOptions {
            location: Location::Path(path.clone()),
            size: 8 << 20,
            ..OpenOptions::default()
        })
        .unwrap();
        store.register_worker(2, 0).unwrap();
        let engine = Engine::new(store.clone(), Config::default(), ServerInfo::default()).unwrap();
        let blocking = Blocking::new(2, store.clone()).unwrap();
        Fixture {
            engine,
            blocking,
            store,
            path,
        }
    }

    fn args(words: &[&str]) -> Vec<Arg<'static>> {
        words
            .iter()
            .map(|w| Cow::Owned(w.as_bytes().to_vec()))
            .collect()
    }

    impl Fixture {
        /// Runs `words` for a client; a blocking command that finds nothing
        /// registers it (as the connection does).
        fn run(&mut self, session: &Rc<RefCell<Session>>, words: &[&str]) -> Option<String> {
            let a = args(words);
            let cmd = self.engine.resolve(&session.borrow(), &a, false);
            let mut out = Vec::new();
            let flow = self
                .engine
                .execute_resolved(&mut session.borrow_mut(), cmd, &a, &mut out);
            let id = session.borrow().id;
            let reply = match flow {
                Flow::Block(req) => {
                    self.blocking.block(session.clone(), id, cmd, &a, &req);
                    None
                }
                _ => Some(String::from_utf8_lossy(&out).into_owned()),
            };
            self.blocking.serve_ready(&mut self.engine, Vec::new());
            reply
        }

        fn served(&self, session: &Rc<RefCell<Session>>) -> Option<String> {
            match self.blocking.take_outcome(session.borrow().id)? {
                Outcome::Served { reply, flow } => {
                    assert_eq!(flow, Flow::Continue);
                    Some(String::from_utf8_lossy(&reply).into_owned())
                }
                Outcome::Unblocked { error } => Some(format!("unblocked error={error}")),
            }
        }

        /// The keys queued for other workers, by slot, over every round.
        fn announced(&self) -> Announcements {
            let mut all = Announcements::new();
            for (_, slots) in self.blocking.take_flush().announce {
                for (slot, keys) in slots {
                    all.entry(slot).or_default().extend(keys);
                }
            }
            all
        }

        fn bit(&self, key: &str) -> bool {
            self.store
                .waiters_on(waiter_word(0, key.as_bytes()))
                .unwrap()
                & (1 << 2)
                != 0
        }

        fn blocked_count(&self) -> u64 {
            self.store
                .workers()
                .unwrap_or_default()
                .iter()
                .map(|w| w.blocked)
                .sum()
        }
    }

    fn client(id: u64) -> Rc<RefCell<Session>> {
        Rc::new(RefCell::new(Session::new(id, 0)))
    }

    #[test]
    fn waiters_are_tried_in_order_and_keep_their_place() {
        let mut f = fixture("fifo");
        let (a, b, c, w) = (client(1), client(2), client(3), client(4));
        assert_eq!(f.run(&a, &["BLPOP", "q", "0"]), None);
        assert_eq!(f.run(&b, &["BLPOP", "other", "q", "0"]), None);
        assert_eq!(f.run(&c, &["BLPOP", "q", "q", "0"]), None);
        assert!(f.bit("q") && f.bit("other"));

        // One element: the first waiter only.
        assert_eq!(f.run(&w, &["RPUSH", "q", "x"]).unwrap(), ":1\r\n");
        assert_eq!(f.served(&a).unwrap(), "*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
        assert_eq!((f.served(&b), f.served(&c)), (None, None));
        // Two: the next two, in the order they blocked.
        assert_eq!(f.run(&w, &["RPUSH", "q", "y", "z"]).unwrap(), ":2\r\n");
        assert_eq!(f.served(&b).unwrap(), "*2\r\n$1\r\nq\r\n$1\r\ny\r\n");
        assert_eq!(f.served(&c).unwrap(), "*2\r\n$1\r\nq\r\n$1\r\nz\r\n");
        assert_eq!(f.run(&w, &["EXISTS", "q"]).unwrap(), ":0\r\n");
        // The last waiter gone, the worker's bits are clear.
        assert!(!f.bit("q") && !f.bit("other"));
    }

    #[test]
    fn a_served_move_makes_its_destination_ready() {
        let mut f = fixture("move");
        let (mover, popper, w) = (client(1), client(2), client(3));
        assert_eq!(
            f.run(&mover, &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]),
            None
        );
        assert_eq!(f.run(&popper, &["BLPOP", "dst", "0"]), None);
        f.run(&w, &["LPUSH", "src", "v"]);
        assert_eq!(f.served(&mover).unwrap(), "$1\r\nv\r\n");
        assert_eq!(f.served(&popper).unwrap(), "*2\r\n$3\r\ndst\r\n$1\r\nv\r\n");
    }

    #[test]
    fn keys_announced_by_another_worker_wake_waiters_and_unblock_cleans_up() {
        let mut f = fixture("remote");
        let (a, b) = (client(1), client(2));
        assert_eq!(f.run(&a, &["BRPOP", "r", "0"]), None);
        assert_eq!(f.run(&b, &["BRPOP", "s", "0"]), None);
        assert_eq!(f.blocked_count(), 2);
        // Another worker wrote "r": here the engine writes it and its ready
        // key is dropped, then the announcement arrives.
        let writer = client(3);
        let a2 = args(&["RPUSH", "r", "1"]);
        let cmd = f.engine.resolve(&writer.borrow(), &a2, false);
        f.engine
            .execute_resolved(&mut writer.borrow_mut(), cmd, &a2, &mut Vec::new());
        f.engine.take_ready_keys();
        assert_eq!(f.served(&a), None);
        f.blocking
            .serve_ready(&mut f.engine, vec![(0, b"r".to_vec())]);
        assert_eq!(f.served(&a).unwrap(), "*2\r\n$1\r\nr\r\n$1\r\n1\r\n");

        // CLIENT UNBLOCK, then the connection's own unblock: idempotent.
        assert!(f.blocking.client_unblock(2, true));
        assert!(!f.blocking.client_unblock(2, true));
        assert_eq!(f.served(&b).unwrap(), "unblocked error=true");
        f.blocking.unblock(2);
        assert!(!f.bit("s"));
        assert_eq!(f.blocked_count(), 0);
        assert!(f.blocking.keys_of_word(waiter_word(0, b"s")).is_empty());
    }

    #[test]
    fn an_older_waiter_on_another_worker_goes_first() {
        let mut f = fixture("order");
        let (a, w) = (client(1), client(2));
        // Worker 5 has a client blocked on "q" before this worker's.
        let older = f.store.next_waiter_seq().unwrap();
        let queue = waiter_queue(0, b"q", ValueType::List as u8);
        f.store.add_waiter(waiter_word(0, b"q"), 5).unwrap();
        f.store.set_waiter_head(5, queue, Some(older)).unwrap();
        assert_eq!(f.run(&a, &["BLPOP", "q", "0"]), None);
        // A zset waiter elsewhere is in another queue: it does not count.
        let zqueue = waiter_queue(0, b"q", ValueType::ZSet as u8);
        assert_ne!(zqueue, queue);

        // The push leaves the element to worker 5's client.
        f.run(&w, &["RPUSH", "q", "x"]);
        assert_eq!(f.served(&a), None);
        assert!(f.announced()[&5].contains(&(0, b"q".to_vec())));
        // That client served (worker 5 clears its head and announces "q"):
        // this worker's client is next.
        f.store.set_waiter_head(5, queue, None).unwrap();
        f.blocking
            .serve_ready(&mut f.engine, vec![(0, b"q".to_vec())]);
        assert_eq!(f.served(&a).unwrap(), "*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
        // Its leaving is announced to worker 5, which still has its bit.
        assert!(f.announced()[&5].contains(&(0, b"q".to_vec())));
        assert_eq!(
            f.store.oldest_waiter_elsewhere(5, queue, 1 << 2).unwrap(),
            None
        );
    }

    #[test]
    fn round_weights_split_and_come_back_whole() {
        let round = round_id(7, 3);
        assert_eq!(round_origin(round), 7);
        assert_eq!(round & 63, 0);
        let request = round_request(round, 1 << 20);
        assert_eq!(round_of_request(request), (round, 1 << 20));
        assert_eq!(round_of_request(0), (0, 0));
        assert_eq!(round_request(round, 3), 0);
        // Three messages: each a power of two, the rest given back.
        let (each, rest) = split_weight(ROUND_WEIGHT, 3);
        assert!(each.is_power_of_two());
        assert_eq!(each * 3 + rest, ROUND_WEIGHT);
        assert!(rest > 0);
        assert_eq!(split_weight(5, 0), (0, 5));
        // Too little to split: the messages go untracked, all goes back.
        assert_eq!(split_weight(1, 1), (0, 1));
    }

    #[test]
    fn a_round_ends_when_its_weight_is_back() {
        let mut f = fixture("round");
        let w = client(1);
        f.store.add_waiter(waiter_word(0, b"k"), 5).unwrap();
        let cmd_args = args(&["RPUSH", "k", "x"]);
        let cmd = f.engine.resolve(&w.borrow(), &cmd_args, false);
        f.engine
            .execute_resolved(&mut w.borrow_mut(), cmd, &cmd_args, &mut Vec::new());
        let round = f
            .blocking
            .serve_ready(&mut f.engine, Vec::new())
            .expect("a round");
        assert_eq!(round_origin(round), 2);
        let flush = f.blocking.take_flush();
        assert_eq!(flush.held[&round], ROUND_WEIGHT);
        assert!(flush.announce[&round][&5].contains(&(0, b"k".to_vec())));
        let (each, rest) = split_weight(ROUND_WEIGHT, 1);
        f.blocking.round_done(round, rest);
        assert!(f.blocking.reg.borrow().origins.contains_key(&round));
        // Worker 5 hands it back; an announcement it forwards to this
        // worker joins the same round (nothing here to serve: all back).
        f.blocking.serve_announced(
            &mut f.engine,
            vec![(0, b"k".to_vec())],
            round_request(round, each),
        );
        let flush = f.blocking.take_flush();
        assert_eq!(flush.held[&round], each);
        f.blocking.round_done(round, each);
        assert!(!f.blocking.reg.borrow().origins.contains_key(&round));
        // No one else waits: a push starts no round.
        f.store.remove_waiter(waiter_word(0, b"k"), 5).unwrap();
        f.engine
            .execute_resolved(&mut w.borrow_mut(), cmd, &cmd_args, &mut Vec::new());
        assert_eq!(f.blocking.serve_ready(&mut f.engine, Vec::new()), None);
    }

    #[test]
    fn the_announcement_goes_to_other_workers_with_bits_set() {
        let mut f = fixture("outbox");
        let w = client(1);
        // Worker 5 waits on "k"; this worker (2) does not.
        f.store.add_waiter(waiter_word(0, b"k"), 5).unwrap();
        f.store.add_waiter(waiter_word(0, b"k"), 2).unwrap();
        f.run(&w, &["RPUSH", "k", "x"]);
        let outbox = f.announced();
        assert_eq!(outbox.len(), 1);
        assert!(outbox[&5].contains(&(0, b"k".to_vec())));
        assert!(f.announced().is_empty());
    }
}
