//! A small RESP2/RESP3 reply parser for tests whose replies are random or
//! unordered (HRANDFIELD, SPOP, SUNION…), so they can check the shape and
//! the contents rather than exact bytes. Include it with
//! `#[path = "common/resp.rs"] mod resp;`.
#![allow(dead_code)]

/// One reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+text`.
    Simple(String),
    /// `-text`.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$n text`.
    Bulk(String),
    /// `$-1`, `*-1` or `_`.
    Null,
    /// An aggregate: its type byte (`*`, `~`, `%`) and its elements (a map's
    /// keys and values alternate).
    Agg(char, Vec<Reply>),
}

impl Reply {
    /// The elements of an aggregate (panics otherwise: a test failure).
    pub fn items(&self) -> &[Reply] {
        match self {
            Reply::Agg(_, items) => items,
            other => panic!("not an aggregate: {other:?}"),
        }
    }

    /// The text of a bulk string.
    pub fn text(&self) -> &str {
        match self {
            Reply::Bulk(s) => s,
            other => panic!("not a bulk string: {other:?}"),
        }
    }

    /// The bulk strings of an aggregate, in order.
    pub fn texts(&self) -> Vec<String> {
        self.items().iter().map(|r| r.text().to_string()).collect()
    }

    /// The bulk strings of an aggregate, sorted.
    pub fn sorted(&self) -> Vec<String> {
        let mut v = self.texts();
        v.sort();
        v
    }
}

/// Parses one whole reply; panics if anything is left over.
pub fn parse(text: &str) -> Reply {
    let (r, rest) = parse_one(text);
    assert!(rest.is_empty(), "trailing bytes after a reply: {rest:?}");
    r
}

fn parse_one(text: &str) -> (Reply, &str) {
    let (line, rest) = text.split_once("\r\n").expect("a CRLF line");
    let (kind, body) = line.split_at(1);
    match kind {
        "+" => (Reply::Simple(body.into()), rest),
        "-" => (Reply::Error(body.into()), rest),
        ":" => (Reply::Int(body.parse().expect("integer")), rest),
        "_" => (Reply::Null, rest),
        "$" if body == "-1" => (Reply::Null, rest),
        "*" if body == "-1" => (Reply::Null, rest),
        "$" => {
            let n: usize = body.parse().expect("length");
            (Reply::Bulk(rest[..n].into()), &rest[n + 2..])
        }
        "*" | "~" | "%" => {
            let mut n: usize = body.parse().expect("count");
            if kind == "%" {
                n *= 2;
            }
            let mut items = Vec::with_capacity(n);
            let mut rest = rest;
            for _ in 0..n {
                let (item, r) = parse_one(rest);
                items.push(item);
                rest = r;
            }
            (Reply::Agg(kind.chars().next().unwrap(), items), rest)
        }
        other => panic!("unknown reply type {other:?}"),
    }
}
