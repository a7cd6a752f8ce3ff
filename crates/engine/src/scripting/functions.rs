//! FUNCTION and FCALL: Redis 7.0's function libraries.
//!
//! The libraries are shared by every worker: their codes are kept in a file
//! beside the segment (`<segment>.functions`), rewritten whole inside an
//! exclusive section of the store by every change, and a shared generation
//! word tells the other workers to load them again. Each worker compiles
//! the libraries in its own Lua state. Every change is also logged, as the
//! whole new set (a `Functions` record, docs/persistence.md), and snapshots
//! hold the set ([`libraries_for_snapshot`]), so recovery from the
//! directory and the replication link carry them; replay hands the set to
//! [`replace_libraries_from_primary`].

use std::time::{Duration, Instant};

use mlua::{Function, Table, Value};
use store::Handle;

use super::lua::{Compiled, Vm};
use super::script_flags::{self, EVAL_COMPAT};
use super::{lua_error, run, with_vm};
use crate::command::{self, Arg, CmdResult};
use crate::engine::Cx;
use crate::error::CmdError;
use crate::parse;
use crate::rdb;

/// How long a library's code may run while it loads (Redis's 500 ms).
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// The most libraries the shared file may hold (a damaged file cannot make
/// a worker allocate without bound).
const MAX_LIBRARIES: usize = 1 << 16;

const NAME_RULE: &str = "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// One function of a library.
#[derive(Clone)]
pub(crate) struct FunctionInfo {
    pub name: String,
    pub description: Option<String>,
    pub flags: u32,
    pub callback: Function,
}

/// One loaded library.
#[derive(Clone)]
pub(crate) struct Library {
    pub name: String,
    pub code: Vec<u8>,
    pub functions: Vec<FunctionInfo>,
}

/// A worker's compiled libraries, at a generation of the shared file.
#[derive(Default)]
pub(crate) struct Libraries {
    pub generation: u64,
    pub libs: Vec<Library>,
    /// A change to these failed to publish (the log refused it, the file
    /// could not be written): they are loaded again from the file.
    pub stale: bool,
}

impl Libraries {
    fn find_function(&self, name: &str) -> Option<(&Library, &FunctionInfo)> {
        self.libs.iter().find_map(|l| {
            l.functions
                .iter()
                .find(|f| f.name.eq_ignore_ascii_case(name))
                .map(|f| (l, f))
        })
    }
}

fn file_path(cx: &Cx<'_>) -> std::path::PathBuf {
    super::functions_file_of(cx.engine.store.path())
}

fn generation(cx: &Cx<'_>) -> u64 {
    cx.engine
        .store
        .config_word(crate::config::word::FUNCTION_GENERATION)
        .unwrap_or(0)
}

/// The library codes in the shared file (none when it is missing or
/// damaged: it is read as untrusted bytes).
fn read_codes(cx: &Cx<'_>) -> Vec<Vec<u8>> {
    let Ok(bytes) = std::fs::read(file_path(cx)) else {
        return Vec::new();
    };
    decode_codes(&bytes).unwrap_or_default()
}

/// Logs the libraries, writes them to the shared file and moves the
/// generation, so the other workers load them again. Runs inside an
/// exclusive section. A change that fails leaves this worker's copy stale:
/// it loads the file again before its next use.
fn publish(cx: &mut Cx<'_>, libs: &mut Libraries) -> Result<(), CmdError> {
    let res = log_and_write(cx, libs);
    libs.stale = res.is_err();
    res
}

/// The change is logged first (as the whole new set), so a set too large
/// for the log changes nothing.
fn log_and_write(cx: &mut Cx<'_>, libs: &mut Libraries) -> Result<(), CmdError> {
    let codes: Vec<Vec<u8>> = libs.libs.iter().map(|l| l.code.clone()).collect();
    let encoded = rdb::encode_functions(&codes);
    cx.h().log_functions(&encoded)?;
    let path = file_path(cx);
    let tmp = {
        let mut p = path.as_os_str().to_owned();
        p.push(format!(".{}", std::process::id()));
        std::path::PathBuf::from(p)
    };
    std::fs::write(&tmp, &encoded)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| CmdError::owned(format!("ERR failed to save the functions: {e}")))?;
    let word = crate::config::word::FUNCTION_GENERATION;
    let store = &cx.engine.store;
    loop {
        let now = store.config_word(word)?;
        if store.swap_config_word(word, now, now.wrapping_add(1))? {
            libs.generation = now.wrapping_add(1);
            return Ok(());
        }
    }
}

/// The decoded library codes of a functions file's bytes (None: damaged,
/// or more libraries than [`MAX_LIBRARIES`]).
fn decode_codes(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    rdb::verify(bytes)
        .ok()
        .and_then(rdb::decode_functions)
        .filter(|c| c.len() <= MAX_LIBRARIES)
}

/// The function libraries' generation: it moves with every change.
pub fn functions_generation(store: &store::Store) -> u64 {
    store
        .config_word(crate::config::word::FUNCTION_GENERATION)
        .unwrap_or(0)
}

/// The function libraries as a replication link carries them to a replica
/// (docs/replication.md, "Functions"): the generation they were read at
/// and the shared file's bytes (empty: no library). The generation is read
/// first, so a change made meanwhile shows as a newer one.
pub fn libraries_for_replica(store: &store::Store) -> (u64, Vec<u8>) {
    let generation = store
        .config_word(crate::config::word::FUNCTION_GENERATION)
        .unwrap_or(0);
    let path = super::functions_file_of(store.path());
    (generation, std::fs::read(path).unwrap_or_default())
}

/// The function libraries a snapshot holds: the encoded set, read inside
/// an exclusive section, so a change whose record is before the snapshot's
/// start has its file written too (a change logs first, then writes).
pub fn libraries_for_snapshot(h: &mut Handle, store: &store::Store) -> Result<Vec<u8>, String> {
    let path = super::functions_file_of(store.path());
    let bytes = h
        .exclusive(|_| Ok(std::fs::read(&path).ok()))
        .map_err(|e| e.to_string())?;
    let codes = bytes.and_then(|b| decode_codes(&b)).unwrap_or_default();
    Ok(rdb::encode_functions(&codes))
}

/// Makes a replica's libraries the ones its primary sent (the bytes of
/// [`libraries_for_replica`] or of a replayed `Functions` record, from the
/// link or from recovery; untrusted: checked before use): the shared
/// file is rewritten and the generation moved, inside an exclusive section
/// as FUNCTION LOAD does, unless they are the ones it has.
pub fn replace_libraries_from_primary(
    h: &mut Handle,
    store: &store::Store,
    payload: &[u8],
) -> Result<(), String> {
    let codes = if payload.is_empty() {
        Vec::new()
    } else {
        decode_codes(payload).ok_or("the function libraries sent are damaged")?
    };
    let path = super::functions_file_of(store.path());
    h.exclusive(|_| {
        let current = std::fs::read(&path)
            .ok()
            .and_then(|b| decode_codes(&b))
            .unwrap_or_default();
        if current == codes {
            return Ok(());
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".{}", std::process::id()));
        let tmp = std::path::PathBuf::from(tmp);
        std::fs::write(&tmp, rdb::encode_functions(&codes))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| store::Error::Io("save the function libraries".into(), e))?;
        let word = crate::config::word::FUNCTION_GENERATION;
        loop {
            let now = store.config_word(word)?;
            if store.swap_config_word(word, now, now.wrapping_add(1))? {
                return Ok(());
            }
        }
    })
    .map_err(|e| e.to_string())
}

/// A library's name and engine from its shebang (`#!lua name=mylib`).
fn metadata(code: &[u8]) -> Result<(String, String), CmdError> {
    if !code.starts_with(b"#!") {
        return Err(CmdError::msg("ERR Missing library metadata"));
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err(CmdError::msg("ERR Invalid library metadata"));
    };
    let words = super::split_args(&code[..end]).unwrap_or_default();
    let mut parts = words.iter().map(String::as_str);
    let Some(first) = parts.next() else {
        return Err(CmdError::msg("ERR Invalid library metadata"));
    };
    let engine = first.get(2..).unwrap_or_default().to_string();
    let mut name = None;
    for part in parts {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case("name=") {
            if name.is_some() {
                return Err(CmdError::msg(
                    "ERR Invalid metadata value, name argument was given multiple times",
                ));
            }
            name = Some(part[5..].to_string());
            continue;
        }
        return Err(CmdError::owned(format!(
            "ERR Invalid metadata value given: {part}"
        )));
    }
    let Some(name) = name else {
        return Err(CmdError::msg("ERR Library name was not given"));
    };
    Ok((name, engine))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Compiles a library and runs its code to collect its functions.
/// A library's name, once its metadata is checked as Redis checks it:
/// the name's characters, then the engine.
fn checked_name(code: &[u8]) -> Result<String, CmdError> {
    let (name, engine) = metadata(code)?;
    if !valid_name(&name) {
        return Err(CmdError::msg(NAME_RULE));
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(CmdError::owned(format!("ERR Engine '{engine}' not found")));
    }
    Ok(name)
}

fn load_library(vm: &Vm, code: &[u8]) -> Result<Library, CmdError> {
    let name = checked_name(code)?;
    let body_start = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let fenv: Table = vm.state.raw_get("fenv").map_err(lua_error)?;
    let chunk = vm
        .lua
        .load(&code[body_start..])
        .set_name("@user_function")
        .set_mode(mlua::chunk::ChunkMode::Text)
        .set_environment(fenv)
        .into_function()
        .map_err(|e| {
            let text = match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            };
            CmdError::owned(format!("ERR Error compiling function: {text}"))
        })?;
    let registered = vm.lua.create_table().map_err(lua_error)?;
    vm.state
        .raw_set("loading", registered.clone())
        .map_err(lua_error)?;
    vm.state.raw_set("pending", Value::Nil).map_err(lua_error)?;
    let started = Instant::now();
    let state = vm.state.clone();
    // Replaces the run hook, which the next run sets again.
    vm.hooked.set(false);
    let _ = vm.lua.set_hook(
        mlua::HookTriggers::new().every_nth_instruction(100_000),
        move |lua, _| {
            if started.elapsed() > LOAD_TIMEOUT {
                let e = super::lua::error_table(lua, b"FUNCTION LOAD timeout")?;
                state.raw_set("pending", e)?;
                return Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()));
            }
            Ok(mlua::VmState::Continue)
        },
    );
    let runner: Result<Function, _> = vm.state.raw_get("run");
    let result = runner
        .and_then(|r| vm.limited(|| r.call::<(bool, Value)>((chunk, Value::Nil, Value::Nil))));
    vm.lua.remove_hook();
    let _ = vm.state.raw_set("loading", Value::Nil);
    match result {
        Ok((true, _)) => {}
        Ok((false, err)) => {
            let msg = match &err {
                Value::Table(t) => match t.raw_get::<Value>("err") {
                    Ok(Value::String(s)) => s.to_string_lossy(),
                    _ => "unknown error".into(),
                },
                Value::String(s) => s.to_string_lossy(),
                _ => "unknown error".into(),
            };
            return Err(CmdError::owned(format!(
                "ERR Error registering functions: {msg}"
            )));
        }
        Err(e) => {
            return Err(CmdError::owned(format!(
                "ERR Error registering functions: {e}"
            )))
        }
    }
    let mut functions = Vec::new();
    for entry in registered.sequence_values::<Table>() {
        let entry = entry.map_err(lua_error)?;
        let mut flags = 0;
        let names: Table = entry.raw_get("flags").map_err(lua_error)?;
        for f in names.sequence_values::<String>().flatten() {
            if let Some((bit, _)) = script_flags::NAMES.iter().find(|(_, n)| *n == f) {
                flags |= bit;
            }
        }
        functions.push(FunctionInfo {
            name: entry.raw_get("name").map_err(lua_error)?,
            description: entry.raw_get("description").map_err(lua_error)?,
            flags,
            callback: entry.raw_get("callback").map_err(lua_error)?,
        });
    }
    if functions.is_empty() {
        return Err(CmdError::msg("ERR No functions registered"));
    }
    Ok(Library {
        name,
        code: code.to_vec(),
        functions,
    })
}

/// Runs `f` with this worker's libraries brought up to the shared
/// generation.
fn with_libraries<R>(
    cx: &mut Cx<'_>,
    f: impl FnOnce(&mut Cx<'_>, &std::rc::Rc<Vm>, &mut Libraries) -> Result<R, CmdError>,
) -> Result<R, CmdError> {
    let gen = generation(cx);
    let codes = std::cell::OnceCell::new();
    let (vm, mut libs) = with_vm(cx, |vm, compiled: &mut Compiled| {
        Ok((vm.clone(), compiled.functions.take()))
    })?;
    let mut libs = match libs.take() {
        Some(l) if l.generation == gen && !l.stale => l,
        _ => {
            let codes = codes.get_or_init(|| read_codes(cx));
            let mut fresh = Libraries {
                generation: gen,
                ..Libraries::default()
            };
            for code in codes {
                if let Ok(lib) = load_library(&vm, code) {
                    fresh.libs.push(lib);
                }
            }
            fresh
        }
    };
    let r = f(cx, &vm, &mut libs);
    let _ = with_vm(cx, |v, compiled| {
        if std::rc::Rc::ptr_eq(v, &vm) {
            compiled.functions = Some(libs);
        }
        Ok(())
    });
    r
}

/// FUNCTION LOAD [REPLACE] code.
pub(super) fn function_load(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let mut replace = false;
    let mut i = 2;
    while i < args.len() - 1 {
        if parse::is(&args[i], "replace") {
            replace = true;
        } else {
            return Err(CmdError::owned(format!(
                "ERR Unknown option given: {}",
                command::clip(&args[i], 128)
            )));
        }
        i += 1;
    }
    let code = args[i].to_vec();
    refuse_oom(cx)?;
    let name = Handle::exclusive_in(cx, Cx::h, |cx| {
        with_libraries(cx, |cx, vm, libs| {
            let name = checked_name(&code)?;
            let existing = libs
                .libs
                .iter()
                .position(|l| l.name.eq_ignore_ascii_case(&name));
            if existing.is_some() && !replace {
                return Err(CmdError::owned(format!(
                    "ERR Library '{name}' already exists"
                )));
            }
            let lib = load_library(vm, &code)?;
            for f in &lib.functions {
                let clash = libs
                    .libs
                    .iter()
                    .filter(|l| !l.name.eq_ignore_ascii_case(&lib.name))
                    .any(|l| {
                        l.functions
                            .iter()
                            .any(|g| g.name.eq_ignore_ascii_case(&f.name))
                    });
                if clash {
                    return Err(CmdError::owned(format!(
                        "ERR Function {} already exists",
                        f.name
                    )));
                }
            }
            let name = lib.name.clone();
            match existing {
                Some(at) => libs.libs[at] = lib,
                None => libs.libs.push(lib),
            }
            publish(cx, libs)?;
            Ok(name)
        })
    })?;
    cx.out.bulk(name.as_bytes());
    Ok(())
}

/// LOAD and RESTORE are `denyoom`: refused over `maxmemory` with nothing
/// to evict (the dispatcher checks the container's flags, not these).
fn refuse_oom(cx: &mut Cx<'_>) -> Result<(), CmdError> {
    match cx.engine.refuses_oom() {
        true => Err(CmdError::msg(crate::error::OOM)),
        false => Ok(()),
    }
}

/// FUNCTION DELETE library.
pub(super) fn function_delete(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let name = String::from_utf8_lossy(&args[2]).into_owned();
    Handle::exclusive_in(cx, Cx::h, |cx| {
        with_libraries(cx, |cx, _, libs| {
            let Some(at) = libs
                .libs
                .iter()
                .position(|l| l.name.eq_ignore_ascii_case(&name))
            else {
                return Err(CmdError::msg("ERR Library not found"));
            };
            libs.libs.remove(at);
            publish(cx, libs)
        })
    })?;
    cx.out.simple(b"OK");
    Ok(())
}

/// FUNCTION FLUSH [ASYNC|SYNC].
pub(super) fn function_flush(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    match &args[2..] {
        [] => {}
        [mode] if parse::is(mode, "async") || parse::is(mode, "sync") => {}
        [_] => {
            return Err(CmdError::msg(
                "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
            ))
        }
        _ => return Err(CmdError::msg(
            "ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP.",
        )),
    }
    Handle::exclusive_in(cx, Cx::h, |cx| {
        with_libraries(cx, |cx, _, libs| {
            libs.libs.clear();
            publish(cx, libs)
        })
    })?;
    cx.out.simple(b"OK");
    Ok(())
}

/// FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern].
pub(super) fn function_list(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let mut i = 2;
    let mut with_code = false;
    let mut pattern: Option<Vec<u8>> = None;
    while i < args.len() {
        if parse::is(&args[i], "withcode") && !with_code {
            with_code = true;
        } else if parse::is(&args[i], "libraryname") && pattern.is_none() {
            if i + 1 >= args.len() {
                return Err(CmdError::msg("ERR library name argument was not given"));
            }
            pattern = Some(args[i + 1].to_vec());
            i += 1;
        } else {
            return Err(CmdError::owned(format!(
                "ERR Unknown argument {}",
                command::clip(&args[i], 128)
            )));
        }
        i += 1;
    }
    with_libraries(cx, |cx, _, libs| {
        let shown: Vec<&Library> = libs
            .libs
            .iter()
            .filter(|l| {
                pattern
                    .as_deref()
                    .is_none_or(|p| store::glob::glob_match(p, l.name.as_bytes(), false))
            })
            .collect();
        cx.out.array_len(shown.len());
        for lib in shown {
            cx.out.map_len(if with_code { 4 } else { 3 });
            cx.out.bulk(b"library_name");
            cx.out.bulk(lib.name.as_bytes());
            cx.out.bulk(b"engine");
            cx.out.bulk(b"LUA");
            cx.out.bulk(b"functions");
            cx.out.array_len(lib.functions.len());
            for f in &lib.functions {
                cx.out.map_len(3);
                cx.out.bulk(b"name");
                cx.out.bulk(f.name.as_bytes());
                cx.out.bulk(b"description");
                match &f.description {
                    Some(d) => cx.out.bulk(d.as_bytes()),
                    None => cx.out.null(),
                }
                cx.out.bulk(b"flags");
                let names: Vec<&str> = script_flags::NAMES
                    .iter()
                    .filter(|(bit, _)| f.flags & bit != 0)
                    .map(|(_, n)| *n)
                    .collect();
                cx.out.set_len(names.len());
                for n in names {
                    cx.out.bulk(n.as_bytes());
                }
            }
            if with_code {
                cx.out.bulk(b"library_code");
                cx.out.bulk(&lib.code);
            }
        }
        Ok(())
    })
}

/// FUNCTION DUMP: the libraries in Redis's payload format.
pub(super) fn function_dump(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let payload = with_libraries(cx, |_, _, libs| {
        let codes: Vec<Vec<u8>> = libs.libs.iter().map(|l| l.code.clone()).collect();
        Ok(rdb::encode_functions(&codes))
    })?;
    cx.out.bulk(&payload);
    Ok(())
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE].
pub(super) fn function_restore(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::msg(
            "ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP.",
        ));
    }
    #[derive(PartialEq)]
    enum Policy {
        Flush,
        Append,
        Replace,
    }
    let policy =
        match args.get(3) {
            None => Policy::Append,
            Some(p) if parse::is(p, "flush") => Policy::Flush,
            Some(p) if parse::is(p, "append") => Policy::Append,
            Some(p) if parse::is(p, "replace") => Policy::Replace,
            Some(_) => return Err(CmdError::msg(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    refuse_oom(cx)?;
    let body = rdb::verify(&args[2])
        .map_err(|_| CmdError::msg("ERR DUMP payload version or checksum are wrong"))?;
    let codes = rdb::decode_functions(body)
        .ok_or_else(|| CmdError::msg("ERR given type is not a function"))?;
    Handle::exclusive_in(cx, Cx::h, |cx| {
        with_libraries(cx, |cx, vm, libs| {
            let mut loaded = Vec::with_capacity(codes.len());
            for code in &codes {
                loaded.push(load_library(vm, code)?);
            }
            let mut next: Vec<Library> = match policy {
                Policy::Flush => Vec::new(),
                _ => libs.libs.clone(),
            };
            for lib in loaded {
                if let Some(at) = next
                    .iter()
                    .position(|l| l.name.eq_ignore_ascii_case(&lib.name))
                {
                    if policy != Policy::Replace {
                        return Err(CmdError::owned(format!(
                            "ERR Library {} already exists",
                            lib.name
                        )));
                    }
                    next.remove(at);
                }
                let clash = lib.functions.iter().find(|f| {
                    next.iter().any(|l| {
                        l.functions
                            .iter()
                            .any(|g| g.name.eq_ignore_ascii_case(&f.name))
                    })
                });
                if let Some(f) = clash {
                    return Err(CmdError::owned(format!(
                        "ERR Function {} already exists",
                        f.name
                    )));
                }
                next.push(lib);
            }
            libs.libs = next;
            publish(cx, libs)
        })
    })?;
    cx.out.simple(b"OK");
    Ok(())
}

/// FUNCTION STATS.
pub(super) fn function_stats(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    with_libraries(cx, |cx, _, libs| {
        let functions: usize = libs.libs.iter().map(|l| l.functions.len()).sum();
        cx.out.map_len(2);
        cx.out.bulk(b"running_script");
        match super::busy::running_function(&cx.engine.store) {
            Some((name, command, duration_ms)) => {
                cx.out.map_len(3);
                cx.out.bulk(b"name");
                cx.out.bulk(&name);
                cx.out.bulk(b"command");
                cx.out.array_len(command.len());
                for a in &command {
                    cx.out.bulk(a);
                }
                cx.out.bulk(b"duration_ms");
                cx.out.integer(duration_ms as i64);
            }
            None => cx.out.null(),
        }
        cx.out.bulk(b"engines");
        cx.out.map_len(1);
        cx.out.bulk(b"LUA");
        cx.out.map_len(2);
        cx.out.bulk(b"libraries_count");
        cx.out.integer(libs.libs.len() as i64);
        cx.out.bulk(b"functions_count");
        cx.out.integer(functions as i64);
        Ok(())
    })
}

/// FCALL / FCALL_RO function numkeys key… arg….
/// The declared flags of function `name`, if it exists.
pub(super) fn function_flags(cx: &mut Cx<'_>, name: &[u8]) -> Option<u32> {
    let name = String::from_utf8_lossy(name);
    with_libraries(cx, |_, _, libs| {
        Ok(libs.find_function(&name).map(|(_, f)| f.flags))
    })
    .ok()
    .flatten()
}

pub(super) fn fcall_command(cx: &mut Cx<'_>, args: &[Arg<'_>], ro: bool) -> CmdResult {
    let name = String::from_utf8_lossy(&args[1]).into_owned();
    let (vm, callback, flags) = with_libraries(cx, |_, vm, libs| {
        let Some((_, f)) = libs.find_function(&name) else {
            return Err(CmdError::msg("ERR Function not found"));
        };
        Ok((vm.clone(), f.callback.clone(), f.flags))
    })?;
    let n = parse::int(&args[2]).map_err(|_| CmdError::msg("ERR Bad number of keys provided"))?;
    if n > (args.len() - 3) as i64 {
        return Err(CmdError::msg(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if n < 0 {
        return Err(CmdError::msg("ERR Number of keys can't be negative"));
    }
    let (keys, argv) = args[3..].split_at(n as usize);
    debug_assert_eq!(flags & EVAL_COMPAT, 0);
    run(cx, &vm, &callback, flags, ro, false, &name, keys, argv)
}
