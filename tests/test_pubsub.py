"""Redis pub/sub: SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE and their UNSUBSCRIBEs,
PUBLISH / SPUBLISH, PUBSUB introspection, the RESP2 subscribed-mode rules and
RESP3 push frames, byte for byte.

Every behaviour test runs twice, against a real redis-server 7.0 (so that the
expected frames are Redis's own) and against a two-worker shoal, where the
clients land on whichever worker SO_REUSEPORT picks. The cross-worker tests at
the end run on shoal alone: they place publishers and subscribers on chosen
workers and check ordering, receiver counts and PUBSUB counts across them.

Channel names carry a per-test prefix, so that the subscriptions of one test
never show in another's counts."""

import threading
import uuid

import pytest

from shoaltest import Err, FrameReader, Server, encode, wait_for
from pubsubtest import CANT, ask, frame, push, read_frames


# ---------------------------------------------------------------------------
# RESP frames as Redis writes them.


def subscribe(c, verb, *names):
    """SUBSCRIBE-like command; returns the parsed confirmations."""
    c.send(encode(verb, *names))
    got = [c.reply() for _ in names]
    for g, n in zip(got, names):
        assert g[0] == verb.lower().encode() and g[1] == n.encode(), got
    return got


# ---------------------------------------------------------------------------
# Fixtures.


@pytest.fixture
def p():
    """A prefix that makes this test's channel names its own."""
    return f"t{uuid.uuid4().hex[:10]}:"


def numpat(c):
    return c.cmd("PUBSUB", "NUMPAT")


def no_patterns_left(c):
    """NUMPAT is server-wide: wait until the connections of earlier tests are
    gone, so that this test's patterns are the only ones."""
    wait_for(lambda: numpat(c) == 0, what="NUMPAT to drop to 0")


def channels(c, pattern):
    return sorted(c.cmd("PUBSUB", "CHANNELS", pattern))


# ---------------------------------------------------------------------------
# Confirmations and counts.


def test_subscribe_confirms_each_channel_with_the_running_count(srv, conns, p):
    c = conns(srv)
    a, b = p + "a", p + "b"
    assert ask(c, "SUBSCRIBE", a, b, a, replies=3) == (
        frame("subscribe", a, 1) + frame("subscribe", b, 2) + frame("subscribe", a, 2))
    # patterns add to the same count
    assert ask(c, "PSUBSCRIBE", p + "x*", p + "y*", p + "x*", replies=3) == (
        frame("psubscribe", p + "x*", 3) + frame("psubscribe", p + "y*", 4)
        + frame("psubscribe", p + "x*", 4))
    # shard channels count on their own
    assert ask(c, "SSUBSCRIBE", p + "s1", p + "s2", p + "s1", replies=3) == (
        frame("ssubscribe", p + "s1", 1) + frame("ssubscribe", p + "s2", 2)
        + frame("ssubscribe", p + "s1", 2))
    assert ask(c, "SUBSCRIBE", p + "c") == frame("subscribe", p + "c", 5)


def test_message_and_pmessage_frames(srv, conns, p):
    sub, pub = conns(srv), conns(srv)
    ch, pat = p + "news", p + "n*"
    assert ask(sub, "SUBSCRIBE", ch) == frame("subscribe", ch, 1)
    assert ask(sub, "PSUBSCRIBE", pat) == frame("psubscribe", pat, 2)
    # one client, two matching subscriptions: two receivers, message first
    assert pub.cmd("PUBLISH", ch, "hello") == 2
    assert read_frames(sub, 2) == frame("message", ch, "hello") + frame("pmessage", pat, ch, "hello")
    # only the pattern matches
    assert pub.cmd("PUBLISH", p + "nope", "x") == 1
    assert read_frames(sub, 1) == frame("pmessage", pat, p + "nope", "x")
    # nothing matches
    assert pub.cmd("PUBLISH", p + "other", "y") == 0
    # binary-safe payloads, the empty one too
    for payload in (b"\x00\r\n\xff$3\r\n", b""):
        assert pub.cmd("PUBLISH", ch, payload) == 2
        assert read_frames(sub, 2) == (frame("message", ch, payload)
                                       + frame("pmessage", pat, ch, payload))
    # and nothing else is queued: the next frame is PING's
    assert ask(sub, "PING") == frame("pong", "")


def test_publish_counts_every_matching_subscription(srv, conns, p):
    ch = p + "room"
    one, two, three, pub = conns(srv), conns(srv), conns(srv), conns(srv)
    subscribe(one, "SUBSCRIBE", ch)
    subscribe(two, "SUBSCRIBE", ch)
    subscribe(two, "PSUBSCRIBE", p + "r*")
    subscribe(three, "PSUBSCRIBE", p + "r*", p + "*m", p + "x*")
    assert pub.cmd("PUBLISH", ch, "hi") == 1 + 2 + 2
    assert one.reply() == [b"message", ch.encode(), b"hi"]
    assert two.reply() == [b"message", ch.encode(), b"hi"]
    assert two.reply() == [b"pmessage", (p + "r*").encode(), ch.encode(), b"hi"]
    got = sorted(tuple(three.reply()) for _ in range(2))
    assert got == [(b"pmessage", pat.encode(), ch.encode(), b"hi") for pat in (p + "*m", p + "r*")]
    for c in (one, two, three):
        assert ask(c, "PING", "sync") == frame("pong", "sync")


def test_glob_patterns(srv, conns, p):
    pats = ["h?llo", "h*llo", "h[ae]llo", "h[^e]llo", "h[a-b]llo", "h\\*llo", "*"]
    sub, pub = conns(srv), conns(srv)
    subscribe(sub, "PSUBSCRIBE", *[p + x for x in pats])
    expected = {
        "hello": ["*", "h*llo", "h?llo", "h[ae]llo"],
        "hallo": ["*", "h*llo", "h?llo", "h[^e]llo", "h[a-b]llo", "h[ae]llo"],
        "hllo": ["*", "h*llo"],
        "hxllo": ["*", "h*llo", "h?llo", "h[^e]llo"],
        "heeello": ["*", "h*llo"],
        "h*llo": ["*", "h*llo", "h?llo", "h[^e]llo", "h\\*llo"],
        "hbllo": ["*", "h*llo", "h?llo", "h[^e]llo", "h[a-b]llo"],
    }
    for name, want in expected.items():
        ch = p + name
        assert pub.cmd("PUBLISH", ch, "m") == len(want), name
        got = [sub.reply() for _ in want]
        assert all(g[0] == b"pmessage" and g[2] == ch.encode() and g[3] == b"m" for g in got)
        assert sorted(g[1].decode()[len(p):] for g in got) == sorted(want), name
    assert ask(sub, "PING") == frame("pong", "")


def test_ssubscribe_and_spublish(srv, conns, p):
    sub, pub = conns(srv), conns(srv)
    sh = p + "shard"
    assert ask(sub, "SSUBSCRIBE", sh) == frame("ssubscribe", sh, 1)
    assert pub.cmd("SPUBLISH", sh, "tick") == 1
    assert read_frames(sub, 1) == frame("smessage", sh, "tick")
    # the two namespaces are apart: PUBLISH does not reach a shard channel,
    # SPUBLISH neither a channel nor a pattern
    assert pub.cmd("PUBLISH", sh, "x") == 0
    subscribe(sub, "SUBSCRIBE", p + "plain")
    subscribe(sub, "PSUBSCRIBE", p + "*")
    assert pub.cmd("SPUBLISH", p + "plain", "y") == 0
    assert pub.cmd("SPUBLISH", sh, "tock") == 1
    assert read_frames(sub, 1) == frame("smessage", sh, "tock")
    assert ask(sub, "PING") == frame("pong", "")


def test_publish_many_arrives_in_order(srv, conns, p):
    sub, pub = conns(srv), conns(srv)
    ch = p + "seq"
    subscribe(sub, "SUBSCRIBE", ch)
    n = 5000
    for start in range(0, n, 500):
        got = pub.pipeline(*[("PUBLISH", ch, f"m{i}") for i in range(start, start + 500)])
        assert got == [1] * 500
    assert [sub.reply() for _ in range(n)] == [
        [b"message", ch.encode(), f"m{i}".encode()] for i in range(n)]


def test_large_message(srv, conns, p):
    sub, pub = conns(srv), conns(srv)
    ch = p + "big"
    subscribe(sub, "SUBSCRIBE", ch)
    body = bytes(range(256)) * (2 * 4096)  # 2 MiB
    assert pub.cmd("PUBLISH", ch, body) == 1
    assert sub.reply() == [b"message", ch.encode(), body]


# ---------------------------------------------------------------------------
# Unsubscribing.


def test_unsubscribe_with_nothing_subscribed(srv, conns, p):
    c = conns(srv)
    assert ask(c, "UNSUBSCRIBE") == frame("unsubscribe", None, 0)
    assert ask(c, "PUNSUBSCRIBE") == frame("punsubscribe", None, 0)
    assert ask(c, "SUNSUBSCRIBE") == frame("sunsubscribe", None, 0)
    # and the connection did not enter subscribed mode
    assert c.cmd("GET", p + "k") is None


def test_unsubscribe_what_was_never_subscribed(srv, conns, p):
    c, pub = conns(srv), conns(srv)
    a = p + "a"
    subscribe(c, "SUBSCRIBE", a)
    assert ask(c, "UNSUBSCRIBE", p + "b") == frame("unsubscribe", p + "b", 1)
    assert ask(c, "PUNSUBSCRIBE", p + "*") == frame("punsubscribe", p + "*", 1)
    assert ask(c, "SUNSUBSCRIBE", p + "s") == frame("sunsubscribe", p + "s", 0)
    # still subscribed to a
    assert c.cmd("GET", "k") == Err(CANT.format("get"))
    assert pub.cmd("PUBLISH", a, "still") == 1
    assert read_frames(c, 1) == frame("message", a, "still")


def test_duplicates_in_one_unsubscribe(srv, conns, p):
    c = conns(srv)
    a, b = p + "a", p + "b"
    subscribe(c, "SUBSCRIBE", a, b)
    assert ask(c, "UNSUBSCRIBE", a, a, replies=2) == (
        frame("unsubscribe", a, 1) + frame("unsubscribe", a, 1))
    subscribe(c, "PSUBSCRIBE", p + "*")
    assert ask(c, "PUNSUBSCRIBE", p + "*", p + "*", replies=2) == (
        frame("punsubscribe", p + "*", 1) + frame("punsubscribe", p + "*", 1))


def test_unsubscribe_all_names_each_channel(srv, conns, p):
    c, pub = conns(srv), conns(srv)
    names = [p + x for x in "abc"]
    subscribe(c, "SUBSCRIBE", *names)
    subscribe(c, "PSUBSCRIBE", p + "z*")
    c.send(encode("UNSUBSCRIBE"))
    got = [c.reply() for _ in names]
    assert all(g[0] == b"unsubscribe" for g in got)
    # any order, each once, the count going down
    assert sorted(g[1] for g in got) == [n.encode() for n in names]
    assert [g[2] for g in got] == [3, 2, 1]
    assert pub.cmd("PUBLISH", names[0], "x") == 0
    # the pattern keeps the connection in subscribed mode
    assert c.cmd("GET", "k") == Err(CANT.format("get"))
    assert ask(c, "PUNSUBSCRIBE") == frame("punsubscribe", p + "z*", 0)
    assert c.cmd("GET", p + "k") is None


def test_punsubscribe_all(srv, conns, p):
    c, pub = conns(srv), conns(srv)
    pats = [p + x + "*" for x in "abc"]
    subscribe(c, "PSUBSCRIBE", *pats)
    subscribe(c, "SUBSCRIBE", p + "chan")
    c.send(encode("PUNSUBSCRIBE"))
    got = [c.reply() for _ in pats]
    assert all(g[0] == b"punsubscribe" for g in got)
    assert sorted(g[1] for g in got) == [x.encode() for x in pats]
    assert [g[2] for g in got] == [3, 2, 1]
    assert pub.cmd("PUBLISH", p + "a1", "x") == 0
    assert pub.cmd("PUBLISH", p + "chan", "y") == 1
    assert read_frames(c, 1) == frame("message", p + "chan", "y")
    assert ask(c, "PING") == frame("pong", "")


# ---------------------------------------------------------------------------
# RESP2 subscribed mode.


def test_resp2_subscribed_mode_refuses_other_commands(srv, conns, p):
    c = conns(srv)
    subscribe(c, "SUBSCRIBE", p + "a")
    for args, name in [(("GET", "k"), "get"), (("SET", p + "k", "v"), "set"),
                       (("PUBLISH", p + "a", "x"), "publish"), (("SELECT", "1"), "select"),
                       (("CLIENT", "ID"), "client|id"),
                       (("PUBSUB", "NUMSUB", p + "a"), "pubsub|numsub"),
                       (("HELLO", "3"), "hello")]:
        assert c.cmd(*args) == Err(CANT.format(name)), args
    # the refused SET wrote nothing
    with srv.raw() as other:
        assert other.cmd("EXISTS", p + "k") == 0
    assert ask(c, "PING") == frame("pong", "")
    assert ask(c, "PING", "hi") == frame("pong", "hi")
    assert c.cmd("QUIT") == "OK"
    assert c.read_all(timeout=5) == (b"", True)


def test_last_unsubscribe_leaves_subscribed_mode(srv, conns, p):
    c = conns(srv)
    subscribe(c, "SUBSCRIBE", p + "a")
    subscribe(c, "PSUBSCRIBE", p + "*")
    assert ask(c, "UNSUBSCRIBE", p + "a") == frame("unsubscribe", p + "a", 1)
    assert c.cmd("GET", p + "k") == Err(CANT.format("get"))
    assert ask(c, "PUNSUBSCRIBE", p + "*") == frame("punsubscribe", p + "*", 0)
    assert c.cmd("SET", p + "k", "v") == "OK"
    assert c.cmd("GET", p + "k") == b"v"
    assert c.cmd("PING") == "PONG"
    assert c.cmd("DEL", p + "k") == 1


def test_a_shard_subscription_alone_is_subscribed_mode(srv, conns, p):
    c = conns(srv)
    subscribe(c, "SSUBSCRIBE", p + "s")
    assert c.cmd("GET", p + "k") == Err(CANT.format("get"))
    assert ask(c, "SUNSUBSCRIBE") == frame("sunsubscribe", p + "s", 0)
    assert c.cmd("GET", p + "k") is None


def test_reset_leaves_subscribed_mode(srv, conns, p):
    c, pub = conns(srv), conns(srv)
    subscribe(c, "SUBSCRIBE", p + "a")
    subscribe(c, "PSUBSCRIBE", p + "*")
    subscribe(c, "SSUBSCRIBE", p + "s")
    assert c.cmd("RESET") == "RESET"
    assert c.cmd("GET", p + "k") is None
    assert pub.cmd("PUBLISH", p + "a", "x") == 0
    assert pub.cmd("SPUBLISH", p + "s", "x") == 0
    assert pub.cmd("PUBSUB", "NUMSUB", p + "a") == [(p + "a").encode(), 0]
    assert pub.cmd("PUBSUB", "SHARDNUMSUB", p + "s") == [(p + "s").encode(), 0]
    # a new subscription counts from 1 again
    assert ask(c, "SUBSCRIBE", p + "b") == frame("subscribe", p + "b", 1)


# ---------------------------------------------------------------------------
# RESP3.


def hello3(c):
    assert c.cmd("HELLO", "3")[b"proto"] == 3


def test_resp3_confirmations_are_push_frames(srv, conns, p):
    c = conns(srv)
    hello3(c)
    assert ask(c, "UNSUBSCRIBE") == push("unsubscribe", None, 0)
    assert ask(c, "PUNSUBSCRIBE") == push("punsubscribe", None, 0)
    assert ask(c, "SUNSUBSCRIBE") == push("sunsubscribe", None, 0)
    assert ask(c, "SUBSCRIBE", p + "a", p + "b", replies=2) == (
        push("subscribe", p + "a", 1) + push("subscribe", p + "b", 2))
    assert ask(c, "PSUBSCRIBE", p + "*") == push("psubscribe", p + "*", 3)
    assert ask(c, "SSUBSCRIBE", p + "s") == push("ssubscribe", p + "s", 1)
    assert ask(c, "UNSUBSCRIBE", p + "a") == push("unsubscribe", p + "a", 2)
    assert ask(c, "PUNSUBSCRIBE") == push("punsubscribe", p + "*", 1)
    assert ask(c, "SUNSUBSCRIBE", p + "s") == push("sunsubscribe", p + "s", 0)
    assert ask(c, "UNSUBSCRIBE") == push("unsubscribe", p + "b", 0)


def test_resp3_messages_are_push_frames(srv, conns, p):
    sub, pub = conns(srv), conns(srv)
    hello3(sub)
    ch, pat, sh = p + "ch", p + "c*", p + "sh"
    ask(sub, "SUBSCRIBE", ch)
    ask(sub, "PSUBSCRIBE", pat)
    ask(sub, "SSUBSCRIBE", sh)
    assert pub.cmd("PUBLISH", ch, "v1") == 2
    assert read_frames(sub, 2) == push("message", ch, "v1") + push("pmessage", pat, ch, "v1")
    assert pub.cmd("SPUBLISH", sh, "v2") == 1
    assert read_frames(sub, 1) == push("smessage", sh, "v2")


def test_resp3_commands_run_while_subscribed(srv, conns, p):
    c = conns(srv)
    hello3(c)
    ch = p + "ch"
    ask(c, "SUBSCRIBE", ch)
    assert ask(c, "GET", p + "k") == b"_\r\n"
    assert ask(c, "SET", p + "k", "v") == b"+OK\r\n"
    assert ask(c, "GET", p + "k") == b"$1\r\nv\r\n"
    assert ask(c, "PING") == b"+PONG\r\n"
    assert ask(c, "PING", "hi") == b"$2\r\nhi\r\n"
    # NUMSUB and SHARDNUMSUB stay flat arrays in RESP3 (a channel may repeat)
    assert ask(c, "PUBSUB", "NUMSUB", ch, p + "x", ch) == frame(ch, 1, p + "x", 0, ch, 1)
    assert ask(c, "PUBSUB", "SHARDNUMSUB", p + "s") == frame(p + "s", 0)
    assert ask(c, "PUBSUB", "NUMSUB") == b"*0\r\n"
    assert isinstance(c.cmd("CLIENT", "ID"), int)
    # a message to itself: the push, then PUBLISH's reply
    assert ask(c, "PUBLISH", ch, "me", replies=2) == push("message", ch, "me") + b":1\r\n"
    assert c.cmd("DEL", p + "k") == 1


# ---------------------------------------------------------------------------
# PUBSUB introspection.


def test_pubsub_channels(srv, conns, p):
    one, two, pats, shard, q = (conns(srv) for _ in range(5))
    a, b, c = p + "a", p + "b", p + "c"
    subscribe(one, "SUBSCRIBE", a, b)
    subscribe(two, "SUBSCRIBE", b, c)
    subscribe(pats, "PSUBSCRIBE", p + "*")  # patterns are not channels
    subscribe(shard, "SSUBSCRIBE", p + "s")  # nor shard channels
    assert channels(q, p + "*") == [x.encode() for x in (a, b, c)]
    assert channels(q, p + "[ab]") == [a.encode(), b.encode()]
    assert channels(q, p + "zz*") == []
    everything = q.cmd("PUBSUB", "CHANNELS")
    assert {a.encode(), b.encode(), c.encode()} <= set(everything)
    assert (p + "s").encode() not in everything
    assert len(everything) == len(set(everything))
    subscribe(one, "UNSUBSCRIBE", a)
    assert channels(q, p + "*") == [b.encode(), c.encode()]
    two.close()
    wait_for(lambda: channels(q, p + "*") == [b.encode()], what="CHANNELS without the closed client")


def test_pubsub_numsub(srv, conns, p):
    one, two, pats, q = (conns(srv) for _ in range(4))
    a, b, c = p + "a", p + "b", p + "c"
    subscribe(one, "SUBSCRIBE", a, b)
    subscribe(two, "SUBSCRIBE", b, c)
    subscribe(pats, "PSUBSCRIBE", p + "*")  # not counted by NUMSUB
    assert ask(q, "PUBSUB", "NUMSUB", a, b, c, p + "nope", a) == frame(
        a, 1, b, 2, c, 1, p + "nope", 0, a, 1)
    assert ask(q, "PUBSUB", "NUMSUB") == b"*0\r\n"
    subscribe(two, "UNSUBSCRIBE", b)
    assert q.cmd("PUBSUB", "NUMSUB", b) == [b.encode(), 1]
    one.close()
    wait_for(lambda: q.cmd("PUBSUB", "NUMSUB", a, b, c) == [a.encode(), 0, b.encode(), 0, c.encode(), 1],
             what="NUMSUB without the closed client")


def test_pubsub_numpat_counts_distinct_patterns(srv, conns, p):
    one, two, chans, q = (conns(srv) for _ in range(4))
    no_patterns_left(q)
    subscribe(one, "PSUBSCRIBE", p + "1*", p + "2*")
    subscribe(two, "PSUBSCRIBE", p + "2*", p + "3*")
    subscribe(chans, "SUBSCRIBE", p + "1x")  # channels are not patterns
    assert ask(q, "PUBSUB", "NUMPAT") == b":3\r\n"
    subscribe(two, "PUNSUBSCRIBE", p + "2*")  # one still has it
    assert numpat(q) == 3
    subscribe(one, "PUNSUBSCRIBE", p + "1*")
    assert numpat(q) == 2
    two.close()
    wait_for(lambda: numpat(q) == 1, what="NUMPAT without the closed client")


def test_pubsub_shard_counts(srv, conns, p):
    one, two, plain, q = (conns(srv) for _ in range(4))
    a, b = p + "a", p + "b"
    subscribe(one, "SSUBSCRIBE", a, b)
    subscribe(two, "SSUBSCRIBE", b)
    subscribe(plain, "SUBSCRIBE", p + "c")  # not a shard channel
    assert sorted(q.cmd("PUBSUB", "SHARDCHANNELS", p + "*")) == [a.encode(), b.encode()]
    assert q.cmd("PUBSUB", "SHARDCHANNELS", p + "b") == [b.encode()]
    assert {a.encode(), b.encode()} <= set(q.cmd("PUBSUB", "SHARDCHANNELS"))
    assert ask(q, "PUBSUB", "SHARDNUMSUB", a, b, p + "c") == frame(a, 1, b, 2, p + "c", 0)
    assert ask(q, "PUBSUB", "SHARDNUMSUB") == b"*0\r\n"
    assert q.cmd("SPUBLISH", b, "x") == 2
    one.close()
    wait_for(lambda: q.cmd("PUBSUB", "SHARDNUMSUB", a, b) == [a.encode(), 0, b.encode(), 1],
             what="SHARDNUMSUB without the closed client")
    assert q.cmd("PUBSUB", "SHARDCHANNELS", p + "*") == [b.encode()]


def test_pubsub_argument_errors(srv, conns):
    c = conns(srv)
    assert c.cmd("PUBSUB") == Err("ERR wrong number of arguments for 'pubsub' command")
    assert c.cmd("PUBSUB", "foo") == Err("ERR unknown subcommand 'foo'. Try PUBSUB HELP.")
    assert c.cmd("PUBSUB", "channels", "a", "b") == Err(
        "ERR unknown subcommand or wrong number of arguments for 'channels'. Try PUBSUB HELP.")
    assert c.cmd("PUBSUB", "NUMPAT", "x") == Err(
        "ERR wrong number of arguments for 'pubsub|numpat' command")
    for cmd in ("SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"):
        assert c.cmd(cmd) == Err(f"ERR wrong number of arguments for '{cmd.lower()}' command")
    for cmd in ("PUBLISH", "SPUBLISH"):
        assert c.cmd(cmd, "ch") == Err(f"ERR wrong number of arguments for '{cmd.lower()}' command")
    # none of these left the connection in subscribed mode
    assert c.cmd("PING") == "PONG"


# ---------------------------------------------------------------------------
# redis-py's PubSub object, RESP2 and RESP3.


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_pubsub(srv, p, protocol):
    r = srv.client(protocol=protocol)
    ps = r.pubsub()
    ch, pat, sh = p + "ch", p + "c*", p + "sh"
    try:
        def next_message():
            m = ps.get_message(timeout=10)
            assert m is not None, "no message within 10 s"
            return m

        ps.subscribe(ch)
        assert next_message() == {"type": "subscribe", "pattern": None, "channel": ch, "data": 1}
        ps.psubscribe(pat)
        assert next_message() == {"type": "psubscribe", "pattern": None, "channel": pat, "data": 2}
        assert r.publish(ch, "hello") == 2
        assert next_message() == {"type": "message", "pattern": None, "channel": ch, "data": "hello"}
        assert next_message() == {"type": "pmessage", "pattern": pat, "channel": ch, "data": "hello"}
        assert r.pubsub_numsub(ch) == [(ch, 1)]
        assert r.pubsub_channels(p + "*") == [ch]
        assert r.pubsub_numpat() >= 1
        ps.ssubscribe(sh)
        m = ps.get_sharded_message(timeout=10)
        assert m == {"type": "ssubscribe", "pattern": None, "channel": sh, "data": 1}
        assert r.spublish(sh, "s") == 1
        m = ps.get_sharded_message(timeout=10)
        assert m == {"type": "smessage", "pattern": None, "channel": sh, "data": "s"}
        assert r.pubsub_shardnumsub(sh) == [(sh, 1)]
        ps.unsubscribe()
        assert next_message() == {"type": "unsubscribe", "pattern": None, "channel": ch, "data": 1}
        ps.punsubscribe()
        assert next_message() == {"type": "punsubscribe", "pattern": None, "channel": pat, "data": 0}
        assert r.publish(ch, "gone") == 0
    finally:
        ps.close()
        r.close()


# ---------------------------------------------------------------------------
# Across workers (shoal only).


@pytest.fixture(scope="module")
def two():
    s = Server(workers=2).start()
    yield s
    s.stop()


def read_messages(c, n, out, errors):
    """Reader thread body: the payloads of `n` message/pmessage frames into
    `out`; a wrong frame or a closed socket goes to `errors`."""
    reader = FrameReader(c)
    try:
        for _ in range(n):
            f = reader.frame()
            if f[0] == b"message":
                out.append(f[2])
            elif f[0] == b"pmessage":
                out.append(f[3])
            else:
                errors.append(f)
                return
    except Exception as e:  # reported by the test thread
        errors.append(e)
    finally:
        reader.release()


@pytest.mark.shoal_only
def test_cross_worker_every_subscriber_gets_every_message_in_order(two, conns, p):
    ch = p + "md"
    pub = conns(two, slot=0)
    subs = []
    for slot in (0, 0, 1, 1):
        c = conns(two, slot=slot)
        subscribe(c, "SUBSCRIBE", ch)
        subs.append(c)
    for slot in (0, 1):
        c = conns(two, slot=slot)
        subscribe(c, "PSUBSCRIBE", p + "m*")
        subs.append(c)
    n = 20000
    got = [[] for _ in subs]
    errors = []
    threads = [threading.Thread(target=read_messages, args=(c, n, out, errors), daemon=True)
               for c, out in zip(subs, got)]
    for t in threads:
        t.start()
    for start in range(0, n, 500):
        replies = pub.pipeline(*[("PUBLISH", ch, b"%05d" % i) for i in range(start, start + 500)])
        assert replies == [len(subs)] * 500, f"PUBLISH counts from message {start}"
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    want = [b"%05d" % i for i in range(n)]
    for i, out in enumerate(got):
        assert len(out) == n, f"subscriber {i} got {len(out)} of {n}"
        assert out == want, f"subscriber {i}: first difference at {next(j for j in range(n) if out[j] != want[j])}"
    for c in subs:
        assert ask(c, "PING") == frame("pong", ""), "a frame after the last message"


@pytest.mark.shoal_only
def test_cross_worker_publish_counts_receivers_on_both_workers(two, conns, p):
    ch = p + "x"
    pub = conns(two, slot=0)
    s1 = conns(two, slot=1)
    subscribe(s1, "SUBSCRIBE", ch)
    assert pub.cmd("PUBLISH", ch, "a") == 1
    assert read_frames(s1, 1) == frame("message", ch, "a")
    p1 = conns(two, slot=1)
    subscribe(p1, "PSUBSCRIBE", p + "*")
    assert pub.cmd("PUBLISH", ch, "b") == 2
    assert read_frames(s1, 1) == frame("message", ch, "b")
    assert read_frames(p1, 1) == frame("pmessage", p + "*", ch, "b")
    s0 = conns(two, slot=0)
    subscribe(s0, "SUBSCRIBE", ch)
    assert pub.cmd("PUBLISH", ch, "c") == 3
    assert read_frames(s0, 1) == frame("message", ch, "c")
    assert read_frames(s1, 1) == frame("message", ch, "c")
    assert read_frames(p1, 1) == frame("pmessage", p + "*", ch, "c")
    # and the other way round
    back = conns(two, slot=1)
    assert back.cmd("PUBLISH", ch, "d") == 3
    assert read_frames(s0, 1) == frame("message", ch, "d")


@pytest.mark.shoal_only
def test_cross_worker_shard_and_resp3(two, conns, p):
    pub = conns(two, slot=0)
    s = conns(two, slot=1)
    subscribe(s, "SSUBSCRIBE", p + "sh")
    assert pub.cmd("SPUBLISH", p + "sh", "v") == 1
    assert read_frames(s, 1) == frame("smessage", p + "sh", "v")
    r3 = conns(two, slot=1)
    hello3(r3)
    assert ask(r3, "SUBSCRIBE", p + "c") == push("subscribe", p + "c", 1)
    assert pub.cmd("PUBLISH", p + "c", "w") == 1
    assert read_frames(r3, 1) == push("message", p + "c", "w")


@pytest.mark.shoal_only
def test_cross_worker_pubsub_counts(two, conns, p):
    q0, q1 = conns(two, slot=0), conns(two, slot=1)
    no_patterns_left(q0)
    s0, s1 = conns(two, slot=0), conns(two, slot=1)
    ch = p + "ch"
    subscribe(s0, "SUBSCRIBE", ch, p + "only0")
    subscribe(s1, "SUBSCRIBE", ch, p + "only1")
    subscribe(s0, "PSUBSCRIBE", p + "same*", p + "p0*")
    subscribe(s1, "PSUBSCRIBE", p + "same*", p + "p1*")
    subscribe(s0, "SSUBSCRIBE", p + "sh")
    subscribe(s1, "SSUBSCRIBE", p + "sh")
    for q in (q0, q1):
        assert q.cmd("PUBSUB", "NUMSUB", ch, p + "only0", p + "only1") == [
            ch.encode(), 2, (p + "only0").encode(), 1, (p + "only1").encode(), 1]
        assert numpat(q) == 3  # "same*" once
        assert channels(q, p + "*") == sorted(x.encode() for x in (ch, p + "only0", p + "only1"))
        assert q.cmd("PUBSUB", "SHARDNUMSUB", p + "sh") == [(p + "sh").encode(), 2]
        assert q.cmd("PUBSUB", "SHARDCHANNELS", p + "*") == [(p + "sh").encode()]


@pytest.mark.shoal_only
def test_cross_worker_unsubscribe_updates_counts_at_once(two, conns, p):
    q = conns(two, slot=0)
    no_patterns_left(q)
    s = conns(two, slot=1)
    ch = p + "ch"
    subscribe(s, "SUBSCRIBE", ch)
    subscribe(s, "PSUBSCRIBE", p + "*")
    subscribe(s, "SSUBSCRIBE", p + "sh")
    assert q.cmd("PUBSUB", "NUMSUB", ch) == [ch.encode(), 1]
    assert numpat(q) == 1
    assert q.cmd("PUBLISH", ch, "x") == 2
    read_frames(s, 2)
    # each confirmation on worker 1 is visible on worker 0 as soon as it is sent
    subscribe(s, "UNSUBSCRIBE", ch)
    assert q.cmd("PUBSUB", "NUMSUB", ch) == [ch.encode(), 0]
    assert channels(q, p + "*") == []
    assert q.cmd("PUBLISH", ch, "y") == 1
    assert read_frames(s, 1) == frame("pmessage", p + "*", ch, "y")
    subscribe(s, "PUNSUBSCRIBE", p + "*")
    assert numpat(q) == 0
    assert q.cmd("PUBLISH", ch, "z") == 0
    subscribe(s, "SUNSUBSCRIBE", p + "sh")
    assert q.cmd("PUBSUB", "SHARDNUMSUB", p + "sh") == [(p + "sh").encode(), 0]
    assert q.cmd("SPUBLISH", p + "sh", "w") == 0
    # nothing was delivered after the unsubscribes, and s left subscribed mode
    assert s.cmd("PING") == "PONG"


@pytest.mark.shoal_only
def test_cross_worker_closed_subscriber_leaves_the_counts(two, conns, p):
    q = conns(two, slot=0)
    no_patterns_left(q)
    s = conns(two, slot=1)
    ch = p + "ch"
    subscribe(s, "SUBSCRIBE", ch)
    subscribe(s, "PSUBSCRIBE", p + "*")
    subscribe(s, "SSUBSCRIBE", p + "sh")
    assert q.cmd("PUBLISH", ch, "x") == 2
    s.close()
    wait_for(lambda: q.cmd("PUBSUB", "NUMSUB", ch) == [ch.encode(), 0], what="NUMSUB 0")
    wait_for(lambda: numpat(q) == 0, what="NUMPAT 0")
    wait_for(lambda: q.cmd("PUBSUB", "SHARDNUMSUB", p + "sh") == [(p + "sh").encode(), 0],
             what="SHARDNUMSUB 0")
    assert channels(q, p + "*") == []
    assert q.cmd("PUBSUB", "SHARDCHANNELS", p + "*") == []
    assert q.cmd("PUBLISH", ch, "y") == 0
    assert q.cmd("SPUBLISH", p + "sh", "y") == 0


@pytest.mark.shoal_only
def test_several_publishers_on_both_workers_keep_their_order(two, conns, p):
    ch = p + "multi"
    subs = []
    for slot, verb, name in [(0, "SUBSCRIBE", ch), (1, "SUBSCRIBE", ch),
                             (0, "PSUBSCRIBE", p + "mul*"), (1, "PSUBSCRIBE", p + "*")]:
        c = conns(two, slot=slot)
        subscribe(c, verb, name)
        subs.append(c)
    pubs = [conns(two, slot=slot) for slot in (0, 0, 1, 1)]
    n = 3000
    got = [[] for _ in subs]
    errors = []
    readers = [threading.Thread(target=read_messages, args=(c, n * len(pubs), out, errors),
                                daemon=True) for c, out in zip(subs, got)]

    def publish(i, c):
        try:
            for start in range(0, n, 250):
                replies = c.pipeline(*[("PUBLISH", ch, b"%d:%d" % (i, k))
                                       for k in range(start, start + 250)])
                if replies != [len(subs)] * 250:
                    errors.append((i, start, replies[:5]))
                    return
        except Exception as e:
            errors.append(e)

    writers = [threading.Thread(target=publish, args=(i, c), daemon=True) for i, c in enumerate(pubs)]
    for t in readers + writers:
        t.start()
    for t in writers + readers:
        t.join(120)
    assert not errors, errors[:3]
    for s, out in enumerate(got):
        assert len(out) == n * len(pubs), f"subscriber {s} got {len(out)}"
        per = {}
        for m in out:
            i, k = m.split(b":")
            per.setdefault(int(i), []).append(int(k))
        for i in range(len(pubs)):
            assert per.get(i) == list(range(n)), f"subscriber {s}, publisher {i} out of order"
