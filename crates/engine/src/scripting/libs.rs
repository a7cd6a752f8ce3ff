//! The libraries Redis 7.0 bundles into its Lua: `bit` (LuaBitOp),
//! `cjson` (lua-cjson), `cmsgpack` (lua-cmsgpack) and `struct` (Roberto
//! Ierusalimschy's struct). mlua's vendored Lua ships none of them and no
//! maintained crate provides them for mlua, so they are written here over
//! mlua's API, following the originals' behaviour and error texts.
//!
//! Every function is a "native" in the sense of `lua.rs`: it returns
//! `true, results…` or `false, message`, and a Lua wrapper raises the
//! message, so no Rust error value ever reaches a script.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use crate::scripting::lua::{fail, format_g, ok};

/// Installs the libraries' natives into `native.<lib>` and their constants
/// into the global tables.
pub(crate) fn install(lua: &Lua, globals: &Table, native: &Table) -> mlua::Result<()> {
    native.raw_set("bit", bit(lua)?)?;
    let cjson = lua.create_table()?;
    cjson.raw_set(
        "null",
        Value::LightUserData(LightUserData(std::ptr::null_mut())),
    )?;
    globals.raw_set("cjson", cjson)?;
    native.raw_set("cjson", cjson_natives(lua)?)?;
    native.raw_set("cmsgpack", cmsgpack(lua)?)?;
    native.raw_set("struct", structlib(lua)?)?;
    Ok(())
}

/// How Lua's `tostring` writes a number (`%.14g`).
pub(crate) fn lua_number_text(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.into();
    }
    format_g(n, 14)
}

fn msg(lua: &Lua, text: &str) -> mlua::Result<MultiValue> {
    fail(lua, Value::String(lua.create_string(text)?))
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => Some(*n),
        Value::Integer(n) => Some(*n as f64),
        Value::String(s) => s.to_str().ok()?.trim().parse().ok(),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// bit

/// LuaBitOp's conversion of a number to a 32-bit integer (modulo 2^32,
/// rounding as its 2^52+2^51 trick does).
fn tobit(n: f64) -> i32 {
    let r = n.round_ties_even();
    let m = r.rem_euclid(4_294_967_296.0);
    (m as u64 as u32) as i32
}

fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    fn arg(
        lua: &Lua,
        args: &MultiValue,
        i: usize,
        name: &str,
    ) -> Result<i32, mlua::Result<MultiValue>> {
        match args.get(i).and_then(num) {
            Some(n) => Ok(tobit(n)),
            None => Err(msg(
                lua,
                &format!(
                    "bad argument #{} to '{name}' (number expected, got {})",
                    i + 1,
                    args.get(i).map_or("no value", |v| v.type_name())
                ),
            )),
        }
    }
    macro_rules! unary {
        ($name:literal, $f:expr) => {
            t.raw_set(
                $name,
                lua.create_function(|lua, args: MultiValue| match arg(lua, &args, 0, $name) {
                    Ok(x) => ok(vec![Value::Number(($f)(x) as f64)]),
                    Err(e) => e,
                })?,
            )?;
        };
    }
    unary!("tobit", |x: i32| x);
    unary!("bnot", |x: i32| !x);
    unary!("bswap", |x: i32| x.swap_bytes());
    macro_rules! fold {
        ($name:literal, $op:expr) => {
            t.raw_set(
                $name,
                lua.create_function(|lua, args: MultiValue| {
                    let mut acc = match arg(lua, &args, 0, $name) {
                        Ok(x) => x,
                        Err(e) => return e,
                    };
                    for i in 1..args.len() {
                        match arg(lua, &args, i, $name) {
                            Ok(x) => acc = ($op)(acc, x),
                            Err(e) => return e,
                        }
                    }
                    ok(vec![Value::Number(acc as f64)])
                })?,
            )?;
        };
    }
    fold!("band", |a: i32, b: i32| a & b);
    fold!("bor", |a: i32, b: i32| a | b);
    fold!("bxor", |a: i32, b: i32| a ^ b);
    macro_rules! shift {
        ($name:literal, $op:expr) => {
            t.raw_set(
                $name,
                lua.create_function(|lua, args: MultiValue| {
                    let x = match arg(lua, &args, 0, $name) {
                        Ok(x) => x,
                        Err(e) => return e,
                    };
                    let n = match arg(lua, &args, 1, $name) {
                        Ok(n) => (n & 31) as u32,
                        Err(e) => return e,
                    };
                    ok(vec![Value::Number(($op)(x, n) as f64)])
                })?,
            )?;
        };
    }
    shift!("lshift", |x: i32, n: u32| ((x as u32) << n) as i32);
    shift!("rshift", |x: i32, n: u32| ((x as u32) >> n) as i32);
    shift!("arshift", |x: i32, n: u32| x >> n);
    shift!("rol", |x: i32, n: u32| (x as u32).rotate_left(n) as i32);
    shift!("ror", |x: i32, n: u32| (x as u32).rotate_right(n) as i32);
    t.raw_set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| {
            let x = match arg(lua, &args, 0, "tohex") {
                Ok(x) => x as u32,
                Err(e) => return e,
            };
            let mut n: i32 = match args.get(1) {
                None | Some(Value::Nil) => 8,
                Some(_) => match arg(lua, &args, 1, "tohex") {
                    Ok(n) => n,
                    Err(e) => return e,
                },
            };
            let upper = n < 0;
            if upper {
                n = n.wrapping_neg();
            }
            let n = n.clamp(1, 8) as usize;
            let full = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            ok(vec![Value::String(lua.create_string(&full[8 - n..])?)])
        })?,
    )?;
    Ok(t)
}

// ---------------------------------------------------------------------------
// cjson

/// lua-cjson's settings, per Lua state.
#[derive(Debug)]
struct JsonConfig {
    encode_max_depth: Cell<usize>,
    decode_max_depth: Cell<usize>,
    encode_invalid_numbers: Cell<bool>,
    decode_invalid_numbers: Cell<bool>,
    encode_precision: Cell<usize>,
}

fn is_null(v: &Value) -> bool {
    matches!(v, Value::LightUserData(p) if p.0.is_null())
}

fn cjson_natives(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let cfg = Rc::new(JsonConfig {
        encode_max_depth: Cell::new(1000),
        decode_max_depth: Cell::new(1000),
        encode_invalid_numbers: Cell::new(false),
        decode_invalid_numbers: Cell::new(true),
        encode_precision: Cell::new(14),
    });
    let c = cfg.clone();
    t.raw_set(
        "encode",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return msg(lua, "bad argument #1 to 'encode' (expected 1 argument)");
            }
            let mut out = Vec::new();
            match json_encode(&args[0], &c, 1, &mut out) {
                Ok(()) => ok(vec![Value::String(lua.create_string(&out)?)]),
                Err(e) => msg(lua, &e),
            }
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        lua.create_function(move |lua, args: MultiValue| {
            let Some(Value::String(s)) = args.front() else {
                return msg(lua, "bad argument #1 to 'decode' (string expected)");
            };
            let bytes = s.as_bytes().to_vec();
            let mut p = JsonParser {
                lua,
                s: &bytes,
                i: 0,
                cfg: &c,
            };
            match p.document() {
                Ok(v) => ok(vec![v]),
                Err(JsonError::Lua(e)) => Err(e),
                Err(JsonError::Text(e)) => msg(lua, &e),
            }
        })?,
    )?;
    macro_rules! setting {
        ($name:literal, $field:ident, $conv:expr, $back:expr) => {
            let c = cfg.clone();
            t.raw_set(
                $name,
                lua.create_function(move |_, args: MultiValue| {
                    if let Some(v) = args.front() {
                        if let Some(x) = ($conv)(v) {
                            c.$field.set(x);
                        }
                    }
                    ok(vec![($back)(c.$field.get())])
                })?,
            )?;
        };
    }
    let depth = |v: &Value| num(v).filter(|n| *n >= 1.0).map(|n| n as usize);
    let flag = |v: &Value| match v {
        Value::Boolean(b) => Some(*b),
        Value::String(s) => match s.as_bytes().as_ref() {
            b"on" => Some(true),
            b"off" => Some(false),
            _ => None,
        },
        _ => None,
    };
    setting!("encode_max_depth", encode_max_depth, depth, |d: usize| {
        Value::Number(d as f64)
    });
    setting!("decode_max_depth", decode_max_depth, depth, |d: usize| {
        Value::Number(d as f64)
    });
    setting!(
        "encode_invalid_numbers",
        encode_invalid_numbers,
        flag,
        Value::Boolean
    );
    setting!(
        "decode_invalid_numbers",
        decode_invalid_numbers,
        flag,
        Value::Boolean
    );
    let precision = |v: &Value| {
        num(v)
            .filter(|n| (1.0..=14.0).contains(n))
            .map(|n| n as usize)
    };
    setting!(
        "encode_number_precision",
        encode_precision,
        precision,
        |d: usize| Value::Number(d as f64)
    );
    t.raw_set(
        "encode_keep_buffer",
        lua.create_function(|_, _: MultiValue| ok(vec![Value::Boolean(true)]))?,
    )?;
    t.raw_set(
        "encode_sparse_array",
        lua.create_function(|_, _: MultiValue| {
            ok(vec![
                Value::Boolean(false),
                Value::Number(2.0),
                Value::Number(10.0),
            ])
        })?,
    )?;
    Ok(t)
}

fn json_string(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b if b < 0x20 || b == 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            b => out.push(b),
        }
    }
    out.push(b'"');
}

fn json_number(n: f64, cfg: &JsonConfig, out: &mut Vec<u8>) -> Result<(), String> {
    if !n.is_finite() {
        if !cfg.encode_invalid_numbers.get() {
            return Err("Cannot serialise number: must not be NaN or Inf".into());
        }
        out.extend_from_slice(if n.is_nan() {
            b"nan"
        } else if n > 0.0 {
            b"inf"
        } else {
            b"-inf"
        });
        return Ok(());
    }
    if n == 0.0 {
        out.extend_from_slice(if n.is_sign_negative() { b"-0" } else { b"0" });
        return Ok(());
    }
    out.extend_from_slice(format_g(n, cfg.encode_precision.get()).as_bytes());
    Ok(())
}

/// The length of `t` as an array, or None when it is an object (lua-cjson's
/// `lua_array_length`, sparse arrays refused as it does by default).
fn json_array_len(t: &Table) -> Result<Option<usize>, String> {
    let (mut max, mut items) = (0usize, 0usize);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair.map_err(|e| e.to_string())?;
        match k {
            Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => {
                max = max.max(n as usize);
                items += 1;
            }
            Value::Integer(n) if n >= 1 => {
                max = max.max(n as usize);
                items += 1;
            }
            _ => return Ok(None),
        }
    }
    if max > 10 && max > items * 2 {
        return Err("Cannot serialise table: excessive sparse array".into());
    }
    Ok(Some(max))
}

fn json_encode(v: &Value, cfg: &JsonConfig, depth: usize, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => json_number(*n, cfg, out)?,
        Value::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::String(s) => json_string(&s.as_bytes(), out),
        v if is_null(v) => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            if depth > cfg.encode_max_depth.get() {
                return Err(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            match json_array_len(t)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let item: Value = t.raw_get(i).map_err(|e| e.to_string())?;
                        json_encode(&item, cfg, depth + 1, out)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.pairs::<Value, Value>() {
                        let (k, val) = pair.map_err(|e| e.to_string())?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::String(s) => json_string(&s.as_bytes(), out),
                            Value::Number(n) => {
                                let mut key = Vec::new();
                                json_number(*n, cfg, &mut key)?;
                                json_string(&key, out);
                            }
                            Value::Integer(n) => json_string(n.to_string().as_bytes(), out),
                            _ => {
                                return Err(
                                    "Cannot serialise table: table key must be a number or string"
                                        .into(),
                                )
                            }
                        }
                        out.push(b':');
                        json_encode(&val, cfg, depth + 1, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ))
        }
    }
    Ok(())
}

enum JsonError {
    Lua(mlua::Error),
    Text(String),
}

impl From<mlua::Error> for JsonError {
    fn from(e: mlua::Error) -> Self {
        JsonError::Lua(e)
    }
}

struct JsonParser<'a> {
    lua: &'a Lua,
    s: &'a [u8],
    i: usize,
    cfg: &'a JsonConfig,
}

impl JsonParser<'_> {
    fn err(&self, what: &str) -> JsonError {
        JsonError::Text(format!(
            "Expected {what} but found invalid token at character {}",
            self.i + 1
        ))
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn document(&mut self) -> Result<Value, JsonError> {
        let v = self.value(0)?;
        self.ws();
        if self.i < self.s.len() {
            return Err(self.err("the end"));
        }
        Ok(v)
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        self.ws();
        let Some(&c) = self.s.get(self.i) else {
            return Err(self.err("value"));
        };
        match c {
            b'{' | b'[' => {
                if depth + 1 > self.cfg.decode_max_depth.get() {
                    return Err(JsonError::Text(format!(
                        "Found too many nested data structures ({}) at character {}",
                        depth + 1,
                        self.i + 1
                    )));
                }
                self.i += 1;
                let t = self.lua.create_table()?;
                let close = if c == b'{' { b'}' } else { b']' };
                self.ws();
                if self.s.get(self.i) == Some(&close) {
                    self.i += 1;
                    return Ok(Value::Table(t));
                }
                let mut n = 1;
                loop {
                    if c == b'{' {
                        self.ws();
                        if self.s.get(self.i) != Some(&b'"') {
                            return Err(self.err("object key string"));
                        }
                        let key = self.string()?;
                        self.ws();
                        if self.s.get(self.i) != Some(&b':') {
                            return Err(self.err("colon"));
                        }
                        self.i += 1;
                        let v = self.value(depth + 1)?;
                        t.raw_set(self.lua.create_string(&key)?, v)?;
                    } else {
                        let v = self.value(depth + 1)?;
                        t.raw_set(n, v)?;
                        n += 1;
                    }
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(&x) if x == close => {
                            self.i += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => {
                            return Err(self.err(if c == b'{' {
                                "comma or object end"
                            } else {
                                "comma or array end"
                            }))
                        }
                    }
                }
            }
            b'"' => Ok(Value::String(self.lua.create_string(self.string()?)?)),
            b't' if self.s[self.i..].starts_with(b"true") => {
                self.i += 4;
                Ok(Value::Boolean(true))
            }
            b'f' if self.s[self.i..].starts_with(b"false") => {
                self.i += 5;
                Ok(Value::Boolean(false))
            }
            b'n' if self.s[self.i..].starts_with(b"null") => {
                self.i += 4;
                Ok(Value::LightUserData(LightUserData(std::ptr::null_mut())))
            }
            _ => self.number(),
        }
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.i;
        while self.i < self.s.len()
            && matches!(self.s[self.i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E' | b'x' | b'X' | b'a'..=b'd' | b'f' | b'A'..=b'D' | b'F' | b'i' | b'n' | b'I' | b'N')
        {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        let lower = text.to_ascii_lowercase();
        let parsed = match lower.as_str() {
            "nan" | "-nan" | "inf" | "-inf" | "infinity" | "-infinity"
                if self.cfg.decode_invalid_numbers.get() =>
            {
                lower.parse::<f64>().ok()
            }
            l if l.starts_with("0x") || l.starts_with("-0x") => {
                let neg = l.starts_with('-');
                let digits = l.trim_start_matches('-').trim_start_matches("0x");
                i64::from_str_radix(digits, 16)
                    .ok()
                    .map(|n| if neg { -(n as f64) } else { n as f64 })
            }
            l if !l.is_empty() && !l.contains(|c: char| c.is_ascii_alphabetic() && c != 'e') => {
                l.parse::<f64>().ok()
            }
            _ => None,
        };
        match parsed {
            Some(n) => Ok(Value::Number(n)),
            None => {
                self.i = start;
                Err(self.err("value"))
            }
        }
    }

    fn string(&mut self) -> Result<Vec<u8>, JsonError> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.s.get(self.i) else {
                return Err(JsonError::Text(format!(
                    "Expected string end but found end of string at character {}",
                    self.i + 1
                )));
            };
            self.i += 1;
            match b {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else {
                        return Err(self.err("escape"));
                    };
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xd800..0xdc00).contains(&cp)
                                && self.s.get(self.i..self.i + 2) == Some(b"\\u")
                            {
                                self.i += 2;
                                let low = self.hex4()?;
                                if (0xdc00..0xe000).contains(&low) {
                                    cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                                }
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(self.err("valid escape")),
                    }
                }
                b => out.push(b),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self
            .s
            .get(self.i..self.i + 4)
            .ok_or_else(|| self.err("unicode escape"))?;
        let text = std::str::from_utf8(digits).map_err(|_| self.err("unicode escape"))?;
        let v = u32::from_str_radix(text, 16).map_err(|_| self.err("unicode escape"))?;
        self.i += 4;
        Ok(v)
    }
}

// ---------------------------------------------------------------------------
// cmsgpack

/// lua-cmsgpack's nesting limit: deeper tables are packed as nil.
const MSGPACK_MAX_NESTING: usize = 16;

fn cmsgpack(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return msg(lua, "MessagePack pack needs input.");
            }
            let mut out = Vec::new();
            for v in args.iter() {
                mp_encode(v, 0, &mut out)?;
            }
            ok(vec![Value::String(lua.create_string(&out)?)])
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| unpack(lua, args, 0, 0, false))?,
    )?;
    t.raw_set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let offset = args.get(1).and_then(num).unwrap_or(0.0) as i64;
            unpack(lua, args, 1, offset, true)
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let limit = args.get(1).and_then(num).unwrap_or(0.0) as i64;
            let offset = args.get(2).and_then(num).unwrap_or(0.0) as i64;
            unpack(lua, args, limit.max(0) as usize, offset, true)
        })?,
    )?;
    Ok(t)
}

fn mp_encode(v: &Value, depth: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(n) => mp_int(*n, out),
        Value::Number(n) => {
            let n = *n;
            if n.is_finite() && n.fract() == 0.0 && (-9.2e18..=1.8e19).contains(&n) {
                if n >= 0.0 && n > i64::MAX as f64 {
                    out.push(0xcf);
                    out.extend_from_slice(&(n as u64).to_be_bytes());
                } else {
                    mp_int(n as i64, out);
                }
            } else if (n as f32) as f64 == n || n.is_nan() {
                out.push(0xca);
                out.extend_from_slice(&(n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        Value::String(s) => {
            let b = s.as_bytes();
            let len = b.len();
            if len < 32 {
                out.push(0xa0 | len as u8);
            } else if len <= 0xff {
                out.extend_from_slice(&[0xd9, len as u8]);
            } else if len <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(len as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) if depth < MSGPACK_MAX_NESTING => {
            let mut count = 0usize;
            let mut max = 0usize;
            let mut array = true;
            for pair in t.pairs::<Value, Value>() {
                let (k, _) = pair?;
                count += 1;
                match k {
                    Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => max = max.max(n as usize),
                    Value::Integer(n) if n >= 1 => max = max.max(n as usize),
                    _ => array = false,
                }
            }
            if array && max == count {
                mp_len(out, count, 0x90, 0xdc, 0xdd);
                for i in 1..=count {
                    mp_encode(&t.raw_get::<Value>(i)?, depth + 1, out)?;
                }
            } else {
                mp_len(out, count, 0x80, 0xde, 0xdf);
                for pair in t.pairs::<Value, Value>() {
                    let (k, val) = pair?;
                    mp_encode(&k, depth + 1, out)?;
                    mp_encode(&val, depth + 1, out)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

fn mp_len(out: &mut Vec<u8>, n: usize, fix: u8, m16: u8, m32: u8) {
    if n < 16 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(m16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(m32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn mp_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// `unpack` (limit 0: every object, returned alone), `unpack_one` and
/// `unpack_limit` (the next offset, -1 at the end, then the objects).
fn unpack(
    lua: &Lua,
    args: MultiValue,
    limit: usize,
    offset: i64,
    with_offset: bool,
) -> mlua::Result<MultiValue> {
    let Some(Value::String(s)) = args.front() else {
        return msg(lua, "MessagePack decoding needs a string as input.");
    };
    let bytes = s.as_bytes().to_vec();
    if offset < 0 || offset as usize > bytes.len() {
        return msg(lua, "Start offset greater than input length.");
    }
    let mut r = MpReader {
        lua,
        s: &bytes,
        i: offset as usize,
    };
    let mut values = Vec::new();
    while r.i < bytes.len() && (limit == 0 || values.len() < limit) {
        match r.value(0) {
            Ok(v) => values.push(v),
            Err(MpError::Lua(e)) => return Err(e),
            Err(MpError::Missing) => return msg(lua, "Missing bytes in input."),
            Err(MpError::Bad) => return msg(lua, "Bad data format in input."),
        }
    }
    if with_offset {
        let next = if r.i >= bytes.len() { -1.0 } else { r.i as f64 };
        let mut out = vec![Value::Number(next)];
        out.extend(values);
        return ok(out);
    }
    ok(values)
}

enum MpError {
    Lua(mlua::Error),
    Missing,
    Bad,
}

impl From<mlua::Error> for MpError {
    fn from(e: mlua::Error) -> Self {
        MpError::Lua(e)
    }
}

struct MpReader<'a> {
    lua: &'a Lua,
    s: &'a [u8],
    i: usize,
}

impl MpReader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], MpError> {
        let end = self.i.checked_add(n).ok_or(MpError::Missing)?;
        let b = self.s.get(self.i..end).ok_or(MpError::Missing)?;
        self.i = end;
        Ok(b)
    }

    fn be(&mut self, n: usize) -> Result<u64, MpError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }

    fn value(&mut self, depth: usize) -> Result<Value, MpError> {
        if depth > 1000 {
            return Err(MpError::Bad);
        }
        let tag = self.take(1)?[0];
        let n = |v: f64| Ok(Value::Number(v));
        match tag {
            0x00..=0x7f => n(tag as f64),
            0xe0..=0xff => n(tag as i8 as f64),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Boolean(false)),
            0xc3 => Ok(Value::Boolean(true)),
            0xcc => n(self.be(1)? as f64),
            0xcd => n(self.be(2)? as f64),
            0xce => n(self.be(4)? as f64),
            0xcf => n(self.be(8)? as f64),
            0xd0 => n(self.be(1)? as u8 as i8 as f64),
            0xd1 => n(self.be(2)? as u16 as i16 as f64),
            0xd2 => n(self.be(4)? as u32 as i32 as f64),
            0xd3 => n(self.be(8)? as i64 as f64),
            0xca => n(f32::from_bits(self.be(4)? as u32) as f64),
            0xcb => n(f64::from_bits(self.be(8)?)),
            0xa0..=0xbf => self.string((tag & 0x1f) as usize),
            0xd9 | 0xc4 => {
                let len = self.be(1)? as usize;
                self.string(len)
            }
            0xda | 0xc5 => {
                let len = self.be(2)? as usize;
                self.string(len)
            }
            0xdb | 0xc6 => {
                let len = self.be(4)? as usize;
                self.string(len)
            }
            0x90..=0x9f => self.array((tag & 0x0f) as usize, depth),
            0xdc => {
                let len = self.be(2)? as usize;
                self.array(len, depth)
            }
            0xdd => {
                let len = self.be(4)? as usize;
                self.array(len, depth)
            }
            0x80..=0x8f => self.map((tag & 0x0f) as usize, depth),
            0xde => {
                let len = self.be(2)? as usize;
                self.map(len, depth)
            }
            0xdf => {
                let len = self.be(4)? as usize;
                self.map(len, depth)
            }
            _ => Err(MpError::Bad),
        }
    }

    fn string(&mut self, len: usize) -> Result<Value, MpError> {
        let b = self.take(len)?.to_vec();
        Ok(Value::String(self.lua.create_string(&b)?))
    }

    fn array(&mut self, len: usize, depth: usize) -> Result<Value, MpError> {
        if len > self.s.len() - self.i {
            return Err(MpError::Missing);
        }
        let t = self.lua.create_table_with_capacity(len, 0)?;
        for i in 1..=len {
            let v = self.value(depth + 1)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, len: usize, depth: usize) -> Result<Value, MpError> {
        if len > (self.s.len() - self.i) / 2 {
            return Err(MpError::Missing);
        }
        let t = self.lua.create_table_with_capacity(0, len)?;
        for _ in 0..len {
            let k = self.value(depth + 1)?;
            let v = self.value(depth + 1)?;
            if !matches!(k, Value::Nil) {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

// ---------------------------------------------------------------------------
// struct

/// One item of a struct format.
#[derive(Clone, Copy, Debug)]
enum Item {
    Int {
        size: usize,
        signed: bool,
    },
    Float,
    Double,
    /// `s`: zero-terminated string.
    ZString,
    /// `cN`: N bytes (N = 0: as many as the previous number said).
    Chars(usize),
    Pad,
}

struct Format<'a> {
    f: &'a [u8],
    i: usize,
    little: bool,
    max_align: usize,
}

impl Format<'_> {
    fn new(f: &[u8]) -> Format<'_> {
        Format {
            f,
            i: 0,
            little: cfg!(target_endian = "little"),
            max_align: 1,
        }
    }

    fn size_arg(&mut self, default: usize) -> usize {
        let start = self.i;
        while self.i < self.f.len() && self.f[self.i].is_ascii_digit() && self.i - start < 9 {
            self.i += 1;
        }
        std::str::from_utf8(&self.f[start..self.i])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    }

    /// The next item, or Ok(None) at the end.
    fn next(&mut self) -> Result<Option<(Item, usize)>, String> {
        while let Some(&c) = self.f.get(self.i) {
            self.i += 1;
            let int = |size, signed| Item::Int { size, signed };
            let item = match c {
                b'b' => int(1, true),
                b'B' => int(1, false),
                b'h' => int(2, true),
                b'H' => int(2, false),
                b'l' => int(8, true),
                b'L' => int(8, false),
                b'T' => int(8, false),
                b'i' | b'I' => {
                    let size = self.size_arg(4);
                    if size > 8 || size == 0 {
                        return Err(format!("integral size {size} is larger than limit of 8"));
                    }
                    int(size, c == b'i')
                }
                b'f' => Item::Float,
                b'd' => Item::Double,
                b's' => Item::ZString,
                b'c' => Item::Chars(self.size_arg(1)),
                b'x' => Item::Pad,
                b'<' => {
                    self.little = true;
                    continue;
                }
                b'>' => {
                    self.little = false;
                    continue;
                }
                b'=' => {
                    self.little = cfg!(target_endian = "little");
                    continue;
                }
                b'!' => {
                    self.max_align = self.size_arg(8);
                    continue;
                }
                b' ' => continue,
                other => return Err(format!("invalid format option '{}'", other as char)),
            };
            let size = match item {
                Item::Int { size, .. } => size,
                Item::Float => 4,
                Item::Double => 8,
                _ => 1,
            };
            let align = size.min(self.max_align);
            return Ok(Some((
                item,
                if align > 1 && align.is_power_of_two() {
                    align
                } else {
                    1
                },
            )));
        }
        Ok(None)
    }
}

fn pad_to(len: usize, align: usize) -> usize {
    (align - (len & (align - 1))) & (align - 1)
}

fn structlib(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            let Some(Value::String(fmt)) = args.front() else {
                return msg(lua, "bad argument #1 to 'pack' (string expected)");
            };
            let fmt = fmt.as_bytes().to_vec();
            let mut f = Format::new(&fmt);
            let mut out = Vec::new();
            let mut arg = 1;
            loop {
                let (item, align) = match f.next() {
                    Ok(Some(x)) => x,
                    Ok(None) => break,
                    Err(e) => return msg(lua, &e),
                };
                out.resize(out.len() + pad_to(out.len(), align), 0);
                let v = args.get(arg).cloned().unwrap_or(Value::Nil);
                match item {
                    Item::Int { size, .. } => {
                        let Some(n) = num(&v) else {
                            return msg(
                                lua,
                                &format!("bad argument #{} to 'pack' (number expected)", arg + 1),
                            );
                        };
                        let n = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                        let bytes = n.to_le_bytes();
                        if f.little {
                            out.extend_from_slice(&bytes[..size]);
                        } else {
                            out.extend(bytes[..size].iter().rev());
                        }
                        arg += 1;
                    }
                    Item::Float | Item::Double => {
                        let Some(n) = num(&v) else {
                            return msg(
                                lua,
                                &format!("bad argument #{} to 'pack' (number expected)", arg + 1),
                            );
                        };
                        let bytes = if matches!(item, Item::Float) {
                            let x = n as f32;
                            if f.little {
                                x.to_le_bytes().to_vec()
                            } else {
                                x.to_be_bytes().to_vec()
                            }
                        } else if f.little {
                            n.to_le_bytes().to_vec()
                        } else {
                            n.to_be_bytes().to_vec()
                        };
                        out.extend_from_slice(&bytes);
                        arg += 1;
                    }
                    Item::ZString | Item::Chars(_) => {
                        let s = match &v {
                            Value::String(s) => s.as_bytes().to_vec(),
                            Value::Number(n) => lua_number_text(*n).into_bytes(),
                            _ => {
                                return msg(
                                    lua,
                                    &format!(
                                        "bad argument #{} to 'pack' (string expected)",
                                        arg + 1
                                    ),
                                )
                            }
                        };
                        match item {
                            Item::ZString => {
                                if s.contains(&0) {
                                    return msg(
                                        lua,
                                        &format!(
                                            "bad argument #{} to 'pack' (string contains zeros)",
                                            arg + 1
                                        ),
                                    );
                                }
                                out.extend_from_slice(&s);
                                out.push(0);
                            }
                            Item::Chars(n) => {
                                let n = if n == 0 { s.len() } else { n };
                                if s.len() < n {
                                    return msg(
                                        lua,
                                        &format!(
                                            "bad argument #{} to 'pack' (string too short)",
                                            arg + 1
                                        ),
                                    );
                                }
                                out.extend_from_slice(&s[..n]);
                            }
                            _ => {}
                        }
                        arg += 1;
                    }
                    Item::Pad => out.push(0),
                }
            }
            ok(vec![Value::String(lua.create_string(&out)?)])
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let (Some(Value::String(fmt)), Some(Value::String(data))) = (args.front(), args.get(1))
            else {
                return msg(lua, "bad argument to 'unpack' (string expected)");
            };
            let fmt = fmt.as_bytes().to_vec();
            let data = data.as_bytes().to_vec();
            let mut pos = match args.get(2).and_then(num) {
                Some(n) if n >= 1.0 => n as usize - 1,
                Some(_) => {
                    return msg(
                        lua,
                        "bad argument #3 to 'unpack' (offset must be 1 or greater)",
                    )
                }
                None => 0,
            };
            let mut f = Format::new(&fmt);
            let mut results = Vec::new();
            let mut last_number: Option<f64> = None;
            loop {
                let (item, align) = match f.next() {
                    Ok(Some(x)) => x,
                    Ok(None) => break,
                    Err(e) => return msg(lua, &e),
                };
                pos += pad_to(pos, align);
                let need = |size: usize| pos.checked_add(size).is_some_and(|e| e <= data.len());
                match item {
                    Item::Int { size, signed } => {
                        if !need(size) {
                            return msg(lua, "bad argument #2 to 'unpack' (data string too short)");
                        }
                        let mut bytes = data[pos..pos + size].to_vec();
                        if !f.little {
                            bytes.reverse();
                        }
                        let mut v: u64 = 0;
                        for (i, b) in bytes.iter().enumerate() {
                            v |= (*b as u64) << (8 * i);
                        }
                        let n = if signed && size < 8 && v >> (size * 8 - 1) & 1 == 1 {
                            (v | (!0u64 << (size * 8))) as i64 as f64
                        } else if signed {
                            v as i64 as f64
                        } else {
                            v as f64
                        };
                        last_number = Some(n);
                        results.push(Value::Number(n));
                        pos += size;
                    }
                    Item::Float | Item::Double => {
                        let size = if matches!(item, Item::Float) { 4 } else { 8 };
                        if !need(size) {
                            return msg(lua, "bad argument #2 to 'unpack' (data string too short)");
                        }
                        let mut b = data[pos..pos + size].to_vec();
                        if !f.little {
                            b.reverse();
                        }
                        let n = if size == 4 {
                            f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64
                        } else {
                            f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
                        };
                        last_number = Some(n);
                        results.push(Value::Number(n));
                        pos += size;
                    }
                    Item::ZString => {
                        let Some(end) = data[pos.min(data.len())..].iter().position(|&b| b == 0)
                        else {
                            return msg(
                                lua,
                                "bad argument #2 to 'unpack' (unfinished string in data)",
                            );
                        };
                        results.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                        pos += end + 1;
                    }
                    Item::Chars(n) => {
                        let n = if n == 0 {
                            match last_number.take() {
                                Some(l) if l >= 0.0 => l as usize,
                                _ => return msg(lua, "format 'c0' needs a previous size"),
                            }
                        } else {
                            n
                        };
                        if !need(n) {
                            return msg(lua, "bad argument #2 to 'unpack' (data string too short)");
                        }
                        results.push(Value::String(lua.create_string(&data[pos..pos + n])?));
                        pos += n;
                    }
                    Item::Pad => pos += 1,
                }
            }
            results.push(Value::Number((pos + 1) as f64));
            ok(results)
        })?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(|lua, args: MultiValue| {
            let Some(Value::String(fmt)) = args.front() else {
                return msg(lua, "bad argument #1 to 'size' (string expected)");
            };
            let fmt = fmt.as_bytes().to_vec();
            let mut f = Format::new(&fmt);
            let mut pos = 0usize;
            loop {
                let (item, align) = match f.next() {
                    Ok(Some(x)) => x,
                    Ok(None) => break,
                    Err(e) => return msg(lua, &e),
                };
                pos += pad_to(pos, align);
                pos += match item {
                    Item::Int { size, .. } => size,
                    Item::Float => 4,
                    Item::Double => 8,
                    Item::Chars(n) => n,
                    Item::Pad => 1,
                    Item::ZString => return msg(lua, "options 's' has no fixed size"),
                };
            }
            ok(vec![Value::Number(pos as f64)])
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tobit_wraps() {
        assert_eq!(tobit(4294967295.0), -1);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(2147483648.0), i32::MIN);
    }

    #[test]
    fn numbers_print_like_lua() {
        assert_eq!(lua_number_text(0.0003), "0.0003");
        assert_eq!(lua_number_text(1023.2), "1023.2");
        assert_eq!(lua_number_text(-5000.0), "-5000");
        assert_eq!(lua_number_text(1e100), "1e+100");
    }
}
