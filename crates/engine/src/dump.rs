//! DUMP and RESTORE (Redis's `generic` group, `cluster.c`): a key's value in
//! Redis's RDB format (see [`crate::rdb`]), readable by Redis 7.0 and back.
//!
//! RESTORE builds the whole value in process memory and hands it to the
//! store, which checks for the key and publishes the value, its expiry and
//! its access information under the key's bucket lock in one transaction:
//! no other client sees a half-restored key, and a key created meanwhile
//! by another worker is not overwritten without REPLACE.

use store::{
    Collection, Handle, Hash, List, NodeLimits, RestoreOptions, Set, Stream, StreamId, ValueType,
    ZSet,
};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::{CmdError, SYNTAX};
use crate::notify::class;
use crate::parse;
use crate::rdb::{self, PayloadError, StreamGroupValue, StreamValue, Value};

/// RESTORE onto a key that exists, without REPLACE.
const BUSY_KEY: &str = "BUSYKEY Target key name already exists.";
const BAD_TTL: &str = "ERR Invalid TTL value, must be >= 0";
const BAD_IDLETIME: &str = "ERR Invalid IDLETIME value, must be >= 0";
const BAD_FREQ: &str = "ERR Invalid FREQ value, must be >= 0 and <= 255";
const BAD_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
const BAD_FORMAT: &str = "ERR Bad data format";
/// Times DUMP reads a key again when its type changed between the type
/// lookup and the read (another worker rewrote it meanwhile).
const TYPE_RACE_RETRIES: usize = 8;

crate::command::group_cmd!("generic", keys = (1, 1, 1), since = "2.6.0");

/// DUMP and RESTORE.
pub(crate) const COMMANDS: &[Command] = &[
    cmd(
        "dump",
        2,
        READONLY,
        "Return a serialized version of the value stored at the specified key.",
        dump,
    ),
    cmd(
        "restore",
        -4,
        WRITE | DENYOOM,
        "Create a key using the provided serialized value, previously obtained using DUMP.",
        restore,
    ),
];

fn dump(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let db = cx.db();
    match read_value(cx.h(), db, &args[1])? {
        Some(value) => cx.out.bulk(&rdb::encode(&value)),
        None => {
            cx.miss(&args[1]);
            cx.out.null();
        }
    }
    Ok(())
}

/// The whole value of `key` as RDB carries it; None when it is missing.
pub(crate) fn read_value(h: &mut Handle, db: u8, key: &[u8]) -> Result<Option<Value>, CmdError> {
    for _ in 0..TYPE_RACE_RETRIES {
        let Some(vtype) = h.key_type(db, key)? else {
            return Ok(None);
        };
        let read = match vtype {
            ValueType::String => h.get(db, key).map(|v| v.map(Value::String)),
            ValueType::List => {
                h.read_collection(db, key, |l: &List| Ok(Value::List(l.range(0, l.len())?)))
            }
            ValueType::Set => h.read_collection(db, key, |s: &Set| Ok(Value::Set(s.members()?))),
            ValueType::Hash => h.read_collection(db, key, |m: &Hash| Ok(Value::Hash(m.entries()?))),
            ValueType::ZSet => {
                h.read_collection(db, key, |z: &ZSet| Ok(Value::ZSet(z.range(0, z.len())?)))
            }
            ValueType::Stream => h.read_collection(db, key, |s: &Stream| {
                Ok(Value::Stream(Box::new(stream_value(s)?)))
            }),
        };
        match read {
            Err(store::Error::WrongType) => continue,
            other => return Ok(other?),
        }
    }
    Err(store::Error::WrongType.into())
}

/// RESTORE's options after the payload, as Redis parses them.
#[derive(Default)]
struct Options {
    replace: bool,
    absttl: bool,
    idle_seconds: Option<u64>,
    freq: Option<u8>,
}

fn options(args: &[Arg<'_>]) -> Result<Options, CmdError> {
    let mut o = Options::default();
    let mut j = 4;
    while j < args.len() {
        let has_value = j + 1 < args.len();
        if parse::is(&args[j], "replace") {
            o.replace = true;
        } else if parse::is(&args[j], "absttl") {
            o.absttl = true;
        } else if parse::is(&args[j], "idletime") && has_value && o.freq.is_none() {
            let idle = parse::int(&args[j + 1])?;
            if idle < 0 {
                return Err(CmdError::msg(BAD_IDLETIME));
            }
            o.idle_seconds = Some(idle as u64);
            j += 1;
        } else if parse::is(&args[j], "freq") && has_value && o.idle_seconds.is_none() {
            let freq = parse::int(&args[j + 1])?;
            let freq = u8::try_from(freq).map_err(|_| CmdError::msg(BAD_FREQ))?;
            o.freq = Some(freq);
            j += 1;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        j += 1;
    }
    Ok(o)
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f],
/// checking in Redis's order: options, an existing key, the TTL, the
/// payload's footer, then its value.
fn restore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let o = options(args)?;
    let db = cx.db();
    let key = &args[1];
    if !o.replace && cx.h().exists(db, key)? {
        return Err(CmdError::msg(BUSY_KEY));
    }
    let ttl = parse::int(&args[2])?;
    if ttl < 0 {
        return Err(CmdError::msg(BAD_TTL));
    }
    let value = rdb::decode(&args[3]).map_err(|e| match e {
        PayloadError::VersionOrChecksum => CmdError::msg(BAD_PAYLOAD),
        PayloadError::BadFormat => CmdError::msg(BAD_FORMAT),
    })?;
    let now = cx.engine.now_ms() as i64;
    let expire_at = if ttl != 0 && !o.absttl {
        ttl.saturating_add(now)
    } else {
        ttl
    };
    if expire_at != 0 && expire_at <= now {
        // Already expired: the key is only deleted (when REPLACE said so).
        if o.replace && cx.h().delete(db, key)? {
            cx.notify(class::GENERIC, "del", key);
        }
        cx.out.simple(b"OK");
        return Ok(());
    }
    let opts = RestoreOptions {
        replace: o.replace,
        expire_at_ms: expire_at as u64,
        idle_seconds: o.idle_seconds,
        lfu_counter: o.freq,
    };
    let config = cx.engine.config();
    let limits = NodeLimits {
        max_bytes: config.stream_node_max_bytes,
        max_entries: config.stream_node_max_entries,
    };
    if !write_value(cx.h(), db, key, value, &opts, limits)? {
        // Another client created the key since the check above.
        return Err(CmdError::msg(BUSY_KEY));
    }
    cx.signal_ready(key);
    cx.notify(class::GENERIC, "restore", key);
    cx.out.simple(b"OK");
    Ok(())
}

/// Builds the value in process memory and writes it whole; false when the
/// key exists and REPLACE was not given.
fn write_value(
    h: &mut Handle,
    db: u8,
    key: &[u8],
    value: Value,
    opts: &RestoreOptions,
    limits: NodeLimits,
) -> Result<bool, CmdError> {
    Ok(match value {
        Value::String(s) => h.restore_value_string(db, key, &s, opts)?,
        Value::List(items) => {
            let mut list = List::empty();
            for item in &items {
                list.push_back(item)?;
            }
            h.restore_value_collection(db, key, list, opts)?
        }
        Value::Set(members) => {
            let mut set = Set::empty();
            for m in &members {
                set.insert(m)?;
            }
            h.restore_value_collection(db, key, set, opts)?
        }
        Value::Hash(pairs) => {
            let mut hash = Hash::empty();
            for (f, v) in &pairs {
                hash.insert(f, v)?;
            }
            h.restore_value_collection(db, key, hash, opts)?
        }
        Value::Stream(v) => {
            let stream = stream_from(&v, limits)?;
            h.restore_value_collection(db, key, stream, opts)?
        }
        Value::ZSet(pairs) => {
            let mut zset = ZSet::empty();
            for (m, s) in &pairs {
                zset.insert(m, *s)?;
            }
            h.restore_value_collection(db, key, zset, opts)?
        }
    })
}

/// A stream's whole value as RDB carries it.
fn stream_value(s: &Stream) -> store::Result<StreamValue> {
    let meta = s.meta();
    let mut groups = Vec::new();
    for g in s.groups()? {
        let pending = s
            .pending_range(&g.name, None, StreamId::MIN, StreamId::MAX, 0)?
            .into_iter()
            .map(|p| (p.id, p.delivery_ms, p.deliveries))
            .collect();
        let mut consumers = Vec::new();
        for c in s.consumers(&g.name)? {
            let owned = s
                .pending_range(&g.name, Some(&c.name), StreamId::MIN, StreamId::MAX, 0)?
                .into_iter()
                .map(|p| p.id)
                .collect();
            consumers.push((c.name, c.seen_ms, owned));
        }
        groups.push(StreamGroupValue {
            name: g.name,
            last_id: g.last_id,
            entries_read: g.entries_read,
            pending,
            consumers,
        });
    }
    Ok(StreamValue {
        entries: s.range(StreamId::MIN, StreamId::MAX, 0, false)?,
        last_id: meta.last_id,
        max_deleted: meta.max_deleted,
        entries_added: meta.entries_added,
        groups,
    })
}

/// A stream built from its RDB value, its entries in nodes as `limits`
/// says. A pending entry must name a consumer that owns it.
fn stream_from(v: &StreamValue, limits: NodeLimits) -> Result<Stream, CmdError> {
    let bad = || CmdError::msg(BAD_FORMAT);
    let mut s = Stream::empty();
    s.create()?;
    for (id, pairs) in &v.entries {
        if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
            return Err(bad());
        }
        let fields: Vec<&[u8]> = pairs.iter().map(|p| p.as_slice()).collect();
        s.append(*id, &fields, limits)?;
    }
    if v.entries.last().is_some_and(|e| e.0 > v.last_id) {
        return Err(bad());
    }
    s.set_meta(v.last_id, v.entries_added, v.max_deleted)?;
    for g in &v.groups {
        s.put_group(&store::StreamGroup {
            name: g.name.clone(),
            last_id: g.last_id,
            entries_read: g.entries_read,
            pending: 0,
        })?;
        let mut owner = std::collections::HashMap::new();
        for (name, seen, owned) in &g.consumers {
            s.put_consumer(
                &g.name,
                &store::StreamConsumer {
                    name: name.clone(),
                    seen_ms: *seen,
                    pending: 0,
                },
            )?;
            for id in owned {
                owner.insert(*id, name.clone());
            }
        }
        for (id, at, count) in &g.pending {
            let consumer = owner.get(id).ok_or_else(bad)?;
            s.put_pending(
                &g.name,
                &store::Pending {
                    id: *id,
                    consumer: consumer.clone(),
                    delivery_ms: *at,
                    deliveries: *count,
                },
            )?;
        }
    }
    Ok(s)
}
