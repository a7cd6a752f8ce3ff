//! Keyspace notifications (Redis's notify.c): every write tells
//! [`Cx::notify`] what happened to which key; when `notify-keyspace-events`
//! selects the event's class it is published on `__keyspace@<db>__:<key>`
//! (message: the event) and/or `__keyevent@<db>__:<event>` (message: the
//! key), across every worker. The same call feeds key subscriptions
//! ([`Engine::key_changed`]), so a key written by any protocol reaches them.

use crate::engine::{Cx, Engine};

/// Event classes, with Redis's bit values.
pub(crate) mod class {
    /// K: publish on `__keyspace@<db>__:<key>`.
    pub const KEYSPACE: u32 = 1 << 0;
    /// E: publish on `__keyevent@<db>__:<event>`.
    pub const KEYEVENT: u32 = 1 << 1;
    /// g: DEL, EXPIRE, RENAME… (type-independent commands).
    pub const GENERIC: u32 = 1 << 2;
    /// $: string commands.
    pub const STRING: u32 = 1 << 3;
    /// l: list commands.
    pub const LIST: u32 = 1 << 4;
    /// s: set commands.
    pub const SET: u32 = 1 << 5;
    /// h: hash commands.
    pub const HASH: u32 = 1 << 6;
    /// z: sorted set commands.
    pub const ZSET: u32 = 1 << 7;
    /// x: a key expired.
    pub const EXPIRED: u32 = 1 << 8;
    /// e: a key was evicted.
    pub const EVICTED: u32 = 1 << 9;
    /// t: stream commands.
    pub const STREAM: u32 = 1 << 10;
    /// m: a read missed (not part of A).
    pub const KEY_MISS: u32 = 1 << 11;
    /// d: module events (none here; accepted for compatibility).
    pub const MODULE: u32 = 1 << 13;
    /// n: a new key was created (not part of A).
    pub const NEW: u32 = 1 << 14;
    /// A: every class above but m and n.
    pub const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;
}

/// Parses a `notify-keyspace-events` value (Redis's
/// `keyspaceEventsStringToFlags`); None for an unknown character.
pub(crate) fn flags_from_str(s: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for &c in s {
        flags |= match c {
            b'A' => class::ALL,
            b'g' => class::GENERIC,
            b'$' => class::STRING,
            b'l' => class::LIST,
            b's' => class::SET,
            b'h' => class::HASH,
            b'z' => class::ZSET,
            b'x' => class::EXPIRED,
            b'e' => class::EVICTED,
            b'K' => class::KEYSPACE,
            b'E' => class::KEYEVENT,
            b't' => class::STREAM,
            b'm' => class::KEY_MISS,
            b'd' => class::MODULE,
            b'n' => class::NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// Formats flags as CONFIG GET shows them (Redis's
/// `keyspaceEventsFlagsToString`).
pub(crate) fn flags_to_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & class::ALL == class::ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (class::GENERIC, 'g'),
            (class::STRING, '$'),
            (class::LIST, 'l'),
            (class::SET, 's'),
            (class::HASH, 'h'),
            (class::ZSET, 'z'),
            (class::EXPIRED, 'x'),
            (class::EVICTED, 'e'),
            (class::STREAM, 't'),
            (class::MODULE, 'd'),
            (class::NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [
        (class::KEYSPACE, 'K'),
        (class::KEYEVENT, 'E'),
        (class::KEY_MISS, 'm'),
    ] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

impl Cx<'_> {
    /// A command did `event` (of `class`) to `key` in the selected db.
    pub(crate) fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        let db = self.session.db;
        self.engine.notify_in(db, class, event, key);
    }
}

impl Engine {
    /// [`Cx::notify`] for a key of db `db` (MOVE, COPY, expiry, eviction).
    pub(crate) fn notify_in(&mut self, db: u8, class: u32, event: &str, key: &[u8]) {
        if class != class::KEY_MISS {
            self.key_changed(db, key);
        }
        let flags = self.config.notify_keyspace_events;
        if flags & class == 0 {
            return;
        }
        if flags & class::KEYSPACE != 0 {
            let mut channel = format!("__keyspace@{db}__:").into_bytes();
            channel.extend_from_slice(key);
            self.publish(&channel, event.as_bytes());
        }
        if flags & class::KEYEVENT != 0 {
            let channel = format!("__keyevent@{db}__:{event}").into_bytes();
            self.publish(&channel, key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_as_redis_prints_them() {
        assert_eq!(flags_from_str(b""), Some(0));
        assert_eq!(flags_from_str(b"?"), None);
        let all = flags_from_str(b"AKE").unwrap();
        assert_eq!(flags_to_string(all), "AKE");
        assert_eq!(flags_to_string(flags_from_str(b"Elg$").unwrap()), "g$lE");
        assert_eq!(flags_from_str(b"KE A"), None);
        assert_eq!(flags_to_string(flags_from_str(b"Kxmn").unwrap()), "xnKm");
        assert_eq!(flags_to_string(flags_from_str(b"Ag$lshzxetd").unwrap()), "A");
    }
}
