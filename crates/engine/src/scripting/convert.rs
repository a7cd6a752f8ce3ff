//! The two conversions at the boundary between Lua and the command engine,
//! with Redis 7.0's rules (`script_lua.c`): a command's RESP reply becomes a
//! Lua value for `redis.call`, and a script's Lua result becomes the RESP
//! reply to the client.
//!
//! The reply bytes are the engine's own output, but they are still parsed
//! defensively: a malformed or truncated reply becomes an error value,
//! nesting is bounded, and nothing here can panic.

use mlua::{Lua, Table, Value};
use proto::resp::{Protocol, ReplyWriter};

/// How deep a reply or a returned table may nest: Redis's Lua stack would
/// run out near here, and a table that contains itself must end somewhere.
pub(crate) const MAX_DEPTH: usize = 200;

/// One parsed RESP reply, independent of Lua (so it can be fuzzed alone).
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+text`.
    Status(Vec<u8>),
    /// `-text`.
    Error(Vec<u8>),
    /// `:n`.
    Integer(i64),
    /// `$n` bytes.
    Bulk(Vec<u8>),
    /// `$-1`, `*-1` (RESP2) or `_` (RESP3).
    Null {
        /// RESP3's `_` (a Lua nil) rather than RESP2's null (Lua false).
        resp3: bool,
    },
    /// `*n`.
    Array(Vec<Reply>),
    /// `%n`.
    Map(Vec<(Reply, Reply)>),
    /// `~n`.
    Set(Vec<Reply>),
    /// `#t` / `#f`.
    Bool(bool),
    /// `,d`.
    Double(f64),
    /// `(digits`.
    BigNumber(Vec<u8>),
    /// `=n fmt:text`.
    Verbatim(Vec<u8>, Vec<u8>),
}

/// Parses every reply in `bytes` (a command normally writes one). Stops at
/// the first malformed one.
pub fn parse_replies(mut bytes: &[u8]) -> Result<Vec<Reply>, &'static str> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (r, rest) = parse(bytes, 0)?;
        out.push(r);
        bytes = rest;
    }
    Ok(out)
}

fn line(bytes: &[u8]) -> Result<(&[u8], &[u8]), &'static str> {
    let end = bytes
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or("truncated reply")?;
    Ok((&bytes[..end], &bytes[end + 2..]))
}

fn number(text: &[u8]) -> Result<i64, &'static str> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or("bad number in reply")
}

fn parse(bytes: &[u8], depth: usize) -> Result<(Reply, &[u8]), &'static str> {
    if depth > MAX_DEPTH {
        return Err("reply nested too deep");
    }
    let (&kind, rest) = bytes.split_first().ok_or("empty reply")?;
    let (head, mut rest) = line(rest)?;
    let count = |head: &[u8]| -> Result<Option<usize>, &'static str> {
        let n = number(head)?;
        if n < 0 {
            return Ok(None);
        }
        Ok(Some(usize::try_from(n).map_err(|_| "bad length")?))
    };
    let elements = |n: usize, rest: &mut &[u8]| -> Result<Vec<Reply>, &'static str> {
        // Each element takes at least 3 bytes: a count beyond that is bad.
        if n > rest.len() / 3 + 1 {
            return Err("bad length");
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let (r, after) = parse(rest, depth + 1)?;
            v.push(r);
            *rest = after;
        }
        Ok(v)
    };
    let reply = match kind {
        b'+' => Reply::Status(head.to_vec()),
        b'-' => Reply::Error(head.to_vec()),
        b':' => Reply::Integer(number(head)?),
        b'_' => Reply::Null { resp3: true },
        b'#' => Reply::Bool(head == b"t"),
        b',' => {
            let text = std::str::from_utf8(head).map_err(|_| "bad double")?;
            Reply::Double(match text {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                t => t.parse().map_err(|_| "bad double")?,
            })
        }
        b'(' => Reply::BigNumber(head.to_vec()),
        b'$' | b'=' => match count(head)? {
            None => Reply::Null { resp3: false },
            Some(n) => {
                if rest.len() < n + 2 || &rest[n..n + 2] != b"\r\n" {
                    return Err("truncated reply");
                }
                let body = &rest[..n];
                rest = &rest[n + 2..];
                if kind == b'=' {
                    if n < 4 {
                        return Err("bad verbatim string");
                    }
                    Reply::Verbatim(body[..3].to_vec(), body[4..].to_vec())
                } else {
                    Reply::Bulk(body.to_vec())
                }
            }
        },
        b'*' | b'~' | b'>' => match count(head)? {
            None => Reply::Null { resp3: false },
            Some(n) => {
                let v = elements(n, &mut rest)?;
                if kind == b'~' {
                    Reply::Set(v)
                } else {
                    Reply::Array(v)
                }
            }
        },
        b'%' => {
            let n = count(head)?.ok_or("bad length")?;
            let flat = elements(n.checked_mul(2).ok_or("bad length")?, &mut rest)?;
            let mut it = flat.into_iter();
            let mut pairs = Vec::with_capacity(n);
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Reply::Map(pairs)
        }
        b'|' => {
            // An attribute: read and dropped, the value follows (as Redis).
            let n = count(head)?.ok_or("bad length")?;
            elements(n.checked_mul(2).ok_or("bad length")?, &mut rest)?;
            let (r, after) = parse(rest, depth + 1)?;
            return Ok((r, after));
        }
        _ => return Err("unknown reply type"),
    };
    Ok((reply, rest))
}

/// A table with one field, the shape of Redis's status and error values.
pub(crate) fn single_field(lua: &Lua, field: &str, value: Value) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(field, value)?;
    Ok(t)
}

/// The Lua value `redis.call` returns for a reply (Redis's
/// `redisProtocolToLuaType`).
pub(crate) fn reply_to_lua(lua: &Lua, reply: &Reply) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Status(s) => Value::Table(single_field(
            lua,
            "ok",
            Value::String(lua.create_string(s)?),
        )?),
        Reply::Error(e) => Value::Table(single_field(
            lua,
            "err",
            Value::String(lua.create_string(e)?),
        )?),
        Reply::Integer(n) => Value::Number(*n as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::Null { resp3: true } => Value::Nil,
        Reply::Null { resp3: false } => Value::Boolean(false),
        Reply::Array(v) => {
            let t = lua.create_table_with_capacity(v.len(), 0)?;
            for (i, r) in v.iter().enumerate() {
                t.raw_set(i + 1, reply_to_lua(lua, r)?)?;
            }
            Value::Table(t)
        }
        Reply::Map(pairs) => {
            let t = lua.create_table_with_capacity(0, pairs.len())?;
            for (k, v) in pairs {
                t.raw_set(reply_to_lua(lua, k)?, reply_to_lua(lua, v)?)?;
            }
            Value::Table(single_field(lua, "map", Value::Table(t))?)
        }
        Reply::Set(v) => {
            let t = lua.create_table_with_capacity(0, v.len())?;
            for r in v {
                t.raw_set(reply_to_lua(lua, r)?, true)?;
            }
            Value::Table(single_field(lua, "set", Value::Table(t))?)
        }
        Reply::Bool(b) => Value::Boolean(*b),
        Reply::Double(d) => Value::Table(single_field(lua, "double", Value::Number(*d))?),
        Reply::BigNumber(digits) => Value::Table(single_field(
            lua,
            "big_number",
            Value::String(lua.create_string(digits)?),
        )?),
        Reply::Verbatim(format, text) => {
            let inner = lua.create_table()?;
            inner.raw_set("format", lua.create_string(format)?)?;
            inner.raw_set("string", lua.create_string(text)?)?;
            Value::Table(single_field(lua, "verbatim_string", Value::Table(inner))?)
        }
    })
}

/// Writes a script's result as the reply (Redis's `luaReplyToRedisReply`).
/// `script_resp` is what the script chose with `redis.setresp` (it decides
/// how a boolean is written).
pub(crate) fn lua_to_reply(out: &mut ReplyWriter<'_>, value: &Value, script_resp: Protocol) {
    write_value(out, value, script_resp, 0);
}

fn write_value(out: &mut ReplyWriter<'_>, value: &Value, script_resp: Protocol, depth: usize) {
    if depth > MAX_DEPTH {
        out.error(b"ERR reached lua stack limit");
        return;
    }
    match value {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Boolean(b) => {
            if script_resp == Protocol::Resp2 {
                if *b {
                    out.integer(1);
                } else {
                    out.null();
                }
            } else {
                out.boolean(*b);
            }
        }
        Value::Integer(n) => out.integer(*n),
        Value::Number(n) => out.integer(number_to_integer(*n)),
        Value::Table(t) => write_table(out, t, script_resp, depth),
        _ => out.null(),
    }
}

/// C's `(long long)` cast of a Lua number, made total: NaN is 0 and the
/// ends saturate (C leaves those undefined).
pub(crate) fn number_to_integer(n: f64) -> i64 {
    n as i64
}

fn write_table(out: &mut ReplyWriter<'_>, t: &Table, script_resp: Protocol, depth: usize) {
    let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
    if let Value::String(e) = field("err") {
        let e = e.as_bytes();
        let mut text = Vec::with_capacity(e.len() + 1);
        text.push(b'-');
        text.extend_from_slice(&e);
        out.error(&text);
        return;
    }
    if let Value::String(s) = field("ok") {
        out.simple(&s.as_bytes());
        return;
    }
    if let Value::Number(d) = field("double") {
        out.double(crate::scripting::lua::format_double(d).as_bytes());
        return;
    }
    if let Value::Integer(d) = field("double") {
        out.double(crate::scripting::lua::format_double(d as f64).as_bytes());
        return;
    }
    if let Value::String(s) = field("big_number") {
        let digits: Vec<u8> = s
            .as_bytes()
            .iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect();
        out.big_number(&digits);
        return;
    }
    if let Value::Table(v) = field("verbatim_string") {
        if let (Ok(Value::String(format)), Ok(Value::String(text))) =
            (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
        {
            out.verbatim(&format.as_bytes(), &text.as_bytes());
            return;
        }
    }
    if let Value::Table(m) = field("map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(Result::ok).collect();
        out.map_len(pairs.len());
        for (k, v) in &pairs {
            write_value(out, k, script_resp, depth + 1);
            write_value(out, v, script_resp, depth + 1);
        }
        return;
    }
    if let Value::Table(s) = field("set") {
        let keys: Vec<Value> = s
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(k, _)| k)
            .collect();
        out.set_len(keys.len());
        for k in &keys {
            write_value(out, k, script_resp, depth + 1);
        }
        return;
    }
    // An array: elements 1, 2, … up to the first nil.
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    out.array_len(items.len());
    for v in &items {
        write_value(out, v, script_resp, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_replies() {
        let r = parse_replies(b"*3\r\n:1\r\n$3\r\nabc\r\n*-1\r\n").unwrap();
        assert_eq!(
            r,
            vec![Reply::Array(vec![
                Reply::Integer(1),
                Reply::Bulk(b"abc".to_vec()),
                Reply::Null { resp3: false }
            ])]
        );
        let r = parse_replies(b"%1\r\n+a\r\n,1.5\r\n").unwrap();
        assert_eq!(
            r,
            vec![Reply::Map(vec![(
                Reply::Status(b"a".to_vec()),
                Reply::Double(1.5)
            )])]
        );
    }

    #[test]
    fn refuses_malformed_replies() {
        assert!(parse_replies(b"$10\r\nabc\r\n").is_err());
        assert!(parse_replies(b"*99999999999\r\n").is_err());
        assert!(parse_replies(b"?\r\n").is_err());
        let deep = "*1\r\n".repeat(MAX_DEPTH + 5) + ":1\r\n";
        assert!(parse_replies(deep.as_bytes()).is_err());
    }
}
