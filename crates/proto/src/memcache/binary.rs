//! memcached's binary protocol: requests and responses with a 24-byte header
//! (magic, opcode, key length, extras length, data type, vbucket or status,
//! body length, opaque, CAS), then extras, key and value.
//!
//! The yardstick is memcached 1.6 (`proto_bin.c`): which header lengths each
//! opcode accepts, the status and text of every error, which errors close
//! the connection. [`parse`] decodes one request from the front of a buffer
//! once its header, extras and key are there (and its value, unless that is
//! over the size limit); [`write_response`] and [`write_error`] encode
//! replies.
//!
//! ```
//! use proto::memcache::binary::{self, Command, Frame, Status};
//!
//! // GETK "a", opaque 7.
//! let mut req = vec![0x80, 0x0c, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7];
//! req.extend_from_slice(&[0; 8]);
//! req.push(b'a');
//! let parsed = binary::parse(&req, 1 << 20).unwrap().unwrap();
//! assert_eq!(parsed.consumed, req.len());
//! let Frame::Request(r) = parsed.frame else { panic!() };
//! assert_eq!(r.command, Command::Get { key: b"a", with_key: true, touch: None });
//!
//! // A miss: GETK answers with the key and no text.
//! let mut out = Vec::new();
//! binary::write_response(&mut out, &r.header, Status::KeyNotFound, 0, &[], b"a", b"");
//! assert_eq!(out.len(), 25);
//! assert_eq!(&out[..2], &[0x81, 0x0c]);
//! # Ok::<(), proto::memcache::binary::BinaryError>(())
//! ```

use std::fmt;

#[doc(hidden)]
pub mod fuzzing;

/// The first byte of every request.
pub const REQUEST_MAGIC: u8 = 0x80;
/// The first byte of every response.
pub const RESPONSE_MAGIC: u8 = 0x81;
/// Header length of requests and responses.
pub const HEADER_LEN: usize = 24;
/// memcached's `KEY_MAX_LENGTH`: a longer key is "Invalid arguments" (the
/// header allows 65535).
pub const KEY_MAX: usize = 250;

/// Opcodes memcached 1.6 serves (protocol_binary.h).
pub mod opcode {
    #![allow(missing_docs)]
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    pub const VERBOSITY: u8 = 0x1b;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;
    pub const SASL_LIST_MECHS: u8 = 0x20;
    pub const SASL_AUTH: u8 = 0x21;
    pub const SASL_STEP: u8 = 0x22;
}

/// memcached's `MAX_SASL_MECH_LEN`: a longer mechanism name is "Invalid
/// arguments".
pub const SASL_MECH_MAX: usize = 32;

/// The most SASL data a SASL_AUTH or SASL_STEP may carry (a PLAIN token is
/// two names and a password).
pub const SASL_DATA_MAX: u64 = 4096;

/// Response statuses, with the texts memcached's `write_bin_error` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// 0x0000.
    Success,
    /// 0x0001 "Not found".
    KeyNotFound,
    /// 0x0002 "Data exists for key.".
    KeyExists,
    /// 0x0003 "Too large.".
    TooLarge,
    /// 0x0004 "Invalid arguments".
    InvalidArguments,
    /// 0x0005 "Not stored.".
    NotStored,
    /// 0x0006 "Non-numeric server-side value for incr or decr".
    NonNumeric,
    /// 0x0020 "Auth failure".
    AuthError,
    /// 0x0021 "Auth continue".
    AuthContinue,
    /// 0x0081 "Unknown command".
    UnknownCommand,
    /// 0x0082 "Out of memory".
    OutOfMemory,
    /// 0x0084 "Internal error" (the spec's; memcached itself never sends it).
    InternalError,
}

impl Status {
    /// The status field's value.
    pub fn code(self) -> u16 {
        match self {
            Status::Success => 0x0000,
            Status::KeyNotFound => 0x0001,
            Status::KeyExists => 0x0002,
            Status::TooLarge => 0x0003,
            Status::InvalidArguments => 0x0004,
            Status::NotStored => 0x0005,
            Status::NonNumeric => 0x0006,
            Status::AuthError => 0x0020,
            Status::AuthContinue => 0x0021,
            Status::UnknownCommand => 0x0081,
            Status::OutOfMemory => 0x0082,
            Status::InternalError => 0x0084,
        }
    }

    /// The body memcached sends with this status as an error.
    pub fn text(self) -> &'static [u8] {
        match self {
            Status::Success => b"",
            Status::KeyNotFound => b"Not found",
            Status::KeyExists => b"Data exists for key.",
            Status::TooLarge => b"Too large.",
            Status::InvalidArguments => b"Invalid arguments",
            Status::NotStored => b"Not stored.",
            Status::NonNumeric => b"Non-numeric server-side value for incr or decr",
            Status::AuthError => b"Auth failure",
            Status::AuthContinue => b"Auth continue",
            Status::UnknownCommand => b"Unknown command",
            Status::OutOfMemory => b"Out of memory",
            Status::InternalError => b"Internal error",
        }
    }
}

/// A request header. The response echoes `opcode` and `opaque`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// The command.
    pub opcode: u8,
    /// Key length.
    pub key_len: u16,
    /// Extras length.
    pub extras_len: u8,
    /// Data type (memcached ignores it).
    pub data_type: u8,
    /// vbucket id (memcached ignores it).
    pub vbucket: u16,
    /// Extras, key and value together.
    pub body_len: u32,
    /// Anything the client likes; echoed in the response.
    pub opaque: u32,
    /// A CAS value to compare (0: none).
    pub cas: u64,
}

impl Header {
    /// Decodes the fields after the magic byte.
    fn decode(b: &[u8; HEADER_LEN]) -> Header {
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Header {
            opcode: b[1],
            key_len: u16_at(2),
            extras_len: b[4],
            data_type: b[5],
            vbucket: u16_at(6),
            body_len: u32_at(8),
            opaque: u32_at(12),
            cas: (u64::from(u32_at(16)) << 32) | u64::from(u32_at(20)),
        }
    }

    /// The request header's 24 bytes, magic included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(REQUEST_MAGIC);
        out.push(self.opcode);
        out.extend_from_slice(&self.key_len.to_be_bytes());
        out.push(self.extras_len);
        out.push(self.data_type);
        out.extend_from_slice(&self.vbucket.to_be_bytes());
        out.extend_from_slice(&self.body_len.to_be_bytes());
        out.extend_from_slice(&self.opaque.to_be_bytes());
        out.extend_from_slice(&self.cas.to_be_bytes());
    }

    /// Whether the opcode is a quiet variant: no reply on success (and, for
    /// the gets, none on a miss either); errors are still answered.
    pub fn is_quiet(&self) -> bool {
        use opcode::*;
        matches!(
            self.opcode,
            GETQ | GETKQ
                | GATQ
                | GATKQ
                | SETQ
                | ADDQ
                | REPLACEQ
                | DELETEQ
                | INCREMENTQ
                | DECREMENTQ
                | QUITQ
                | FLUSHQ
                | APPENDQ
                | PREPENDQ
        )
    }
}

/// The storage commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreMode {
    /// SET(Q).
    Set,
    /// ADD(Q).
    Add,
    /// REPLACE(Q).
    Replace,
    /// APPEND(Q).
    Append,
    /// PREPEND(Q).
    Prepend,
}

/// What a request asks, its extras decoded. Quiet variants decode like
/// their loud twins; [`Header::is_quiet`] tells them apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Command<'a> {
    /// GET, GETK (`with_key`), and GAT, GATK with `touch` (the exptime).
    Get {
        /// The key.
        key: &'a [u8],
        /// GETK/GATK: the response carries the key.
        with_key: bool,
        /// GAT/GATK: the new exptime.
        touch: Option<u32>,
    },
    /// TOUCH: a new exptime; the response carries the flags, not the value.
    Touch {
        /// The key.
        key: &'a [u8],
        /// The new exptime.
        exptime: u32,
    },
    /// SET, ADD, REPLACE (flags and exptime from the extras) and APPEND,
    /// PREPEND (no extras: flags and exptime 0).
    Store {
        /// Which one.
        mode: StoreMode,
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
        /// Client flags.
        flags: u32,
        /// Expiry, as memcached reads exptimes.
        exptime: u32,
    },
    /// DELETE.
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// INCREMENT, DECREMENT: `exptime` 0xffffffff means "do not create".
    Arith {
        /// INCREMENT or DECREMENT.
        incr: bool,
        /// The key.
        key: &'a [u8],
        /// By how much.
        delta: u64,
        /// The value a missing item is created with.
        initial: u64,
        /// The created item's exptime, or 0xffffffff.
        exptime: u32,
    },
    /// QUIT: reply (unless quiet), then close.
    Quit,
    /// FLUSH with an optional delay (0: now).
    Flush {
        /// Delay, as memcached reads exptimes.
        delay: u32,
    },
    /// NOOP.
    Noop,
    /// VERSION.
    Version,
    /// VERBOSITY (memcached 1.4's; answered with success).
    Verbosity {
        /// The requested level.
        level: u32,
    },
    /// STAT with a group ("" for the general statistics).
    Stat {
        /// The group: the key.
        group: &'a [u8],
    },
    /// SASL_LIST_MECHS: the mechanisms the server offers.
    SaslListMechs,
    /// SASL_AUTH (`step` false) or SASL_STEP: a mechanism (the key) and
    /// its data (the value).
    SaslAuth {
        /// SASL_STEP.
        step: bool,
        /// The mechanism's name.
        mechanism: &'a [u8],
        /// The mechanism's data (PLAIN: `authzid NUL authcid NUL passwd`).
        data: &'a [u8],
    },
}

/// A request: its header and what it asks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Request<'a> {
    /// The header (for the response's opcode, opaque and the CAS compare).
    pub header: Header,
    /// The command.
    pub command: Command<'a>,
}

/// One decoded request, or one memcached answers with an error and goes on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Frame<'a> {
    /// A request to execute.
    Request(Request<'a>),
    /// A storage request whose value is longer than the limit: memcached
    /// answers "Too large.", discards the value (the `skip` bytes), and for
    /// SET(Q) also drops the item the key had.
    TooLarge {
        /// The header.
        header: Header,
        /// The key.
        key: &'a [u8],
    },
    /// An opcode memcached does not serve: "Unknown command", the rest of
    /// the body skipped.
    Unknown {
        /// The header.
        header: Header,
    },
}

/// [`parse`]'s result: the frame, the bytes it took from the buffer, and how
/// many more bytes of its body (not buffered yet, perhaps) to discard.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Parsed<'a> {
    /// What was read.
    pub frame: Frame<'a>,
    /// Bytes taken from the front of the buffer.
    pub consumed: usize,
    /// Bytes after those to discard as they arrive: a too-large value, an
    /// unknown command's body, bytes past what STAT, TOUCH and GAT read.
    pub skip: u64,
}

/// A request memcached refuses and then closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryError {
    /// The first byte is not 0x80: closed without a reply.
    BadMagic(u8),
    /// The key and extras are longer than the body: "Unknown command", then
    /// closed.
    BadLengths(Header),
    /// A key over 250 bytes, or lengths the opcode does not take: "Invalid
    /// arguments", then closed.
    InvalidArguments(Header),
}

impl BinaryError {
    /// The request header and status to answer with before closing (None:
    /// close without a reply).
    pub fn reply(&self) -> Option<(Header, Status)> {
        match *self {
            BinaryError::BadMagic(_) => None,
            BinaryError::BadLengths(h) => Some((h, Status::UnknownCommand)),
            BinaryError::InvalidArguments(h) => Some((h, Status::InvalidArguments)),
        }
    }
}

impl fmt::Display for BinaryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BinaryError::BadMagic(m) => write!(f, "invalid magic: {m:#04x}"),
            BinaryError::BadLengths(h) => write!(
                f,
                "key ({}) and extras ({}) longer than the body ({})",
                h.key_len, h.extras_len, h.body_len
            ),
            BinaryError::InvalidArguments(h) => {
                write!(f, "invalid lengths for opcode {:#04x}", h.opcode)
            }
        }
    }
}

impl std::error::Error for BinaryError {}

/// Decodes the request at the front of `buf`. `Ok(None)`: more bytes are
/// needed. A value longer than `max_value` is not waited for: the frame is
/// [`Frame::TooLarge`] as soon as the key is there.
///
/// The checks and their order are memcached's: magic; then, once header,
/// extras and key are in, key and extras within the body, the key's
/// length, the opcode's lengths.
pub fn parse(buf: &[u8], max_value: u64) -> Result<Option<Parsed<'_>>, BinaryError> {
    let Some(head) = buf.first_chunk::<HEADER_LEN>() else {
        return Ok(None);
    };
    if head[0] != REQUEST_MAGIC {
        return Err(BinaryError::BadMagic(head[0]));
    }
    let h = Header::decode(head);
    let extras_len = usize::from(h.extras_len);
    let key_len = usize::from(h.key_len);
    let key_end = HEADER_LEN + extras_len + key_len;
    if buf.len() < key_end {
        return Ok(None);
    }
    let body_len = u64::from(h.body_len);
    let fixed_len = (extras_len + key_len) as u64;
    if fixed_len > body_len {
        return Err(BinaryError::BadLengths(h));
    }
    if key_len > KEY_MAX {
        return Err(BinaryError::InvalidArguments(h));
    }
    let extras = &buf[HEADER_LEN..HEADER_LEN + extras_len];
    let key = &buf[HEADER_LEN + extras_len..key_end];
    let rest = body_len - fixed_len;
    let invalid = || Err(BinaryError::InvalidArguments(h));
    let exact = extras_len == 0 && key_len == 0 && body_len == 0;
    let keyed = |want_extras: usize| key_len > 0 && extras_len == want_extras;
    // Everything is read once header, extras and key are in, except a
    // storage command's value; `rest` past what a command reads is skipped.
    let (command, skip) = {
        use opcode::*;
        match h.opcode {
            GET | GETQ | GETK | GETKQ if keyed(0) && rest == 0 => {
                let with_key = matches!(h.opcode, GETK | GETKQ);
                let touch = None;
                (
                    Command::Get {
                        key,
                        with_key,
                        touch,
                    },
                    0,
                )
            }
            GAT | GATQ | GATK | GATKQ if keyed(4) => {
                let with_key = matches!(h.opcode, GATK | GATKQ);
                let touch = Some(be_u32(extras, 0));
                (
                    Command::Get {
                        key,
                        with_key,
                        touch,
                    },
                    rest,
                )
            }
            TOUCH if keyed(4) => {
                let exptime = be_u32(extras, 0);
                (Command::Touch { key, exptime }, rest)
            }
            SET | SETQ | ADD | ADDQ | REPLACE | REPLACEQ | APPEND | APPENDQ | PREPEND
            | PREPENDQ => {
                let (mode, want_extras) = match h.opcode {
                    SET | SETQ => (StoreMode::Set, 8),
                    ADD | ADDQ => (StoreMode::Add, 8),
                    REPLACE | REPLACEQ => (StoreMode::Replace, 8),
                    APPEND | APPENDQ => (StoreMode::Append, 0),
                    _ => (StoreMode::Prepend, 0),
                };
                if !keyed(want_extras) {
                    return invalid();
                }
                if rest > max_value {
                    return Ok(Some(Parsed {
                        frame: Frame::TooLarge { header: h, key },
                        consumed: key_end,
                        skip: rest,
                    }));
                }
                // `rest` is at most `max_value` here, which the caller
                // keeps within memory.
                let end = key_end + rest as usize;
                let Some(value) = buf.get(key_end..end) else {
                    return Ok(None);
                };
                let (flags, exptime) = match want_extras {
                    8 => (be_u32(extras, 0), be_u32(extras, 4)),
                    _ => (0, 0),
                };
                let command = Command::Store {
                    mode,
                    key,
                    value,
                    flags,
                    exptime,
                };
                return Ok(Some(Parsed {
                    frame: Frame::Request(Request { header: h, command }),
                    consumed: end,
                    skip: 0,
                }));
            }
            SASL_AUTH | SASL_STEP => {
                if !keyed(0) || key_len > SASL_MECH_MAX || rest > SASL_DATA_MAX {
                    return invalid();
                }
                // `rest` is at most SASL_DATA_MAX here.
                let end = key_end + rest as usize;
                let Some(data) = buf.get(key_end..end) else {
                    return Ok(None);
                };
                let command = Command::SaslAuth {
                    step: h.opcode == SASL_STEP,
                    mechanism: key,
                    data,
                };
                return Ok(Some(Parsed {
                    frame: Frame::Request(Request { header: h, command }),
                    consumed: end,
                    skip: 0,
                }));
            }
            SASL_LIST_MECHS if exact => (Command::SaslListMechs, 0),
            DELETE | DELETEQ if keyed(0) && rest == 0 => (Command::Delete { key }, 0),
            INCREMENT | INCREMENTQ | DECREMENT | DECREMENTQ if keyed(20) && rest == 0 => {
                let command = Command::Arith {
                    incr: matches!(h.opcode, INCREMENT | INCREMENTQ),
                    key,
                    delta: be_u64(extras, 0),
                    initial: be_u64(extras, 8),
                    exptime: be_u32(extras, 16),
                };
                (command, 0)
            }
            QUIT | QUITQ if exact => (Command::Quit, 0),
            FLUSH | FLUSHQ if key_len == 0 && rest == 0 && matches!(extras_len, 0 | 4) => {
                let delay = if extras_len == 4 {
                    be_u32(extras, 0)
                } else {
                    0
                };
                (Command::Flush { delay }, 0)
            }
            NOOP if exact => (Command::Noop, 0),
            VERSION if exact => (Command::Version, 0),
            VERBOSITY if key_len == 0 && extras_len == 4 && rest == 0 => (
                Command::Verbosity {
                    level: be_u32(extras, 0),
                },
                0,
            ),
            STAT if extras_len == 0 => (Command::Stat { group: key }, rest),
            GET | GETQ | GETK | GETKQ | GAT | GATQ | GATK | GATKQ | TOUCH | DELETE | DELETEQ
            | INCREMENT | INCREMENTQ | DECREMENT | DECREMENTQ | QUIT | QUITQ | FLUSH | FLUSHQ
            | NOOP | VERSION | VERBOSITY | STAT | SASL_LIST_MECHS => return invalid(),
            _ => {
                return Ok(Some(Parsed {
                    frame: Frame::Unknown { header: h },
                    consumed: key_end,
                    skip: rest,
                }))
            }
        }
    };
    Ok(Some(Parsed {
        frame: Frame::Request(Request { header: h, command }),
        consumed: key_end,
        skip,
    }))
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(w)
}

fn be_u64(b: &[u8], at: usize) -> u64 {
    (u64::from(be_u32(b, at)) << 32) | u64::from(be_u32(b, at + 4))
}

/// Appends a response to `request`: its opcode and opaque, `status`, `cas`,
/// then extras (`flags` when `extras_len` is 4), key and value. The value is
/// written as given; use [`write_error`] for memcached's error texts.
pub fn write_response(
    out: &mut Vec<u8>,
    request: &Header,
    status: Status,
    cas: u64,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) {
    write_response_header(
        out,
        request,
        status,
        cas,
        extras.len() as u8,
        key.len() as u16,
        value.len(),
    );
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Appends just a response header whose body (extras, key and a
/// `value_len`-byte value) the caller writes next, for values that are
/// copied straight into `out`.
pub fn write_response_header(
    out: &mut Vec<u8>,
    request: &Header,
    status: Status,
    cas: u64,
    extras_len: u8,
    key_len: u16,
    value_len: usize,
) {
    let body_len = usize::from(extras_len) + usize::from(key_len) + value_len;
    out.push(RESPONSE_MAGIC);
    out.push(request.opcode);
    out.extend_from_slice(&key_len.to_be_bytes());
    out.push(extras_len);
    out.push(0);
    out.extend_from_slice(&status.code().to_be_bytes());
    // Bodies come from items of at most `item-size-max` bytes.
    out.extend_from_slice(&(body_len as u32).to_be_bytes());
    out.extend_from_slice(&request.opaque.to_be_bytes());
    out.extend_from_slice(&cas.to_be_bytes());
}

/// Appends memcached's error response: `status` with its text as the body
/// and CAS 0.
pub fn write_error(out: &mut Vec<u8>, request: &Header, status: Status) {
    write_response(out, request, status, 0, &[], &[], status.text());
}

/// Encodes a request (for clients and tests): header fields from `header`
/// except the lengths, which follow `extras`, `key` and `value`.
pub fn encode_request(out: &mut Vec<u8>, header: &Header, extras: &[u8], key: &[u8], value: &[u8]) {
    let h = Header {
        key_len: key.len() as u16,
        extras_len: extras.len() as u8,
        body_len: (extras.len() + key.len() + value.len()) as u32,
        ..*header
    };
    h.encode(out);
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

impl Request<'_> {
    /// The request's bytes as a client sends them (the inverse of
    /// [`parse`] for a request whose body it read whole).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut extras = Vec::with_capacity(20);
        let (key, value): (&[u8], &[u8]) = match &self.command {
            Command::Get { key, touch, .. } => {
                if let Some(t) = touch {
                    extras.extend_from_slice(&t.to_be_bytes());
                }
                (key, &[])
            }
            Command::Touch { key, exptime } => {
                extras.extend_from_slice(&exptime.to_be_bytes());
                (key, &[])
            }
            Command::Store {
                mode,
                key,
                value,
                flags,
                exptime,
            } => {
                if matches!(mode, StoreMode::Set | StoreMode::Add | StoreMode::Replace) {
                    extras.extend_from_slice(&flags.to_be_bytes());
                    extras.extend_from_slice(&exptime.to_be_bytes());
                }
                (key, value)
            }
            Command::Delete { key } => (key, &[]),
            Command::Arith {
                key,
                delta,
                initial,
                exptime,
                ..
            } => {
                extras.extend_from_slice(&delta.to_be_bytes());
                extras.extend_from_slice(&initial.to_be_bytes());
                extras.extend_from_slice(&exptime.to_be_bytes());
                (key, &[])
            }
            Command::Flush { delay } => {
                if self.header.extras_len == 4 {
                    extras.extend_from_slice(&delay.to_be_bytes());
                }
                (&[], &[])
            }
            Command::Verbosity { level } => {
                extras.extend_from_slice(&level.to_be_bytes());
                (&[], &[])
            }
            Command::Stat { group } => (group, &[]),
            Command::SaslAuth {
                mechanism, data, ..
            } => (mechanism, data),
            Command::Quit | Command::Noop | Command::Version | Command::SaslListMechs => (&[], &[]),
        };
        encode_request(out, &self.header, &extras, key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_requests_are_read_and_bounded() {
        use fuzzing::request_bytes;
        let auth = request_bytes(opcode::SASL_AUTH, &[], b"PLAIN", b"\0user\0pass");
        let p = parse(&auth, 1 << 20).expect("valid").expect("whole");
        assert_eq!(p.consumed, auth.len());
        assert!(matches!(
            p.frame,
            Frame::Request(Request {
                command: Command::SaslAuth {
                    step: false,
                    mechanism: b"PLAIN",
                    data: b"\0user\0pass"
                },
                ..
            })
        ));
        assert!(parse(&auth[..auth.len() - 1], 1 << 20)
            .expect("valid")
            .is_none());
        let list = request_bytes(opcode::SASL_LIST_MECHS, &[], &[], &[]);
        let p = parse(&list, 1 << 20).expect("valid").expect("whole");
        assert!(matches!(
            p.frame,
            Frame::Request(Request {
                command: Command::SaslListMechs,
                ..
            })
        ));
        let long = request_bytes(opcode::SASL_AUTH, &[], &[b'M'; 33], b"x");
        assert!(matches!(
            parse(&long, 1 << 20),
            Err(BinaryError::InvalidArguments(_))
        ));
        let big = request_bytes(opcode::SASL_STEP, &[], b"PLAIN", &[0; 5000]);
        assert!(matches!(
            parse(&big, 1 << 20),
            Err(BinaryError::InvalidArguments(_))
        ));
        assert_eq!(Status::AuthError.code(), 0x20);
        assert_eq!(Status::AuthError.text(), b"Auth failure");
    }

    fn header(opcode: u8) -> Header {
        Header {
            opcode,
            key_len: 0,
            extras_len: 0,
            data_type: 0,
            vbucket: 0,
            body_len: 0,
            opaque: 0xdead_beef,
            cas: 0,
        }
    }

    fn request(opcode: u8, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_request(&mut out, &header(opcode), extras, key, value);
        out
    }

    fn parse_all(buf: &[u8]) -> Result<Option<Parsed<'_>>, BinaryError> {
        parse(buf, 1 << 20)
    }

    #[test]
    fn set_with_flags_and_exptime() {
        let extras = [0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 60];
        let buf = request(opcode::SETQ, &extras, b"k", b"hello");
        let p = parse_all(&buf).unwrap().unwrap();
        assert_eq!(p.consumed, buf.len());
        assert_eq!(p.skip, 0);
        let Frame::Request(r) = p.frame else { panic!() };
        assert!(r.header.is_quiet());
        assert_eq!(
            r.command,
            Command::Store {
                mode: StoreMode::Set,
                key: b"k",
                value: b"hello",
                flags: 0xffff_fffe,
                exptime: 60
            }
        );
        let mut again = Vec::new();
        r.encode(&mut again);
        assert_eq!(again, buf);
    }

    #[test]
    fn needs_every_byte_it_reads() {
        let buf = request(opcode::SET, &[0; 8], b"key", b"value");
        for n in 0..buf.len() {
            assert_eq!(parse_all(&buf[..n]), Ok(None), "{n} bytes");
        }
        assert!(parse_all(&buf).unwrap().is_some());
    }

    #[test]
    fn bad_magic_closes_without_reply() {
        let mut buf = request(opcode::NOOP, &[], &[], &[]);
        buf[0] = 0x81;
        let e = parse_all(&buf).unwrap_err();
        assert_eq!(e, BinaryError::BadMagic(0x81));
        assert_eq!(e.reply(), None);
    }

    #[test]
    fn key_and_extras_past_the_body_is_unknown_command() {
        let mut buf = request(opcode::GET, &[], b"abc", &[]);
        buf[11] = 2; // body length 2 < key length 3
        let e = parse_all(&buf).unwrap_err();
        assert_eq!(e.reply().unwrap().1, Status::UnknownCommand);
    }

    #[test]
    fn key_limit_is_250() {
        let ok = request(opcode::GET, &[], &[b'a'; 250], &[]);
        assert!(parse_all(&ok).unwrap().is_some());
        let long = request(opcode::GET, &[], &[b'a'; 251], &[]);
        let e = parse_all(&long).unwrap_err();
        assert_eq!(e.reply().unwrap().1, Status::InvalidArguments);
    }

    #[test]
    fn lengths_each_opcode_takes() {
        let invalid = |buf: Vec<u8>| {
            assert!(
                matches!(parse_all(&buf), Err(BinaryError::InvalidArguments(_))),
                "{buf:?}"
            )
        };
        invalid(request(opcode::GET, &[], &[], &[]));
        invalid(request(opcode::GET, &[0; 4], b"k", &[]));
        invalid(request(opcode::GET, &[], b"k", b"v"));
        invalid(request(opcode::SET, &[], b"k", b"v"));
        invalid(request(opcode::SET, &[0; 8], &[], b"v"));
        invalid(request(opcode::APPEND, &[0; 8], b"k", b"v"));
        invalid(request(opcode::DELETE, &[0; 4], b"k", &[]));
        invalid(request(opcode::INCREMENT, &[0; 8], b"k", &[]));
        invalid(request(opcode::NOOP, &[], &[], b"x"));
        invalid(request(opcode::QUIT, &[], b"k", &[]));
        invalid(request(opcode::FLUSH, &[], b"k", &[]));
        invalid(request(opcode::FLUSH, &[0; 8], &[], &[]));
        invalid(request(opcode::TOUCH, &[0; 4], &[], &[]));
        invalid(request(opcode::GAT, &[0; 8], b"k", &[]));
        invalid(request(opcode::STAT, &[0; 4], &[], &[]));
        invalid(request(opcode::VERBOSITY, &[], &[], &[]));
    }

    #[test]
    fn incr_extras() {
        let mut extras = Vec::new();
        extras.extend_from_slice(&5u64.to_be_bytes());
        extras.extend_from_slice(&10u64.to_be_bytes());
        extras.extend_from_slice(&u32::MAX.to_be_bytes());
        let buf = request(opcode::DECREMENTQ, &extras, b"n", &[]);
        let p = parse_all(&buf).unwrap().unwrap();
        let Frame::Request(r) = p.frame else { panic!() };
        assert_eq!(
            r.command,
            Command::Arith {
                incr: false,
                key: b"n",
                delta: 5,
                initial: 10,
                exptime: u32::MAX
            }
        );
    }

    #[test]
    fn too_large_value_is_not_waited_for() {
        let mut buf = request(opcode::SET, &[0; 8], b"big", &[]);
        buf[8..12].copy_from_slice(&(11 + 2_000_000u32).to_be_bytes());
        let p = parse(&buf, 1 << 20).unwrap().unwrap();
        assert_eq!(p.consumed, buf.len());
        assert_eq!(p.skip, 2_000_000);
        assert_eq!(
            p.frame,
            Frame::TooLarge {
                header: Header {
                    key_len: 3,
                    extras_len: 8,
                    body_len: 2_000_011,
                    ..header(opcode::SET)
                },
                key: b"big"
            }
        );
    }

    #[test]
    fn unknown_opcode_skips_its_body() {
        let buf = request(0x30, &[], b"key", b"value");
        let p = parse_all(&buf).unwrap().unwrap();
        assert_eq!(p.consumed, 24 + 3);
        assert_eq!(p.skip, 5);
        assert!(matches!(p.frame, Frame::Unknown { .. }));
    }

    #[test]
    fn responses() {
        let h = header(opcode::GETK);
        let mut out = Vec::new();
        write_response(&mut out, &h, Status::Success, 7, &[0, 0, 0, 1], b"k", b"v");
        assert_eq!(
            out,
            [
                &[0x81, 0x0c, 0, 1, 4, 0, 0, 0, 0, 0, 0, 6, 0xde, 0xad, 0xbe, 0xef][..],
                &7u64.to_be_bytes(),
                &[0, 0, 0, 1, b'k', b'v']
            ]
            .concat()
        );
        out.clear();
        write_error(&mut out, &header(opcode::DELETE), Status::KeyNotFound);
        assert_eq!(&out[6..8], &[0, 1]);
        assert_eq!(&out[24..], b"Not found");
    }
}
