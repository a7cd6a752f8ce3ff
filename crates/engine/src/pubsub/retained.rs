//! Retained channels (the last-value cache). A channel matching one of the
//! `lvc-channels` globs keeps its last message, numbered, in the string key
//! `__lvc__:<channel>` of db 0: 8 bytes of big-endian epoch, 8 of sequence
//! number, then the message. The sequence counts 1, 2, 3… within an epoch;
//! a new epoch (a value from the segment's write counter, so it only grows)
//! starts when the key is missing, e.g. after DEL or FLUSHALL.
//!
//! The key's lock orders everything: a publisher takes the next number,
//! routes the message and writes the new value under it, and LSUBSCRIBE
//! adds its table entry and reads the value under it. So a subscriber's
//! snapshot is (E, S), and every message routed to its worker afterwards
//! comes after (E, S). Messages can reach a worker out of order (the
//! publisher's own worker delivers at once while older ones still sit in its
//! ring; a full ring's backlog), so each worker puts a retained channel's
//! messages back in order before its subscribers see them: it holds a
//! message that arrives early until the ones before it come, and gives up
//! waiting after two ticks of the sweeper (a message that never comes, a
//! gap the subscriber sees in the numbers).

use std::borrow::Cow;
use std::collections::BTreeMap;

use store::glob::glob_match;
use store::{Expiry, Meta, SubKind, Update, ValueType};

use super::{Frames, Part, PubSub, Routed, Tag};
use crate::engine::Engine;

/// Key prefix of retained values.
pub(crate) const LVC_PREFIX: &[u8] = b"__lvc__:";

/// Messages held this long (in sweeper ticks) stop waiting for a gap.
const HOLD_TICKS: u32 = 2;
/// Messages held per channel before the wait is given up anyway.
const HOLD_MAX: usize = 100_000;

fn lvc_key(channel: &[u8]) -> Vec<u8> {
    let mut key = LVC_PREFIX.to_vec();
    key.extend_from_slice(channel);
    key
}

/// A retained value's epoch, sequence number and message.
fn split(value: &[u8]) -> Option<(u64, u64, &[u8])> {
    let epoch = u64::from_be_bytes(value.get(..8)?.try_into().ok()?);
    let seq = u64::from_be_bytes(value.get(8..16)?.try_into().ok()?);
    Some((epoch, seq, &value[16..]))
}

/// A retained key someone overwrote with another type is not a retained
/// value.
fn check_string(old: Option<(&[u8], Meta)>) -> Result<(), store::Error> {
    match old {
        Some((_, m)) if m.vtype != ValueType::String => Err(store::Error::WrongType),
        _ => Ok(()),
    }
}

/// One LSUBSCRIBE client and the last message it got.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Subscriber {
    client: u64,
    epoch: u64,
    last: u64,
}

/// A retained channel on this worker: its LSUBSCRIBE clients and the
/// reordering of its messages.
#[derive(Debug, Default)]
pub(crate) struct Local {
    pub subscribers: Vec<Subscriber>,
    /// The epoch and the next sequence number to deliver.
    epoch: u64,
    next: u64,
    /// Messages that came before their turn, by sequence number.
    held: BTreeMap<u64, Vec<u8>>,
    held_ticks: u32,
}

/// A message in delivery order: epoch, sequence, bytes.
type Ordered = (u64, u64, Vec<u8>);

impl Local {
    /// Takes a message as it arrives; returns those now due, in order.
    pub(crate) fn accept(&mut self, epoch: u64, seq: u64, data: &[u8]) -> Vec<Ordered> {
        let mut due = Vec::new();
        if seq == 0 {
            // Not numbered: the channel was not retained when published.
            due.push((0, 0, data.to_vec()));
            return due;
        }
        if epoch < self.epoch {
            return due;
        }
        if epoch > self.epoch {
            // The numbering restarted: what was held of the old one goes
            // first, with its gaps.
            due.extend(self.release_all());
            self.epoch = epoch;
            self.next = 1;
        }
        if seq < self.next {
            return due;
        }
        if seq > self.next {
            self.held.insert(seq, data.to_vec());
            if self.held.len() > HOLD_MAX {
                due.extend(self.release_all());
            }
            return due;
        }
        due.push((epoch, seq, data.to_vec()));
        self.next += 1;
        while let Some(data) = self.held.remove(&self.next) {
            due.push((self.epoch, self.next, data));
            self.next += 1;
        }
        if self.held.is_empty() {
            self.held_ticks = 0;
        }
        due
    }

    /// Everything held, in order, past any gap.
    fn release_all(&mut self) -> Vec<Ordered> {
        let held = std::mem::take(&mut self.held);
        self.held_ticks = 0;
        let epoch = self.epoch;
        let due: Vec<Ordered> = held.into_iter().map(|(s, d)| (epoch, s, d)).collect();
        if let Some((_, last, _)) = due.last() {
            self.next = last + 1;
        }
        due
    }
}

impl Engine {
    /// Whether `channel` keeps its last message (`lvc-channels`).
    pub(crate) fn is_retained(&self, channel: &[u8]) -> bool {
        self.config
            .lvc_channels
            .iter()
            .any(|g| glob_match(g, channel, false))
    }

    /// PUBLISH on a retained channel; returns the receivers.
    pub(crate) fn publish_retained(&mut self, channel: &[u8], message: &[u8]) -> u64 {
        // The epoch a restarted numbering takes (taken before the key lock,
        // which holds the handle).
        let fresh_epoch = self.h.next_version().unwrap_or(1);
        let ps = &mut self.pubsub;
        let mut routed = None;
        let res = self.h.update(0, &lvc_key(channel), true, |old| {
            check_string(old)?;
            let (epoch, seq) = match old.and_then(|(v, _)| split(v)) {
                Some((e, s, _)) => (e, s + 1),
                None => (fresh_epoch, 1),
            };
            routed = Some(ps.route(&Routed {
                tag: Tag::Channel,
                db: 0,
                seq,
                epoch,
                name: channel,
                data: message,
            }));
            let mut value = Vec::with_capacity(16 + message.len());
            value.extend_from_slice(&epoch.to_be_bytes());
            value.extend_from_slice(&seq.to_be_bytes());
            value.extend_from_slice(message);
            Ok((
                Update::Write {
                    value: Cow::Owned(value),
                    expiry: Expiry::Keep,
                    mc_flags: None,
                },
                (),
            ))
        });
        match (res, routed) {
            (_, Some(n)) => n,
            // The key holds another type (someone wrote it): the message
            // still goes out, unnumbered and not retained.
            (_, None) => self.pubsub.route(&Routed {
                tag: Tag::Channel,
                db: 0,
                seq: 0,
                epoch: 0,
                name: channel,
                data: message,
            }),
        }
    }

    /// LSUBSCRIBE of one channel: subscribes under the retained key's lock
    /// and returns the snapshot (sequence, message), if any.
    pub(crate) fn subscribe_retained(
        &mut self,
        client: u64,
        channel: &[u8],
    ) -> Option<(u64, Vec<u8>)> {
        let ps = &mut self.pubsub;
        let mut snapshot = None;
        let res = self.h.update(0, &lvc_key(channel), true, |old| {
            check_string(old)?;
            snapshot = old
                .and_then(|(v, _)| split(v))
                .map(|(e, s, m)| (e, s, m.to_vec()));
            let (epoch, seq) = snapshot.as_ref().map_or((0, 0), |(e, s, _)| (*e, *s));
            ps.add_retained(client, channel, epoch, seq);
            Ok((Update::Keep, ()))
        });
        if res.is_err() {
            self.pubsub.add_retained(client, channel, 0, 0);
        }
        snapshot.map(|(_, s, m)| (s, m))
    }
}

impl PubSub {
    fn add_retained(&mut self, client: u64, channel: &[u8], epoch: u64, seq: u64) {
        let local = self
            .retained
            .entry(channel.to_vec())
            .or_insert_with(|| Local {
                epoch,
                next: seq + 1,
                ..Local::default()
            });
        local.subscribers.push(Subscriber {
            client,
            epoch,
            last: seq,
        });
        let _ = self
            .store
            .subscription_add(self.slot, SubKind::Channel, channel, 1);
    }

    pub(crate) fn remove_retained(&mut self, client: u64, channel: &[u8]) {
        if let Some(local) = self.retained.get_mut(channel) {
            local.subscribers.retain(|s| s.client != client);
            if local.subscribers.is_empty() {
                self.retained.remove(channel);
            }
        }
        let _ = self
            .store
            .subscription_add(self.slot, SubKind::Channel, channel, -1);
    }

    /// Sends one in-order message to the LSUBSCRIBE clients it is new to.
    pub(crate) fn deliver_retained(
        &mut self,
        channel: &[u8],
        local: &mut Local,
        epoch: u64,
        seq: u64,
        data: &[u8],
    ) {
        let parts = [
            Part::Bulk(b"lmessage"),
            Part::Bulk(channel),
            Part::Int(seq as i64),
            Part::Bulk(data),
        ];
        let mut frames = Frames::new(&parts);
        for s in local.subscribers.iter_mut() {
            // Unnumbered messages go to everyone; numbered ones only when
            // after what the client has (its snapshot or the last one).
            if seq != 0 {
                if (epoch, seq) <= (s.epoch, s.last) {
                    continue;
                }
                (s.epoch, s.last) = (epoch, seq);
            }
            self.emit(s.client, &mut frames);
        }
    }

    /// A sweeper tick: messages held too long for a gap to fill go out.
    pub(crate) fn tick(&mut self) {
        let stuck: Vec<Vec<u8>> = self
            .retained
            .iter_mut()
            .filter(|(_, l)| !l.held.is_empty())
            .filter_map(|(name, l)| {
                l.held_ticks += 1;
                (l.held_ticks >= HOLD_TICKS).then(|| name.clone())
            })
            .collect();
        for name in stuck {
            let Some(mut local) = self.retained.remove(&name) else {
                continue;
            };
            for (epoch, seq, data) in local.release_all() {
                self.deliver_retained(&name, &mut local, epoch, seq, &data);
            }
            self.retained.insert(name, local);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retained_values_split_into_epoch_sequence_and_message() {
        let mut v = 3u64.to_be_bytes().to_vec();
        v.extend_from_slice(&7u64.to_be_bytes());
        v.extend_from_slice(b"px=1");
        assert_eq!(split(&v), Some((3, 7, &b"px=1"[..])));
        assert_eq!(split(b"short"), None);
        assert_eq!(lvc_key(b"md.x"), b"__lvc__:md.x");
    }

    fn seqs(due: Vec<Ordered>) -> Vec<(u64, u64)> {
        due.into_iter().map(|(e, s, _)| (e, s)).collect()
    }

    #[test]
    fn early_messages_wait_for_their_turn_and_late_ones_are_dropped() {
        let mut l = Local {
            epoch: 5,
            next: 4,
            ..Local::default()
        };
        assert_eq!(seqs(l.accept(5, 2, b"old")), []);
        assert_eq!(seqs(l.accept(5, 6, b"f")), []);
        assert_eq!(seqs(l.accept(5, 5, b"e")), []);
        assert_eq!(seqs(l.accept(5, 4, b"d")), [(5, 4), (5, 5), (5, 6)]);
        assert_eq!(seqs(l.accept(5, 6, b"again")), []);
        // A restarted numbering: what was held goes first.
        assert_eq!(seqs(l.accept(5, 9, b"i")), []);
        assert_eq!(seqs(l.accept(8, 1, b"a")), [(5, 9), (8, 1)]);
        assert_eq!(seqs(l.accept(5, 10, b"stale")), []);
        assert_eq!(seqs(l.accept(0, 0, b"plain")), [(0, 0)]);
        // A gap that never fills is given up.
        assert_eq!(seqs(l.accept(8, 3, b"c")), []);
        assert_eq!(seqs(l.release_all()), [(8, 3)]);
        assert_eq!(seqs(l.accept(8, 4, b"d")), [(8, 4)]);
    }
}
