//! Splitting an inline request line into arguments: a port of Redis 7.0's
//! `sdssplitargs` (`src/sds.c`), which `processInlineBuffer` calls.
//!
//! The grammar, as Redis implements it:
//!
//! * Arguments are separated by runs of C `isspace` bytes (space, `\t`, `\n`,
//!   `\v`, `\f`, `\r`).
//! * Outside quotes, an argument ends at a space, `\t`, `\n`, `\r` or NUL, but
//!   *not* at `\v` or `\f`, which stay inside the argument.
//! * `"…"` takes the escapes `\xHH` (two hex digits, either case), `\n`, `\r`,
//!   `\t`, `\b`, `\a`; a backslash before any other byte yields that byte
//!   (`\"`, `\\`, and `\x` without two hex digits gives `x`).
//! * `'…'` takes only `\'`; every other byte, backslashes included, is literal.
//! * A quote may open in the middle of an argument (`foo"bar"` is `foobar`),
//!   but a closing quote must be followed by `isspace` or the end of the line;
//!   otherwise, or when a quote never closes, the whole line is refused.
//!
//! The C code runs over a NUL-terminated string; here the end of the slice
//! plays the NUL. (The request parser never passes a line with a NUL in it:
//! Redis's `strchr` for the newline stops at the first NUL.)

use std::borrow::Cow;

/// C `isspace` in the "C" locale. Redis never changes `LC_CTYPE`, and bytes of
/// 0x80 and above are not spaces there.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Splits `line` into arguments like `sdssplitargs`, or `None` where it
/// returns NULL (unbalanced quotes). An argument without quotes borrows
/// `line`; one with quotes is decoded into owned bytes. A blank line gives no
/// arguments.
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<Cow<'_, [u8]>>> {
    // `*p` of the C code: the byte at `i`, or NUL past the end.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut args = Vec::new();
    let mut p = 0;
    loop {
        while at(p) != 0 && is_c_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Some(args);
        }
        let start = p;
        // While no quote has been seen the argument is `line[start..p]`, so
        // nothing is copied; the first quote switches to an owned buffer.
        let mut owned: Option<Vec<u8>> = None;
        let (mut in_dq, mut in_sq, mut done) = (false, false, false);
        while !done {
            let c = at(p);
            if in_dq {
                let buf = owned.get_or_insert_with(Vec::new);
                if let (b'\\', b'x', Some(hi), Some(lo)) =
                    (c, at(p + 1), hex_value(at(p + 2)), hex_value(at(p + 3)))
                {
                    buf.push(hi * 16 + lo);
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    buf.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    // The closing quote must be followed by a space or nothing.
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None; // unterminated quotes
                } else {
                    buf.push(c);
                }
            } else if in_sq {
                let buf = owned.get_or_insert_with(Vec::new);
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    buf.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    done = true;
                } else if c == 0 {
                    return None;
                } else {
                    buf.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' | b'\'' => {
                        owned = Some(line[start..p].to_vec());
                        if c == b'"' {
                            in_dq = true;
                        } else {
                            in_sq = true;
                        }
                    }
                    _ => {}
                }
                if done && owned.is_none() {
                    args.push(Cow::Borrowed(&line[start..p]));
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        if let Some(buf) = owned {
            args.push(Cow::Owned(buf));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &[u8]) -> Option<Vec<Vec<u8>>> {
        split_args(line).map(|v| v.into_iter().map(Cow::into_owned).collect())
    }

    fn ok(line: &[u8], want: &[&[u8]]) {
        let want: Vec<Vec<u8>> = want.iter().map(|a| a.to_vec()).collect();
        assert_eq!(
            split(line),
            Some(want),
            "line {:?}",
            String::from_utf8_lossy(line)
        );
    }

    #[test]
    fn plain_words() {
        ok(b"", &[]);
        ok(b"   \t ", &[]);
        ok(b"PING", &[b"PING"]);
        ok(b"  SET  k\tv  ", &[b"SET", b"k", b"v"]);
        ok(b"a\rb\nc", &[b"a", b"b", b"c"]);
    }

    #[test]
    fn vertical_tab_and_form_feed_separate_only_between_words() {
        // Skipped as blanks before a word, kept inside one.
        ok(b"\x0b\x0ca\x0bb\x0c", &[b"a\x0bb\x0c"]);
        ok(b"a \x0b b", &[b"a", b"b"]);
    }

    #[test]
    fn unquoted_words_borrow() {
        let args = split_args(b"GET key").unwrap();
        assert!(args.iter().all(|a| matches!(a, Cow::Borrowed(_))));
        let args = split_args(b"GET \"key\"").unwrap();
        assert!(matches!(args[1], Cow::Owned(_)));
    }

    #[test]
    fn double_quotes_and_escapes() {
        ok(b"\"\"", &[b""]);
        ok(b"set \"a b\" c", &[b"set", b"a b", b"c"]);
        ok(br#""\x41\x6a\x4A""#, &[b"AjJ"]);
        ok(br#""\x00\xff""#, &[b"\x00\xff"]);
        ok(br#""\n\r\t\b\a""#, &[b"\n\r\t\x08\x07"]);
        ok(br#""\"\\\q""#, &[b"\"\\q"]);
        // `\x` without two hex digits is a plain `x`.
        ok(br#""\xg1\x4""#, &[b"xg1x4"]);
        ok(b"foo\"bar baz\"", &[b"foobar baz"]);
        ok(b"\"a\"\x0bb", &[b"a", b"b"]);
    }

    #[test]
    fn single_quotes_take_only_escaped_quote() {
        ok(b"''", &[b""]);
        ok(br"'a\'b'", &[b"a'b"]);
        ok(br"'\n\x41\ '", &[br"\n\x41\ "]);
        // `\\'` is a backslash, then an escaped quote: the quote never closes.
        assert_eq!(split(br"'a\\'"), None);
        ok(b"'say \"hi\"'", &[b"say \"hi\""]);
        ok(b"\"it's\"", &[b"it's"]);
    }

    #[test]
    fn unbalanced_quotes() {
        for line in [
            &b"\""[..],
            b"'",
            b"\"abc",
            b"'abc",
            b"\"a\"b",
            b"'a'b",
            b"\"a\"\"",
            br#""abc\""#,
            br"'abc\'",
            // tests/unit/protocol.tcl "Unbalanced number of quotes".
            br#"set """test-key""" test-value"#,
        ] {
            assert_eq!(
                split(line),
                None,
                "line {:?}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn a_nul_ends_the_line_as_in_c() {
        ok(b"a b\0c d", &[b"a", b"b"]);
        assert_eq!(split(b"\"a\0\""), None);
    }
}
