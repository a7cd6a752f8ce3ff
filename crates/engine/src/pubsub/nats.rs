//! What NATS clients need beyond channels: a message's reply subject and
//! header block carried to NATS subscribers on every worker, and queue
//! groups whose members may be on any worker.
//!
//! Envelope: a NATS publish with a reply subject or headers is routed as
//! [`Tag::Nats`], its data being the envelope (reply, headers) before the
//! payload. Redis, SSE and WebSocket subscribers get the payload alone;
//! NATS clients get frames with two more elements, the reply subject and
//! the header block.
//!
//! Queue groups: a worker publishes its members of each group as a pattern
//! record of kind [`SubKind::Queue`] (the subject, a space, the group; the
//! count is its members). The publisher reads every worker's records,
//! sums the members of each group whose subject matches the channel, and
//! picks member `turn % total` (`turn` counting its own messages): the
//! worker that member is on gets one [`Tag::Queue`] message, and gives it
//! to one of its members in turns. So each message reaches exactly one
//! member of each group, and members share the messages in proportion.

use proto::nats::{subject_matches, valid_literal_subject};
use store::SubKind;

use super::{bits, Frames, Part, PubSub, Routed, Tag};
use crate::engine::Engine;
use crate::session::Session;

/// A NATS message's reply subject and header block (empty: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Envelope<'a> {
    pub reply: &'a [u8],
    pub headers: &'a [u8],
}

/// Writes the envelope then the payload: each part as u32 LE length then
/// bytes.
fn encode(env: Envelope<'_>, payload: &[u8], out: &mut Vec<u8>) {
    out.reserve(8 + env.reply.len() + env.headers.len() + payload.len());
    for part in [env.reply, env.headers] {
        out.extend_from_slice(&(part.len() as u32).to_le_bytes());
        out.extend_from_slice(part);
    }
    out.extend_from_slice(payload);
}

/// Takes one length-prefixed part off the front of `bytes`.
fn take_part<'a>(bytes: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let part = bytes.get(4..4usize.checked_add(len)?)?;
    *bytes = &bytes[4 + len..];
    Some(part)
}

/// The envelope and payload of a [`Tag::Nats`] message's data (bytes
/// another process wrote: None when they do not parse).
pub(crate) fn decode(mut data: &[u8]) -> Option<(Envelope<'_>, &[u8])> {
    let reply = take_part(&mut data)?;
    let headers = take_part(&mut data)?;
    Some((Envelope { reply, headers }, data))
}

/// A queue group's record name: the subject, a space, the group (neither
/// holds a space).
pub fn queue_key(subject: &[u8], queue: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(subject.len() + 1 + queue.len());
    key.extend_from_slice(subject);
    key.push(b' ');
    key.extend_from_slice(queue);
    key
}

/// The subject of a queue group's record name.
fn key_subject(key: &[u8]) -> &[u8] {
    key.split(|&b| b == b' ').next().unwrap_or(key)
}

/// A queue group's members over the workers: (slot, members there).
type Spread = Vec<(u32, u64)>;

/// This worker's members of one queue group.
#[derive(Debug, Default)]
pub(crate) struct Group {
    pub members: Vec<u64>,
    /// Messages given out so far: the next goes to `members[turn % len]`.
    pub turn: u64,
}

impl PubSub {
    /// Marks a client as a NATS client: its frames carry reply subjects
    /// and headers.
    pub(crate) fn add_nats_client(&mut self, client: u64, echo: bool) {
        self.nats_clients.insert(client, echo);
    }

    /// Adds a member to the queue group `key` on this worker.
    pub(crate) fn add_queue_member(&mut self, client: u64, key: &[u8]) {
        let group = self.queues.entry(key.to_vec()).or_default();
        if !group.members.contains(&client) {
            group.members.push(client);
        }
        let count = group.members.len() as u32;
        let _ = self
            .store
            .set_pattern(self.slot, SubKind::Queue, key, count);
    }

    /// Removes a member from the queue group `key` on this worker.
    pub(crate) fn remove_queue_member(&mut self, client: u64, key: &[u8]) {
        let mut count = 0;
        if let Some(group) = self.queues.get_mut(key) {
            group.members.retain(|&c| c != client);
            count = group.members.len();
            if count == 0 {
                self.queues.remove(key);
            }
        }
        let _ = self
            .store
            .set_pattern(self.slot, SubKind::Queue, key, count as u32);
    }

    /// Picks one member of every queue group matching the channel, over
    /// every worker in `mask`, and sends it the message; returns the
    /// number of groups served.
    pub(crate) fn route_queues(&mut self, mask: u32, msg: &Routed<'_>) -> u64 {
        if !valid_literal_subject(msg.name) {
            return 0;
        }
        // A publisher that asked for no echo is no candidate for its own
        // message, as in nats-server.
        let publisher = self.current;
        let skip = if self.nats_clients.get(&publisher) == Some(&false) {
            publisher
        } else {
            0
        };
        // Each matching group with its members per slot, slots ascending.
        let mut groups: Vec<(Vec<u8>, Spread)> = Vec::new();
        for slot in bits(mask) {
            let mut add = |key: &[u8], count: u64| {
                if count == 0 || !subject_matches(key_subject(key), msg.name) {
                    return;
                }
                match groups.iter_mut().find(|(k, _)| k == key) {
                    Some((_, members)) => members.push((slot, count)),
                    None => groups.push((key.to_vec(), vec![(slot, count)])),
                }
            };
            if slot == self.slot {
                for (key, group) in &self.queues {
                    let others = group.members.iter().filter(|&&c| c != skip).count();
                    add(key, others as u64);
                }
            } else {
                for p in self.patterns_of(slot) {
                    if p.kind == SubKind::Queue {
                        add(&p.pattern, p.count as u64);
                    }
                }
            }
        }
        if groups.is_empty() {
            return 0;
        }
        let (env, payload) = match msg.tag {
            Tag::Nats => match decode(msg.data) {
                Some(parts) => parts,
                None => return 0,
            },
            _ => (Envelope::default(), msg.data),
        };
        let turn = self.queue_turn;
        self.queue_turn = self.queue_turn.wrapping_add(1);
        let mut served = 0;
        for (key, members) in groups {
            let total: u64 = members.iter().map(|(_, n)| n).sum();
            let mut pick = turn % total;
            let Some(&(slot, _)) = members.iter().find(|(_, n)| {
                if pick < *n {
                    return true;
                }
                pick -= n;
                false
            }) else {
                continue;
            };
            served += 1;
            if slot == self.slot {
                self.deliver_queue_parts(&key, msg.name, env, payload, skip);
                continue;
            }
            let mut data = Vec::with_capacity(4 + key.len() + payload.len() + 16);
            data.extend_from_slice(&(key.len() as u32).to_le_bytes());
            data.extend_from_slice(&key);
            encode(env, payload, &mut data);
            self.send_routed(
                slot,
                &Routed {
                    tag: Tag::Queue,
                    db: 0,
                    seq: 0,
                    epoch: 0,
                    name: msg.name,
                    data: &data,
                },
            );
        }
        served
    }

    /// A [`Tag::Queue`] message another worker chose this one for.
    pub(crate) fn deliver_queue(&mut self, msg: &Routed<'_>) -> u64 {
        let mut data = msg.data;
        let Some(key) = take_part(&mut data) else {
            return 0;
        };
        let Some((env, payload)) = decode(data) else {
            return 0;
        };
        self.deliver_queue_parts(key, msg.name, env, payload, 0)
    }

    /// Gives a message to the next member of this worker's group `key`
    /// other than `skip` (0: none). A group whose last member here left
    /// since the publisher read the tables loses the message.
    fn deliver_queue_parts(
        &mut self,
        key: &[u8],
        channel: &[u8],
        env: Envelope<'_>,
        payload: &[u8],
        skip: u64,
    ) -> u64 {
        let Some(group) = self.queues.get_mut(key) else {
            return 0;
        };
        let candidates: Vec<u64> = group
            .members
            .iter()
            .copied()
            .filter(|&c| c != skip)
            .collect();
        if candidates.is_empty() {
            return 0;
        }
        let client = candidates[(group.turn % candidates.len() as u64) as usize];
        group.turn = group.turn.wrapping_add(1);
        let parts = [
            Part::Bulk(b"qmessage"),
            Part::Bulk(key),
            Part::Bulk(channel),
            Part::Bulk(payload),
            Part::Bulk(env.reply),
            Part::Bulk(env.headers),
        ];
        self.emit(client, &mut Frames::new(&parts));
        1
    }

    /// Whether `client` is a NATS client.
    pub(crate) fn is_nats(&self, client: u64) -> bool {
        !self.nats_clients.is_empty() && self.nats_clients.contains_key(&client)
    }
}

impl Engine {
    /// Marks the session as a NATS client (frames with reply subjects and
    /// headers, queue groups); `echo` false: it is never chosen in a queue
    /// group for its own messages.
    pub fn nats_client(&mut self, session: &Session, echo: bool) {
        self.pubsub.track(session.id, session.protocol);
        self.pubsub.add_nats_client(session.id, echo);
    }

    /// Sets the reply subject and header block the next PUBLISH carries
    /// to NATS subscribers (call it around one PUBLISH; empty: none).
    pub fn set_nats_envelope(&mut self, reply: &[u8], headers: &[u8]) {
        self.pubsub.envelope = if reply.is_empty() && headers.is_empty() {
            None
        } else {
            Some((reply.to_vec(), headers.to_vec()))
        };
    }

    /// Joins queue group `queue` on `subject` (wildcards allowed).
    pub fn queue_subscribe(&mut self, session: &mut Session, subject: &[u8], queue: &[u8]) {
        let key = queue_key(subject, queue);
        if session.subs.queues.insert(key.clone()) {
            self.pubsub.track(session.id, session.protocol);
            self.pubsub.add_queue_member(session.id, &key);
        }
    }

    /// Leaves queue group `queue` on `subject`.
    pub fn queue_unsubscribe(&mut self, session: &mut Session, subject: &[u8], queue: &[u8]) {
        let key = queue_key(subject, queue);
        if session.subs.queues.shift_remove(&key) {
            self.pubsub.remove_queue_member(session.id, &key);
        }
    }

    /// PUBLISH's routing of a message with a NATS envelope.
    pub(crate) fn publish_envelope(
        &mut self,
        channel: &[u8],
        message: &[u8],
        reply: &[u8],
        headers: &[u8],
    ) -> u64 {
        let mut data = Vec::new();
        encode(Envelope { reply, headers }, message, &mut data);
        self.pubsub.route(&Routed {
            tag: Tag::Nats,
            db: 0,
            seq: 0,
            epoch: 0,
            name: channel,
            data: &data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip_and_garbage_is_refused() {
        let env = Envelope {
            reply: b"_INBOX.a.b",
            headers: b"NATS/1.0\r\nA: 1\r\n\r\n",
        };
        let mut data = Vec::new();
        encode(env, b"payload", &mut data);
        assert_eq!(decode(&data), Some((env, &b"payload"[..])));
        assert_eq!(decode(&data[..3]), None);
        let mut long = data.clone();
        long[0] = 200;
        assert_eq!(decode(&long), None);
        assert_eq!(key_subject(&queue_key(b"job.*", b"workers")), b"job.*");
    }

    proptest::proptest! {
        /// Envelopes are read from other processes' ring messages (I1): any
        /// bytes decode without a panic, into parts that lie within them.
        #[test]
        fn any_envelope_bytes_decode_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            if let Some((env, payload)) = decode(&bytes) {
                proptest::prop_assert!(env.reply.len() + env.headers.len() + payload.len() + 8 == bytes.len());
            }
        }
    }
}
