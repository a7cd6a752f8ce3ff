//! Key subscriptions with values: "snapshot, then updates". A subscriber
//! first gets the key's value as it is, then the value after every write,
//! each with the key's version (the store's write counter stamped in the
//! entry), by whichever worker and protocol wrote it.
//!
//! No update is lost: the subscriber's table entry is visible (SeqCst)
//! before it reads the snapshot, and a writer reads the tables only after
//! its write is published ([`store::Store::key_subscriber_slots`] fences),
//! as blocked clients' waiter bits work (I14). Either the writer sees the
//! subscriber, or the snapshot sees the write. Both may happen: the
//! receiving worker drops, per subscriber and key, any version not greater
//! than the last one sent, so versions only grow.

use std::borrow::Cow;
use std::collections::HashMap;

use proto::resp::Protocol;
use store::glob::glob_match;
use store::{SubKind, ValueType};

use super::{bits, Frames, Part, PubSub, Routed, Since, Tag};
use crate::command::Arg;
use crate::engine::{Cx, Engine};
use crate::session::Session;

/// A key's value as subscribers get it: RESP2 text, empty when the key is
/// gone.
pub(crate) struct KeyValue {
    pub version: u64,
    pub resp: Vec<u8>,
}

impl Engine {
    /// `key` of `db` was written or removed: its subscribers, on every
    /// worker, get the value it has now.
    pub(crate) fn key_changed(&mut self, db: u8, key: &[u8]) {
        let mask = self.store.key_subscriber_slots().unwrap_or(0);
        if mask == 0 || (db == 0 && key.starts_with(super::retained::LVC_PREFIX)) {
            return;
        }
        let interested = bits(mask).any(|slot| {
            slot == self.pubsub.slot && self.pubsub.has_key_subscriber(db, key)
                || slot != self.pubsub.slot
                    && self
                        .pubsub
                        .remote_receivers(
                            slot,
                            &Routed {
                                tag: Tag::Key,
                                db,
                                seq: 0,
                                epoch: 0,
                                name: key,
                                data: &[],
                            },
                        )
                        .1
        });
        if !interested {
            return;
        }
        let value = self.key_value(db, key);
        self.pubsub.route(&Routed {
            tag: Tag::Key,
            db,
            seq: value.version,
            epoch: 0,
            name: key,
            data: &value.resp,
        });
    }

    /// The key's value and version, read consistently (the version did not
    /// move while the value was read).
    pub(crate) fn key_value(&mut self, db: u8, key: &[u8]) -> KeyValue {
        for _ in 0..16 {
            let Ok(Some(before)) = self.h.meta(db, key) else {
                break;
            };
            let resp = self.render(db, key, before.vtype);
            match self.h.meta(db, key) {
                Ok(Some(after)) if after.lsn == before.lsn => {
                    return KeyValue {
                        version: before.lsn,
                        resp,
                    }
                }
                _ => continue,
            }
        }
        // Gone (or changing too fast to read): a removal, with a version no
        // write stamped before, the same for every removal one command
        // reports of this key.
        if let Some((d, k, v)) = &self.pubsub.removal {
            // Only while nothing was written since: a removal after a new
            // write is a new removal.
            if *d == db && k == key && self.h.last_version().ok() == Some(*v) {
                return KeyValue {
                    version: *v,
                    resp: Vec::new(),
                };
            }
        }
        let version = self.h.next_version().unwrap_or(0);
        self.pubsub.removal = Some((db, key.to_vec(), version));
        KeyValue {
            version,
            resp: Vec::new(),
        }
    }

    /// The whole value in RESP2, by the type's own read command.
    fn render(&mut self, db: u8, key: &[u8], vtype: ValueType) -> Vec<u8> {
        let words: &[&[u8]] = match vtype {
            ValueType::String => &[b"get"],
            ValueType::List => &[b"lrange", b"", b"0", b"-1"],
            ValueType::Hash => &[b"hgetall"],
            ValueType::Set => &[b"smembers"],
            ValueType::ZSet => &[b"zrange", b"", b"0", b"-1", b"withscores"],
            ValueType::Stream => &[b"xrange", b"", b"-", b"+"],
        };
        let mut args: Vec<Arg<'_>> = words.iter().map(|w| Cow::Borrowed(*w)).collect();
        args.insert(1, Cow::Borrowed(key));
        if args.len() > 2 && args[2].is_empty() {
            args.remove(2);
        }
        let Some(cmd) = crate::command::lookup(&args[0]) else {
            return Vec::new();
        };
        let mut session = Session::new(0, 0);
        session.db = db;
        let mut out = Vec::new();
        let mut cx = Cx {
            engine: self,
            session: &mut session,
            out: proto::resp::ReplyWriter::new(&mut out, Protocol::Resp2),
            flow: crate::engine::Flow::Continue,
        };
        // The handler itself: an internal read is no command (no MONITOR
        // line, no stats).
        if (cmd.handler)(&mut cx, &args).is_err() {
            return Vec::new();
        }
        out
    }
}

impl PubSub {
    fn has_key_subscriber(&self, db: u8, key: &[u8]) -> bool {
        self.keys.contains_key(&(db, key.to_vec()))
            || self
                .key_patterns
                .iter()
                .any(|((d, p), _)| *d == db && glob_match(p, key, false))
    }

    /// KSUBSCRIBE of one key: the table entry first (I14).
    pub(crate) fn add_key(&mut self, client: u64, protocol: Protocol, db: u8, key: &[u8]) {
        self.track(client, protocol);
        self.keys
            .entry((db, key.to_vec()))
            .or_default()
            .push(Since { client, last: 0 });
        let _ = self
            .store
            .subscription_add(self.slot, SubKind::Key(db), key, 1);
    }

    /// Records the version a client's snapshot of `key` had.
    pub(crate) fn key_seen(&mut self, client: u64, db: u8, key: &[u8], version: u64) {
        if let Some(subs) = self.keys.get_mut(&(db, key.to_vec())) {
            for s in subs.iter_mut().filter(|s| s.client == client) {
                s.last = s.last.max(version);
            }
        }
    }

    pub(crate) fn remove_key(&mut self, client: u64, db: u8, key: &[u8]) {
        let id = (db, key.to_vec());
        if let Some(list) = self.keys.get_mut(&id) {
            list.retain(|s| s.client != client);
            if list.is_empty() {
                self.keys.remove(&id);
            }
        }
        let _ = self
            .store
            .subscription_add(self.slot, SubKind::Key(db), key, -1);
    }

    /// KPSUBSCRIBE of one pattern: the table entry first (I14).
    pub(crate) fn add_key_pattern(
        &mut self,
        client: u64,
        protocol: Protocol,
        db: u8,
        pattern: &[u8],
    ) {
        self.track(client, protocol);
        let id = (db, pattern.to_vec());
        let count = match self.key_patterns.iter_mut().find(|(p, _)| *p == id) {
            Some((_, list)) => {
                list.push((client, HashMap::new()));
                list.len()
            }
            None => {
                self.key_patterns.push((id, vec![(client, HashMap::new())]));
                1
            }
        };
        let _ = self
            .store
            .set_pattern(self.slot, SubKind::Key(db), pattern, count as u32);
    }

    /// Records the version a pattern subscriber's snapshot of `key` had.
    pub(crate) fn key_pattern_seen(
        &mut self,
        client: u64,
        db: u8,
        pattern: &[u8],
        key: &[u8],
        version: u64,
    ) {
        let id = (db, pattern.to_vec());
        if let Some((_, list)) = self.key_patterns.iter_mut().find(|(p, _)| *p == id) {
            for (_, seen) in list.iter_mut().filter(|(c, _)| *c == client) {
                let last = seen.entry(key.to_vec()).or_default();
                *last = (*last).max(version);
            }
        }
    }

    pub(crate) fn remove_key_pattern(&mut self, client: u64, db: u8, pattern: &[u8]) {
        let id = (db, pattern.to_vec());
        let mut count = 0;
        if let Some(i) = self.key_patterns.iter().position(|(p, _)| *p == id) {
            self.key_patterns[i].1.retain(|(c, _)| *c != client);
            count = self.key_patterns[i].1.len();
            if count == 0 {
                self.key_patterns.remove(i);
            }
        }
        let _ = self
            .store
            .set_pattern(self.slot, SubKind::Key(db), pattern, count as u32);
    }

    /// Delivers a key's new value to this worker's subscribers.
    pub(crate) fn deliver_key(&mut self, msg: &Routed<'_>) -> u64 {
        let value = if msg.data.is_empty() {
            Part::Null
        } else {
            Part::Raw(msg.data)
        };
        let version = msg.seq as i64;
        let mut n = 0;
        let id = (msg.db, msg.name.to_vec());
        if let Some(mut subs) = self.keys.remove(&id) {
            let parts = [
                Part::Bulk(b"kmessage"),
                Part::Bulk(msg.name),
                Part::Int(version),
                value,
            ];
            let mut frames = Frames::new(&parts);
            for s in subs.iter_mut() {
                if msg.seq <= s.last {
                    continue;
                }
                s.last = msg.seq;
                self.emit(s.client, &mut frames);
                n += 1;
            }
            self.keys.insert(id, subs);
        }
        let mut patterns = std::mem::take(&mut self.key_patterns);
        for ((db, pattern), subs) in patterns.iter_mut() {
            if *db != msg.db || !glob_match(pattern, msg.name, false) {
                continue;
            }
            let parts = [
                Part::Bulk(b"kpmessage"),
                Part::Bulk(pattern),
                Part::Bulk(msg.name),
                Part::Int(version),
                value,
            ];
            let mut frames = Frames::new(&parts);
            for (client, seen) in subs.iter_mut() {
                let last = seen.entry(msg.name.to_vec()).or_default();
                if msg.seq <= *last {
                    continue;
                }
                *last = msg.seq;
                self.emit(*client, &mut frames);
                n += 1;
            }
        }
        self.key_patterns = patterns;
        n
    }
}
