//! Retained channels (the last-value cache). A channel matching one of the
//! `lvc-channels` globs keeps its last message, with a sequence number, in
//! the string key `__lvc__:<channel>` of db 0 (8 bytes of big-endian
//! sequence, then the message). The key's lock orders everything: a
//! publisher takes the next number, routes the message and writes the new
//! value under it, and LSUBSCRIBE adds its table entry and reads the value
//! under it. So a subscriber's snapshot has sequence S, every message routed
//! to its worker after has a greater one, and the worker drops, for that
//! subscriber, what was routed before (≤ S): no gap, no duplicate.

use std::borrow::Cow;

use store::glob::glob_match;
use store::{Expiry, Meta, SubKind, Update, ValueType};

use super::{PubSub, Routed, Since, Tag};
use crate::engine::Engine;

/// Key prefix of retained values.
pub(crate) const LVC_PREFIX: &[u8] = b"__lvc__:";

fn lvc_key(channel: &[u8]) -> Vec<u8> {
    let mut key = LVC_PREFIX.to_vec();
    key.extend_from_slice(channel);
    key
}

/// A retained value's sequence number and message.
fn split(value: &[u8]) -> Option<(u64, &[u8])> {
    let seq = u64::from_be_bytes(value.get(..8)?.try_into().ok()?);
    Some((seq, &value[8..]))
}

/// A retained key someone overwrote with another type is not a retained
/// value.
fn check_string(old: Option<(&[u8], Meta)>) -> Result<(), store::Error> {
    match old {
        Some((_, m)) if m.vtype != ValueType::String => Err(store::Error::WrongType),
        _ => Ok(()),
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
        let ps = &mut self.pubsub;
        let mut routed = None;
        let res = self.h.update(0, &lvc_key(channel), true, |old| {
            check_string(old)?;
            let seq = old.and_then(|(v, _)| split(v)).map_or(0, |(s, _)| s) + 1;
            routed = Some(ps.route(&Routed {
                tag: Tag::Channel,
                db: 0,
                seq,
                name: channel,
                data: message,
            }));
            let mut value = seq.to_be_bytes().to_vec();
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
        let mut added = false;
        let res = self.h.update(0, &lvc_key(channel), true, |old| {
            check_string(old)?;
            ps.add_retained(client, channel);
            added = true;
            let snap = old
                .and_then(|(v, _)| split(v))
                .map(|(s, m)| (s, m.to_vec()));
            Ok((Update::Keep, snap))
        });
        if !added {
            self.pubsub.add_retained(client, channel);
        }
        let snap = res.ok().and_then(|(snap, _)| snap);
        if let Some((seq, _)) = &snap {
            self.pubsub.set_retained_seen(client, channel, *seq);
        }
        snap
    }
}

impl PubSub {
    fn add_retained(&mut self, client: u64, channel: &[u8]) {
        self.retained
            .entry(channel.to_vec())
            .or_default()
            .push(Since { client, last: 0 });
        let _ = self
            .store
            .subscription_add(self.slot, SubKind::Channel, channel, 1);
    }

    fn set_retained_seen(&mut self, client: u64, channel: &[u8], seq: u64) {
        if let Some(subs) = self.retained.get_mut(channel) {
            for s in subs.iter_mut().filter(|s| s.client == client) {
                s.last = seq;
            }
        }
    }

    pub(crate) fn remove_retained(&mut self, client: u64, channel: &[u8]) {
        if let Some(list) = self.retained.get_mut(channel) {
            list.retain(|s| s.client != client);
            if list.is_empty() {
                self.retained.remove(channel);
            }
        }
        let _ = self
            .store
            .subscription_add(self.slot, SubKind::Channel, channel, -1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retained_values_split_into_sequence_and_message() {
        let mut v = 7u64.to_be_bytes().to_vec();
        v.extend_from_slice(b"px=1");
        assert_eq!(split(&v), Some((7, &b"px=1"[..])));
        assert_eq!(split(b"short"), None);
        assert_eq!(lvc_key(b"md.x"), b"__lvc__:md.x");
    }
}
