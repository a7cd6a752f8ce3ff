//! DUMP and RESTORE (Redis's `generic` group, `cluster.c`): a key's value in
//! Redis's RDB format (see [`crate::rdb`]), readable by Redis 7.0 and back.
//!
//! RESTORE builds the whole value in process memory and hands it to the
//! store, which checks for the key and publishes the value, its expiry and
//! its access information under the key's bucket lock in one transaction:
//! no other client sees a half-restored key, and a key created meanwhile
//! by another worker is not overwritten without REPLACE.

use store::{Collection, Handle, Hash, List, RestoreOptions, Set, ValueType, ZSet};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::{CmdError, SYNTAX};
use crate::notify::class;
use crate::parse;
use crate::rdb::{self, PayloadError, Value};

/// RESTORE onto a key that exists, without REPLACE.
const BUSY_KEY: &str = "BUSYKEY Target key name already exists.";
const BAD_TTL: &str = "ERR Invalid TTL value, must be >= 0";
const BAD_IDLETIME: &str = "ERR Invalid IDLETIME value, must be >= 0";
const BAD_FREQ: &str = "ERR Invalid FREQ value, must be >= 0 and <= 255";
const BAD_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
const BAD_FORMAT: &str = "ERR Bad data format";
/// DUMP of a value type shoal has no RDB writer for.
const NO_STREAM_DUMP: &str = "ERR DUMP of stream values is not supported";
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
            ValueType::Stream => return Err(CmdError::msg(NO_STREAM_DUMP)),
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
    if !write_value(cx.h(), db, key, value, &opts)? {
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
        Value::ZSet(pairs) => {
            let mut zset = ZSet::empty();
            for (m, s) in &pairs {
                zset.insert(m, *s)?;
            }
            h.restore_value_collection(db, key, zset, opts)?
        }
    })
}
