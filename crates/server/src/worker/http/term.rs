//! The `term` WebSocket sub-protocol's two halves, without I/O: a line
//! editor that turns keystrokes (as a browser terminal sends them) into
//! terminal output and command lines, and a formatter that prints replies
//! the way `redis-cli` does on a terminal.
//!
//! Keys: printable text is inserted at the cursor; Enter runs the line;
//! Backspace/DEL and Delete erase; Left/Right, Home/End (and Ctrl-B/F/A/E)
//! move; Up/Down (Ctrl-P/N) walk the history; Ctrl-C drops the line; Ctrl-U,
//! Ctrl-K and Ctrl-W cut; Ctrl-L clears the screen. The output uses a small
//! subset of VT100: `\r`, `\n`, `ESC[K`, `ESC[nD`, `ESC[2J`, `ESC[H`.

use std::fmt::Write as _;

use proto::json::Reply;

/// The prompt after every reply.
pub(crate) const PROMPT: &str = "shoal> ";

/// The longest line (Redis's inline limit).
const MAX_LINE: usize = proto::resp::PROTO_INLINE_MAX_SIZE;

/// Lines kept for Up/Down.
const MAX_HISTORY: usize = 1000;

/// Where an escape sequence stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Escape {
    /// Not in one.
    None,
    /// After ESC.
    Started,
    /// After `ESC [`, with the parameter bytes so far.
    Csi(String),
    /// After `ESC O` (application cursor keys).
    Ss3,
}

/// One terminal's line editor.
#[derive(Debug)]
pub(crate) struct LineEditor {
    line: Vec<char>,
    cursor: usize,
    history: Vec<String>,
    /// The history entry shown, while walking it.
    browsing: Option<usize>,
    /// The line being typed before the walk started.
    saved: Vec<char>,
    escape: Escape,
    /// The last byte was `\r` (so a `\n` after it is the same Enter).
    after_cr: bool,
}

impl LineEditor {
    pub(crate) fn new() -> Self {
        LineEditor {
            line: Vec::new(),
            cursor: 0,
            history: Vec::new(),
            browsing: None,
            saved: Vec::new(),
            escape: Escape::None,
            after_cr: false,
        }
    }

    /// The prompt and the line being edited, cursor in place: what a reply
    /// is followed by.
    pub(crate) fn redraw(&self, out: &mut String) {
        out.push('\r');
        out.push_str(PROMPT);
        out.extend(self.line.iter());
        out.push_str("\x1b[K");
        let back = self.line.len() - self.cursor;
        if back > 0 {
            let _ = write!(out, "\x1b[{back}D");
        }
    }

    /// Handles keystrokes: appends what the terminal should show to `out`
    /// and each line Enter finished to `lines`.
    pub(crate) fn feed(&mut self, input: &str, out: &mut String, lines: &mut Vec<String>) {
        for c in input.chars() {
            let after_cr = std::mem::replace(&mut self.after_cr, c == '\r');
            match std::mem::replace(&mut self.escape, Escape::None) {
                Escape::None => {}
                Escape::Started => {
                    self.escape = match c {
                        '[' => Escape::Csi(String::new()),
                        'O' => Escape::Ss3,
                        _ => Escape::None,
                    };
                    continue;
                }
                Escape::Ss3 => {
                    self.key(c, out);
                    continue;
                }
                Escape::Csi(mut params) => {
                    if c.is_ascii_digit() || c == ';' {
                        if params.len() < 16 {
                            params.push(c);
                        }
                        self.escape = Escape::Csi(params);
                    } else if c == '~' {
                        match params.split(';').next() {
                            Some("1" | "7") => self.key('H', out),
                            Some("4" | "8") => self.key('F', out),
                            Some("3") => self.delete(out),
                            _ => {}
                        }
                    } else {
                        self.key(c, out);
                    }
                    continue;
                }
            }
            match c {
                '\x1b' => self.escape = Escape::Started,
                '\n' if after_cr => {}
                '\r' | '\n' => self.enter(out, lines),
                '\x7f' | '\x08' => self.backspace(out),
                '\x03' => {
                    out.push_str("^C\r\n");
                    self.line.clear();
                    self.cursor = 0;
                    self.browsing = None;
                    self.redraw(out);
                }
                '\x01' => self.key('H', out),
                '\x05' => self.key('F', out),
                '\x02' => self.key('D', out),
                '\x06' => self.key('C', out),
                '\x10' => self.key('A', out),
                '\x0e' => self.key('B', out),
                '\x04' => self.delete(out),
                '\x0b' => {
                    self.line.truncate(self.cursor);
                    self.redraw(out);
                }
                '\x15' => {
                    self.line.drain(..self.cursor);
                    self.cursor = 0;
                    self.redraw(out);
                }
                '\x17' => {
                    let mut start = self.cursor;
                    while start > 0 && self.line[start - 1] == ' ' {
                        start -= 1;
                    }
                    while start > 0 && self.line[start - 1] != ' ' {
                        start -= 1;
                    }
                    self.line.drain(start..self.cursor);
                    self.cursor = start;
                    self.redraw(out);
                }
                '\x0c' => {
                    out.push_str("\x1b[2J\x1b[H");
                    self.redraw(out);
                }
                c if c < ' ' => {}
                c => self.insert(c, out),
            }
        }
    }

    /// Clears the screen and shows the prompt (the `clear` command).
    pub(crate) fn clear_screen(&self, out: &mut String) {
        out.push_str("\x1b[2J\x1b[H");
        self.redraw(out);
    }

    /// A cursor or editing key by its final byte (`A` up, `B` down, `C`
    /// right, `D` left, `H` home, `F` end).
    fn key(&mut self, c: char, out: &mut String) {
        match c {
            'A' => self.history_step(true, out),
            'B' => self.history_step(false, out),
            'C' if self.cursor < self.line.len() => {
                self.cursor += 1;
                out.push_str("\x1b[C");
            }
            'D' if self.cursor > 0 => {
                self.cursor -= 1;
                out.push_str("\x1b[D");
            }
            'H' => {
                self.cursor = 0;
                self.redraw(out);
            }
            'F' => {
                self.cursor = self.line.len();
                self.redraw(out);
            }
            _ => {}
        }
    }

    fn insert(&mut self, c: char, out: &mut String) {
        if self.line.len() >= MAX_LINE {
            out.push('\x07');
            return;
        }
        self.line.insert(self.cursor, c);
        self.cursor += 1;
        if self.cursor == self.line.len() {
            out.push(c);
        } else {
            self.redraw(out);
        }
    }

    fn backspace(&mut self, out: &mut String) {
        if self.cursor == 0 {
            return;
        }
        self.cursor -= 1;
        self.line.remove(self.cursor);
        if self.cursor == self.line.len() {
            out.push_str("\x08\x1b[K");
        } else {
            self.redraw(out);
        }
    }

    fn delete(&mut self, out: &mut String) {
        if self.cursor < self.line.len() {
            self.line.remove(self.cursor);
            self.redraw(out);
        }
    }

    fn enter(&mut self, out: &mut String, lines: &mut Vec<String>) {
        out.push_str("\r\n");
        let line: String = self.line.iter().collect();
        if !line.trim().is_empty() && self.history.last() != Some(&line) {
            if self.history.len() >= MAX_HISTORY {
                self.history.remove(0);
            }
            self.history.push(line.clone());
        }
        self.line.clear();
        self.cursor = 0;
        self.browsing = None;
        lines.push(line);
    }

    fn history_step(&mut self, up: bool, out: &mut String) {
        let next = match (self.browsing, up) {
            (None, true) if !self.history.is_empty() => {
                self.saved = self.line.clone();
                Some(self.history.len() - 1)
            }
            (Some(i), true) if i > 0 => Some(i - 1),
            (Some(i), false) if i + 1 < self.history.len() => Some(i + 1),
            (Some(_), false) => None,
            _ => {
                out.push('\x07');
                return;
            }
        };
        self.browsing = next;
        self.line = match next {
            Some(i) => self.history[i].chars().collect(),
            None => std::mem::take(&mut self.saved),
        };
        self.cursor = self.line.len();
        self.redraw(out);
    }
}

/// Formats a reply as `redis-cli` prints it on a terminal
/// (`cliFormatReplyTTY`), lines ending in `\n`.
pub(crate) fn format_reply(reply: &Reply<'_>, out: &mut String) {
    format_nested(reply, "", out);
}

fn format_nested(reply: &Reply<'_>, prefix: &str, out: &mut String) {
    match reply {
        Reply::Error(e) => {
            out.push_str("(error) ");
            out.push_str(&String::from_utf8_lossy(e));
            out.push('\n');
        }
        Reply::Simple(s) => {
            out.push_str(&String::from_utf8_lossy(s));
            out.push('\n');
        }
        Reply::Integer(n) => {
            let _ = writeln!(out, "(integer) {n}");
        }
        Reply::Double(d) => {
            let _ = writeln!(out, "(double) {}", String::from_utf8_lossy(d));
        }
        Reply::BigNumber(n) => {
            let _ = writeln!(out, "(big number) {}", String::from_utf8_lossy(n));
        }
        Reply::Bulk(s) => {
            quoted(s, out);
            out.push('\n');
        }
        Reply::Verbatim { text, .. } => {
            out.push_str(&String::from_utf8_lossy(text));
            out.push('\n');
        }
        Reply::Null => out.push_str("(nil)\n"),
        Reply::Boolean(b) => out.push_str(if *b { "(true)\n" } else { "(false)\n" }),
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => {
            let (empty, sep) = match reply {
                Reply::Set(_) => ("(empty set)\n", '~'),
                Reply::Push(_) => ("(empty push)\n", ')'),
                _ => ("(empty array)\n", ')'),
            };
            if items.is_empty() {
                out.push_str(empty);
                return;
            }
            let width = items.len().to_string().len();
            let inner = format!("{prefix}{}", " ".repeat(width + 2));
            for (i, item) in items.iter().enumerate() {
                let lead = if i == 0 { "" } else { prefix };
                let _ = write!(out, "{lead}{:>width$}{sep} ", i + 1);
                format_nested(item, &inner, out);
            }
        }
        Reply::Map(pairs) => {
            if pairs.is_empty() {
                out.push_str("(empty hash)\n");
                return;
            }
            let width = pairs.len().to_string().len();
            let inner = format!("{prefix}{}", " ".repeat(width + 2));
            for (i, (k, v)) in pairs.iter().enumerate() {
                let lead = if i == 0 { "" } else { prefix };
                let _ = write!(out, "{lead}{:>width$}# ", i + 1);
                format_nested(k, &inner, out);
                out.pop();
                out.push_str(" => ");
                format_nested(v, &inner, out);
            }
        }
    }
}

/// `sdscatrepr`: a double-quoted string with C escapes, other bytes that are
/// not printable ASCII as `\xHH`.
fn quoted(s: &[u8], out: &mut String) {
    out.push('"');
    for &b in s {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
}

/// Text for a terminal: every `\n` becomes `\r\n`.
pub(crate) fn crlf(text: &str, out: &mut String) {
    for (i, piece) in text.split('\n').enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        out.push_str(piece);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(keys: &str) -> (LineEditor, String, Vec<String>) {
        let mut e = LineEditor::new();
        let (mut out, mut lines) = (String::new(), Vec::new());
        e.feed(keys, &mut out, &mut lines);
        (e, out, lines)
    }

    #[test]
    fn typing_echoes_and_enter_gives_the_line() {
        let (_, out, lines) = run("get k\r");
        assert_eq!(out, "get k\r\n");
        assert_eq!(lines, ["get k"]);
        let (_, _, lines) = run("a\r\nb\n");
        assert_eq!(lines, ["a", "b"]);
    }

    #[test]
    fn editing_keys() {
        let (_, _, lines) = run("gte\x7f\x7fet\x1b[D\x1b[D\x1b[3~\r");
        assert_eq!(lines, ["gt"]);
        let (_, _, lines) = run("et k\x1b[H\x1bOHg\x1b[F!\r");
        assert_eq!(lines, ["get k!"]);
        let (_, _, lines) = run("set a b\x17\x17c\r");
        assert_eq!(lines, ["set c"]);
        let (_, out, lines) = run("junk\x03ping\r");
        assert_eq!(lines, ["ping"]);
        assert!(out.contains("^C\r\n\rshoal> \x1b[K"));
    }

    #[test]
    fn history_walks_up_and_down() {
        let (_, _, lines) = run("one\rtwo\rdraft\x1b[A\x1b[A\r");
        assert_eq!(lines, ["one", "two", "one"]);
        let (_, _, lines) = run("one\rdraft\x1b[A\x1b[B\r");
        assert_eq!(lines, ["one", "draft"]);
    }

    #[test]
    fn redraw_puts_the_cursor_back() {
        let (e, _, _) = run("abc\x1b[D\x1b[D");
        let mut out = String::new();
        e.redraw(&mut out);
        assert_eq!(out, "\rshoal> abc\x1b[K\x1b[2D");
    }

    #[test]
    fn random_keystrokes_keep_the_cursor_in_the_line() {
        let keys = [
            "a",
            "é",
            " ",
            "\r",
            "\n",
            "\x7f",
            "\x08",
            "\x03",
            "\x01",
            "\x05",
            "\x02",
            "\x06",
            "\x10",
            "\x0e",
            "\x04",
            "\x0b",
            "\x15",
            "\x17",
            "\x0c",
            "\t",
            "\x1b",
            "\x1b[",
            "\x1b[A",
            "\x1b[B",
            "\x1b[C",
            "\x1b[D",
            "\x1b[H",
            "\x1b[F",
            "\x1b[3~",
            "\x1b[1;5C",
            "\x1bOA",
            "\x1b[99999999999999999999~",
            "[",
            "~",
            "O",
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut e = LineEditor::new();
        let (mut out, mut lines) = (String::new(), Vec::new());
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            e.feed(keys[(x % keys.len() as u64) as usize], &mut out, &mut lines);
            assert!(e.cursor <= e.line.len());
            assert!(e.browsing.is_none_or(|i| i < e.history.len()));
        }
        assert!(!lines.is_empty());
    }

    fn cli(resp: &[u8]) -> String {
        let (r, _) = proto::json::parse_reply(resp).unwrap().unwrap();
        let mut out = String::new();
        format_reply(&r, &mut out);
        out
    }

    #[test]
    fn replies_print_like_redis_cli() {
        assert_eq!(cli(b"+OK\r\n"), "OK\n");
        assert_eq!(cli(b"-ERR x\r\n"), "(error) ERR x\n");
        assert_eq!(cli(b":3\r\n"), "(integer) 3\n");
        assert_eq!(cli(b"$-1\r\n"), "(nil)\n");
        assert_eq!(cli(b"$4\r\na\"\n\xff\r\n"), "\"a\\\"\\n\\xff\"\n");
        assert_eq!(cli(b"*0\r\n"), "(empty array)\n");
        assert_eq!(
            cli(b"*2\r\n$1\r\na\r\n*2\r\n:1\r\n$1\r\nb\r\n"),
            "1) \"a\"\n2) 1) (integer) 1\n   2) \"b\"\n"
        );
        let ten = format!("*10\r\n{}", ":1\r\n".repeat(10));
        assert!(cli(ten.as_bytes()).starts_with(" 1) (integer) 1\n 2)"));
        assert_eq!(
            cli(b"%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n:2\r\n"),
            "1# \"a\" => (integer) 1\n2# \"b\" => (integer) 2\n"
        );
        assert_eq!(cli(b"~1\r\n$1\r\nx\r\n"), "1~ \"x\"\n");
    }
}
