//! WebSocket (RFC 6455), sans-IO: the opening handshake's key and
//! sub-protocol choice, and frames: decoding (masking, fragmentation, control
//! frames, limits, UTF-8 of text) into whole messages, and encoding.
//!
//! ```
//! use proto::websocket::{accept_key, write_frame, Message, MessageDecoder, Opcode};
//!
//! assert_eq!(accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
//!
//! // A masked text frame, as a browser sends it.
//! let mut wire = Vec::new();
//! write_frame(&mut wire, true, Opcode::Text, b"PING", Some([1, 2, 3, 4]));
//! let mut decoder = MessageDecoder::new(1 << 20);
//! let (message, used) = decoder.decode(&wire)?;
//! assert_eq!(message, Some(Message::Text(b"PING".to_vec())));
//! assert_eq!(used, wire.len());
//! # Ok::<(), proto::websocket::WsError>(())
//! ```

use base64::Engine as _;
use sha1::{Digest, Sha1};

/// The GUID RFC 6455 §1.3 appends to the key.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The largest control-frame payload (§5.5).
const MAX_CONTROL: u64 = 125;

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`: base64(SHA-1(key + GUID)).
pub fn accept_key(key: &[u8]) -> String {
    let mut sha = Sha1::new();
    sha.update(key);
    sha.update(GUID);
    base64::engine::general_purpose::STANDARD.encode(sha.finalize())
}

/// Whether a `Sec-WebSocket-Key` is what §4.1 asks: base64 of 16 bytes.
pub fn valid_key(key: &[u8]) -> bool {
    key.len() == 24
        && base64::engine::general_purpose::STANDARD
            .decode(key)
            .is_ok_and(|k| k.len() == 16)
}

/// The client offered sub-protocols, none of them supported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnsupportedProtocols;

impl std::fmt::Display for UnsupportedProtocols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no supported WebSocket sub-protocol offered")
    }
}

impl std::error::Error for UnsupportedProtocols {}

/// The sub-protocol to answer with: the first one the client offers (in
/// the order of its `Sec-WebSocket-Protocol` fields) that `supported` has.
/// `Ok(None)` when the client offers none.
pub fn select_protocol<'s>(
    offered: &[&[u8]],
    supported: &[&'s str],
) -> Result<Option<&'s str>, UnsupportedProtocols> {
    let mut any = false;
    for field in offered {
        for token in crate::http::tokens(field) {
            any = true;
            if let Some(p) = supported.iter().find(|p| p.as_bytes() == token) {
                return Ok(Some(p));
            }
        }
    }
    if any {
        Err(UnsupportedProtocols)
    } else {
        Ok(None)
    }
}

/// Appends the `101 Switching Protocols` response.
pub fn write_handshake(out: &mut Vec<u8>, key: &[u8], protocol: Option<&str>) {
    out.extend_from_slice(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ",
    );
    out.extend_from_slice(accept_key(key).as_bytes());
    if let Some(p) = protocol {
        out.extend_from_slice(b"\r\nSec-WebSocket-Protocol: ");
        out.extend_from_slice(p.as_bytes());
    }
    out.extend_from_slice(b"\r\n\r\n");
}

/// A frame's opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    /// The next fragment of a message.
    Continuation,
    /// UTF-8 text.
    Text,
    /// Bytes.
    Binary,
    /// Close (status code and reason).
    Close,
    /// Ping.
    Ping,
    /// Pong.
    Pong,
}

impl Opcode {
    fn from_bits(b: u8) -> Option<Opcode> {
        Some(match b {
            0 => Opcode::Continuation,
            1 => Opcode::Text,
            2 => Opcode::Binary,
            8 => Opcode::Close,
            9 => Opcode::Ping,
            10 => Opcode::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0,
            Opcode::Text => 1,
            Opcode::Binary => 2,
            Opcode::Close => 8,
            Opcode::Ping => 9,
            Opcode::Pong => 10,
        }
    }

    fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// Why the peer's frames are refused; the endpoint then closes with
/// [`WsError::close_code`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsError {
    /// 1002: a frame breaks the protocol (reserved bits or opcode, an
    /// unmasked client frame, a fragmented or long control frame, a stray
    /// continuation, a bad close code).
    Protocol(&'static str),
    /// 1007: a text message or close reason that is not UTF-8.
    InvalidUtf8,
    /// 1009: a frame or message larger than the limit.
    TooBig,
}

impl WsError {
    /// The close status to send.
    pub fn close_code(self) -> u16 {
        match self {
            WsError::Protocol(_) => 1002,
            WsError::InvalidUtf8 => 1007,
            WsError::TooBig => 1009,
        }
    }

    /// The close reason to send.
    pub fn reason(self) -> &'static str {
        match self {
            WsError::Protocol(why) => why,
            WsError::InvalidUtf8 => "invalid UTF-8",
            WsError::TooBig => "message too big",
        }
    }
}

impl std::fmt::Display for WsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.close_code(), self.reason())
    }
}

impl std::error::Error for WsError {}

/// A frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// The last fragment of its message.
    pub fin: bool,
    /// The opcode.
    pub opcode: Opcode,
    /// The masking key (client frames have one).
    pub mask: Option<[u8; 4]>,
    /// Payload bytes.
    pub payload_len: u64,
    /// Header bytes (2 to 14).
    pub header_len: usize,
}

/// Decodes a frame header at the start of `buf`: `Ok(None)` while
/// incomplete. Checks everything the header alone decides (reserved bits
/// and opcodes, control-frame rules, `max_payload`).
pub fn parse_header(buf: &[u8], max_payload: u64) -> Result<Option<FrameHeader>, WsError> {
    let [b0, b1, ..] = *buf else {
        return Ok(None);
    };
    if b0 & 0x70 != 0 {
        return Err(WsError::Protocol("reserved bits set"));
    }
    let fin = b0 & 0x80 != 0;
    let opcode = Opcode::from_bits(b0 & 0x0f).ok_or(WsError::Protocol("reserved opcode"))?;
    let masked = b1 & 0x80 != 0;
    let (payload_len, mut header_len) = match b1 & 0x7f {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(None),
        },
        127 => match buf.get(2..10).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
            Some(b) => {
                let n = u64::from_be_bytes(b);
                if n >> 63 != 0 {
                    return Err(WsError::Protocol("payload length with its top bit set"));
                }
                (n, 10)
            }
            None => return Ok(None),
        },
        n => (u64::from(n), 2),
    };
    if opcode.is_control() {
        if !fin {
            return Err(WsError::Protocol("fragmented control frame"));
        }
        if payload_len > MAX_CONTROL {
            return Err(WsError::Protocol("control frame longer than 125 bytes"));
        }
    }
    if payload_len > max_payload {
        return Err(WsError::TooBig);
    }
    let mask = if masked {
        match buf
            .get(header_len..header_len + 4)
            .and_then(|m| <[u8; 4]>::try_from(m).ok())
        {
            Some(m) => {
                header_len += 4;
                Some(m)
            }
            None => return Ok(None),
        }
    } else {
        None
    };
    Ok(Some(FrameHeader {
        fin,
        opcode,
        mask,
        payload_len,
        header_len,
    }))
}

/// XORs `data` with `mask`, `data[0]` lining up with mask byte `offset % 4`
/// (masking and unmasking are the same operation).
pub fn apply_mask(data: &mut [u8], mask: [u8; 4], offset: usize) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= mask[(offset + i) % 4];
    }
}

/// Appends one frame. Servers send unmasked frames (`mask: None`); clients
/// mask theirs.
pub fn write_frame(
    out: &mut Vec<u8>,
    fin: bool,
    opcode: Opcode,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) {
    out.push(u8::from(fin) << 7 | opcode.bits());
    let m = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(m | n as u8),
        n if n <= 0xffff => {
            out.push(m | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(m | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let start = out.len();
    match mask {
        Some(key) => {
            out.extend_from_slice(&key);
            out.extend_from_slice(payload);
            apply_mask(&mut out[start + 4..], key, 0);
        }
        None => out.extend_from_slice(payload),
    }
}

/// Appends a close frame with `code` and `reason` (cut to fit 125 bytes on
/// a character boundary).
pub fn write_close(out: &mut Vec<u8>, code: u16, reason: &str) {
    let mut cut = reason.len().min(123);
    while !reason.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut payload = code.to_be_bytes().to_vec();
    payload.extend_from_slice(&reason.as_bytes()[..cut]);
    write_frame(out, true, Opcode::Close, &payload, None);
}

/// A whole message (fragments joined, payload unmasked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A text message (valid UTF-8).
    Text(Vec<u8>),
    /// A binary message.
    Binary(Vec<u8>),
    /// A ping: answer with a pong carrying the same payload.
    Ping(Vec<u8>),
    /// A pong.
    Pong(Vec<u8>),
    /// A close: the status code and reason, if it carried one.
    Close(Option<(u16, String)>),
}

/// Whether a close frame may carry `code` (§7.4; 1005, 1006 and 1015 are
/// never sent).
fn valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// Joins a peer's frames into messages. A server's decoder insists that
/// frames be masked (§5.1).
#[derive(Clone, Debug)]
pub struct MessageDecoder {
    max_message: u64,
    require_mask: bool,
    /// A fragmented message being joined: its opcode and bytes so far.
    partial: Option<(Opcode, Vec<u8>)>,
}

impl MessageDecoder {
    /// A server's decoder: masked frames only, messages of at most
    /// `max_message` bytes.
    pub fn new(max_message: u64) -> Self {
        MessageDecoder {
            max_message,
            require_mask: true,
            partial: None,
        }
    }

    /// A client's decoder: the server's frames are unmasked.
    pub fn client(max_message: u64) -> Self {
        MessageDecoder {
            require_mask: false,
            ..MessageDecoder::new(max_message)
        }
    }

    /// Decodes the frames at the start of `buf` until a message is whole:
    /// returns it (or None when the bytes run out first) and how many bytes
    /// were used, which may be more than zero even without a message (its
    /// first fragments). Call again with the rest.
    pub fn decode(&mut self, buf: &[u8]) -> Result<(Option<Message>, usize), WsError> {
        let mut used = 0;
        loop {
            let so_far = self.partial.as_ref().map_or(0, |(_, b)| b.len() as u64);
            let room = self.max_message.saturating_sub(so_far);
            let Some(h) = parse_header(&buf[used..], room.max(MAX_CONTROL))? else {
                return Ok((None, used));
            };
            if self.require_mask && h.mask.is_none() {
                return Err(WsError::Protocol("unmasked client frame"));
            }
            if !h.opcode.is_control() && h.payload_len > room {
                return Err(WsError::TooBig);
            }
            let start = used + h.header_len;
            let Some(end) = usize::try_from(h.payload_len)
                .ok()
                .and_then(|n| start.checked_add(n))
                .filter(|&end| end <= buf.len())
            else {
                return Ok((None, used));
            };
            used = end;
            let mut payload = buf[start..end].to_vec();
            if let Some(mask) = h.mask {
                apply_mask(&mut payload, mask, 0);
            }
            if let Some(message) = self.frame(h, payload)? {
                return Ok((Some(message), used));
            }
        }
    }

    /// Takes one complete frame; returns a message when one is whole.
    fn frame(&mut self, h: FrameHeader, payload: Vec<u8>) -> Result<Option<Message>, WsError> {
        let data = match (h.opcode, &mut self.partial) {
            (Opcode::Ping, _) => return Ok(Some(Message::Ping(payload))),
            (Opcode::Pong, _) => return Ok(Some(Message::Pong(payload))),
            (Opcode::Close, _) => return close_message(&payload).map(Some),
            (Opcode::Continuation, None) => {
                return Err(WsError::Protocol("continuation without a message"))
            }
            (Opcode::Continuation, Some((_, joined))) => {
                joined.extend_from_slice(&payload);
                if !h.fin {
                    return Ok(None);
                }
                self.partial.take()
            }
            (Opcode::Text | Opcode::Binary, Some(_)) => {
                return Err(WsError::Protocol("new message inside a fragmented one"))
            }
            (op, None) if !h.fin => {
                self.partial = Some((op, payload));
                return Ok(None);
            }
            (op, None) => Some((op, payload)),
        };
        Ok(match data {
            Some((Opcode::Text, text)) => {
                if std::str::from_utf8(&text).is_err() {
                    return Err(WsError::InvalidUtf8);
                }
                Some(Message::Text(text))
            }
            Some((_, bytes)) => Some(Message::Binary(bytes)),
            None => None,
        })
    }
}

/// A close frame's payload: empty, or a valid code and a UTF-8 reason.
fn close_message(payload: &[u8]) -> Result<Message, WsError> {
    match payload {
        [] => Ok(Message::Close(None)),
        [_] => Err(WsError::Protocol("close frame of one byte")),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            if !valid_close_code(code) {
                return Err(WsError::Protocol("invalid close code"));
            }
            let reason = std::str::from_utf8(reason).map_err(|_| WsError::InvalidUtf8)?;
            Ok(Message::Close(Some((code, reason.to_owned()))))
        }
    }
}

/// Harness functions for the `websocket_frame` fuzz target and its stable
/// property test; they panic only when an invariant breaks.
#[doc(hidden)]
pub mod fuzzing {
    use super::*;

    /// The largest message the harness's decoders accept (small, so the
    /// 1009 paths are reached).
    const LIMIT: u64 = 4096;

    /// Messages decoded from `data` delivered as `data[..end]` for each end
    /// in turn, and the error that ended the stream, if any.
    fn drive(data: &[u8], ends: &[usize], server: bool) -> (Vec<Message>, Option<WsError>) {
        let mut decoder = if server {
            MessageDecoder::new(LIMIT)
        } else {
            MessageDecoder::client(LIMIT)
        };
        let (mut messages, mut start) = (Vec::new(), 0);
        for &end in ends {
            loop {
                match decoder.decode(&data[start..end]) {
                    Ok((message, used)) => {
                        assert!(start + used <= end);
                        start += used;
                        match message {
                            Some(m) => messages.push(m),
                            None => break,
                        }
                    }
                    Err(e) => return (messages, Some(e)),
                }
            }
        }
        (messages, None)
    }

    /// Feeds `data` as frames from a client (and from a server) and checks:
    ///
    /// * nothing panics; every message respects the limits (control payloads
    ///   of at most 125 bytes, text that is UTF-8, close codes that may be
    ///   sent);
    /// * delivering the bytes whole, one at a time or in chunks of a size
    ///   taken from the input gives the same messages and the same error;
    /// * every message, encoded again as masked frames (data split into
    ///   fragments), decodes to the same message;
    /// * the handshake helpers take any key or offer.
    pub fn fuzz_frames(data: &[u8]) {
        for server in [true, false] {
            let whole = drive(data, &[data.len()], server);
            let bytewise: Vec<usize> = (0..=data.len()).collect();
            assert_eq!(drive(data, &bytewise, server), whole, "byte by byte");
            let chunk = usize::from(data.first().copied().unwrap_or(1)).max(1);
            let mut ends: Vec<usize> = (chunk..data.len()).step_by(chunk).collect();
            ends.push(data.len());
            assert_eq!(drive(data, &ends, server), whole, "in chunks of {chunk}");
            for m in &whole.0 {
                check_message(m);
                round_trip(m, data.len() % 5 + 1);
            }
        }
        let _ = accept_key(data);
        let _ = valid_key(data);
        let _ = select_protocol(&[data], &["resp", "json", "term"]);
        let _ = parse_header(data, LIMIT);
    }

    fn check_message(m: &Message) {
        match m {
            Message::Text(t) => assert!(std::str::from_utf8(t).is_ok()),
            Message::Binary(b) => assert!(b.len() as u64 <= LIMIT),
            Message::Ping(p) | Message::Pong(p) => assert!(p.len() as u64 <= MAX_CONTROL),
            Message::Close(Some((code, reason))) => {
                assert!(valid_close_code(*code));
                assert!(reason.len() <= 123);
            }
            Message::Close(None) => {}
        }
    }

    /// Encodes a message as masked frames, data in `pieces` fragments, and
    /// decodes it again.
    fn round_trip(m: &Message, pieces: usize) {
        let mut wire = Vec::new();
        let mask = Some([0x5a, 0x01, 0xff, 0x80]);
        let (opcode, payload) = match m {
            Message::Text(t) => (Opcode::Text, t.clone()),
            Message::Binary(b) => (Opcode::Binary, b.clone()),
            Message::Ping(p) => (Opcode::Ping, p.clone()),
            Message::Pong(p) => (Opcode::Pong, p.clone()),
            Message::Close(None) => (Opcode::Close, Vec::new()),
            Message::Close(Some((code, reason))) => {
                let mut p = code.to_be_bytes().to_vec();
                p.extend_from_slice(reason.as_bytes());
                (Opcode::Close, p)
            }
        };
        if opcode.is_control() {
            write_frame(&mut wire, true, opcode, &payload, mask);
        } else {
            let size = payload.len().div_ceil(pieces).max(1);
            let mut parts: Vec<&[u8]> = payload.chunks(size).collect();
            if parts.is_empty() {
                parts.push(&[]);
            }
            let last = parts.len() - 1;
            for (i, part) in parts.iter().enumerate() {
                let op = if i == 0 { opcode } else { Opcode::Continuation };
                write_frame(&mut wire, i == last, op, part, mask);
            }
        }
        let (again, used) = MessageDecoder::new(LIMIT)
            .decode(&wire)
            .expect("a message encoded again decodes");
        assert_eq!(again.as_ref(), Some(m));
        assert_eq!(used, wire.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MASK: Option<[u8; 4]> = Some([0x37, 0xfa, 0x21, 0x3d]);

    fn frame(fin: bool, op: Opcode, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_frame(&mut out, fin, op, payload, MASK);
        out
    }

    #[test]
    fn rfc_examples_decode() {
        // RFC 6455 §5.7: a masked "Hello".
        let wire = [
            0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
        ];
        let (m, n) = MessageDecoder::new(100).decode(&wire).unwrap();
        assert_eq!(m, Some(Message::Text(b"Hello".to_vec())));
        assert_eq!(n, wire.len());
        assert_eq!(frame(true, Opcode::Text, b"Hello"), wire);
        // Unmasked "Hel" + "lo" for a client decoder.
        let wire = [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f];
        let (m, _) = MessageDecoder::client(100).decode(&wire).unwrap();
        assert_eq!(m, Some(Message::Text(b"Hello".to_vec())));
    }

    #[test]
    fn fragments_join_around_control_frames() {
        let mut wire = frame(false, Opcode::Binary, b"ab");
        wire.extend(frame(true, Opcode::Ping, b"p"));
        wire.extend(frame(true, Opcode::Continuation, b"cd"));
        let mut d = MessageDecoder::new(100);
        let (m, n) = d.decode(&wire).unwrap();
        assert_eq!(m, Some(Message::Ping(b"p".to_vec())));
        let (m, k) = d.decode(&wire[n..]).unwrap();
        assert_eq!(m, Some(Message::Binary(b"abcd".to_vec())));
        assert_eq!(n + k, wire.len());
    }

    #[test]
    fn lengths_of_16_and_64_bits() {
        for len in [125, 126, 65_535, 65_536, 70_000] {
            let payload = vec![b'x'; len];
            let wire = frame(true, Opcode::Binary, &payload);
            let (m, n) = MessageDecoder::new(1 << 20).decode(&wire).unwrap();
            assert_eq!((m, n), (Some(Message::Binary(payload)), wire.len()));
            assert_eq!(
                MessageDecoder::new(1 << 20)
                    .decode(&wire[..wire.len() - 1])
                    .unwrap(),
                (None, 0)
            );
        }
    }

    #[test]
    fn protocol_violations() {
        let err = |wire: &[u8]| MessageDecoder::new(100).decode(wire).unwrap_err();
        let mut w = frame(true, Opcode::Text, b"x");
        w[0] |= 0x40;
        assert_eq!(err(&w).close_code(), 1002);
        let mut unmasked = Vec::new();
        write_frame(&mut unmasked, true, Opcode::Text, b"x", None);
        assert_eq!(err(&unmasked).close_code(), 1002);
        assert_eq!(err(&frame(false, Opcode::Ping, b"")).close_code(), 1002);
        assert_eq!(
            err(&frame(true, Opcode::Ping, &[0; 126])).close_code(),
            1002
        );
        assert_eq!(
            err(&frame(true, Opcode::Continuation, b"x")).close_code(),
            1002
        );
        assert_eq!(err(&frame(true, Opcode::Text, &[0xff])).close_code(), 1007);
        assert_eq!(
            err(&frame(true, Opcode::Binary, &[0; 101])).close_code(),
            1009
        );
        assert_eq!(
            err(&frame(true, Opcode::Close, &[0x03, 0xed])).close_code(),
            1002
        );
        assert_eq!(err(&frame(true, Opcode::Close, &[1])).close_code(), 1002);
        let mut two = frame(false, Opcode::Text, b"a");
        two.extend(frame(true, Opcode::Text, b"b"));
        assert_eq!(err(&two).close_code(), 1002);
        let mut big = frame(false, Opcode::Binary, &[0; 60]);
        big.extend(frame(true, Opcode::Continuation, &[0; 60]));
        assert_eq!(err(&big).close_code(), 1009);
    }

    #[test]
    fn close_frames() {
        let (m, _) = MessageDecoder::new(100)
            .decode(&frame(true, Opcode::Close, b"\x03\xe8bye"))
            .unwrap();
        assert_eq!(m, Some(Message::Close(Some((1000, "bye".into())))));
        let mut out = Vec::new();
        write_close(&mut out, 1001, &"é".repeat(100));
        assert_eq!(out.len(), 2 + 2 + 122);
    }

    #[test]
    fn handshake_pieces() {
        assert!(valid_key(b"dGhlIHNhbXBsZSBub25jZQ=="));
        assert!(!valid_key(b"short"));
        let supported = ["resp", "json", "term"];
        assert_eq!(
            select_protocol(&[b"x, term", b"json"], &supported),
            Ok(Some("term"))
        );
        assert_eq!(select_protocol(&[], &supported), Ok(None));
        assert_eq!(
            select_protocol(&[b"chat"], &supported),
            Err(UnsupportedProtocols)
        );
        let mut out = Vec::new();
        write_handshake(&mut out, b"dGhlIHNhbXBsZSBub25jZQ==", Some("json"));
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
        assert!(text.ends_with("Sec-WebSocket-Protocol: json\r\n\r\n"));
    }
}
