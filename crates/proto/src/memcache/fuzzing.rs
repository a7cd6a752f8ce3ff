//! Harness for the `memcache_text` fuzz target and its property tests: it
//! takes arbitrary bytes and panics only when an invariant of the text
//! parser breaks, so the cargo-fuzz target is a one-line call and
//! `tests/memcache_text_fuzz_test.rs` replays the corpus on stable.

use super::meta::{Code, Num};
use super::text::{Parsed, Parser, Request, KEY_MAX};

/// One step of parsing, owned so that runs can be compared.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// A request (its debug form) and the bytes it took.
    Request(String, usize),
    /// An error line, whether withheld, and the bytes it took.
    Error(&'static str, bool, usize),
    /// Bytes of a refused data block skipped (runs of them merged).
    Skipped(usize),
    /// The connection closes.
    Close,
}

/// Feeds `data` to the text [`Parser`] and checks that:
///
/// * it never panics, and every step consumes at least one byte and at most
///   what it was given;
/// * delivering `data` in pieces (chunks of sizes taken from the input, and
///   a split at points taken from the input) gives the same steps as
///   delivering it whole (skipped bytes counted in total);
/// * every error is one of memcached's reply lines (`ERROR`,
///   `CLIENT_ERROR …`, `SERVER_ERROR …`) without a line break;
/// * every key is at most 250 bytes, every data block has the length its
///   line announced;
/// * a parser with a small item size limit takes the same steps up to the
///   first data block it refuses, and refuses it as too large;
/// * a storage request written back as a text line parses to itself;
/// * a meta reply written for any meta request is one line.
pub fn fuzz_text(data: &[u8]) {
    let whole = run(data, &[data.len()], Parser::default());
    let seed = |i: usize| data.get(i).map_or(0, |&b| usize::from(b));
    let min_chunk = data.len() / 2048 + 1;
    for chunk in [min_chunk, min_chunk + 1 + seed(0) % 13] {
        let ends: Vec<usize> = (chunk..data.len() + chunk)
            .step_by(chunk)
            .map(|e| e.min(data.len()))
            .collect();
        let pieces = run(data, &ends, Parser::default());
        assert_eq!(pieces, whole, "chunk {chunk}");
    }
    let split = |k: usize| if data.is_empty() { 0 } else { k % data.len() };
    let mut cuts = vec![split(seed(1) * 257 + seed(2)), split(seed(3) * 31)];
    cuts.sort_unstable();
    cuts.push(data.len());
    assert_eq!(run(data, &cuts, Parser::default()), whole, "cuts {cuts:?}");

    let limit = (seed(1) % 8) as u64;
    let small = run(data, &[data.len()], Parser::new(limit));
    let same = small.iter().zip(&whole).take_while(|(a, b)| a == b).count();
    if same < small.len() && same < whole.len() {
        match &small[same] {
            Step::Request(r, _) => assert!(r.starts_with("TooLarge"), "limit {limit}: {r}"),
            other => panic!("limit {limit}: {other:?} vs {:?}", whole[same]),
        }
    }
}

/// Parses `data` delivered up to each of `ends` in turn, the way a
/// connection appends reads to its unconsumed bytes.
fn run(data: &[u8], ends: &[usize], mut parser: Parser) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut start = 0;
    for &end in ends {
        let end = end.clamp(start, data.len());
        loop {
            let buf = &data[start..end];
            let (step, used) = match parser.parse(buf) {
                Parsed::Incomplete => break,
                Parsed::Close => {
                    steps.push(Step::Close);
                    return steps;
                }
                Parsed::Skipped(n) => {
                    if let Some(Step::Skipped(total)) = steps.last_mut() {
                        *total += n;
                        start += n;
                        assert!(n >= 1 && n <= buf.len());
                        continue;
                    }
                    (Step::Skipped(n), n)
                }
                Parsed::Error {
                    line,
                    quiet,
                    consumed,
                } => {
                    check_error(line);
                    (Step::Error(line, quiet, consumed), consumed)
                }
                Parsed::Request(r, consumed) => {
                    check_request(&r);
                    (Step::Request(format!("{r:?}"), consumed), consumed)
                }
            };
            assert!(used >= 1, "{step:?} consumed nothing");
            assert!(
                used <= buf.len(),
                "{step:?} consumed {used} of {}",
                buf.len()
            );
            start += used;
            steps.push(step);
        }
    }
    steps
}

fn check_error(line: &str) {
    assert!(
        line == "ERROR"
            || line.starts_with("ERROR: ")
            || line.starts_with("CLIENT_ERROR ")
            || line.starts_with("SERVER_ERROR "),
        "{line:?}"
    );
    assert!(!line.contains(['\r', '\n']), "{line:?}");
}

fn check_request(r: &Request<'_>) {
    match r {
        Request::Get { keys, .. } => {
            for k in *keys {
                assert!(!k.is_empty() && k.len() <= KEY_MAX, "{k:?}");
                assert!(!k.contains(&b' ') && !k.contains(&b'\n'));
            }
        }
        Request::Store {
            mode,
            key,
            flags,
            exptime,
            cas,
            data,
            noreply,
        } => {
            assert!(key.len() <= KEY_MAX);
            let command: &[u8] = match (mode, cas) {
                (_, Some(_)) => b"cas",
                (super::text::StoreMode::Set, None) => b"set",
                (super::text::StoreMode::Add, None) => b"add",
                (super::text::StoreMode::Replace, None) => b"replace",
                (super::text::StoreMode::Append, None) => b"append",
                (super::text::StoreMode::Prepend, None) => b"prepend",
            };
            let mut line = [command, b" ", key].concat();
            line.extend_from_slice(format!(" {flags} {exptime} {}", data.len()).as_bytes());
            if let Some(c) = cas {
                line.extend_from_slice(format!(" {c}").as_bytes());
            }
            if *noreply {
                line.extend_from_slice(b" noreply");
            }
            line.extend_from_slice(b"\r\n");
            line.extend_from_slice(data);
            line.extend_from_slice(b"\r\n");
            let Parsed::Request(again, n) = Parser::default().parse(&line) else {
                panic!("{r:?} written as {line:?} does not parse");
            };
            assert_eq!(n, line.len());
            assert_eq!(&again, r);
        }
        Request::MetaGet(m)
        | Request::MetaDelete(m)
        | Request::MetaArith(m)
        | Request::MetaSet(m, _) => {
            assert!(!m.key.is_empty() || !m.base64);
            for code in [Code::Hd, Code::Va(3), Code::En, Code::Ex] {
                let mut out = Vec::new();
                m.write_reply(&mut out, code, |f| match f {
                    b't' => Some(Num::I(-1)),
                    b'c' | b's' | b'f' | b'l' => Some(Num::U(u64::MAX)),
                    _ => None,
                });
                assert!(out.ends_with(b"\r\n"));
                assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1, "{out:?}");
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::fuzz_text;

    #[test]
    fn harness_runs_on_samples() {
        for sample in [
            &b"set k 0 0 5\r\nhello\r\nget k\r\n"[..],
            b"set k 0 0 500\r\nabc",
            b"ms k 3 T5 c k O1\r\nabc\r\nmg k v s t\r\nmd k q\r\nma n N0 J1 v\r\nmn\r\n",
            b"gat 10 a b c\r\ngets a\r\ndelete a 0 noreply\r\nincr a 5\r\n",
        ] {
            fuzz_text(sample);
        }
    }
}
