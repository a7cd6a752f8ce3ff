//! Key specifications: where a command's keys are and what it does to each
//! (Redis 7.0's key specs). The specs themselves are data, generated into
//! `key_specs.rs`; this module reads them: COMMAND INFO prints them, and
//! [`keys_and_flags`] gives each key of a request its flags for COMMAND
//! GETKEYSANDFLAGS and for ACL read/write key patterns (`%R~`, `%W~`).

use crate::command::{Arg, Command};
use crate::key_specs;

/// A request's key positions with their flags: inline for the few keys
/// most requests have, so the ACL check of every request allocates nothing.
pub(crate) type Keys = smallvec::SmallVec<[(usize, u16); 4]>;

/// Key spec flags, with Redis's names in [`flag::NAMES`] order.
pub(crate) mod flag {
    pub const RO: u16 = 1 << 0;
    pub const RW: u16 = 1 << 1;
    pub const OW: u16 = 1 << 2;
    pub const RM: u16 = 1 << 3;
    pub const ACCESS: u16 = 1 << 4;
    pub const UPDATE: u16 = 1 << 5;
    pub const INSERT: u16 = 1 << 6;
    pub const DELETE: u16 = 1 << 7;
    pub const NOT_KEY: u16 = 1 << 8;
    pub const INCOMPLETE: u16 = 1 << 9;
    pub const VARIABLE_FLAGS: u16 = 1 << 10;

    /// As COMMAND INFO and COMMAND GETKEYSANDFLAGS print them, in order.
    pub const NAMES: [(u16, &str); 11] = [
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

/// Where the search for a spec's keys starts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Begin {
    /// At this argument.
    Index(i32),
    /// After this keyword, searched from `startfrom` (negative: from the
    /// end, backwards).
    Keyword(&'static str, i32),
    /// Only the command's own reading of its arguments knows.
    Unknown,
}

/// Which arguments from the start are keys.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Find {
    /// Up to `lastkey` (relative; -1 = the last argument), every `step`;
    /// with `limit` > 1, that share of the remaining arguments.
    Range {
        lastkey: i32,
        step: i32,
        limit: i32,
    },
    /// A count at `keynumidx`, then that many keys from `firstkey`, every
    /// `step`.
    Keynum {
        keynumidx: i32,
        firstkey: i32,
        step: i32,
    },
    Unknown,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct KeySpec {
    pub flags: u16,
    pub notes: Option<&'static str>,
    pub begin: Begin,
    pub find: Find,
}

/// The key specs of `cmd`.
pub(crate) fn specs(cmd: &Command) -> &'static [KeySpec] {
    key_specs::key_specs(cmd.name)
}

/// The command tips of `cmd`.
pub(crate) fn tips(cmd: &Command) -> &'static [&'static str] {
    key_specs::tips(cmd.name)
}

/// The names of `flags`, in Redis's order.
pub(crate) fn flag_names(flags: u16) -> impl Iterator<Item = &'static str> {
    flag::NAMES
        .iter()
        .filter(move |(bit, _)| flags & bit != 0)
        .map(|(_, name)| *name)
}

/// The keys of a request (argument positions) with their key spec flags,
/// as Redis finds them: from the specs when every spec can be followed and
/// none has variable flags or is incomplete; otherwise the command's own
/// key positions, each with the flags of the spec that names it (or, for a
/// key that only the command can find, of its last spec that no search can
/// follow completely).
pub(crate) fn keys_and_flags(cmd: &Command, args: &[Arg<'_>]) -> Keys {
    keys_and_flags_by(cmd, specs(cmd), args)
}

/// [`keys_and_flags`] with the command's key specs already looked up
/// (the ACL check keeps them by command id).
pub(crate) fn keys_and_flags_by(cmd: &Command, specs: &[KeySpec], args: &[Arg<'_>]) -> Keys {
    let variable = specs.iter().any(|s| s.flags & flag::VARIABLE_FLAGS != 0);
    if variable {
        if let Some(flags) = variable_flags(cmd, args) {
            return positions(cmd, args)
                .into_iter()
                .map(|i| (i, flags))
                .collect();
        }
    }
    let reliable = !variable && specs.iter().any(|s| s.flags & flag::NOT_KEY == 0);
    if reliable {
        // Most commands: one spec naming every key (the ACL check of each
        // request takes this path).
        if let [spec] = specs {
            if spec.flags & (flag::NOT_KEY | flag::INCOMPLETE) == 0 {
                if let Some(keys) = follow(spec, args) {
                    return keys;
                }
            }
        }
        if let Some(keys) = follow_all(specs, args) {
            return keys;
        }
    }
    let followed: Keys = specs
        .iter()
        .filter(|s| s.flags & flag::NOT_KEY == 0)
        .flat_map(|s| follow(s, args).unwrap_or_default())
        .collect();
    let unfollowed = specs
        .iter()
        .rev()
        .find(|s| {
            s.flags & flag::INCOMPLETE != 0
                || matches!(s.begin, Begin::Unknown)
                || matches!(s.find, Find::Unknown)
        })
        .or(specs.first())
        .map_or(0, |s| s.flags & !flag::INCOMPLETE);
    positions(cmd, args)
        .into_iter()
        .map(|i| {
            let flags = followed
                .iter()
                .find(|(at, _)| *at == i)
                .map_or(unfollowed, |(_, f)| *f);
            (i, flags)
        })
        .collect()
}

/// [`Command::keys_of`] without a heap allocation for the few keys most
/// requests have (SET's variable flags take this path on every request).
fn positions(cmd: &Command, args: &[Arg<'_>]) -> smallvec::SmallVec<[usize; 4]> {
    match cmd.movable_keys {
        None => cmd.key_positions(args.len()).collect(),
        Some(_) => cmd.keys_of(args).into_iter().collect(),
    }
}

/// The flags of the key of a command whose spec says `variable_flags`:
/// what it does to its key depends on its arguments.
fn variable_flags(cmd: &Command, args: &[Arg<'_>]) -> Option<u16> {
    use flag::*;
    let is = |a: &[u8], word: &str| a.eq_ignore_ascii_case(word.as_bytes());
    match cmd.name {
        // SET … GET reads the old value.
        "set" => Some(if args.iter().skip(3).any(|a| is(a, "get")) {
            RW | ACCESS | UPDATE
        } else {
            OW | UPDATE
        }),
        // BITFIELD with only GET and OVERFLOW reads; anything else (or a
        // syntax error) may write.
        "bitfield" => {
            let mut i = 2;
            let read_only = loop {
                let Some(arg) = args.get(i) else { break true };
                let rest = args.len() - i - 1;
                if is(arg, "get") && rest >= 2 {
                    i += 3;
                } else if is(arg, "overflow") && rest >= 1 {
                    i += 2;
                } else {
                    break false;
                }
            };
            Some(if read_only {
                RO | ACCESS
            } else {
                RW | ACCESS | UPDATE
            })
        }
        _ => None,
    }
}

/// Every spec followed in turn (Redis's getKeysUsingKeySpecs); None when
/// one cannot be followed (then the command's own reading decides).
fn follow_all(specs: &[KeySpec], args: &[Arg<'_>]) -> Option<Keys> {
    let mut keys = Keys::new();
    for spec in specs.iter().filter(|s| s.flags & flag::NOT_KEY == 0) {
        keys.extend(follow(spec, args)?);
        // An incomplete spec may miss keys: the command's reading decides.
        if spec.flags & flag::INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

/// The keys one spec names in `args`: Some(empty) when its keyword is
/// absent, None when it cannot be followed (unknown, out of range, or no
/// keys at all, which Redis too leaves to the command's own reading).
fn follow(spec: &KeySpec, args: &[Arg<'_>]) -> Option<Keys> {
    let (from, to, step) = follow_range(spec, args)?;
    Some((from..to).step_by(step).map(|i| (i, spec.flags)).collect())
}

/// [`follow`]'s keys as a range of positions (`from..to`, every `step`)
/// rather than a list: an absent keyword gives an empty range.
fn follow_range(spec: &KeySpec, args: &[Arg<'_>]) -> Option<(usize, usize, usize)> {
    let argc = args.len() as i64;
    let first = match spec.begin {
        Begin::Index(pos) => pos as i64,
        Begin::Keyword(keyword, startfrom) => {
            let found = if startfrom > 0 {
                (startfrom as i64..argc)
                    .find(|&i| args[i as usize].eq_ignore_ascii_case(keyword.as_bytes()))
            } else {
                (1..argc + startfrom as i64 + 1)
                    .rev()
                    .find(|&i| args[i as usize].eq_ignore_ascii_case(keyword.as_bytes()))
            };
            match found {
                Some(i) => i + 1,
                None => return Some((0, 0, 1)),
            }
        }
        Begin::Unknown => return None,
    };
    let (first, last, step) = match spec.find {
        Find::Range {
            lastkey,
            step,
            limit,
        } => {
            let last = if lastkey >= 0 {
                first + lastkey as i64
            } else if limit == 0 {
                argc + lastkey as i64
            } else {
                first + ((argc - first) / limit as i64 + lastkey as i64)
            };
            (first, last, step)
        }
        Find::Keynum {
            keynumidx,
            firstkey,
            step,
        } => {
            let at = usize::try_from(first + keynumidx as i64).ok()?;
            let numkeys: i64 = std::str::from_utf8(args.get(at)?).ok()?.parse().ok()?;
            if numkeys < 0 {
                return None;
            }
            let first = first + firstkey as i64;
            (first, first + numkeys - 1, step)
        }
        Find::Unknown => return None,
    };
    if last >= argc || last < first || first >= argc || first < 1 || step < 1 {
        return None;
    }
    Some((first as usize, last as usize + 1, step as usize))
}

/// How [`keys_and_flags_by`] finds a command's keys, decided once per
/// command from its specs: the ACL check of every request then walks the
/// keys of the common shapes in place, with no list built.
#[derive(Clone, Copy, Debug)]
pub(crate) enum KeyPlan {
    /// One spec naming the keys at fixed positions (`first..=last`, every
    /// `step`) with fixed flags, when the request has `last + 1` arguments
    /// or more (else [`keys_and_flags_by`]).
    Fixed {
        first: usize,
        last: usize,
        step: usize,
        flags: u16,
    },
    /// One spec naming every key with fixed flags.
    Single(&'static KeySpec),
    /// A spec whose flags depend on the arguments (SET, BITFIELD).
    Variable,
    /// Anything else: [`keys_and_flags_by`].
    General,
}

/// The plan for a command with these specs.
pub(crate) fn plan(specs: &'static [KeySpec]) -> KeyPlan {
    if specs.iter().any(|s| s.flags & flag::VARIABLE_FLAGS != 0) {
        return KeyPlan::Variable;
    }
    match specs {
        [spec] if spec.flags & (flag::NOT_KEY | flag::INCOMPLETE) == 0 => match *spec {
            KeySpec {
                begin: Begin::Index(first),
                find: Find::Range { lastkey, step, .. },
                flags,
                ..
            } if first >= 1 && lastkey >= 0 && step >= 1 => KeyPlan::Fixed {
                first: first as usize,
                last: first as usize + lastkey as usize,
                step: step as usize,
                flags,
            },
            _ => KeyPlan::Single(spec),
        },
        _ => KeyPlan::General,
    }
}

/// Calls `ok` with each key of a request and its flags, in the order of
/// [`keys_and_flags_by`] (whose answer it equals, `plan` being
/// [`plan`]`(specs)`), until `ok` says no: Err with that key's position.
#[inline]
pub(crate) fn try_keys(
    plan: KeyPlan,
    cmd: &Command,
    specs: &[KeySpec],
    args: &[Arg<'_>],
    mut ok: impl FnMut(usize, u16) -> bool,
) -> Result<(), usize> {
    match plan {
        KeyPlan::Fixed {
            first,
            last,
            step,
            flags,
        } if last < args.len() => {
            return match (first..=last).step_by(step).find(|&i| !ok(i, flags)) {
                Some(i) => Err(i),
                None => Ok(()),
            };
        }
        KeyPlan::Single(spec) => {
            if let Some((from, to, step)) = follow_range(spec, args) {
                return match (from..to).step_by(step).find(|&i| !ok(i, spec.flags)) {
                    Some(i) => Err(i),
                    None => Ok(()),
                };
            }
        }
        KeyPlan::Variable if cmd.movable_keys.is_none() => {
            if let Some(flags) = variable_flags(cmd, args) {
                return match cmd.key_positions(args.len()).find(|&i| !ok(i, flags)) {
                    Some(i) => Err(i),
                    None => Ok(()),
                };
            }
        }
        _ => {}
    }
    match keys_and_flags_by(cmd, specs, args)
        .into_iter()
        .find(|&(i, flags)| !ok(i, flags))
    {
        Some((i, _)) => Err(i),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `try_keys`'s in-place walks give every key `keys_and_flags_by`
    /// gives, with its flags and in its order, for every command and
    /// subcommand on many argument lists; and stop at the first refused.
    #[test]
    fn try_keys_walks_the_keys_keys_and_flags_by_gives() {
        let words: [&[u8]; 12] = [
            b"k1",
            b"2",
            b"get",
            b"GET",
            b"overflow",
            b"store",
            b"keys",
            b"by",
            b"0",
            b"-1",
            b"streams",
            b"x",
        ];
        let mut cmds: Vec<&'static Command> = Vec::new();
        for c in crate::command::all() {
            cmds.push(c);
            cmds.extend(c.subcommands.iter());
        }
        let mut checked = 0;
        for cmd in cmds {
            let specs = specs(cmd);
            let plan = plan(specs);
            for argc in 1..=7usize {
                if !cmd.arity_ok(argc) {
                    continue;
                }
                for seed in 0..40usize {
                    let mut args: Vec<Arg<'_>> =
                        vec![std::borrow::Cow::Borrowed(cmd.name.as_bytes())];
                    if let Some((_, sub)) = cmd.name.split_once('|') {
                        args = vec![
                            std::borrow::Cow::Borrowed(
                                cmd.name.split('|').next().unwrap().as_bytes(),
                            ),
                            std::borrow::Cow::Borrowed(sub.as_bytes()),
                        ];
                    }
                    while args.len() < argc {
                        let w = words[(seed * 7 + args.len() * 5 + seed / 12) % words.len()];
                        args.push(std::borrow::Cow::Borrowed(w));
                    }
                    if args.len() != argc {
                        continue;
                    }
                    let want = keys_and_flags_by(cmd, specs, &args);
                    let mut got = Vec::new();
                    let all = try_keys(plan, cmd, specs, &args, |i, f| {
                        got.push((i, f));
                        true
                    });
                    assert_eq!(all, Ok(()));
                    assert_eq!(got, want.to_vec(), "{} {args:?}", cmd.name);
                    if let Some(&(last, _)) = want.last() {
                        let stopped = try_keys(plan, cmd, specs, &args, |i, _| i != last);
                        assert_eq!(stopped, Err(last), "{} {args:?}", cmd.name);
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000, "{checked} argument lists");
    }
}
