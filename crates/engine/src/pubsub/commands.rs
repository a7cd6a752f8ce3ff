//! The pub/sub commands: Redis's SUBSCRIBE family, PUBLISH, SPUBLISH,
//! PUBSUB and MONITOR, and shoal's LSUBSCRIBE (retained channels) and
//! KSUBSCRIBE / KPSUBSCRIBE (keys with their values).

use proto::resp::ReplyWriter;
use store::SubKind;

use super::{write_push, Part, Routed, Tag};
use crate::command::{dispatch_sub, flags::*, reply_help, Arg, Channels, CmdResult, Command};
use crate::engine::{Cx, Flow, ServerRequest};
use crate::error::CmdError;
use crate::session::ReplyMode;

crate::command::group_cmd!("pubsub", keys = (0, 0, 0), since = "2.0.0");

const SUB: u32 = PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK;

const PUBSUB_SUBCOMMANDS: &[Command] = &[
    cmd(
        "pubsub|channels",
        -2,
        PUBSUB | LOADING | STALE,
        "List active channels",
        pubsub_channels,
    ),
    cmd(
        "pubsub|numsub",
        -2,
        PUBSUB | LOADING | STALE,
        "Get the count of subscribers for channels",
        pubsub_numsub,
    ),
    cmd(
        "pubsub|numpat",
        2,
        PUBSUB | LOADING | STALE,
        "Get the count of unique patterns pattern subscriptions",
        pubsub_numpat,
    ),
    cmd(
        "pubsub|shardchannels",
        -2,
        PUBSUB | LOADING | STALE,
        "List active shard channels",
        pubsub_shardchannels,
    ),
    cmd(
        "pubsub|shardnumsub",
        -2,
        PUBSUB | LOADING | STALE,
        "Get the count of subscribers for shard channels",
        pubsub_shardnumsub,
    ),
    cmd(
        "pubsub|help",
        2,
        LOADING | STALE,
        "Show helpful text about the different subcommands",
        pubsub_help,
    ),
];

/// The pub/sub commands.
pub(crate) const COMMANDS: &[Command] = &[
    cmd("subscribe", -2, SUB, "Listen for messages published to the given channels", subscribe).with_channels(Channels::Subscribe),
    cmd("unsubscribe", -1, SUB, "Stop listening for messages posted to the given channels", unsubscribe),
    cmd("psubscribe", -2, SUB, "Listen for messages published to channels matching the given patterns", psubscribe).with_channels(Channels::SubscribePattern),
    cmd("punsubscribe", -1, SUB, "Stop listening for messages posted to channels matching the given patterns", punsubscribe),
    cmd("ssubscribe", -2, SUB, "Listen for messages published to the given shard channels", ssubscribe).with_channels(Channels::Subscribe),
    cmd("sunsubscribe", -1, SUB, "Stop listening for messages posted to the given shard channels", sunsubscribe),
    cmd("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, "Post a message to a channel", publish).with_channels(Channels::Publish),
    cmd("spublish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, "Post a message to a shard channel", spublish).with_channels(Channels::Publish),
    Command {
        subcommands: PUBSUB_SUBCOMMANDS,
        ..cmd("pubsub", -2, 0, "A container for Pub/Sub commands", pubsub)
    },
    cmd("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, "Listen for all requests received by the server in real time", monitor),
    cmd("lsubscribe", -2, SUB, "Listen for messages on channels, starting with each retained channel's last message (shoal)", lsubscribe).with_channels(Channels::Subscribe),
    cmd("lunsubscribe", -1, SUB, "Stop listening to channels subscribed with LSUBSCRIBE (shoal)", lunsubscribe),
    cmd("ksubscribe", -2, SUB, "Receive keys' values now and after every write (shoal)", ksubscribe),
    cmd("kunsubscribe", -1, SUB, "Stop receiving keys' values (shoal)", kunsubscribe),
    cmd("kpsubscribe", -2, SUB, "Receive the values of keys matching patterns now and after every write (shoal)", kpsubscribe),
    cmd("kpunsubscribe", -1, SUB, "Stop receiving the values of keys matching patterns (shoal)", kpunsubscribe),
];

/// Writes a push frame into the reply.
fn push(cx: &mut Cx<'_>, parts: &[Part<'_>]) {
    write_push(&mut cx.out, parts);
}

/// A (un)subscribe confirmation: kind, name (nil when there was none) and
/// the client's count.
///
/// Like every push it reaches the client whatever CLIENT REPLY says (Redis
/// sends pushes past OFF and SKIP): under OFF or SKIP it goes with the
/// messages this command delivered to its own client, which the dispatcher
/// keeps when it drops the reply.
fn confirm(cx: &mut Cx<'_>, kind: &[u8], name: Option<&[u8]>, count: usize) {
    let name = name.map_or(Part::Null, Part::Bulk);
    let parts = [Part::Bulk(kind), name, Part::Int(count as i64)];
    if cx.session.reply == ReplyMode::On {
        push(cx, &parts);
    } else {
        let mut frame = Vec::new();
        write_push(
            &mut ReplyWriter::new(&mut frame, cx.session.protocol),
            &parts,
        );
        cx.engine.pubsub.current_frames.extend_from_slice(&frame);
    }
}

fn track(cx: &mut Cx<'_>) -> u64 {
    let id = cx.session.id;
    cx.engine.pubsub.track(id, cx.session.protocol);
    id
}

fn subscribe_kind(cx: &mut Cx<'_>, args: &[Arg<'_>], kind: SubKind, reply: &[u8]) -> CmdResult {
    let id = track(cx);
    for ch in &args[1..] {
        let set = match kind {
            SubKind::Shard => &mut cx.session.subs.shard,
            _ => &mut cx.session.subs.channels,
        };
        if set.insert(ch.to_vec()) {
            cx.engine.pubsub.add_channel(id, kind, ch);
        }
        let count = shard_or_count(cx, kind);
        confirm(cx, reply, Some(ch), count);
    }
    Ok(())
}

fn shard_or_count(cx: &Cx<'_>, kind: SubKind) -> usize {
    match kind {
        SubKind::Shard => cx.session.subs.shard.len(),
        _ => cx.session.subs.count(),
    }
}

fn unsubscribe_kind(cx: &mut Cx<'_>, args: &[Arg<'_>], kind: SubKind, reply: &[u8]) -> CmdResult {
    let id = cx.session.id;
    let names = match (args.len(), kind) {
        (1, SubKind::Shard) => held(&cx.session.subs.shard),
        (1, _) => held(&cx.session.subs.channels),
        _ => named(args, 0),
    };
    unsubscribe_each(
        cx,
        reply,
        names,
        |cx, _, ch| {
            let set = match kind {
                SubKind::Shard => &mut cx.session.subs.shard,
                _ => &mut cx.session.subs.channels,
            };
            if set.shift_remove(ch) {
                cx.engine.pubsub.remove_channel(id, kind, ch);
            }
        },
        |cx| shard_or_count(cx, kind),
    )
}

/// The subscriptions an unsubscribe without arguments ends, in the order
/// they were made.
fn held(set: &indexmap::IndexSet<Vec<u8>>) -> Vec<(u8, Vec<u8>)> {
    set.iter().map(|n| (0, n.clone())).collect()
}

/// The subscriptions an unsubscribe names (keys and key patterns in `db`).
fn named(args: &[Arg<'_>], db: u8) -> Vec<(u8, Vec<u8>)> {
    args[1..].iter().map(|a| (db, a.to_vec())).collect()
}

/// What every unsubscribe command shares: each of `names` (db, name) is
/// removed by `remove` (which knows whether the client held it) and
/// confirmed with the client's `count` after it; with no names at all, one
/// confirmation with a nil name, as Redis replies.
fn unsubscribe_each(
    cx: &mut Cx<'_>,
    reply: &[u8],
    names: Vec<(u8, Vec<u8>)>,
    mut remove: impl FnMut(&mut Cx<'_>, u8, &[u8]),
    count: impl Fn(&Cx<'_>) -> usize,
) -> CmdResult {
    if names.is_empty() {
        let n = count(cx);
        confirm(cx, reply, None, n);
    }
    for (db, name) in names {
        remove(cx, db, &name);
        let n = count(cx);
        confirm(cx, reply, Some(&name), n);
    }
    Ok(())
}

fn subscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    subscribe_kind(cx, args, SubKind::Channel, b"subscribe")
}

fn unsubscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    unsubscribe_kind(cx, args, SubKind::Channel, b"unsubscribe")
}

fn ssubscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    subscribe_kind(cx, args, SubKind::Shard, b"ssubscribe")
}

fn sunsubscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    unsubscribe_kind(cx, args, SubKind::Shard, b"sunsubscribe")
}

fn psubscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let id = track(cx);
    for p in &args[1..] {
        if cx.session.subs.patterns.insert(p.to_vec()) {
            cx.engine.pubsub.add_pattern(id, p);
        }
        let count = cx.session.subs.count();
        confirm(cx, b"psubscribe", Some(p), count);
    }
    Ok(())
}

fn punsubscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let id = cx.session.id;
    let names = match args.len() {
        1 => held(&cx.session.subs.patterns),
        _ => named(args, 0),
    };
    let remove = |cx: &mut Cx<'_>, _, p: &[u8]| {
        if cx.session.subs.patterns.shift_remove(p) {
            cx.engine.pubsub.remove_pattern(id, p);
        }
    };
    unsubscribe_each(cx, b"punsubscribe", names, remove, |cx| {
        cx.session.subs.count()
    })
}

fn publish(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let n = cx.engine.publish(&args[1], &args[2]);
    cx.out.integer(n as i64);
    Ok(())
}

fn spublish(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let n = cx.engine.pubsub.route(&Routed {
        tag: Tag::Shard,
        db: 0,
        seq: 0,
        epoch: 0,
        name: &args[1],
        data: &args[2],
    });
    cx.out.integer(n as i64);
    Ok(())
}

fn pubsub(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let parent = crate::command::lookup(b"pubsub").expect("PUBSUB is in the table");
    dispatch_sub(cx, parent, args)
}

/// Redis checks these subcommands' argument counts itself.
fn sub_syntax(args: &[Arg<'_>], max: usize) -> CmdResult {
    if args.len() > max {
        return Err(CmdError::owned(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            crate::command::clip(&args[1], 128)
        )));
    }
    Ok(())
}

fn channels_request(cx: &mut Cx<'_>, args: &[Arg<'_>], shard: bool) -> CmdResult {
    sub_syntax(args, 3)?;
    cx.flow = Flow::Server(ServerRequest::PubsubChannels {
        shard,
        pattern: args.get(2).map(|p| p.to_vec()),
    });
    Ok(())
}

fn pubsub_channels(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    channels_request(cx, args, false)
}

fn pubsub_shardchannels(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    channels_request(cx, args, true)
}

fn numsub(cx: &mut Cx<'_>, args: &[Arg<'_>], kind: SubKind) -> CmdResult {
    let names = &args[2..];
    // A flat array, not a map, in RESP3 too (Redis 7.0).
    cx.out.array_len(2 * names.len());
    for ch in names {
        let n = cx.engine.pubsub.count_everywhere(kind, ch);
        cx.out.bulk(ch);
        cx.out.integer(n as i64);
    }
    Ok(())
}

fn pubsub_numsub(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    numsub(cx, args, SubKind::Channel)
}

fn pubsub_shardnumsub(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    numsub(cx, args, SubKind::Shard)
}

fn pubsub_numpat(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    let n = cx.engine.pubsub.distinct_patterns();
    cx.out.integer(n as i64);
    Ok(())
}

fn pubsub_help(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    reply_help(
        cx,
        &[
            "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
            "HELP",
            "    Prints this help.",
        ],
    )
}

fn monitor(cx: &mut Cx<'_>, _args: &[Arg<'_>]) -> CmdResult {
    if cx.session.in_multi() || cx.session.in_exec() {
        return Err(CmdError::msg(
            "ERR MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    // A second MONITOR is ignored, with no reply, as in Redis.
    if cx.session.subs.monitor {
        return Ok(());
    }
    cx.session.subs.monitor = true;
    let (id, protocol) = (cx.session.id, cx.session.protocol);
    cx.engine.pubsub.add_monitor(id, protocol);
    cx.out.simple(b"OK");
    Ok(())
}

fn lsubscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let id = track(cx);
    for ch in &args[1..] {
        let snapshot = if cx.session.subs.retained.insert(ch.to_vec()) {
            cx.engine.subscribe_retained(id, ch)
        } else {
            None
        };
        let count = cx.session.subs.count();
        confirm(cx, b"lsubscribe", Some(ch), count);
        if let Some((seq, message)) = snapshot {
            push(
                cx,
                &[
                    Part::Bulk(b"lmessage"),
                    Part::Bulk(ch),
                    Part::Int(seq as i64),
                    Part::Bulk(&message),
                ],
            );
        }
    }
    Ok(())
}

fn lunsubscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let id = cx.session.id;
    let names = match args.len() {
        1 => held(&cx.session.subs.retained),
        _ => named(args, 0),
    };
    let remove = |cx: &mut Cx<'_>, _, ch: &[u8]| {
        if cx.session.subs.retained.shift_remove(ch) {
            cx.engine.pubsub.remove_retained(id, ch);
        }
    };
    unsubscribe_each(cx, b"lunsubscribe", names, remove, |cx| {
        cx.session.subs.count()
    })
}

fn value_part(resp: &[u8]) -> Part<'_> {
    if resp.is_empty() {
        Part::Null
    } else {
        Part::Raw(resp)
    }
}

fn ksubscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (id, protocol, db) = (cx.session.id, cx.session.protocol, cx.session.db);
    for key in &args[1..] {
        let fresh = cx.session.subs.keys.insert((db, key.to_vec()));
        let snapshot = if fresh {
            cx.engine.pubsub.add_key(id, protocol, db, key);
            let v = cx.engine.key_value(db, key);
            cx.engine.pubsub.key_seen(id, db, key, v.version);
            Some(v)
        } else {
            None
        };
        let count = cx.session.subs.count();
        confirm(cx, b"ksubscribe", Some(key), count);
        if let Some(v) = snapshot {
            push(
                cx,
                &[
                    Part::Bulk(b"kmessage"),
                    Part::Bulk(key),
                    Part::Int(v.version as i64),
                    value_part(&v.resp),
                ],
            );
        }
    }
    Ok(())
}

fn kunsubscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (id, db) = (cx.session.id, cx.session.db);
    let names = match args.len() {
        1 => cx.session.subs.keys.iter().cloned().collect(),
        _ => named(args, db),
    };
    let remove = |cx: &mut Cx<'_>, kdb: u8, key: &[u8]| {
        if cx.session.subs.keys.shift_remove(&(kdb, key.to_vec())) {
            cx.engine.pubsub.remove_key(id, kdb, key);
        }
    };
    unsubscribe_each(cx, b"kunsubscribe", names, remove, |cx| {
        cx.session.subs.count()
    })
}

fn kpsubscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (id, protocol, db) = (cx.session.id, cx.session.protocol, cx.session.db);
    for pattern in &args[1..] {
        let fresh = cx.session.subs.key_patterns.insert((db, pattern.to_vec()));
        if fresh {
            cx.engine.pubsub.add_key_pattern(id, protocol, db, pattern);
        }
        let count = cx.session.subs.count();
        confirm(cx, b"kpsubscribe", Some(pattern), count);
        if !fresh {
            continue;
        }
        // The snapshot: every key that matches now, after the table entry
        // (I14), so a write racing the scan is seen one way or the other.
        let mut cursor = 0;
        loop {
            let page = cx.engine.h.scan(db, cursor, Some(pattern), 1000, None)?;
            for key in page.keys {
                let v = cx.engine.key_value(db, &key);
                if v.resp.is_empty() {
                    continue;
                }
                cx.engine
                    .pubsub
                    .key_pattern_seen(id, db, pattern, &key, v.version);
                push(
                    cx,
                    &[
                        Part::Bulk(b"kpmessage"),
                        Part::Bulk(pattern),
                        Part::Bulk(&key),
                        Part::Int(v.version as i64),
                        Part::Raw(&v.resp),
                    ],
                );
            }
            cursor = page.cursor;
            if cursor == 0 {
                break;
            }
        }
    }
    Ok(())
}

fn kpunsubscribe(cx: &mut Cx<'_>, args: &[Arg<'_>]) -> CmdResult {
    let (id, db) = (cx.session.id, cx.session.db);
    let names = match args.len() {
        1 => cx.session.subs.key_patterns.iter().cloned().collect(),
        _ => named(args, db),
    };
    let remove = |cx: &mut Cx<'_>, pdb: u8, pattern: &[u8]| {
        if cx
            .session
            .subs
            .key_patterns
            .shift_remove(&(pdb, pattern.to_vec()))
        {
            cx.engine.pubsub.remove_key_pattern(id, pdb, pattern);
        }
    };
    unsubscribe_each(cx, b"kpunsubscribe", names, remove, |cx| {
        cx.session.subs.count()
    })
}
