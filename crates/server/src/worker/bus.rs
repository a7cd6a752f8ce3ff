//! Messages between workers: requests that need every worker's answer
//! (CLIENT LIST, CLIENT KILL, CLIENT UNBLOCK) and notices (CONFIG SET, keys
//! that blocked clients may now find ready). A message goes into
//! the receiver's mailbox in the segment; a one-byte datagram to the
//! receiver's abstract Unix socket wakes its event loop (only when the mailbox
//! says a wake-up is owed, so a burst costs one datagram).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::rc::Rc;
use std::time::Duration;

use engine::{ClientType, KillFilter};
use store::{Handle, Sent};
use tokio::sync::Notify;

use crate::error::{io, Error};

/// Request: the receiver's CLIENT LIST lines (payload: ids, u64 LE each).
pub(crate) const LIST_REQUEST: u32 = 1;
/// Reply: a piece of CLIENT LIST text, more to come.
pub(crate) const LIST_PART: u32 = 2;
/// Reply: the last piece of CLIENT LIST text.
pub(crate) const LIST_REPLY: u32 = 3;
/// Request: close the clients a filter selects (payload: the filter).
pub(crate) const KILL_REQUEST: u32 = 4;
/// Reply: how many were closed (u64 LE).
pub(crate) const KILL_REPLY: u32 = 5;
/// Notice: keys were written that the receiver's blocked clients wait on
/// (payload: [`encode_keys`]).
pub(crate) const KEY_READY: u32 = 6;
/// Notice: a key too long for a KEY_READY message was written; the receiver
/// tries every key of that waiter-table word (payload: the word, u32 LE).
pub(crate) const WORD_READY: u32 = 7;
/// Request: CLIENT UNBLOCK (payload: client id u64 LE, then 1 for ERROR).
pub(crate) const UNBLOCK_REQUEST: u32 = 8;
/// Reply: 1 if the client was blocked there and is unblocked, else 0 (u64 LE).
pub(crate) const UNBLOCK_REPLY: u32 = 9;

/// Request: the receiver's channel names with subscribers (payload: 1 for
/// shard channels, then the glob, if any).
pub(crate) const CHANNELS_REQUEST: u32 = 10;
/// Reply: the last piece of channel names, each as u32 LE length then
/// bytes (earlier pieces come as LIST_PART).
pub(crate) const CHANNELS_REPLY: u32 = 11;
/// Request: the receiver engine's answer to a diagnostics query (payload:
/// the query; `Engine::answer_gather`).
pub(crate) const GATHER_REQUEST: u32 = 12;
/// Reply: the last piece of that answer (earlier pieces come as LIST_PART).
pub(crate) const GATHER_REPLY: u32 = 13;

/// Notice: CLIENT UNPAUSE ran on the sender: held clients look again.
pub(crate) const PAUSE_CHANGED: u32 = 14;
/// Notice: the weight of a round of wake-ups the receiver started comes
/// back (request: the round; payload: the weight, u64 LE; blocking.rs).
pub(crate) const ROUND_DONE: u32 = 24;

/// How long a request waits for the other workers.
const GATHER_TIMEOUT: Duration = Duration::from_secs(1);

struct Pending {
    waiting: HashSet<u32>,
    /// Each worker's answer so far, its pieces joined in order.
    parts: BTreeMap<u32, Vec<u8>>,
    done: Rc<Notify>,
}

/// This worker's end of the bus.
pub(crate) struct Bus {
    slot: u32,
    prefix: String,
    sender: UnixDatagram,
    next_request: Cell<u64>,
    pending: RefCell<HashMap<u64, Pending>>,
}

/// A short stable name for a segment path (FNV-1a), for socket names.
fn path_tag(path: &str) -> u64 {
    path.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

impl Bus {
    pub fn new(slot: u32, segment: &str) -> Result<Bus, Error> {
        Ok(Bus {
            slot,
            prefix: format!("shoal-{:016x}", path_tag(segment)),
            sender: UnixDatagram::unbound().map_err(io("create wake-up socket"))?,
            next_request: Cell::new(1),
            pending: RefCell::new(HashMap::new()),
        })
    }

    fn addr(&self, slot: u32) -> Result<SocketAddr, Error> {
        let name = format!("{}-w{slot}", self.prefix);
        SocketAddr::from_abstract_name(name.as_bytes()).map_err(io("name wake-up socket"))
    }

    /// The socket this worker's loop awaits for wake-ups.
    pub fn bind(&self) -> Result<tokio::net::UnixDatagram, Error> {
        let what = "bind wake-up socket (is another worker using this slot?)";
        let sock = UnixDatagram::bind_addr(&self.addr(self.slot)?).map_err(io(what))?;
        sock.set_nonblocking(true).map_err(io(what))?;
        tokio::net::UnixDatagram::from_std(sock).map_err(io(what))
    }

    /// Wakes worker `to` to drain its mailbox (a message arrived that it
    /// had not been told about).
    pub fn wake(&self, to: u32) {
        if let Ok(addr) = self.addr(to) {
            // A worker that is not there yet drains its mailbox when it
            // starts.
            let _ = self.sender.send_to_addr(&[1], &addr);
        }
    }

    /// Puts a message in `to`'s mailbox and wakes it if needed. Retries a
    /// full mailbox for a while (the receiver drains it as it runs).
    pub async fn send(
        &self,
        h: &RefCell<Handle>,
        to: u32,
        kind: u32,
        request: u64,
        payload: &[u8],
    ) -> bool {
        for _ in 0..1000 {
            let sent = h
                .borrow_mut()
                .mailbox_send(to, kind, self.slot, request, payload);
            match sent {
                Ok(Sent::Delivered { wake }) => {
                    if wake {
                        self.wake(to);
                    }
                    return true;
                }
                Ok(Sent::Full) => tokio::time::sleep(Duration::from_millis(1)).await,
                Err(_) => return false,
            }
        }
        false
    }

    /// Sends a request to every worker in `to` and waits (bounded) for their
    /// replies; returns the reply payloads, pieces joined per worker.
    pub async fn gather(
        &self,
        h: &RefCell<Handle>,
        to: &[u32],
        kind: u32,
        payload: &[u8],
    ) -> Vec<Vec<u8>> {
        let request = self.next_request.get();
        self.next_request.set(request + 1);
        let done = Rc::new(Notify::new());
        let mut waiting = HashSet::new();
        for &slot in to {
            if self.send(h, slot, kind, request, payload).await {
                waiting.insert(slot);
            }
        }
        if waiting.is_empty() {
            return Vec::new();
        }
        self.pending.borrow_mut().insert(
            request,
            Pending {
                waiting,
                parts: BTreeMap::new(),
                done: done.clone(),
            },
        );
        let _ = tokio::time::timeout(GATHER_TIMEOUT, done.notified()).await;
        self.pending
            .borrow_mut()
            .remove(&request)
            .map(|p| p.parts.into_values().collect())
            .unwrap_or_default()
    }

    /// Files a reply piece from worker `from` under its request; `last` ends
    /// that worker's answer.
    pub fn reply_arrived(&self, request: u64, from: u32, payload: Vec<u8>, last: bool) {
        let mut pending = self.pending.borrow_mut();
        let Some(p) = pending.get_mut(&request) else {
            return; // too late: the request timed out
        };
        p.parts.entry(from).or_default().extend_from_slice(&payload);
        if last {
            p.waiting.remove(&from);
            if p.waiting.is_empty() {
                p.done.notify_one();
            }
        }
    }
}

/// CLIENT LIST's id filter as a payload.
/// The little-endian u64 a payload starts with (None when too short).
pub(crate) fn payload_u64(payload: &[u8]) -> Option<u64> {
    payload.get(..8)?.try_into().ok().map(u64::from_le_bytes)
}

/// The little-endian u32 a payload starts with (None when too short).
pub(crate) fn payload_u32(payload: &[u8]) -> Option<u32> {
    payload.get(..4)?.try_into().ok().map(u32::from_le_bytes)
}

pub(crate) fn encode_ids(ids: &[u64]) -> Vec<u8> {
    ids.iter().flat_map(|i| i.to_le_bytes()).collect()
}

/// The ids of a LIST_REQUEST payload.
pub(crate) fn decode_ids(payload: &[u8]) -> Vec<u64> {
    payload
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

/// A key in a db (a ready key).
pub(crate) type DbKey = (u8, Vec<u8>);

/// Ready keys as payloads of at most `max` bytes: per key its db (u8), its
/// length (u32 LE) and its bytes. Keys too long for a payload of their own
/// are returned apart (the caller announces them by their table word).
pub(crate) fn encode_keys<'k>(
    keys: impl IntoIterator<Item = &'k DbKey>,
    max: usize,
) -> (Vec<Vec<u8>>, Vec<&'k DbKey>) {
    let mut payloads: Vec<Vec<u8>> = Vec::new();
    let mut too_long = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    for entry in keys {
        let (db, key) = entry;
        let need = 5 + key.len();
        if need > max || key.len() > u32::MAX as usize {
            too_long.push(entry);
            continue;
        }
        if cur.len() + need > max {
            payloads.push(std::mem::take(&mut cur));
        }
        cur.push(*db);
        cur.extend_from_slice(&(key.len() as u32).to_le_bytes());
        cur.extend_from_slice(key);
    }
    if !cur.is_empty() {
        payloads.push(cur);
    }
    (payloads, too_long)
}

/// The keys of a KEY_READY payload (a truncated last entry is dropped).
pub(crate) fn decode_keys(payload: &[u8]) -> Vec<DbKey> {
    let mut keys = Vec::new();
    let mut rest = payload;
    while let [db, a, b, c, d, tail @ ..] = rest {
        let len = u32::from_le_bytes([*a, *b, *c, *d]) as usize;
        let Some(key) = tail.get(..len) else {
            break;
        };
        keys.push((*db, key.to_vec()));
        rest = &tail[len..];
    }
    keys
}

/// A kill filter as a payload: `key=value` lines.
pub(crate) fn encode_filter(f: &KillFilter) -> Vec<u8> {
    let mut s = format!("caller={}\nskipme={}\n", f.caller, f.skip_me as u8);
    if let Some(id) = f.id {
        s += &format!("id={id}\n");
    }
    if let Some(a) = &f.addr {
        s += &format!("addr={a}\n");
    }
    if let Some(a) = &f.laddr {
        s += &format!("laddr={a}\n");
    }
    if let Some(age) = f.max_age {
        s += &format!("maxage={age}\n");
    }
    if let Some(t) = f.client_type {
        s += &format!("type={}\n", t.name());
    }
    for u in &f.users {
        s += &format!("user={}\n", hex(u));
    }
    if let Some(allowed) = &f.channels_outside {
        let list: Vec<String> = allowed.iter().map(|c| hex(c)).collect();
        s += &format!("channels={}\n", list.join(","));
    }
    s.into_bytes()
}

/// Bytes as hex (user and channel names may hold any byte but spaces).
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of [`hex`]'s text (a bad pair is skipped).
fn unhex(text: &str) -> Vec<u8> {
    text.as_bytes()
        .chunks(2)
        .filter_map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

/// The filter of a KILL_REQUEST payload (unknown lines are ignored).
pub(crate) fn decode_filter(payload: &[u8]) -> KillFilter {
    let mut f = KillFilter::default();
    for line in String::from_utf8_lossy(payload).lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        match k {
            "caller" => f.caller = v.parse().unwrap_or(0),
            "skipme" => f.skip_me = v == "1",
            "id" => f.id = v.parse().ok(),
            "addr" => f.addr = Some(v.to_string()),
            "laddr" => f.laddr = Some(v.to_string()),
            "maxage" => f.max_age = v.parse().ok(),
            "type" => f.client_type = ClientType::parse(v.as_bytes()),
            "user" => f.users.push(unhex(v)),
            "channels" => {
                f.channels_outside =
                    Some(v.split(',').filter(|c| !c.is_empty()).map(unhex).collect())
            }
            _ => {}
        }
    }
    f
}

/// Encodes channel names for CHANNELS_REPLY pieces of at most `max` bytes
/// each (a name too long for one piece is left out). Always one piece at
/// least.
pub(crate) fn encode_names(names: &[Vec<u8>], max: usize) -> Vec<Vec<u8>> {
    let mut pieces = vec![Vec::new()];
    for n in names {
        if 4 + n.len() > max {
            continue;
        }
        if pieces.last().is_some_and(|p| p.len() + 4 + n.len() > max) {
            pieces.push(Vec::new());
        }
        let piece = pieces.last_mut().expect("at least one piece");
        piece.extend_from_slice(&(n.len() as u32).to_le_bytes());
        piece.extend_from_slice(n);
    }
    pieces
}

/// Decodes a CHANNELS_REPLY, stopping at anything malformed.
pub(crate) fn decode_names(mut p: &[u8]) -> Vec<Vec<u8>> {
    let mut names = Vec::new();
    while p.len() >= 4 {
        let len = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize;
        let Some(name) = p.get(4..4 + len) else {
            break;
        };
        names.push(name.to_vec());
        p = &p[4 + len..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_and_ids_round_trip() {
        let f = KillFilter {
            legacy: false,
            id: Some(7),
            addr: Some("127.0.0.1:5000".into()),
            laddr: None,
            max_age: Some(3),
            client_type: Some(ClientType::PubSub),
            skip_me: true,
            caller: 9,
            users: vec![b"al ice\n".to_vec()],
            channels_outside: Some(vec![b"a:*".to_vec(), b"b,c".to_vec()]),
            // Peers never reply: `quiet` stays with the caller.
            quiet: false,
        };
        assert_eq!(decode_filter(&encode_filter(&f)), f);
        assert_eq!(decode_ids(&encode_ids(&[1, 2, u64::MAX])), [1, 2, u64::MAX]);
        assert_eq!(decode_ids(b"short"), Vec::<u64>::new());
    }

    #[test]
    fn channel_names_round_trip_in_bounded_pieces() {
        let names: Vec<Vec<u8>> = (0..100).map(|i| format!("ch{i}").into_bytes()).collect();
        let pieces = encode_names(&names, 64);
        assert!(pieces.len() > 1 && pieces.iter().all(|p| p.len() <= 64));
        let back: Vec<Vec<u8>> = pieces.iter().flat_map(|p| decode_names(p)).collect();
        assert_eq!(back, names);
        assert_eq!(encode_names(&[], 64), vec![Vec::<u8>::new()]);
        assert_eq!(encode_names(&[vec![0; 100]], 64), vec![Vec::<u8>::new()]);
        assert_eq!(decode_names(&[9, 0, 0, 0, 1]), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn ready_keys_round_trip_in_bounded_payloads() {
        let keys: Vec<(u8, Vec<u8>)> = vec![
            (0, b"a".to_vec()),
            (3, b"".to_vec()),
            (15, vec![7; 20]),
            (1, vec![9; 100]),
            (2, b"bb".to_vec()),
        ];
        let (payloads, too_long) = encode_keys(&keys, 32);
        assert!(payloads.iter().all(|p| p.len() <= 32));
        assert_eq!(too_long, vec![&keys[3]]);
        let back: Vec<_> = payloads.iter().flat_map(|p| decode_keys(p)).collect();
        assert_eq!(back, [&keys[..3], &keys[4..]].concat());
        // Truncated or empty payloads decode to what is whole.
        assert_eq!(decode_keys(&payloads[0][..payloads[0].len() - 1]).len(), 1);
        assert_eq!(decode_keys(b""), Vec::new());
        assert_eq!(decode_keys(b"\x00\xff\xff\xff\xff"), Vec::new());
    }
}
