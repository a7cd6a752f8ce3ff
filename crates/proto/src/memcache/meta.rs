//! memcached's meta commands (`mg`, `ms`, `md`, `ma`; `mn` and `me` need
//! no flags): their flags, read as `_meta_flag_preparse` and the
//! `process_m*_command` functions of memcached 1.6's `proto_text.c` read
//! them, and their reply lines, whose return flags come back in the order
//! the request sent them.
//!
//! shoal keeps no per-item "fetched", "stale" or "win token" state, so the
//! flags that need it are refused with memcached's own answer to a flag it
//! does not know (`CLIENT_ERROR invalid flag`; `md` and `ma` say
//! `CLIENT_ERROR invalid or duplicate flag`) rather than half-honoured:
//! `mg`'s `h` (hit before), `u` (no LRU bump; every read here counts as an
//! access), `N` (vivify, whose point is the `W`/`Z` win tokens) and `R`
//! (recache win), and `I` (invalidate: mark stale) of `ms` and `md`. Newer
//! flags memcached 1.6 did not have in its first meta releases (`E`, `x`)
//! are refused the same way; `E` could not be honoured anyway, as a CAS
//! value here is the write's log position. The rest are served as memcached
//! serves them, `P` and `L` (proxy hints) ignored, and flags a command
//! does not use accepted and ignored, as memcached accepts them.

use std::borrow::Cow;

use base64::Engine as _;

use super::text::{parse_i32, parse_u32, parse_u64, write_i64, write_u64, StoreMode, KEY_MAX};

/// memcached's `MFLAG_MAX_OPT_LENGTH`: a meta line of more tokens (command,
/// key, length, flags and the tokenizer's terminal one) is refused.
pub const MAX_TOKENS: usize = 20;
/// Longest opaque (`O`) token, `O` included (`MFLAG_MAX_OPAQUE_LENGTH`).
pub const OPAQUE_MAX: usize = 32;

/// Too many flags on an `ms`, `md` or `ma` line.
pub const FLAGS_TOO_LONG: &str = "CLIENT_ERROR options flags too long";
/// Too many flags on an `mg` line (memcached words it differently there).
pub const GET_FLAGS_TOO_LONG: &str = "CLIENT_ERROR options flags are too long";
/// A flag given twice (or a token starting with a non-ASCII byte).
pub const DUPLICATE_FLAG: &str = "CLIENT_ERROR duplicate flag";
/// A flag memcached does not know (or shoal cannot honour).
pub const INVALID_FLAG: &str = "CLIENT_ERROR invalid flag";
/// Any flag error on `md` and `ma`.
pub const INVALID_OR_DUPLICATE_FLAG: &str = "CLIENT_ERROR invalid or duplicate flag";
/// A `b` key that is not base64.
pub const BAD_KEY_ENCODING: &str = "CLIENT_ERROR error decoding key";
/// A flag's number that does not parse.
pub const BAD_TOKEN: &str = "CLIENT_ERROR bad token in command line format";
/// An `M` flag not of one character.
pub const BAD_MODE_LENGTH: &str = "CLIENT_ERROR incorrect length for M token";
/// `ma`'s `J` that does not parse.
pub const BAD_INITIAL: &str = "CLIENT_ERROR invalid numeric initial value";
/// `ma`'s `D` that does not parse.
pub const BAD_DELTA: &str = "CLIENT_ERROR invalid numeric delta value";
/// An `O` token past [`OPAQUE_MAX`].
pub const OPAQUE_TOO_LONG: &str = "CLIENT_ERROR opaque token too long";
/// An `ms` mode other than E, A, P, R, S.
pub const BAD_SET_MODE: &str = "CLIENT_ERROR invalid mode for ms M token";
/// An `ma` mode other than I, +, D, -.
pub const BAD_ARITH_MODE: &str = "CLIENT_ERROR invalid mode for ma M token";

/// The meta commands that take flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// `mg`.
    Get,
    /// `ms`.
    Set,
    /// `md`.
    Delete,
    /// `ma`.
    Arith,
}

/// A meta request: its key and what its flags ask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta<'a> {
    /// The key (decoded when `b` was given).
    pub key: Cow<'a, [u8]>,
    /// `b`: the key came in base64 and goes back in base64.
    pub base64: bool,
    /// The flag tokens as sent, for the reply.
    flags: &'a [u8],
    /// `q`: withhold the nominal reply (see each command).
    pub quiet: bool,
    /// `v`: return the value.
    pub value: bool,
    /// `T`: a new exptime (mg, ma: on a hit; ms: the item's).
    pub ttl: Option<i64>,
    /// `N`: `ma` creates a missing item with this exptime.
    pub vivify: Option<i64>,
    /// `C`: compare this CAS value.
    pub compare_cas: Option<u64>,
    /// `F`: `ms`'s client flags (0 when not given).
    pub client_flags: u32,
    /// `M`: the mode character (0 when not given).
    pub mode: u8,
    /// `D`: `ma`'s delta (1 when not given).
    pub delta: u64,
    /// `J`: `ma`'s initial value for `N` (0 when not given).
    pub initial: u64,
}

/// A number a return flag carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Num {
    /// Unsigned (sizes, flags, CAS values, ages).
    U(u64),
    /// Signed (a TTL, -1 for none).
    I(i64),
}

/// A reply's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// `HD`: success without a value.
    Hd,
    /// `VA <len>`: success with a value of this length.
    Va(u64),
    /// `EN`: a miss (mg).
    En,
    /// `NF`: not found.
    Nf,
    /// `NS`: not stored.
    Ns,
    /// `EX`: the CAS value did not match.
    Ex,
}

/// Decodes a base64 key; None when it is not base64 or decodes to nothing.
pub fn decode_key(token: &[u8]) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(token)
        .ok()
        .filter(|k| !k.is_empty())
}

impl<'a> Meta<'a> {
    /// Reads a meta request of `command` for `key` with the flag tokens
    /// `flags` (spanning `span` of the line). The error is memcached's reply.
    pub(crate) fn parse(
        command: Command,
        key: &'a [u8],
        flags: &[&'a [u8]],
        span: &'a [u8],
    ) -> Result<Meta<'a>, &'static str> {
        use Command::*;
        if command != Set {
            if key.len() > KEY_MAX {
                return Err(super::text::BAD_FORMAT);
            }
            if flags.len() + 3 > MAX_TOKENS {
                return Err(match command {
                    Get => GET_FLAGS_TOO_LONG,
                    _ => FLAGS_TOO_LONG,
                });
            }
        }
        let mut m = Meta {
            key: Cow::Borrowed(key),
            base64: false,
            flags: span,
            quiet: false,
            value: false,
            ttl: None,
            vivify: None,
            compare_cas: None,
            client_flags: 0,
            mode: 0,
            delta: 1,
            initial: 0,
        };
        let flag_error = |e: &'static str| match command {
            // memcached reports any flag error of md and ma in one way.
            Delete | Arith => INVALID_OR_DUPLICATE_FLAG,
            Get | Set => e,
        };
        // memcached goes on past some errors and reports the last one.
        let mut error = None;
        let mut bad_flags = false;
        let mut seen = [false; 128];
        for tok in flags {
            let f = tok[0];
            if f >= 127 || seen[usize::from(f)] {
                return Err(flag_error(DUPLICATE_FLAG));
            }
            seen[usize::from(f)] = true;
            let arg = &tok[1..];
            let unsupported = match command {
                Get => matches!(f, b'h' | b'u' | b'N' | b'R'),
                Set | Delete => f == b'I',
                Arith => false,
            };
            if unsupported {
                return Err(flag_error(INVALID_FLAG));
            }
            match f {
                b'b' => match decode_key(key) {
                    Some(k) => {
                        m.key = Cow::Owned(k);
                        m.base64 = true;
                    }
                    None => error = Some(BAD_KEY_ENCODING),
                },
                b'N' => match parse_i32(arg) {
                    Some(e) => m.vivify = Some(e),
                    None => error = Some(BAD_TOKEN),
                },
                b'T' => match parse_i32(arg) {
                    Some(e) => m.ttl = Some(e),
                    None => error = Some(BAD_TOKEN),
                },
                b'R' => {
                    if parse_i32(arg).is_none() {
                        error = Some(BAD_TOKEN);
                    }
                }
                // memcached flags a bad F without a message of its own: the
                // reply is the last message set, else "bad command line
                // format".
                b'F' => match parse_u32(arg) {
                    Some(v) => m.client_flags = v,
                    None => bad_flags = true,
                },
                b'C' => match parse_u64(arg) {
                    Some(v) => m.compare_cas = Some(v),
                    None => error = Some(BAD_TOKEN),
                },
                b'M' => match arg {
                    [mode] => m.mode = *mode,
                    _ => error = Some(BAD_MODE_LENGTH),
                },
                b'J' => match parse_u64(arg) {
                    Some(v) => m.initial = v,
                    None => error = Some(BAD_INITIAL),
                },
                b'D' => match parse_u64(arg) {
                    Some(v) => m.delta = v,
                    None => error = Some(BAD_DELTA),
                },
                b'v' => m.value = true,
                b'q' => m.quiet = true,
                b'l' | b'h' | b'u' | b'I' | b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c'
                | b'f' => {}
                _ => return Err(flag_error(INVALID_FLAG)),
            }
        }
        if let Some(e) = error {
            return Err(flag_error(e));
        }
        if bad_flags {
            return Err(flag_error(super::text::BAD_FORMAT));
        }
        match (command, m.mode) {
            (Set, 0 | b'E' | b'A' | b'P' | b'R' | b'S') => {}
            (Set, _) => return Err(BAD_SET_MODE),
            (Arith, 0 | b'I' | b'+' | b'D' | b'-') => {}
            (Arith, _) => return Err(BAD_ARITH_MODE),
            _ => {}
        }
        if flags.iter().any(|t| t[0] == b'O' && t.len() > OPAQUE_MAX) {
            return Err(OPAQUE_TOO_LONG);
        }
        Ok(m)
    }

    /// `ms`'s storage mode (`M`; a `C` turns set and replace into a CAS
    /// store, which the compare value carries).
    pub fn store_mode(&self) -> StoreMode {
        match self.mode {
            b'E' => StoreMode::Add,
            b'A' => StoreMode::Append,
            b'P' => StoreMode::Prepend,
            b'R' => StoreMode::Replace,
            _ => StoreMode::Set,
        }
    }

    /// `ma`'s direction: incr unless `M` says D or -.
    pub fn incr(&self) -> bool {
        !matches!(self.mode, b'D' | b'-')
    }

    /// Whether the request carries flag `f`.
    pub fn has(&self, f: u8) -> bool {
        super::text::Tokens::new(self.flags).any(|t| t[0] == f)
    }

    /// Appends a reply line: the status, then the request's return flags in
    /// the order sent, then `\r\n`. `O` (the opaque, echoed) and `k` (the
    /// key, in base64 with a `b` flag when it came so) are written here;
    /// `number(flag)` gives any other flag's figure, None for a flag that
    /// returns nothing in this reply.
    pub fn write_reply(
        &self,
        out: &mut Vec<u8>,
        code: Code,
        mut number: impl FnMut(u8) -> Option<Num>,
    ) {
        out.extend_from_slice(match code {
            Code::Hd => b"HD",
            Code::Va(_) => b"VA ",
            Code::En => b"EN",
            Code::Nf => b"NF",
            Code::Ns => b"NS",
            Code::Ex => b"EX",
        });
        if let Code::Va(len) = code {
            write_u64(out, len);
        }
        for tok in super::text::Tokens::new(self.flags) {
            match tok[0] {
                b'O' => {
                    out.push(b' ');
                    out.extend_from_slice(tok);
                }
                b'k' => {
                    out.extend_from_slice(b" k");
                    write_key(out, &self.key, self.base64);
                }
                f => {
                    if let Some(n) = number(f) {
                        out.push(b' ');
                        out.push(f);
                        match n {
                            Num::U(u) => write_u64(out, u),
                            Num::I(i) => write_i64(out, i),
                        }
                    }
                }
            }
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends `key`, in base64 followed by ` b` when it came in base64.
fn write_key(out: &mut Vec<u8>, key: &[u8], base64: bool) {
    if base64 {
        let encoded = base64::engine::general_purpose::STANDARD.encode(key);
        out.extend_from_slice(encoded.as_bytes());
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(key);
    }
}

/// The facts `me` prints about an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Debug {
    /// memcached's `exp`: -1 without an expiry, else the seconds since the
    /// expiry time (negative while the item lives).
    pub exp: i64,
    /// Seconds since the last access.
    pub la: u64,
    /// The CAS value.
    pub cas: u64,
    /// The value's length in bytes.
    pub size: u64,
}

/// Appends `me`'s reply for a hit: `ME <key> exp=… la=… cas=… size=…`,
/// the key in base64 (without a `b` flag) when it came so. memcached also prints `fetch` (fetched before?) and `cls` (slab class):
/// shoal keeps neither, so they are left out rather than made up; `size` is
/// the value's length (memcached counts its item header too).
pub fn write_debug(out: &mut Vec<u8>, key: &[u8], base64: bool, d: Debug) {
    out.extend_from_slice(b"ME ");
    if base64 {
        let encoded = base64::engine::general_purpose::STANDARD.encode(key);
        out.extend_from_slice(encoded.as_bytes());
    } else {
        out.extend_from_slice(key);
    }
    out.extend_from_slice(b" exp=");
    write_i64(out, d.exp);
    out.extend_from_slice(b" la=");
    write_u64(out, d.la);
    out.extend_from_slice(b" cas=");
    write_u64(out, d.cas);
    out.extend_from_slice(b" size=");
    write_u64(out, d.size);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::super::text::{Parsed, Parser, Request};
    use super::*;

    fn parse(line: &[u8]) -> Parsed<'_> {
        Parser::default().parse(line)
    }

    fn meta(line: &[u8]) -> Meta<'_> {
        match parse(line) {
            Parsed::Request(Request::MetaGet(m), _)
            | Parsed::Request(Request::MetaDelete(m), _)
            | Parsed::Request(Request::MetaArith(m), _)
            | Parsed::Request(Request::MetaSet(m, _), _) => m,
            other => panic!("{other:?}"),
        }
    }

    fn refused(line: &[u8]) -> &'static str {
        match parse(line) {
            Parsed::Error { line, .. } => line,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_come_back_in_the_order_sent() {
        let m = meta(b"mg key s v t c f O123 k l q\r\n");
        assert!(m.value && m.quiet);
        let mut out = Vec::new();
        m.write_reply(&mut out, Code::Va(5), |f| match f {
            b's' => Some(Num::U(5)),
            b't' => Some(Num::I(-1)),
            b'c' => Some(Num::U(9)),
            b'f' => Some(Num::U(3)),
            b'l' => Some(Num::U(0)),
            _ => None,
        });
        assert_eq!(out, b"VA 5 s5 t-1 c9 f3 O123 kkey l0\r\n");
        out.clear();
        m.write_reply(&mut out, Code::En, |_| None);
        assert_eq!(out, b"EN O123 kkey\r\n");
    }

    #[test]
    fn base64_keys_decode_and_go_back_encoded() {
        let m = meta(b"mg a2V5 b k v\r\n");
        assert_eq!(&*m.key, b"key");
        let mut out = Vec::new();
        m.write_reply(&mut out, Code::Hd, |_| None);
        assert_eq!(out, b"HD ka2V5 b\r\n");
        assert_eq!(refused(b"mg k b\r\n"), BAD_KEY_ENCODING);
        assert_eq!(refused(b"md k b\r\n"), INVALID_OR_DUPLICATE_FLAG);
    }

    #[test]
    fn flag_errors_are_memcacheds() {
        assert_eq!(refused(b"mg k x\r\n"), INVALID_FLAG);
        assert_eq!(refused(b"mg k v v\r\n"), DUPLICATE_FLAG);
        assert_eq!(refused(b"mg\r\n"), "ERROR");
        assert_eq!(refused(b"mg k Tx\r\n"), BAD_TOKEN);
        assert_eq!(
            refused(b"mg k a b c d e f g h i j k l m n o p q r\r\n"),
            GET_FLAGS_TOO_LONG
        );
        assert_eq!(
            refused(b"md k a b c d e f g h i j k l m n o p q r\r\n"),
            FLAGS_TOO_LONG
        );
        let opaque = [&b"mg k O"[..], &[b'1'; 32], b"\r\n"].concat();
        assert_eq!(refused(&opaque), OPAQUE_TOO_LONG);
        assert_eq!(refused(b"ma k Mx\r\n"), BAD_ARITH_MODE);
        assert_eq!(refused(b"ma k Dx\r\n"), INVALID_OR_DUPLICATE_FLAG);
        assert_eq!(refused(b"mg k M\r\n"), BAD_MODE_LENGTH);
    }

    #[test]
    fn state_shoal_does_not_keep_is_refused() {
        for line in [
            &b"mg k h\r\n"[..],
            b"mg k u\r\n",
            b"mg k N30\r\n",
            b"mg k R30\r\n",
        ] {
            assert_eq!(refused(line), INVALID_FLAG, "{line:?}");
        }
        assert_eq!(refused(b"md k I\r\n"), INVALID_OR_DUPLICATE_FLAG);
        assert_eq!(refused(b"ms k 1 I\r\nx\r\n"), INVALID_FLAG);
        assert_eq!(refused(b"ms k 1 E5\r\nx\r\n"), INVALID_FLAG);
        // ma's N creates the item, which needs no such state.
        let m = meta(b"ma k N30 J5 D2 MD\r\n");
        assert_eq!(
            (m.vivify, m.initial, m.delta, m.incr()),
            (Some(30), 5, 2, false)
        );
    }

    #[test]
    fn ms_skips_its_block_after_a_flag_error() {
        let mut p = Parser::default();
        assert!(matches!(
            p.parse(b"ms k 5 MX\r\nhello\r\n"),
            Parsed::Error {
                line: BAD_SET_MODE,
                consumed: 11,
                ..
            }
        ));
        assert_eq!(p.parse(b"hello\r\nmn\r\n"), Parsed::Skipped(7));
        assert_eq!(p.parse(b"mn\r\n"), Parsed::Request(Request::MetaNoop, 4));
        // A bad length is refused before the block is known: nothing skipped.
        let mut p = Parser::default();
        assert!(matches!(p.parse(b"ms k S5\r\n"), Parsed::Error { .. }));
        assert!(!p.skipping());
    }

    #[test]
    fn ms_reads_its_block() {
        let Parsed::Request(Request::MetaSet(m, data), 27) =
            parse(b"ms k 5 T10 F7 MA c\r\nhello\r\n")
        else {
            panic!()
        };
        assert_eq!(data, b"hello");
        assert_eq!((m.ttl, m.client_flags), (Some(10), 7));
        assert_eq!(m.store_mode(), StoreMode::Append);
        assert!(m.has(b'c') && !m.has(b'k'));
    }

    #[test]
    fn me_prints_what_shoal_knows() {
        let mut out = Vec::new();
        let d = Debug {
            exp: -1,
            la: 2,
            cas: 7,
            size: 5,
        };
        write_debug(&mut out, b"key", true, d);
        assert_eq!(out, b"ME a2V5 exp=-1 la=2 cas=7 size=5\r\n");
        assert!(matches!(
            parse(b"me a2V5 b\r\n"),
            Parsed::Request(Request::MetaDebug { base64: true, .. }, _)
        ));
        assert_eq!(refused(b"me\r\n"), super::super::text::BAD_FORMAT);
    }
}
