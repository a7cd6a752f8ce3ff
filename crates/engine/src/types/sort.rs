//! SORT and SORT_RO (Redis's `sort.c`): the elements of a list, set or
//! sorted set, sorted as numbers or as strings, by themselves or by weights
//! read from other keys (`BY pattern`), optionally replaced by values read
//! from other keys (`GET pattern`), with LIMIT, and stored as a list
//! (`STORE dest`, SORT only).
//!
//! A pattern names another key by putting an element in place of its first
//! `*`; `key->field` reads a hash field instead of a string, and `#` is the
//! element itself. A BY pattern without `*` (`BY nosort`) skips sorting:
//! lists and sorted sets keep their own order (reversed by DESC, LIMIT taken
//! as a range of it), sets their iteration order, except that a set sorted
//! into a STORE is sorted as strings so the stored list does not depend on
//! it. Numbers sort by value, then equal weights by the elements' bytes, so
//! the result is deterministic; ALPHA sorts by bytes (Redis's `strcoll` in
//! the C locale), and with BY a missing weight comes first.
//!
//! SORT reads keys named by its data and may write another: it carries the
//! ATOMIC flag, so it runs in the store's exclusive section and sees (and
//! leaves) the data set at one instant. Its key positions in the table are
//! the sorted key alone, as Redis's legacy (first, last, step) triple: the
//! STORE destination can stand anywhere among the options (Redis finds it
//! with `sortGetKeys`), and the BY/GET keys only exist once the data is
//! read.

use std::cmp::Ordering;

use store::{Collection, Hash, List, Set, ValueType, ZSet};

use crate::command::{flags::*, Arg, CmdResult, Command};
use crate::engine::Cx;
use crate::error::{CmdError, SYNTAX};
use crate::notify::class;
use crate::parse;
use crate::types::zset::score::parse_weight;

/// A weight (or an element) that is not a number in a numeric sort.
pub(crate) const NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";

crate::command::group_cmd!("generic");

/// SORT and SORT_RO.
#[rustfmt::skip]
pub(crate) const COMMANDS: &[Command] = &[
    Command { movable_keys: Some(sort_keys), ..cmd("sort", -2, WRITE | DENYOOM | ATOMIC, (1, 1, 1), "1.0.0", "Sort the elements in a list, set or sorted set", sort) },
    Command { movable_keys: Some(sort_keys), ..cmd("sort_ro", -2, READONLY | ATOMIC, (1, 1, 1), "7.0.0", "Sort the elements in a list, set or sorted set. Read-only variant of SORT.", sort_ro) },
];

/// SORT's options, as `sortCommandGeneric` parses them.
#[derive(Debug, Default)]
struct Options<'a> {
    desc: bool,
    alpha: bool,
    /// LIMIT's offset and count (0 and -1 without it).
    offset: i64,
    count: i64,
    /// The last BY pattern.
    by: Option<&'a [u8]>,
    /// Some BY pattern had no `*`: nothing is sorted. It sticks, as in
    /// Redis, even if a later BY has a `*`.
    dont_sort: bool,
    /// GET patterns, in order.
    gets: Vec<&'a [u8]>,
    /// The last STORE destination.
    store: Option<&'a [u8]>,
}

/// Parses the options after the key; `read_only` (SORT_RO) knows no STORE.
/// A keyword missing its arguments is a syntax error.
/// Without `reads_every_key` (ACL), a BY or GET pattern that reads other
/// keys is refused.
fn parse_options<'a>(
    args: &'a [Arg<'_>],
    read_only: bool,
    reads_every_key: bool,
) -> Result<Options<'a>, CmdError> {
    let mut o = Options {
        count: -1,
        ..Options::default()
    };
    let mut j = 0;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if parse::is(a, "asc") {
            o.desc = false;
        } else if parse::is(a, "desc") {
            o.desc = true;
        } else if parse::is(a, "alpha") {
            o.alpha = true;
        } else if parse::is(a, "limit") && left >= 2 {
            o.offset = parse::int(&args[j + 1])?;
            o.count = parse::int(&args[j + 2])?;
            j += 2;
        } else if !read_only && parse::is(a, "store") && left >= 1 {
            o.store = Some(&args[j + 1]);
            j += 1;
        } else if parse::is(a, "by") && left >= 1 {
            let pattern: &[u8] = &args[j + 1];
            if !c_str(pattern).contains(&b'*') {
                o.dont_sort = true;
            } else if !reads_every_key {
                return Err(CmdError::msg(
                    "ERR BY option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            o.by = Some(pattern);
            j += 1;
        } else if parse::is(a, "get") && left >= 1 {
            if !reads_every_key {
                return Err(CmdError::msg(
                    "ERR GET option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            o.gets.push(&args[j + 1]);
            j += 1;
        } else {
            return Err(CmdError::msg(SYNTAX));
        }
        j += 1;
    }
    Ok(o)
}

/// The bytes before the first NUL: what Redis's C string functions see of
/// a pattern.
fn c_str(bytes: &[u8]) -> &[u8] {
    bytes.split(|&b| b == 0).next().unwrap_or(bytes)
}

/// Where a pattern reads, once an element is put in: a string key, or a
/// field of a hash key.
#[derive(Debug, PartialEq, Eq)]
enum Source {
    /// The element itself (`#`).
    Element,
    String(Vec<u8>),
    HashField(Vec<u8>, Vec<u8>),
}

/// Redis's `lookupKeyByPattern` without the lookup: the first `*` of
/// `pattern` becomes `elem`; a `->` after it followed by at least one byte
/// splits off a hash field. None for a pattern without `*` (a constant key
/// is never read).
fn pattern_source(pattern: &[u8], elem: &[u8]) -> Option<Source> {
    let cs = c_str(pattern);
    if cs == b"#" {
        return Some(Source::Element);
    }
    let star = cs.iter().position(|&b| b == b'*')?;
    let after = &cs[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + 1 + i)
        .filter(|&f| f + 2 < cs.len());
    let key_end = arrow.unwrap_or(pattern.len());
    let mut key = Vec::with_capacity(key_end + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    Some(match arrow {
        Some(f) => Source::HashField(key, pattern[f + 2..].to_vec()),
        None => Source::String(key),
    })
}

/// The value `pattern` names for `elem`: None when the key is missing or of
/// another type, or the field is missing. A missing key is a keyspace miss,
/// as Redis's `lookupKeyRead` counts it.
fn lookup(cx: &mut Cx<'_>, pattern: &[u8], elem: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    let db = cx.db();
    let found = match pattern_source(pattern, elem) {
        None => return Ok(None),
        Some(Source::Element) => return Ok(Some(elem.to_vec())),
        Some(Source::String(key)) => match cx.h().get(db, &key) {
            Ok(v) => cx.miss_if_none(&key, v).map(Some),
            Err(store::Error::WrongType) => Some(None),
            Err(e) => return Err(e.into()),
        },
        Some(Source::HashField(key, field)) => {
            match cx.h().read_collection(db, &key, |h: &Hash| h.get(&field)) {
                Ok(v) => cx.miss_if_none(&key, v),
                Err(store::Error::WrongType) => Some(None),
                Err(e) => return Err(e.into()),
            }
        }
    };
    Ok(found.flatten())
}

/// The range of a `len`-element result that LIMIT selects, as Redis clamps
/// it: `start..=end`, empty when `end < start`.
fn limit_range(offset: i64, count: i64, len: i64) -> (i64, i64) {
    let mut start = offset.clamp(0, len);
    let count = count.clamp(-1, len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// The elements to sort, and the range of them (`start..=end`, after
/// sorting) to output.
struct Loaded {
    elems: Vec<Vec<u8>>,
    start: i64,
    end: i64,
    /// The value is a set (its order is no order).
    is_set: bool,
}

/// The zero-based `start..=end` as the `u64` bounds of a half-open range
/// (empty when `end < start`).
fn bounds(start: i64, end: i64) -> (u64, u64) {
    if end < start {
        (0, 0)
    } else {
        (start as u64, end as u64 + 1)
    }
}

/// Reads `key` for SORT: WRONGTYPE unless it is a list, set or sorted set;
/// a missing key sorts as an empty list. With `ranged` (nothing is to be
/// sorted) a list or sorted set loads only the LIMIT range of its own order
/// (reversed by DESC), as Redis does; otherwise every element.
fn load(cx: &mut Cx<'_>, key: &[u8], o: &Options<'_>, ranged: bool) -> Result<Loaded, CmdError> {
    let db = cx.db();
    let vtype = cx.h().key_type(db, key)?;
    let (offset, count, desc) = (o.offset, o.count, o.desc);
    // For an ordered value that is not sorted: its LIMIT range, in order.
    let window = |len: u64| {
        let (start, end) = limit_range(offset, count, len as i64);
        let (from, to) = bounds(start, end);
        let (from, to) = if desc {
            (len - to, len - from)
        } else {
            (from, to)
        };
        (from, to, end - start)
    };
    let found = match vtype {
        None => None,
        Some(ValueType::List) => cx.h().read_collection(db, key, |l: &List| {
            if !ranged {
                return Ok((l.range(0, l.len())?, None));
            }
            let (from, to, span) = window(l.len());
            let mut v = l.range(from, to)?;
            if desc {
                v.reverse();
            }
            Ok((v, Some(span)))
        })?,
        Some(ValueType::ZSet) => cx.h().read_collection(db, key, |z: &ZSet| {
            let (from, to, span) = if ranged {
                window(z.len())
            } else {
                (0, z.len(), -1)
            };
            let mut v: Vec<_> = z.range(from, to)?.into_iter().map(|(m, _)| m).collect();
            if ranged && desc {
                v.reverse();
            }
            Ok((v, ranged.then_some(span)))
        })?,
        Some(ValueType::Set) => {
            let members = cx.h().read_collection(db, key, |s: &Set| s.members())?;
            return Ok(Loaded {
                is_set: true,
                ..whole(members.unwrap_or_default(), o)
            });
        }
        Some(_) => return Err(store::Error::WrongType.into()),
    };
    let Some((elems, span)) = cx.miss_if_none(key, found) else {
        return Ok(whole(Vec::new(), o));
    };
    Ok(match span {
        // Already cut to the range: all of it is output.
        Some(span) => Loaded {
            elems,
            start: 0,
            end: span,
            is_set: false,
        },
        None => whole(elems, o),
    })
}

/// All elements loaded; LIMIT picks the output range from them.
fn whole(elems: Vec<Vec<u8>>, o: &Options<'_>) -> Loaded {
    let (start, end) = limit_range(o.offset, o.count, elems.len() as i64);
    Loaded {
        elems,
        start,
        end,
        is_set: false,
    }
}

/// What an element sorts by.
enum Key {
    /// Numeric sort: the weight (0 when the BY key is missing).
    Number(f64),
    /// ALPHA with BY: the weight's bytes (None, first, when missing).
    Text(Option<Vec<u8>>),
    /// ALPHA without BY: the element itself.
    Element,
}

/// Redis's `sortCompare`: numbers by value then by the elements' bytes;
/// strings by bytes, a missing weight first (equal weights compare equal).
fn compare(a: (&Key, &[u8]), b: (&Key, &[u8])) -> Ordering {
    match (a.0, b.0) {
        (Key::Number(x), Key::Number(y)) => x
            .partial_cmp(y)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.1.cmp(b.1)),
        (Key::Text(x), Key::Text(y)) => x.cmp(y),
        _ => a.1.cmp(b.1),
    }
}

/// SORT's keys: the sorted key and the last STORE's destination, reading
/// the options as SORT does (LIMIT's two numbers and BY/GET patterns are not
/// keys; BY and GET keys come from the data, so no request names them).
fn sort_keys(args: &[Arg<'_>]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let skip = if crate::parse::is(&args[i], "limit") {
            2
        } else if crate::parse::is(&args[i], "get") || crate::parse::is(&args[i], "by") {
            1
        } else if crate::parse::is(&args[i], "store") {
            store = Some(i + 1);
            1
        } else {
            0
        };
        i += 1 + skip;
    }
    keys.extend(store.filter(|&d| d < args.len()));
    keys
}

fn sort(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    sort_generic(cx, args, false)
}

fn sort_ro(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    sort_generic(cx, args, true)
}

fn sort_generic(cx: &mut Cx<'_>, args: &[Arg<'_>], read_only: bool) -> CmdResult {
    let reads_every_key = cx.engine.user_reads_every_key(cx.session, args);
    let mut o = parse_options(&args[2..], read_only, reads_every_key)?;
    let key: &[u8] = &args[1];
    // Lists and sorted sets keep their order when nothing is sorted; LIMIT
    // is then a range of it, read directly.
    let mut loaded = load(cx, key, &o, o.dont_sort)?;
    // A set's iteration order is no order: sorted into a STORE, or for a
    // script (whose writes must not depend on it), it is sorted as strings
    // so that the result is the same anywhere.
    if o.dont_sort && loaded.is_set && (o.store.is_some() || cx.session.in_script) {
        o.dont_sort = false;
        o.alpha = true;
        o.by = None;
    }
    if !o.dont_sort {
        let mut keyed = Vec::with_capacity(loaded.elems.len());
        let mut not_double = false;
        for elem in std::mem::take(&mut loaded.elems) {
            let weight = match o.by {
                Some(pattern) => lookup(cx, pattern, &elem)?,
                None => None,
            };
            let k = if o.alpha {
                if o.by.is_some() {
                    Key::Text(weight)
                } else {
                    Key::Element
                }
            } else {
                let text = if o.by.is_some() {
                    weight.as_deref()
                } else {
                    Some(&elem[..])
                };
                // A missing BY key weighs 0.
                match text.map(parse_weight) {
                    Some(Some(w)) => Key::Number(w),
                    Some(None) => {
                        not_double = true;
                        Key::Number(0.0)
                    }
                    None => Key::Number(0.0),
                }
            };
            keyed.push((k, elem));
        }
        if not_double {
            return Err(CmdError::msg(NOT_DOUBLE));
        }
        keyed.sort_by(|a, b| {
            let ord = compare((&a.0, &a.1), (&b.0, &b.1));
            if o.desc {
                ord.reverse()
            } else {
                ord
            }
        });
        loaded.elems = keyed.into_iter().map(|(_, e)| e).collect();
    }
    let (start, end) = (loaded.start, loaded.end);
    let picked: &[Vec<u8>] = if end < start {
        &[]
    } else {
        loaded
            .elems
            .get(start as usize..=end as usize)
            .unwrap_or(&[])
    };
    match o.store {
        None => reply(cx, picked, &o.gets),
        Some(dest) => store(cx, dest, picked, &o.gets),
    }
}

/// Writes the sorted elements, or for each the values of the GET patterns
/// (a null for a missing one).
fn reply(cx: &mut Cx<'_>, picked: &[Vec<u8>], gets: &[&[u8]]) -> CmdResult {
    let mut values = Vec::with_capacity(picked.len() * gets.len().max(1));
    for elem in picked {
        if gets.is_empty() {
            values.push(Some(elem.clone()));
        }
        for pattern in gets {
            values.push(lookup(cx, pattern, elem)?);
        }
    }
    cx.out.array_len(values.len());
    for v in &values {
        match v {
            Some(v) => cx.out.bulk(v),
            None => cx.out.null(),
        }
    }
    Ok(())
}

/// STORE: the result replaces `dest` as a list (its expiry gone), or
/// deletes it when empty; replies the length.
fn store(cx: &mut Cx<'_>, dest: &[u8], picked: &[Vec<u8>], gets: &[&[u8]]) -> CmdResult {
    let mut list = List::empty();
    for elem in picked {
        if gets.is_empty() {
            list.push_back(elem)?;
        }
        for pattern in gets {
            // A missing value is stored as an empty string.
            list.push_back(&lookup(cx, pattern, elem)?.unwrap_or_default())?;
        }
    }
    let len = list.len();
    let db = cx.db();
    if len == 0 {
        if cx.h().delete(db, dest)? {
            cx.notify(class::GENERIC, "del", dest);
        }
    } else {
        cx.h().store_collection(db, dest, list)?;
        cx.notify(class::LIST, "sortstore", dest);
        cx.signal_ready(dest);
    }
    cx.out.integer(len as i64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(pattern: &str, elem: &str) -> Option<Source> {
        pattern_source(pattern.as_bytes(), elem.as_bytes())
    }

    fn s(key: &str) -> Option<Source> {
        Some(Source::String(key.as_bytes().to_vec()))
    }

    fn hf(key: &str, field: &str) -> Option<Source> {
        Some(Source::HashField(
            key.as_bytes().to_vec(),
            field.as_bytes().to_vec(),
        ))
    }

    #[test]
    fn patterns_substitute_the_first_star() {
        assert_eq!(src("#", "a"), Some(Source::Element));
        assert_eq!(src("nosort", "a"), None);
        assert_eq!(src("w_*", "a"), s("w_a"));
        assert_eq!(src("*_*", "a"), s("a_*"));
        assert_eq!(src("o_*->w", "a"), hf("o_a", "w"));
        assert_eq!(src("o_*x->w->v", "a"), hf("o_ax", "w->v"));
        // "->" with nothing after it is part of the key name.
        assert_eq!(src("x:*->", "a"), s("x:a->"));
        // A "->" before the star is part of the key name too.
        assert_eq!(src("a->b*", "1"), s("a->b1"));
        // C string functions stop at a NUL: no star seen past it.
        assert_eq!(src("w\0*", "a"), None);
        assert_eq!(src("#\0x", "a"), Some(Source::Element));
    }

    #[test]
    fn limits_clamp_like_redis() {
        assert_eq!(limit_range(0, -1, 5), (0, 4));
        assert_eq!(limit_range(1, 2, 5), (1, 2));
        assert_eq!(limit_range(-10, 100, 5), (0, 4));
        assert_eq!(limit_range(5, 10, 5), (4, 3));
        assert_eq!(limit_range(2, 0, 5), (2, 1));
        assert_eq!(limit_range(2, i64::MAX, 3), (2, 2));
        assert_eq!(limit_range(i64::MAX, i64::MAX, 3), (2, 1));
        assert_eq!(limit_range(0, -1, 0), (-1, -2));
        assert_eq!(limit_range(0, 5, 0), (-1, -2));
    }
}
