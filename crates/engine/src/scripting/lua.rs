//! The Lua 5.1 state each worker thread keeps for scripts and functions,
//! set up as Redis 7.0 sets up its own: the base, table, string and math
//! libraries; `bit`, `cjson`, `cmsgpack` and `struct` (written in Rust over
//! mlua, see `libs.rs`); the `redis` table; no `loadfile`, `dofile` or
//! `print`; read-only globals. A script's commands reach the engine through
//! `redis.call`, a native the engine makes for each run, and `redis.pcall`
//! (the prelude's, over it).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use mlua::{chunk::ChunkMode, Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use proto::resp::Protocol;
use sha1::{Digest, Sha1};

use crate::connection::REDIS_VERSION;

/// Most memory one worker's Lua state may hold: a script that allocates
/// without bound gets an error instead of exhausting the worker.
pub(crate) const MEMORY_LIMIT: usize = 256 << 20;

/// What the natives read and change during one run.
#[derive(Debug)]
pub(crate) struct RunFlags {
    /// The protocol the script reads replies in (`redis.setresp`).
    pub resp: Cell<Protocol>,
    /// A run is in progress (`redis.setresp` and `redis.call` need one).
    pub running: Cell<bool>,
}

/// Table keys a run sets, as Lua strings.
pub(crate) struct Names {
    pub pending: mlua::LuaString,
    pub call: mlua::LuaString,
    pub keys: mlua::LuaString,
    pub argv: mlua::LuaString,
    pub killed: mlua::LuaString,
}

/// The collector's pause between cycles, in percent of the live heap
/// (Lua's default is 200). A script call leaves a little garbage (its
/// KEYS and ARGV, the run's natives) in a heap that is mostly the
/// libraries, which every cycle marks again: a longer pause marks them
/// less often, for a heap that grows to at most 5 times the live one.
const GC_PAUSE: i32 = 500;

/// One thread's Lua state.
pub(crate) struct Vm {
    pub lua: Lua,
    /// The prelude's private table (`run`, `env`, `protect`, `pending`).
    pub state: Table,
    /// The real globals, where KEYS and ARGV are set.
    pub globals: Table,
    /// The real `redis` table, where a run puts its `call`.
    pub redis: Table,
    /// What `redis.call` is outside a run.
    pub outside_run: Function,
    /// A native that does nothing: calling it from Rust restocks the slot
    /// a native's error needs (see [`Vm::restock_error_slot`]).
    nothing: Function,
    /// The prelude's protected runner (`state.run`).
    pub runner: Function,
    /// The names a run sets, made once: a name given as `&str` is a new
    /// Lua string (hashed and interned) on every use.
    pub names: Names,
    /// What the instruction hook watches while a script runs; the hook
    /// stays set between runs (setting one costs a protected call).
    pub watch: Rc<RefCell<Option<crate::scripting::Watch>>>,
    /// Whether the run hook is the one set (FUNCTION LOAD sets its own).
    pub hooked: Cell<bool>,
    pub flags: Rc<RunFlags>,
}

/// Redis's `sha1hex`: 40 lower-case hex digits.
pub(crate) fn sha1_hex(bytes: &[u8]) -> String {
    let digest = Sha1::digest(bytes);
    let mut s = String::with_capacity(40);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// C's `%.17g`, which Redis uses for a Lua number passed as a command
/// argument and for a double reply.
pub(crate) fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.into();
    }
    format_g(d, 17)
}

/// C's `%.<precision>g` for a finite, non-zero `d`.
pub(crate) fn format_g(d: f64, precision: usize) -> String {
    let sci = format!("{:.*e}", precision - 1, d);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= precision as i32 {
        let m = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (precision as i32 - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{d:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The text of an error raised from a message, as Redis's
/// `luaPushErrorBuff` builds it: `-CODE msg` keeps its code, anything else
/// gets `ERR`.
pub(crate) fn error_text(buf: &[u8]) -> Vec<u8> {
    let (code, msg): (&[u8], &[u8]) = match buf.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&b| b == b' ') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", buf),
    };
    let is_break = |b: &u8| matches!(b, b'\r' | b'\n');
    let start = msg.iter().position(|b| !is_break(b)).unwrap_or(msg.len());
    let end = msg
        .iter()
        .rposition(|b| !is_break(b))
        .map_or(start, |i| i + 1);
    let mut out = code.to_vec();
    out.push(b' ');
    out.extend_from_slice(msg.get(start..end).unwrap_or_default());
    out
}

/// An error table `{err = text}` for `text` as `error_text` shapes it.
pub(crate) fn error_table(lua: &Lua, text: &[u8]) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(error_text(text))?)?;
    Ok(Value::Table(t))
}

/// A native's failure: `false` and the value the wrapper raises.
pub(crate) fn fail(lua: &Lua, err: Value) -> mlua::Result<MultiValue> {
    let _ = lua;
    Ok(MultiValue::from_vec(vec![Value::Boolean(false), err]))
}

/// A native's success: `true` and its results.
pub(crate) fn ok(values: Vec<Value>) -> mlua::Result<MultiValue> {
    let mut v = Vec::with_capacity(values.len() + 1);
    v.push(Value::Boolean(true));
    v.extend(values);
    Ok(MultiValue::from_vec(v))
}

impl Vm {
    /// Runs `f` (a script's or a library's Lua code) under [`MEMORY_LIMIT`].
    /// The limit is on only while Lua code runs: with a limit set, mlua
    /// wraps every call the engine makes (a table, a string, a field) in a
    /// protected call of its own, which costs a script call much time and
    /// garbage, and what the engine allocates is bounded by the request.
    ///
    /// A run that left more than half the limit in use (a script stopped
    /// by the limit leaves its garbage behind) is followed by a full
    /// collection: otherwise the next runs would fail for want of memory.
    pub(crate) fn limited<R>(&self, f: impl FnOnce() -> R) -> R {
        let _ = self.lua.set_memory_limit(MEMORY_LIMIT);
        let r = f();
        let _ = self.lua.set_memory_limit(0);
        if self.lua.used_memory() > MEMORY_LIMIT / 2 {
            let _ = self.lua.gc_collect();
        }
        r
    }

    /// Sets aside again the object a native's error is raised in. mlua
    /// keeps a pool of them; a native raising an error takes one, and a
    /// native called while the pool is empty makes one on the Lua stack,
    /// which fails when the call's arguments fill the stack (Redis allows
    /// 7999 of them, `redis.call('lpush', k, unpack(t))`). So whoever
    /// raises from a native, or ends a failed run, restocks the pool.
    pub(crate) fn restock_error_slot(&self) {
        let _ = self.nothing.call::<()>(());
    }

    /// A fresh state with Redis's libraries and protections.
    pub(crate) fn new() -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let globals = lua.globals();
        for name in [
            "loadfile", "dofile", "print", "require", "module", "newproxy",
        ] {
            globals.raw_set(name, Value::Nil)?;
        }
        let flags = Rc::new(RunFlags {
            resp: Cell::new(Protocol::Resp2),
            running: Cell::new(false),
        });
        let state = lua.create_table()?;
        let native = lua.create_table()?;
        let redis = lua.create_table()?;
        redis.raw_set("REDIS_VERSION", REDIS_VERSION)?;
        redis.raw_set("REDIS_VERSION_NUM", version_num(REDIS_VERSION))?;
        for (name, level) in [
            ("LOG_DEBUG", 0),
            ("LOG_VERBOSE", 1),
            ("LOG_NOTICE", 2),
            ("LOG_WARNING", 3),
        ] {
            redis.raw_set(name, level)?;
        }
        for (name, v) in [
            ("REPL_NONE", 0),
            ("REPL_AOF", 1),
            ("REPL_SLAVE", 2),
            ("REPL_REPLICA", 2),
            ("REPL_ALL", 3),
        ] {
            redis.raw_set(name, v)?;
        }
        globals.raw_set("redis", redis.clone())?;
        native.raw_set("redis", redis_natives(&lua, &flags)?)?;
        crate::scripting::libs::install(&lua, &globals, &native)?;
        state.raw_set("native", native)?;
        state.raw_set("redis", redis.clone())?;
        state.raw_set(
            "acl_check",
            crate::scripting::native_op(crate::scripting::NATIVE_ACL_CHECK),
        )?;
        lua.load(WRAP_NATIVES)
            .set_name("@[shoal]")
            .set_mode(ChunkMode::Text)
            .call::<()>((state.clone(), globals.clone()))?;
        lua.load(include_str!("prelude.lua"))
            .set_name("@[shoal]")
            .set_mode(ChunkMode::Text)
            .call::<()>((state.clone(), globals.clone()))?;
        let outside_run = state.raw_get("outside_run")?;
        let nothing = lua.create_function(|_, ()| Ok(()))?;
        nothing.call::<()>(())?;
        let runner = state.raw_get("run")?;
        let name = |s: &str| lua.create_string(s);
        let names = Names {
            pending: name("pending")?,
            call: name("call")?,
            keys: name("KEYS")?,
            argv: name("ARGV")?,
            killed: name("killed")?,
        };
        lua.gc_set_mode(mlua::prelude::LuaGcMode::Incremental(
            mlua::prelude::LuaGcIncParams::default().pause(GC_PAUSE),
        ));
        Ok(Vm {
            lua,
            state,
            globals,
            redis,
            outside_run,
            nothing,
            runner,
            names,
            watch: Rc::new(RefCell::new(None)),
            hooked: Cell::new(false),
            flags,
        })
    }

    /// The globals scripts see (read-only).
    pub(crate) fn env(&self) -> mlua::Result<Table> {
        self.state.raw_get("env")
    }

    /// Compiles `body` as chunk `name` with the script globals.
    pub(crate) fn compile(&self, body: &[u8], name: &str) -> mlua::Result<Function> {
        self.lua
            .load(body)
            .set_name(name)
            .set_mode(ChunkMode::Text)
            .set_environment(self.env()?)
            .into_function()
    }
}

/// Builds the public library tables from `state.native`: each native
/// returns `true, results…` or `false, error` and the wrapper raises the
/// error as a Lua error (a Redis error table stays a table).
const WRAP_NATIVES: &str = r#"
local state, G = ...
local error, pairs, rawget, rawset = error, pairs, rawget, rawset
local function check(ok, ...)
  if not ok then error((...), 0) end
  return ...
end
for lib, fns in pairs(state.native) do
  local t = rawget(G, lib)
  if t == nil then t = {}; rawset(G, lib, t) end
  for name, f in pairs(fns) do
    rawset(t, name, function(...) return check(f(...)) end)
  end
end
"#;

/// `7.0.15` → 0x07000f (a byte per part).
fn version_num(v: &str) -> i64 {
    v.split('.')
        .map(|p| p.parse::<i64>().unwrap_or(0))
        .fold(0, |acc, p| (acc << 8) | (p & 0xff))
}

fn arg_count(args: &MultiValue) -> usize {
    args.len()
}

/// The natives behind `redis.*` (all but call, which needs the
/// running command context and is set per run, and pcall, over call).
fn redis_natives(lua: &Lua, flags: &Rc<RunFlags>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if arg_count(&args) != 1 {
                return fail(lua, error_table(lua, b"wrong number of arguments")?);
            }
            let bytes = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Number(n) => crate::scripting::libs::lua_number_text(*n).into_bytes(),
                Value::Integer(n) => n.to_string().into_bytes(),
                _ => Vec::new(),
            };
            ok(vec![Value::String(lua.create_string(sha1_hex(&bytes))?)])
        })?,
    )?;
    t.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| {
            let text = match (arg_count(&args), &args.front()) {
                (1, Some(Value::String(s))) => s.as_bytes().to_vec(),
                _ => {
                    return ok(vec![error_table(
                        lua,
                        b"wrong number or type of arguments",
                    )?])
                }
            };
            let text = if text.first() == Some(&b'-') {
                text
            } else {
                [b"-".as_slice(), &text].concat()
            };
            ok(vec![error_table(lua, &text)?])
        })?,
    )?;
    t.raw_set(
        "status_reply",
        lua.create_function(
            |lua, args: MultiValue| match (arg_count(&args), &args.front()) {
                (1, Some(Value::String(s))) => {
                    let t = lua.create_table()?;
                    t.raw_set("ok", s.clone())?;
                    ok(vec![Value::Table(t)])
                }
                _ => ok(vec![error_table(
                    lua,
                    b"wrong number or type of arguments",
                )?]),
            },
        )?,
    )?;
    t.raw_set(
        "log",
        lua.create_function(|lua, args: MultiValue| {
            if arg_count(&args) < 2 {
                return fail(
                    lua,
                    error_table(lua, b"redis.log() requires two arguments or more.")?,
                );
            }
            let level = match &args[0] {
                Value::Number(n) => *n as i64,
                Value::Integer(n) => *n,
                _ => {
                    return fail(
                        lua,
                        error_table(lua, b"First argument must be a number (log level).")?,
                    )
                }
            };
            if !(0..=3).contains(&level) {
                return fail(lua, error_table(lua, b"Invalid debug level.")?);
            }
            let mut line = String::new();
            for v in args.iter().skip(1) {
                if !line.is_empty() {
                    line.push(' ');
                }
                match v {
                    Value::String(s) => line.push_str(&s.to_string_lossy()),
                    Value::Number(n) => line.push_str(&crate::scripting::libs::lua_number_text(*n)),
                    Value::Integer(n) => line.push_str(&n.to_string()),
                    _ => {}
                }
            }
            // Warnings reach the server's log (stderr); lower levels are
            // what the default `loglevel notice` drops anyway.
            if level >= 2 {
                eprintln!("script log: {line}");
            }
            ok(vec![])
        })?,
    )?;
    let f = flags.clone();
    t.raw_set(
        "setresp",
        lua.create_function(move |lua, args: MultiValue| {
            if !f.running.get() {
                return fail(
                    lua,
                    error_table(
                        lua,
                        b"redis.setresp can only be called inside a script invocation",
                    )?,
                );
            }
            if arg_count(&args) != 1 {
                return fail(
                    lua,
                    error_table(lua, b"redis.setresp() requires one argument.")?,
                );
            }
            let v = match &args[0] {
                Value::Number(n) => *n as i64,
                Value::Integer(n) => *n,
                _ => 0,
            };
            match v {
                2 => f.resp.set(Protocol::Resp2),
                3 => f.resp.set(Protocol::Resp3),
                _ => return fail(lua, error_table(lua, b"RESP version must be 2 or 3.")?),
            }
            ok(vec![])
        })?,
    )?;
    let f = flags.clone();
    t.raw_set(
        "set_repl",
        lua.create_function(move |lua, args: MultiValue| {
            if !f.running.get() {
                return fail(
                    lua,
                    error_table(lua, b"redis.set_repl can only be called inside a script invocation")?,
                );
            }
            if arg_count(&args) != 1 {
                return fail(lua, error_table(lua, b"redis.set_repl() requires two arguments.")?);
            }
            let v = match &args[0] {
                Value::Number(n) => *n as i64,
                Value::Integer(n) => *n,
                _ => -1,
            };
            if !(0..=3).contains(&v) {
                return fail(
                    lua,
                    error_table(
                        lua,
                        b"Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                    )?,
                );
            }
            // Writes are logged as their effects whatever the flags say.
            ok(vec![])
        })?,
    )?;
    t.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: MultiValue| ok(vec![Value::Boolean(true)]))?,
    )?;
    t.raw_set(
        "breakpoint",
        lua.create_function(|_, _: MultiValue| ok(vec![Value::Boolean(false)]))?,
    )?;
    t.raw_set("debug", lua.create_function(|_, _: MultiValue| ok(vec![]))?)?;
    Ok(t)
}

/// The compiled scripts of one thread, by SHA1, with the script-cache
/// epoch they belong to.
#[derive(Default)]
pub(crate) struct Compiled {
    pub by_sha: std::collections::HashMap<String, (Function, u32)>,
    pub epoch: u64,
    /// The function libraries, compiled in this state.
    pub functions: Option<crate::scripting::functions::Libraries>,
}

thread_local! {
    /// This worker thread's Lua state and compiled scripts (created on
    /// first use).
    pub(crate) static VM: RefCell<Option<(Rc<Vm>, Compiled)>> = const { RefCell::new(None) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_c() {
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(-2.5e-7), "-2.4999999999999999e-07");
        assert_eq!(version_num("7.0.15"), 0x07_00_0f);
    }

    #[test]
    fn error_text_takes_the_code() {
        assert_eq!(error_text(b"-WRONG thing\r\n"), b"WRONG thing");
        assert_eq!(error_text(b"-Oops"), b"ERR Oops");
        assert_eq!(error_text(b"plain"), b"ERR plain");
    }
}
