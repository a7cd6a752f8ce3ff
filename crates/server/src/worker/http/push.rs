//! Tells pushed frames from replies in the RESP stream a WebSocket bridge
//! reads. A subscribed connection gets pub/sub messages written between
//! replies at any time; the `json` and `term` sub-protocols pair replies
//! with the commands they sent, so they must know which frames answer
//! nothing.
//!
//! * RESP3: a push frame (`>`) is pushed, except the (un)subscribe
//!   confirmations, which are the replies of those commands.
//! * RESP2: messages are plain arrays, so the frame's shape decides: an
//!   array `["message", channel, payload]` (and `pmessage`, `smessage`,
//!   `lmessage`, `kmessage`, `kpmessage` with their lengths) is pushed while
//!   the connection is subscribed. While subscribed, Redis answers only
//!   (un)subscribe commands, PING, QUIT and RESET, none of them with such an
//!   array, so the shape is enough. Whether it is subscribed comes from the
//!   counts the confirmations carry (and RESET's `+RESET`), and only once a
//!   subscribe command went out, so that a reply such as an `EXEC` array
//!   that happens to look like a confirmation is never read as one.

use proto::json::Reply;

/// The first element of a message frame, and the frame's length.
const MESSAGES: [(&[u8], usize); 6] = [
    (b"message", 3),
    (b"pmessage", 4),
    (b"smessage", 3),
    (b"lmessage", 4),
    (b"kmessage", 4),
    (b"kpmessage", 5),
];

/// Commands that subscribe (and so may make pushes come).
const SUBSCRIBES: [&[u8]; 6] = [
    b"subscribe",
    b"psubscribe",
    b"ssubscribe",
    b"lsubscribe",
    b"ksubscribe",
    b"kpsubscribe",
];

/// The first element of a confirmation (`[kind, name, count]`), with
/// whether it counts shard channels (which count on their own).
const CONFIRMATIONS: [(&[u8], bool); 12] = [
    (b"subscribe", false),
    (b"unsubscribe", false),
    (b"psubscribe", false),
    (b"punsubscribe", false),
    (b"lsubscribe", false),
    (b"lunsubscribe", false),
    (b"ksubscribe", false),
    (b"kunsubscribe", false),
    (b"kpsubscribe", false),
    (b"kpunsubscribe", false),
    (b"ssubscribe", true),
    (b"sunsubscribe", true),
];

/// One bridge's view of its connection's subscriptions.
#[derive(Debug, Default)]
pub(crate) struct PushTracker {
    /// A subscribe command was sent: RESP2 frames may be messages.
    armed: bool,
    /// The connection speaks RESP3 (learnt from HELLO's reply and from the
    /// confirmations' frame type): then arrays are always replies.
    resp3: bool,
    /// Subscriptions other than shard channels, as the last confirmation
    /// said.
    subscriptions: i64,
    /// Shard channels, likewise.
    shard: i64,
}

impl PushTracker {
    /// Notes a command on its way to the RESP side (`name` as typed).
    pub(crate) fn sent(&mut self, name: &[u8]) {
        if SUBSCRIBES.iter().any(|s| name.eq_ignore_ascii_case(s)) {
            self.armed = true;
        }
    }

    /// Whether `frame` is pushed rather than the reply to a command; notes
    /// the protocol and the subscription counts that replies tell.
    pub(crate) fn is_push(&mut self, frame: &Reply<'_>) -> bool {
        match frame {
            Reply::Push(items) => {
                if self.confirmation(items) {
                    self.resp3 = true;
                    return false;
                }
                true
            }
            Reply::Array(items) => {
                if self.armed && self.confirmation(items) {
                    self.resp3 = false;
                    return false;
                }
                if let Some(proto) = hello_proto(frame) {
                    self.resp3 = proto == 3;
                    return false;
                }
                let subscribed = self.subscriptions > 0 || self.shard > 0;
                self.armed
                    && !self.resp3
                    && subscribed
                    && MESSAGES.iter().any(|(kind, len)| {
                        items.len() == *len && text(&items[0]).is_some_and(|t| t == *kind)
                    })
            }
            Reply::Map(_) => {
                if let Some(proto) = hello_proto(frame) {
                    self.resp3 = proto == 3;
                }
                false
            }
            Reply::Simple(b"RESET") => {
                // RESET ends every subscription and goes back to RESP2.
                (self.subscriptions, self.shard, self.resp3) = (0, 0, false);
                false
            }
            _ => false,
        }
    }

    /// Whether `items` is a confirmation (and if so, notes its count).
    fn confirmation(&mut self, items: &[Reply<'_>]) -> bool {
        let [kind, name, Reply::Integer(count)] = items else {
            return false;
        };
        if !matches!(name, Reply::Bulk(_) | Reply::Null) {
            return false;
        }
        let Some(kind) = text(kind) else {
            return false;
        };
        let Some((_, shard)) = CONFIRMATIONS.iter().find(|(k, _)| *k == kind) else {
            return false;
        };
        if *shard {
            self.shard = *count;
        } else {
            self.subscriptions = *count;
        }
        true
    }
}

/// The protocol a HELLO reply announces: a map (RESP3) or a flat array
/// (RESP2) that starts with `server` and holds `proto`.
fn hello_proto(frame: &Reply<'_>) -> Option<i64> {
    let pairs: Vec<(&Reply<'_>, &Reply<'_>)> = match frame {
        Reply::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
        Reply::Array(items) if items.len() % 2 == 0 => {
            items.chunks(2).map(|p| (&p[0], &p[1])).collect()
        }
        _ => return None,
    };
    if pairs.first().and_then(|(k, _)| text(k)) != Some(b"server") {
        return None;
    }
    pairs.iter().find_map(|(k, v)| match (text(k), v) {
        (Some(b"proto"), Reply::Integer(n)) => Some(*n),
        _ => None,
    })
}

/// A string element's bytes.
fn text<'a>(r: &Reply<'a>) -> Option<&'a [u8]> {
    match r {
        Reply::Bulk(t) | Reply::Simple(t) => Some(t),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(resp: &[u8]) -> Reply<'_> {
        proto::json::parse_reply(resp).unwrap().unwrap().0
    }

    #[test]
    fn resp2_messages_are_pushed_only_while_subscribed() {
        let message = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n";
        let mut t = PushTracker::default();
        // Before any subscribe command a reply may look like anything.
        assert!(!t.is_push(&frame(b"*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n")));
        assert!(!t.is_push(&frame(message)));
        t.sent(b"SUBSCRIBE");
        assert!(!t.is_push(&frame(message)));
        assert!(!t.is_push(&frame(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")));
        assert!(t.is_push(&frame(message)));
        assert!(t.is_push(&frame(
            b"*4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$2\r\nhi\r\n"
        )));
        // PING's reply while subscribed is an array, not a message.
        assert!(!t.is_push(&frame(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")));
        // A message of the wrong length is not one.
        assert!(!t.is_push(&frame(b"*2\r\n$7\r\nmessage\r\n$2\r\nch\r\n")));
        assert!(!t.is_push(&frame(b"*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n")));
        assert!(!t.is_push(&frame(message)));
    }

    #[test]
    fn shard_channels_count_on_their_own() {
        let mut t = PushTracker::default();
        t.sent(b"ssubscribe");
        assert!(!t.is_push(&frame(b"*3\r\n$10\r\nssubscribe\r\n$1\r\ns\r\n:1\r\n")));
        assert!(!t.is_push(&frame(b"*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n")));
        let smessage = b"*3\r\n$8\r\nsmessage\r\n$1\r\ns\r\n$1\r\nm\r\n";
        assert!(t.is_push(&frame(smessage)));
        assert!(!t.is_push(&frame(b"+RESET\r\n")));
        assert!(!t.is_push(&frame(smessage)));
    }

    #[test]
    fn resp3_pushes_are_pushed_but_confirmations() {
        let mut t = PushTracker::default();
        t.sent(b"psubscribe");
        assert!(!t.is_push(&frame(b">3\r\n$10\r\npsubscribe\r\n$2\r\nc*\r\n:1\r\n")));
        assert!(t.is_push(&frame(
            b">4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$2\r\nhi\r\n"
        )));
        assert!(t.is_push(&frame(b">2\r\n$10\r\ninvalidate\r\n*0\r\n")));
        // In RESP3 an array is a reply even when it looks like a message.
        let lookalike = b"*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nb\r\n";
        assert!(!t.is_push(&frame(lookalike)));
        assert!(!t.is_push(&frame(b"+OK\r\n")));
        // HELLO 2 while subscribed: messages come as arrays from then on.
        let hello2 = b"*4\r\n$6\r\nserver\r\n$5\r\nshoal\r\n$5\r\nproto\r\n:2\r\n";
        assert!(!t.is_push(&frame(hello2)));
        assert!(t.is_push(&frame(lookalike)));
        let hello3 = b"%2\r\n$6\r\nserver\r\n$5\r\nshoal\r\n$5\r\nproto\r\n:3\r\n";
        assert!(!t.is_push(&frame(hello3)));
        assert!(!t.is_push(&frame(lookalike)));
    }
}
