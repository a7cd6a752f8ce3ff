//! Redis glob-style pattern matching (`KEYS`, `SCAN MATCH`, `PSUBSCRIBE`, ...).
//!
//! This is a port of `stringmatchlen()` from Redis 7.0's `src/util.c`
//! (including the 7.0.9 fix for CVE-2022-36021, redis/redis#11858, which added
//! the `skipLongerMatches` early exit). It gives the same answer as Redis for
//! every pattern and every string. The only difference is how it runs: Redis
//! recurses once per `*`, and this port is an iterative loop. It uses no
//! recursion and never allocates. It runs in `O(pattern.len() * string.len())`
//! time and constant space.
//!
//! # Why the loop gives the same answers as the recursion
//!
//! In Redis, every token except `*` consumes exactly one byte. `*` tries the
//! rest of the pattern at each later position of the string. With
//! `skipLongerMatches`, once an inner `*` has tried every position and failed,
//! every enclosing `*` gives up as well. The outer `*` are never retried with a
//! longer span. So at any time only the *most recently entered* `*` can still
//! backtrack. That is the classic "remember the last star" loop used below:
//! on a mismatch, resume just after the last `*` and start one byte further
//! into the string. The end conditions also match Redis. `*` never tries the
//! rest of the pattern against an empty remainder. Trailing `*` are skipped
//! once the string has been used up. An empty string matches only the empty
//! pattern.

/// Whether `string` matches the Redis glob `pattern`. The result is the same,
/// byte for byte, as Redis 7.0's `stringmatchlen(pattern, string, nocase)`.
///
/// Both arguments are arbitrary bytes (no UTF-8 is assumed). The grammar is:
///
/// * `*` matches any sequence of bytes, including the empty one. A run of
///   consecutive `*` acts like a single `*`.
/// * `?` matches any single byte.
/// * `\x` matches the byte `x` literally (for example `\*`, `\?`, `\[`, `\\`).
///   A lone `\` at the very end of the pattern matches a literal `\`.
/// * `[...]` matches one byte from a class:
///   * A `^` right after the `[` negates the class.
///   * `a-z` is a range. Reversed ranges work too (`[z-a]` is the same as
///     `[a-z]`). A range takes the two bytes on either side of the `-`
///     literally. Escapes do not apply there, and `]` can be the upper end. So
///     `[a-]` is the range `]`..=`a` and does **not** match `-`, and the class
///     then runs on past that `]`.
///   * `\x` inside a class matches `x` literally. It is compared
///     **case-sensitively** even when `nocase` is set.
///   * A `]` as the first member closes the class at once. So `[]` matches
///     nothing, and `[^]` matches any byte.
///   * A class with no closing `]` runs to the end of the pattern. For example
///     `[abc` matches `a`, `b` or `c`. A pattern ending in `[` matches nothing
///     at that point, and one ending in `[^` matches any byte.
/// * Any other byte matches itself.
///
/// Edge cases that Redis also has:
///
/// * An **empty `string` matches only the empty pattern**. Even `*` does not
///   match `""`. `KEYS` and `SCAN` test for the pattern `*` themselves before
///   they call the matcher, so they do list the empty key. Callers that want
///   the same behaviour must add the same check.
/// * `nocase` folds ASCII letters only, as `tolower()` does in the C locale.
///   Bytes `>= 0x80` are never folded. Literal comparisons and class members
///   are folded. `\x` inside a class is not. Range ends are folded *after* the
///   reversed-range swap, so with `nocase` `[A-z]` no longer matches `[`, and
///   `[a-Z]` matches nothing.
/// * Range tests compare bytes as C `char`. This matches the x86-64
///   Linux/glibc build of Redis, where `char` is signed. There, bytes `>= 0x80`
///   count as negative and sort *below* ASCII, so `[\x00-\xff]` matches only
///   `\x00` and `\xff`. With `nocase`, glibc's `tolower()` maps those negative
///   values, except `\xff` (which is `EOF`), to `byte + 256`, so the bounds
///   are then compared as unsigned. This only affects ranges whose ends or
///   tested byte are `>= 0x80`. Redis builds where `char` is unsigned (for
///   example aarch64) compare such ranges as unsigned bytes.
///
/// Redis 7.2.6/7.4.1 (CVE-2024-31228) later added a limit of 1000 nested `*`
/// recursions, so a pattern with more `*` groups than that can stop matching.
/// This follows 7.0, which has no such limit. It does not need one either,
/// because it does not recurse.
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    // Redis loops `while (patternLen && stringLen)`. With an empty string the
    // body never runs, and only an empty pattern matches.
    if string.is_empty() {
        return pattern.is_empty();
    }

    let mut p = 0; // position in `pattern`
    let mut s = 0; // position in `string`
                   // Where to resume after the most recent `*`: the index of the pattern
                   // just after the star run, and the index in the string where that rest of
                   // the pattern was last tried.
    let mut resume: Option<(usize, usize)> = None;

    while s < string.len() {
        match pattern.get(p) {
            Some(b'*') => {
                p += 1;
                while pattern.get(p) == Some(&b'*') {
                    p += 1;
                }
                if p == pattern.len() {
                    // A trailing `*` matches the (non-empty) rest.
                    return true;
                }
                resume = Some((p, s));
                continue;
            }
            Some(_) => {
                if let Some(next) = match_token(pattern, p, string[s], nocase) {
                    p = next;
                    s += 1;
                    continue;
                }
            }
            // The pattern has run out but the string has not: a mismatch.
            None => {}
        }
        // Mismatch. Let the most recent `*` swallow one more byte. If there
        // is none, or it has now used up the string, there is no match (the
        // loop ends and the check below fails, because the pattern after a
        // star run is never empty or made of stars).
        let Some((rest, tried_at)) = resume else {
            return false;
        };
        p = rest;
        s = tried_at + 1;
        resume = Some((rest, s));
    }

    // The string is used up. Only `*` may be left in the pattern.
    while pattern.get(p) == Some(&b'*') {
        p += 1;
    }
    p == pattern.len()
}

/// Matches the single token (not `*`) at `pattern[p]` against the byte `c`.
/// Returns the index just past the token if it matches.
///
/// `p < pattern.len()` must hold.
fn match_token(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<usize> {
    match pattern[p] {
        b'?' => Some(p + 1),
        b'[' => match_class(pattern, p + 1, c, nocase),
        b'\\' if p + 1 < pattern.len() => eq_byte(pattern[p + 1], c, nocase).then_some(p + 2),
        // Any other byte, including a lone `\` at the end of the pattern.
        lit => eq_byte(lit, c, nocase).then_some(p + 1),
    }
}

/// Matches the class whose body starts at `pattern[i]` (just past the `[`)
/// against `c`. Follows Redis's parsing loop step by step. Returns the index
/// just past the class if it matches.
fn match_class(pattern: &[u8], mut i: usize, c: u8, nocase: bool) -> Option<usize> {
    let len = pattern.len();
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    let end = loop {
        let Some(&b) = pattern.get(i) else {
            // Unterminated: the class runs to the end of the pattern.
            break len;
        };
        let remaining = len - i;
        if b == b'\\' && remaining >= 2 {
            // Escaped member: raw, case-sensitive comparison (as in Redis).
            i += 1;
            matched |= pattern[i] == c;
        } else if b == b']' {
            break i + 1;
        } else if remaining >= 3 && pattern[i + 1] == b'-' {
            matched |= range_contains(b, pattern[i + 2], c, nocase);
            i += 2;
        } else {
            matched |= eq_byte(b, c, nocase);
        }
        i += 1;
    };
    (matched != negate).then_some(end)
}

/// A literal comparison, as Redis does it:
/// `tolower(a) == tolower(b)` when `nocase`, else `a == b`. In the C locale,
/// glibc's `tolower()` maps the `char` values one-to-one apart from folding
/// ASCII letters, so this is ASCII case folding.
fn eq_byte(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

/// The range test `[lo-hi]` against `c`, exactly as Redis computes it. The
/// bytes are read as (signed) C `char`, the ends are swapped if reversed, and
/// then, when `nocase`, all three values go through the C-locale `tolower()`.
fn range_contains(lo: u8, hi: u8, c: u8, nocase: bool) -> bool {
    let (mut start, mut end, mut c) = (c_char(lo), c_char(hi), c_char(c));
    if start > end {
        std::mem::swap(&mut start, &mut end);
    }
    if nocase {
        start = c_tolower(start);
        end = c_tolower(end);
        c = c_tolower(c);
    }
    start <= c && c <= end
}

/// `(int)(char)b` where `char` is signed (x86-64 Linux, the reference build).
fn c_char(b: u8) -> i32 {
    i32::from(i8::from_ne_bytes([b]))
}

/// glibc's `tolower()` in the "C" `LC_CTYPE` locale (Redis only sets
/// `LC_COLLATE`), for the values that `c_char` can return. `-128..=-2` map to
/// `byte + 256`, `-1` is `EOF` and stays as it is, and ASCII upper case is
/// folded.
fn c_tolower(v: i32) -> i32 {
    match v {
        65..=90 => v + 32,
        -128..=-2 => v + 256,
        _ => v,
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;
    use proptest::prelude::*;

    /// (pattern, string, nocase, expected)
    type Case = (&'static [u8], &'static [u8], bool, bool);

    const CASES: &[Case] = &[
        // --- redis-doc commands/keys.md, "Supported glob-style patterns" ---
        (b"h?llo", b"hello", false, true),
        (b"h?llo", b"hallo", false, true),
        (b"h?llo", b"hxllo", false, true),
        (b"h?llo", b"hllo", false, false),
        (b"h*llo", b"hllo", false, true),
        (b"h*llo", b"heeeello", false, true),
        (b"h[ae]llo", b"hello", false, true),
        (b"h[ae]llo", b"hallo", false, true),
        (b"h[ae]llo", b"hillo", false, false),
        (b"h[^e]llo", b"hallo", false, true),
        (b"h[^e]llo", b"hbllo", false, true),
        (b"h[^e]llo", b"hello", false, false),
        (b"h[a-b]llo", b"hallo", false, true),
        (b"h[a-b]llo", b"hbllo", false, true),
        (b"h[a-b]llo", b"hcllo", false, false),
        // redis-doc keys.md @examples: `KEYS *name*`, `KEYS a??`.
        (b"*name*", b"firstname", false, true),
        (b"*name*", b"lastname", false, true),
        (b"*name*", b"age", false, false),
        (b"a??", b"age", false, true),
        (b"a??", b"firstname", false, false),
        // --- tests/unit/keyspace.tcl ---
        // "KEYS with pattern": keys {key_x key_y key_z foo_a foo_b foo_c}, `foo*`.
        (b"foo*", b"foo_a", false, true),
        (b"foo*", b"foo_c", false, true),
        (b"foo*", b"key_x", false, false),
        (b"foo*", b"fo", false, false),
        // "KEYS with hashtag": `{a}*` and `*{b}*`.
        (b"{a}*", b"{a}x", false, true),
        (b"{a}*", b"{b}a", false, false),
        (b"*{b}*", b"{b}c", false, true),
        (b"*{b}*", b"{a}z", false, false),
        // "KEYS * two times with long key, Github issue #1208".
        (b"*", b"dlskeriewrioeuwqoirueioqwrueoqwrueqw", false, true),
        // "Regression for pattern matching long nested loops" (CVE-2022-36021).
        (
            b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            false,
            false,
        ),
        // --- tests/unit/scan.tcl ---
        // "SCAN MATCH": `key:1??` against `debug populate` keys.
        (b"key:1??", b"key:123", false, true),
        (b"key:1??", b"key:12", false, false),
        (b"key:1??", b"key:1234", false, false),
        (b"key:1??", b"key:223", false, false),
        // "SSCAN with integer encoded object (issue #1345)": `*a*`, `*1*`.
        (b"*a*", b"a", false, true),
        (b"*a*", b"1", false, false),
        (b"*1*", b"1", false, true),
        // "SSCAN with PATTERN": {foo fab fiz foobar 1 2 3 4} MATCH foo*.
        (b"foo*", b"foo", false, true),
        (b"foo*", b"foobar", false, true),
        (b"foo*", b"fab", false, false),
        (b"foo*", b"fiz", false, false),
        // --- Edge cases from reading src/util.c stringmatchlen_impl (7.0).
        // Each was checked against that C code compiled on x86-64 glibc. ---
        // Empty pattern / empty string: the loop never runs when stringLen == 0.
        (b"", b"", false, true),
        (b"", b"a", false, false),
        (b"a", b"", false, false),
        (b"?", b"", false, false),
        (b"*", b"", false, false),
        (b"**", b"", false, false),
        (b"[^", b"", false, false),
        // `*` and runs of `*`.
        (b"*", b"a", false, true),
        (b"**", b"ab", false, true),
        (b"a**b", b"ab", false, true),
        (b"a**b", b"axxb", false, true),
        (b"a*", b"a", false, true),
        (b"a*b*", b"ab", false, true),
        (b"*a", b"ba", false, true),
        (b"*a", b"ab", false, false),
        (b"a*b", b"a", false, false),
        (b"*?", b"a", false, true),
        (b"*??", b"a", false, false),
        // Escapes outside brackets.
        (b"\\*", b"*", false, true),
        (b"\\*", b"a", false, false),
        (b"\\*", b"\\*", false, false),
        (b"\\?", b"?", false, true),
        (b"\\?", b"x", false, false),
        (b"\\[", b"[", false, true),
        (b"\\\\", b"\\", false, true),
        (b"a\\*b", b"a*b", false, true),
        (b"a\\*b", b"axb", false, false),
        // A lone trailing backslash matches a literal backslash.
        (b"\\", b"\\", false, true),
        (b"a\\", b"a\\", false, true),
        (b"a\\", b"a", false, false),
        // Escapes inside brackets.
        (b"[\\]]", b"]", false, true),
        (b"[\\]]", b"\\", false, false),
        (b"[\\]", b"]", false, true), // escaped `]`, then unterminated
        (b"[\\]", b"\\", false, false),
        (b"[\\-a]", b"-", false, true), // `\-` is not a range start
        (b"[\\-a]", b"b", false, false),
        (b"[a\\", b"\\", false, true), // lone `\` at the end of a class: literal
        // Negation.
        (b"[^a]", b"b", false, true),
        (b"[^a]", b"a", false, false),
        (b"[^a]", b"ab", false, false),
        (b"[^a-c]x", b"dx", false, true),
        (b"[^a-c]x", b"bx", false, false),
        // Ranges, including reversed ones.
        (b"[a-c]", b"b", false, true),
        (b"[a-c]", b"d", false, false),
        (b"[z-a]", b"m", false, true),
        (b"[z-a]", b"A", false, false),
        (b"[0-9a-f]", b"e", false, true),
        // `b-]` is a range too (`]`..=`b`), so a `-` just before `]` is not literal.
        (b"[ab-]", b"-", false, false),
        (b"[ab-]", b"^", false, true),
        // `[a-]` is the range `]`..=`a` (0x5d..=0x61), and the class is then unterminated.
        (b"[a-]", b"a", false, true),
        (b"[a-]", b"]", false, true),
        (b"[a-]", b"_", false, true),
        (b"[a-]", b"-", false, false),
        (b"[a-]", b"b", false, false),
        (b"[a-]b", b"b", false, true), // `b` is still a member of the class
        (b"[-a]", b"-", false, true),
        // Empty class / `]` first.
        (b"[]", b"]", false, false),
        (b"[]a]", b"]a]", false, false),
        (b"[^]", b"x", false, true),
        (b"[^]a", b"xa", false, true),
        // Unterminated classes run to the end of the pattern.
        (b"[abc", b"b", false, true),
        (b"[abc", b"d", false, false),
        (b"[abc", b"bc", false, false),
        (b"[", b"[", false, false),
        (b"[", b"a", false, false),
        (b"a[", b"a[", false, false),
        (b"[^", b"x", false, true),
        (b"[^", b"xy", false, false),
        (b"*[a", b"xxa", false, true),
        // nocase: ASCII folding for literals and class members.
        (b"HELLO", b"hello", true, true),
        (b"HELLO", b"hello", false, false),
        (b"h?LLO", b"HeLlo", true, true),
        (b"h[AE]llo", b"hello", true, true),
        (b"h[A-Z]llo", b"hello", true, true),
        (b"h[a-z]llo", b"HELLO", true, true),
        (b"h[a-z]llo", b"HELLO", false, false),
        (b"h[^E]llo", b"hello", true, false),
        (b"\\A", b"a", true, true), // an escape outside a class still folds
        (b"[\\A]", b"a", true, false), // but not inside a class
        (b"[\\A]", b"A", true, true),
        (b"*B", b"aab", true, true),
        // nocase folds range ends after the swap: `[A-z]` becomes `[a-z]`, so no `[`.
        (b"[A-z]", b"[", false, true),
        (b"[A-z]", b"[", true, false),
        // `[a-Z]` is Z..=a as is, but becomes `z..=a` (empty) with nocase.
        (b"[a-Z]", b"_", false, true),
        (b"[a-Z]", b"a", true, false),
        (b"[a-Z]", b"Z", true, false),
        // Bytes >= 0x80 are never folded.
        (b"\xc9", b"\xe9", true, false),
        (b"\xc9", b"\xc9", true, true),
        // Ranges compare signed C chars (x86-64 glibc Redis).
        (b"[\x00-\xff]", b"\x00", false, true),
        (b"[\x00-\xff]", b"\xff", false, true),
        (b"[\x00-\xff]", b"a", false, false),
        (b"[\x00-\xff]", b"\x80", false, false),
        (b"[\x80-\xff]", b"\x90", false, true),
        (b"[\x80-\xff]", b"a", false, false),
        (b"[a-\xe9]", b"0", false, true),
        (b"[a-\xe9]", b"\xf0", false, true),
        (b"[a-\xe9]", b"\xe1", false, false),
        (b"[a-\xe9]", b"b", false, false),
        // ...and with nocase, glibc's tolower() remaps them, except 0xff (EOF).
        (b"[\x80-\xfe]", b"\x90", true, true),
        (b"[\x80-\xff]", b"\x90", true, false),
        (b"[\x00-\xff]", b"a", true, false),
        (b"[\x00-\xff]", b"\xff", true, true),
        (b"[\x00-\xff]", b"\x80", true, false),
        // Embedded NUL bytes are ordinary bytes.
        (b"a\x00*", b"a\x00bc", false, true),
        (b"[\x00]", b"\x00", false, true),
    ];

    #[test]
    fn redis_cases() {
        for &(pattern, string, nocase, expected) in CASES {
            assert_eq!(
                glob_match(pattern, string, nocase),
                expected,
                "pattern {:?} string {:?} nocase {}",
                String::from_utf8_lossy(pattern),
                String::from_utf8_lossy(string),
                nocase,
            );
        }
    }

    /// CVE-2022-36021 style blow-up: without `skipLongerMatches` this takes
    /// exponential time. It must simply finish.
    #[test]
    fn pathological_pattern_completes() {
        let mut pattern = b"a*".repeat(30);
        pattern.push(b'b');
        let string = vec![b'a'; 10_000];
        assert!(!glob_match(&pattern, &string, false));
        assert!(!glob_match(&pattern, &string, true));

        let mut matching = string.clone();
        matching.push(b'b');
        assert!(glob_match(&pattern, &matching, false));

        // Redis 7.2's "very long nested loops" regression pattern.
        let pattern = b"*?".repeat(50_000);
        assert!(!glob_match(
            &pattern,
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            false
        ));
    }

    /// Redis recurses once per `*`. This port must not overflow the stack on
    /// long patterns.
    #[test]
    fn long_patterns_do_not_overflow() {
        let pattern = b"*a".repeat(100_000);
        let string = vec![b'a'; 100_000];
        assert!(glob_match(&pattern, &string, false));
        let mut longer = pattern.clone();
        longer.push(b'b');
        assert!(!glob_match(&longer, &string, false));
        let class = [b"[".as_slice(), &[b'x'; 100_000]].concat();
        assert!(glob_match(&class, b"x", false));
    }

    // ---------------------------------------------------------------------
    // Reference matcher: first parse the pattern into tokens, then do plain
    // recursive backtracking. It is exponential, so use it on short inputs
    // only. It is written independently of the matcher above and implements
    // the grammar documented on `glob_match` for ASCII bytes.
    // ---------------------------------------------------------------------

    #[derive(Debug)]
    enum Tok {
        Star,
        Any,
        Lit(u8),
        Class { negate: bool, members: Vec<Member> },
    }

    #[derive(Debug)]
    enum Member {
        Escaped(u8),
        Byte(u8),
        Range(u8, u8),
    }

    fn parse(p: &[u8]) -> Vec<Tok> {
        let mut toks = Vec::new();
        let mut i = 0;
        while i < p.len() {
            match p[i] {
                b'*' => toks.push(Tok::Star),
                b'?' => toks.push(Tok::Any),
                b'\\' if i + 1 < p.len() => {
                    i += 1;
                    toks.push(Tok::Lit(p[i]));
                }
                b'[' => {
                    i += 1;
                    let negate = p.get(i) == Some(&b'^');
                    if negate {
                        i += 1;
                    }
                    let mut members = Vec::new();
                    // Stop at `]` or at the end of the pattern (unterminated class).
                    while i < p.len() && p[i] != b']' {
                        if p[i] == b'\\' && i + 1 < p.len() {
                            members.push(Member::Escaped(p[i + 1]));
                            i += 2;
                        } else if i + 2 < p.len() && p[i + 1] == b'-' {
                            members.push(Member::Range(p[i], p[i + 2]));
                            i += 3;
                        } else {
                            members.push(Member::Byte(p[i]));
                            i += 1;
                        }
                    }
                    toks.push(Tok::Class { negate, members });
                }
                b => toks.push(Tok::Lit(b)),
            }
            i += 1;
        }
        toks
    }

    fn fold(b: u8, nocase: bool) -> u8 {
        if nocase {
            b.to_ascii_lowercase()
        } else {
            b
        }
    }

    fn tok_matches(t: &Tok, c: u8, nocase: bool) -> bool {
        match t {
            Tok::Star => unreachable!(),
            Tok::Any => true,
            Tok::Lit(b) => fold(*b, nocase) == fold(c, nocase),
            Tok::Class { negate, members } => {
                let hit = members.iter().any(|m| match *m {
                    Member::Escaped(b) => b == c,
                    Member::Byte(b) => fold(b, nocase) == fold(c, nocase),
                    Member::Range(a, b) => {
                        let (lo, hi) = (a.min(b), a.max(b));
                        (fold(lo, nocase)..=fold(hi, nocase)).contains(&fold(c, nocase))
                    }
                });
                hit != *negate
            }
        }
    }

    fn match_toks(toks: &[Tok], s: &[u8], nocase: bool) -> bool {
        match toks.split_first() {
            None => s.is_empty(),
            Some((Tok::Star, rest)) => (0..=s.len()).any(|k| match_toks(rest, &s[k..], nocase)),
            Some((t, rest)) => match s.split_first() {
                Some((&c, tail)) => tok_matches(t, c, nocase) && match_toks(rest, tail, nocase),
                None => false,
            },
        }
    }

    fn reference(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
        // Redis quirk: an empty string only matches the empty pattern.
        if string.is_empty() {
            return pattern.is_empty();
        }
        match_toks(&parse(pattern), string, nocase)
    }

    #[test]
    fn reference_agrees_with_table() {
        // Check the reference itself against the ASCII rows of the table.
        for &(pattern, string, nocase, expected) in CASES {
            // (Skip rows with many stars: the reference is exponential in them.)
            let stars = pattern.iter().filter(|&&b| b == b'*').count();
            if pattern.is_ascii() && string.is_ascii() && stars <= 4 {
                assert_eq!(
                    reference(pattern, string, nocase),
                    expected,
                    "{:?} {:?}",
                    String::from_utf8_lossy(pattern),
                    String::from_utf8_lossy(string)
                );
            }
        }
    }

    const PATTERN_ALPHABET: &[u8] = b"aAb*?[]^-\\";
    const STRING_ALPHABET: &[u8] = b"aAbB]^-\\*?[";

    fn from(alphabet: &'static [u8], max: usize) -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(alphabet), 0..=max)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn matches_reference(
            pattern in from(PATTERN_ALPHABET, 10),
            string in from(STRING_ALPHABET, 8),
            nocase in any::<bool>(),
        ) {
            prop_assert_eq!(
                glob_match(&pattern, &string, nocase),
                reference(&pattern, &string, nocase),
                "pattern {:?} string {:?} nocase {}",
                String::from_utf8_lossy(&pattern),
                String::from_utf8_lossy(&string),
                nocase
            );
        }

        /// Like Redis's `stringmatchlen_fuzz_test` (`DEBUG stringmatch-test`):
        /// arbitrary bytes must never crash.
        #[test]
        fn never_panics(
            pattern in prop::collection::vec(any::<u8>(), 0..64),
            string in prop::collection::vec(any::<u8>(), 0..64),
            nocase in any::<bool>(),
        ) {
            let _ = glob_match(&pattern, &string, nocase);
        }

        /// Escaping every byte gives a pattern that matches exactly that string.
        #[test]
        fn escaped_string_matches_itself(
            string in prop::collection::vec(any::<u8>(), 1..32),
            other in prop::collection::vec(any::<u8>(), 0..32),
        ) {
            let pattern: Vec<u8> = string.iter().flat_map(|&b| [b'\\', b]).collect();
            prop_assert!(glob_match(&pattern, &string, false));
            prop_assert_eq!(glob_match(&pattern, &other, false), other == string);
        }
    }
}
