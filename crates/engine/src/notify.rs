//! Keyspace notifications (Redis's notify.c): every write tells
//! [`Cx::notify`] what happened to which key; when `notify-keyspace-events`
//! selects the event's class it is published on `__keyspace@<db>__:<key>`
//! (message: the event) and/or `__keyevent@<db>__:<event>` (message: the
//! key), across every worker. The same call feeds key subscriptions
//! ([`Engine::key_changed`]), so a key written by any protocol reaches them.
//!
//! Three events have no command behind them: "expired" (a lookup or the
//! sweeper found the key past its time), "evicted" and "new" (whether a
//! write created its key only the store knows). The store's key log
//! ([`store::KeyEvent`]) reports them, switched on only while something
//! wants them ([`Engine::sync_key_log`]); they are sent before the next
//! event of a command and after every command and sweep, which keeps
//! Redis's order: "expired", "keymiss", "new", then the command's own.

use store::{Expiry, KeyEvent, KeyLogEntry, SetCondition, SetOptions, SetResult};

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

    /// A command took elements out of `key` (`event`); when it left the
    /// collection empty the key is gone, and Redis follows with "del".
    pub(crate) fn notify_removed(&mut self, class: u32, event: &str, key: &[u8], emptied: bool) {
        self.notify(class, event, key);
        if emptied {
            self.notify(class::GENERIC, "del", key);
        }
    }

    /// [`Engine::notify_set`] in the selected db.
    pub(crate) fn notify_set(&mut self, key: &[u8], opts: &SetOptions, res: &SetResult) {
        let db = self.session.db;
        self.engine.notify_set(db, key, opts, res);
    }

    /// A read found no `key` (Redis's "keymiss", from `lookupKeyRead`).
    pub(crate) fn miss(&mut self, key: &[u8]) {
        self.notify(class::KEY_MISS, "keymiss", key);
    }

    /// Whether "keymiss" events are published: a read that cannot tell a
    /// missing key from an empty string looks again only then.
    pub(crate) fn wants_misses(&self) -> bool {
        let flags = self.engine.config.notify_keyspace_events;
        flags & class::KEY_MISS != 0 && flags & (class::KEYSPACE | class::KEYEVENT) != 0
    }

    /// [`Cx::miss`] when `found` is None; passes `found` on.
    pub(crate) fn miss_if_none<T>(&mut self, key: &[u8], found: Option<T>) -> Option<T> {
        if found.is_none() {
            self.miss(key);
        }
        found
    }
}

impl Engine {
    /// [`Cx::notify`] for a key of db `db` (MOVE, COPY, memcached). What the
    /// store did on its own first (a key the command found expired, keys
    /// evicted to make room, the key the write created), so events come in
    /// Redis's order: "expired", "new", then the command's own.
    pub(crate) fn notify_in(&mut self, db: u8, class: u32, event: &str, key: &[u8]) {
        self.drain_key_log();
        self.emit(db, class, event, key);
    }

    /// Publishes one event and tells key subscribers. A key's "new" is
    /// always followed by the creating command's own event, which tells
    /// them.
    fn emit(&mut self, db: u8, class: u32, event: &str, key: &[u8]) {
        if class & (class::KEY_MISS | class::NEW) == 0 {
            self.key_changed(db, key);
            self.key_written(key, class & (class::EXPIRED | class::EVICTED) == 0);
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

    /// Sends the events of the store's key log (keys created, expired or
    /// evicted by this engine's handle). The dispatcher calls it after every
    /// command and the sweeper after every pass.
    pub(crate) fn drain_key_log(&mut self) {
        if !self.h.key_log_pending() {
            return;
        }
        let mut events = Vec::new();
        self.h.take_key_log(&mut events);
        for event in events {
            self.emit_logged(event);
        }
    }

    /// A write that reads first (GETSET, SET … GET) found no `key`: Redis's
    /// "keymiss" comes after what the lookup expired and before the "new"
    /// of the key the write then created.
    fn miss_before_write(&mut self, db: u8, key: &[u8]) {
        let mut events = Vec::new();
        self.h.take_key_log(&mut events);
        let (created, removed): (Vec<_>, Vec<_>) = events
            .into_iter()
            .partition(|(_, _, e)| *e == KeyEvent::Created);
        for event in removed {
            self.emit_logged(event);
        }
        self.emit(db, class::KEY_MISS, "keymiss", key);
        for event in created {
            self.emit_logged(event);
        }
    }

    /// The events of a string write with SET's options that did `res`
    /// (SET and its kin, memcached's set, add, replace and cas): a
    /// "keymiss" when GET found nothing, then "set", and "expire" when it
    /// set an expiry. A time already past makes the write a delete, where
    /// Redis keeps the key until it is next looked at or swept: its "new"
    /// and "expired" are sent at once.
    pub(crate) fn notify_set(&mut self, db: u8, key: &[u8], opts: &SetOptions, res: &SetResult) {
        if opts.get && !res.existed {
            self.miss_before_write(db, key);
        }
        if !res.written {
            return;
        }
        let past = match opts.expiry {
            Expiry::At(at) => at <= self.h.now_ms(),
            _ => false,
        };
        // The store deleted without writing (see `Handle::write_value`).
        let deleted_at_once = past && !opts.get && opts.condition == SetCondition::Always;
        if deleted_at_once && !res.existed {
            self.notify_in(db, class::NEW, "new", key);
        }
        self.notify_in(db, class::STRING, "set", key);
        if matches!(opts.expiry, Expiry::At(_)) {
            self.notify_in(db, class::GENERIC, "expire", key);
        }
        if past {
            self.notify_in(db, class::EXPIRED, "expired", key);
        }
    }

    /// The event of one key log entry.
    fn emit_logged(&mut self, (db, key, event): KeyLogEntry) {
        match event {
            KeyEvent::Created => self.emit(db, class::NEW, "new", &key),
            KeyEvent::Expired => self.emit(db, class::EXPIRED, "expired", &key),
            KeyEvent::Evicted => self.emit(db, class::EVICTED, "evicted", &key),
        }
    }

    /// Asks the store to log what the settings and subscribers need: expired
    /// and evicted keys while `x` or `e` is on or any key subscription
    /// exists (a key subscriber hears of expiry too), created keys while `n`
    /// is on. Called before each batch and each sweep, so a command pays
    /// nothing for it.
    pub(crate) fn sync_key_log(&mut self) {
        let flags = self.config.notify_keyspace_events;
        let publishing = flags & (class::KEYSPACE | class::KEYEVENT) != 0;
        let removals = (publishing && flags & (class::EXPIRED | class::EVICTED) != 0)
            || self.store.key_subscriber_slots().unwrap_or(0) != 0
            || self
                .store
                .config_word(crate::config::word::TRACKING_SLOTS)
                .unwrap_or(0)
                != 0;
        let creations = publishing && flags & class::NEW != 0;
        self.h.set_key_log(removals, creations);
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
        assert_eq!(
            flags_to_string(flags_from_str(b"Ag$lshzxetd").unwrap()),
            "A"
        );
    }
}
