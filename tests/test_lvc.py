"""Retained channels (the last-value cache, docs/pubsub.md): `CONFIG SET
lvc-channels`, LSUBSCRIBE / LUNSUBSCRIBE, the snapshot and the sequence
numbers, the `__lvc__:<channel>` key, RESP2 and RESP3 frames byte for byte,
on a two-worker shoal with clients placed on chosen workers.

The race tests at the end are the issue's: publishers at full speed in
processes of their own while subscribers on both workers join and leave over
and over; every subscription must see its snapshot, then each following
sequence number exactly once. `python tests/test_lvc.py publish PORT SLOT
CHANNEL...` is the publisher they start."""

import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import uuid

import pytest

from shoaltest import (Err, FrameReader, Raw, Server, encode, raw_on_worker, wait_for,
                       worker_slot, worker_slot_pids)
from pubsubtest import CANT, ask, frame, push, read_frames

pytestmark = pytest.mark.shoal_only


# ---------------------------------------------------------------------------
# Frames as the server writes them.


def lvc_key(channel):
    return "__lvc__:" + channel


class retained:
    """The value of `__lvc__:<channel>`: a big-endian epoch (any), the
    big-endian sequence, then the message. Compares equal to such bytes."""

    def __init__(self, seq, message):
        if isinstance(message, str):
            message = message.encode()
        self.seq, self.message = seq, message

    def __eq__(self, other):
        return (isinstance(other, bytes) and len(other) >= 16
                and int.from_bytes(other[8:16], "big") == self.seq
                and other[16:] == self.message)

    def __repr__(self):
        return f"retained(seq={self.seq}, message={self.message!r})"


def retained_seq(value):
    """The sequence number in a `__lvc__:` value (0 when there is none)."""
    return 0 if value is None else int.from_bytes(value[8:16], "big")


# ---------------------------------------------------------------------------
# Fixtures.


@pytest.fixture(scope="module")
def two():
    """A two-worker shoal retaining `md.*`. The race tests' Python readers
    can fall behind a full-speed publisher for a moment, so the pubsub output
    limit is off here (test_pubsub_limits.py tests it)."""
    s = Server(workers=2).start()
    with raw_on_worker(s, 0) as c:
        assert c.cmd("CONFIG", "SET", "lvc-channels", "md.*") == "OK"
        assert c.cmd("CONFIG", "SET", "client-output-buffer-limit", "pubsub 0 0 0") == "OK"
    with raw_on_worker(s, 1) as c:
        wait_for(lambda: c.cmd("CONFIG", "GET", "lvc-channels") == [b"lvc-channels", b"md.*"],
                 what="worker 1 to see lvc-channels")
    yield s
    s.stop()


@pytest.fixture
def p():
    """A retained-channel prefix of this test's own."""
    return f"md.{uuid.uuid4().hex[:10]}."


# ---------------------------------------------------------------------------
# Frames and numbering.


def test_snapshot_then_every_message_numbered_one_more(two, conns, p):
    a, b = p + "a", p + "b"
    pub, sub = conns(two, 1), conns(two, 0)
    assert pub.cmd("PUBLISH", a, "v1") == 0
    assert pub.cmd("PUBLISH", a, "v2") == 0
    # b has nothing retained: its confirmation has no snapshot after it
    assert ask(sub, "LSUBSCRIBE", a, b, replies=3) == (
        frame("lsubscribe", a, 1) + frame("lmessage", a, 2, "v2") + frame("lsubscribe", b, 2))
    assert pub.cmd("PUBLISH", a, "v3") == 1
    assert read_frames(sub, 1) == frame("lmessage", a, 3, "v3")
    assert pub.cmd("PUBLISH", b, "w1") == 1
    assert read_frames(sub, 1) == frame("lmessage", b, 1, "w1")
    assert pub.cmd("PUBLISH", a, "v4") == 1
    assert pub.cmd("PUBLISH", b, "w2") == 1
    assert read_frames(sub, 2) == frame("lmessage", a, 4, "v4") + frame("lmessage", b, 2, "w2")


def test_publisher_on_the_subscribers_worker(two, conns, p):
    ch = p + "local"
    pub, sub = conns(two, 0), conns(two, 0)
    assert ask(sub, "LSUBSCRIBE", ch) == frame("lsubscribe", ch, 1)
    for i in range(1, 4):
        assert pub.cmd("PUBLISH", ch, f"m{i}") == 1
    assert read_frames(sub, 3) == b"".join(frame("lmessage", ch, i, f"m{i}") for i in range(1, 4))
    late = conns(two, 1)
    assert ask(late, "LSUBSCRIBE", ch, replies=2) == (
        frame("lsubscribe", ch, 1) + frame("lmessage", ch, 3, "m3"))


def test_a_channel_that_is_not_retained_numbers_nothing(two, conns):
    ch = f"plain.{uuid.uuid4().hex[:10]}"
    pub, sub = conns(two, 0), conns(two, 1)
    assert pub.cmd("PUBLISH", ch, "before") == 0
    # no snapshot: the next frame is the reply to PING in subscribed mode
    assert ask(sub, "LSUBSCRIBE", ch) == frame("lsubscribe", ch, 1)
    assert ask(sub, "PING") == frame("pong", "")
    assert pub.cmd("PUBLISH", ch, "m1") == 1
    assert pub.cmd("PUBLISH", ch, "m2") == 1
    assert read_frames(sub, 2) == frame("lmessage", ch, 0, "m1") + frame("lmessage", ch, 0, "m2")
    assert pub.cmd("EXISTS", lvc_key(ch)) == 0


def test_plain_subscribers_of_a_retained_channel_get_message_frames(two, conns, p):
    ch = p + "x"
    pub = conns(two, 0)
    assert pub.cmd("PUBLISH", ch, "old") == 0
    plain = [conns(two, 0), conns(two, 1)]
    for c in plain:
        # SUBSCRIBE sends no snapshot
        assert ask(c, "SUBSCRIBE", ch) == frame("subscribe", ch, 1)
        assert ask(c, "PING") == frame("pong", "")
    lsub = conns(two, 1)
    assert ask(lsub, "LSUBSCRIBE", ch, replies=2) == (
        frame("lsubscribe", ch, 1) + frame("lmessage", ch, 1, "old"))
    assert pub.cmd("PUBLISH", ch, "new") == 3
    for c in plain:
        assert read_frames(c, 1) == frame("message", ch, "new")
    assert read_frames(lsub, 1) == frame("lmessage", ch, 2, "new")


def test_one_client_subscribed_both_ways_gets_both_frames(two, conns, p):
    ch = p + "both"
    pub, sub = conns(two, 1), conns(two, 0)
    assert ask(sub, "SUBSCRIBE", ch) == frame("subscribe", ch, 1)
    assert ask(sub, "LSUBSCRIBE", ch) == frame("lsubscribe", ch, 2)
    assert pub.cmd("PUBLISH", ch, "m") == 2
    got = {sub.reply_bytes(), sub.reply_bytes()}
    assert got == {frame("message", ch, "m"), frame("lmessage", ch, 1, "m")}


def test_the_retained_value_is_a_db0_string_key(two, conns, p):
    ch = p + "key"
    pub = conns(two, 1)
    assert pub.cmd("SELECT", 5) == "OK"
    binary = b"a\x00b\r\n\xff"
    for m in (b"one", b"two", binary):
        assert pub.cmd("PUBLISH", ch, m) == 0
    # db 0, whichever db the publisher selected
    assert pub.cmd("EXISTS", lvc_key(ch)) == 0
    reader = conns(two, 0)
    assert reader.cmd("GET", lvc_key(ch)) == retained(3, binary)
    assert reader.cmd("TYPE", lvc_key(ch)) == "string"
    sub = conns(two, 0)
    assert ask(sub, "LSUBSCRIBE", ch, replies=2) == (
        frame("lsubscribe", ch, 1) + frame("lmessage", ch, 3, binary))


def test_deleting_the_retained_key_restarts_the_numbering(two, conns, p):
    ch = p + "restart"
    pub = conns(two, 0)
    for i in range(3):
        pub.cmd("PUBLISH", ch, f"m{i}")
    assert pub.cmd("DEL", lvc_key(ch)) == 1
    sub = conns(two, 1)
    assert ask(sub, "LSUBSCRIBE", ch) == frame("lsubscribe", ch, 1)
    assert pub.cmd("PUBLISH", ch, "again") == 1
    assert read_frames(sub, 1) == frame("lmessage", ch, 1, "again")
    assert pub.cmd("GET", lvc_key(ch)) == retained(1, "again")


@pytest.mark.parametrize("sub_slot", [0, 1])
def test_a_live_subscriber_gets_messages_after_the_numbering_restarts(two, conns, p, sub_slot):
    """The docs say deleting the key restarts the numbering; a subscriber
    that was there before must still get the messages (seq 1, 2, ...), not
    lose them silently until the count passes its old number."""
    ch = p + "live"
    pub, sub = conns(two, 0), conns(two, sub_slot)
    assert ask(sub, "LSUBSCRIBE", ch) == frame("lsubscribe", ch, 1)
    for i in range(1, 4):
        assert pub.cmd("PUBLISH", ch, f"m{i}") == 1
    assert read_frames(sub, 3) == b"".join(frame("lmessage", ch, i, f"m{i}") for i in range(1, 4))
    assert pub.cmd("DEL", lvc_key(ch)) == 1
    assert pub.cmd("PUBLISH", ch, "after") == 1
    assert read_frames(sub, 1) == frame("lmessage", ch, 1, "after")


def test_resp3_frames_are_pushes(two, conns, p):
    ch = p + "r3"
    pub, sub = conns(two, 0), conns(two, 1)
    pub.cmd("PUBLISH", ch, "snap")
    assert isinstance(sub.cmd("HELLO", "3"), dict)
    assert ask(sub, "LSUBSCRIBE", ch, replies=2) == (
        push("lsubscribe", ch, 1) + push("lmessage", ch, 1, "snap"))
    # RESP3 clients run any command while subscribed
    got = ask(sub, "GET", lvc_key(ch))
    header, _, body = got.partition(b"\r\n")
    assert header == b"$20" and body[:-2] == retained(1, "snap")
    assert pub.cmd("PUBLISH", ch, "live") == 1
    assert read_frames(sub, 1) == push("lmessage", ch, 2, "live")
    assert ask(sub, "LUNSUBSCRIBE") == push("lunsubscribe", ch, 0)
    assert ask(sub, "LUNSUBSCRIBE") == push("lunsubscribe", None, 0)


def test_lunsubscribe_replies_and_counts_with_other_kinds(two, conns, p):
    a, b = p + "a", p + "b"
    c = conns(two, 0)
    assert ask(c, "LUNSUBSCRIBE") == frame("lunsubscribe", None, 0)
    assert ask(c, "SUBSCRIBE", p + "plain") == frame("subscribe", p + "plain", 1)
    assert ask(c, "LSUBSCRIBE", a, b, replies=2) == frame("lsubscribe", a, 2) + frame("lsubscribe", b, 3)
    assert ask(c, "PSUBSCRIBE", p + "*") == frame("psubscribe", p + "*", 4)
    # shard channels count on their own
    assert ask(c, "SSUBSCRIBE", p + "sh") == frame("ssubscribe", p + "sh", 1)
    assert ask(c, "LUNSUBSCRIBE", a) == frame("lunsubscribe", a, 3)
    assert ask(c, "LUNSUBSCRIBE", p + "never") == frame("lunsubscribe", p + "never", 3)
    assert ask(c, "LUNSUBSCRIBE") == frame("lunsubscribe", b, 2)
    assert ask(c, "LUNSUBSCRIBE") == frame("lunsubscribe", None, 2)
    # LUNSUBSCRIBE leaves the plain subscription alone
    pub = conns(two, 1)
    assert pub.cmd("PUBLISH", p + "plain", "m") == 2
    assert read_frames(c, 2) == (frame("message", p + "plain", "m")
                                 + frame("pmessage", p + "*", p + "plain", "m"))


def test_lsubscribe_twice_sends_one_snapshot(two, conns, p):
    ch = p + "twice"
    pub, sub = conns(two, 1), conns(two, 0)
    pub.cmd("PUBLISH", ch, "v")
    assert ask(sub, "LSUBSCRIBE", ch, replies=2) == (
        frame("lsubscribe", ch, 1) + frame("lmessage", ch, 1, "v"))
    assert ask(sub, "LSUBSCRIBE", ch) == frame("lsubscribe", ch, 1)
    assert ask(sub, "PING") == frame("pong", "")
    assert pub.cmd("PUBLISH", ch, "w") == 1
    assert read_frames(sub, 1) == frame("lmessage", ch, 2, "w")


def test_lsubscribe_is_subscribed_mode_in_resp2(two, conns, p):
    ch = p + "mode"
    c = conns(two, 1)
    assert ask(c, "LSUBSCRIBE", ch) == frame("lsubscribe", ch, 1)
    assert c.cmd("GET", "x") == Err(CANT.format("get"))
    assert c.cmd("PUBLISH", ch, "x") == Err(CANT.format("publish"))
    assert ask(c, "LUNSUBSCRIBE", ch) == frame("lunsubscribe", ch, 0)
    assert c.cmd("PING") == "PONG"


def test_publish_counts_and_numsub_on_both_workers(two, conns, p):
    ch = p + "count"
    pubs = [conns(two, 0), conns(two, 1)]
    subs = [conns(two, 0), conns(two, 1)]
    for s in subs:
        ask(s, "LSUBSCRIBE", ch)
    for q in pubs:
        assert q.cmd("PUBSUB", "NUMSUB", ch) == [ch.encode(), 2]
        assert q.cmd("PUBLISH", ch, "m") == 2
    for s in subs:
        assert read_frames(s, 2) == frame("lmessage", ch, 1, "m") + frame("lmessage", ch, 2, "m")
    assert ask(subs[1], "LUNSUBSCRIBE") == frame("lunsubscribe", ch, 0)
    for q in pubs:
        assert q.cmd("PUBSUB", "NUMSUB", ch) == [ch.encode(), 1]
    subs[0].close()
    for q in pubs:
        wait_for(lambda q=q: q.cmd("PUBSUB", "NUMSUB", ch) == [ch.encode(), 0],
                 what="NUMSUB 0 after the subscriber closed")
        assert q.cmd("PUBLISH", ch, "n") == 0


def test_several_globs_set_on_one_worker_apply_on_the_other(two, conns):
    tag = uuid.uuid4().hex[:10]
    c0, c1 = conns(two, 0), conns(two, 1)
    try:
        assert c0.cmd("CONFIG", "SET", "lvc-channels", "md.* fx.*") == "OK"
        wait_for(lambda: c1.cmd("CONFIG", "GET", "lvc-channels") == [b"lvc-channels", b"md.* fx.*"],
                 what="worker 1 to see lvc-channels")
        for i in (1, 2):
            assert c1.cmd("PUBLISH", f"fx.{tag}", "eur") == 0
            assert c1.cmd("PUBLISH", f"md.{tag}", "px") == 0
        assert c0.cmd("GET", f"__lvc__:fx.{tag}") == retained(2, "eur")
        assert c0.cmd("GET", f"__lvc__:md.{tag}") == retained(2, "px")
        assert c1.cmd("PUBLISH", f"ot.{tag}", "no") == 0
        assert c0.cmd("EXISTS", f"__lvc__:ot.{tag}") == 0
    finally:
        assert c0.cmd("CONFIG", "SET", "lvc-channels", "md.*") == "OK"
    wait_for(lambda: c1.cmd("CONFIG", "GET", "lvc-channels") == [b"lvc-channels", b"md.*"],
             what="worker 1 to see lvc-channels md.*")
    # fx.* is no longer retained: its messages go out unnumbered and the
    # old retained value stays as it was
    fresh = f"fx.{tag}.new"
    sub = conns(two, 0)
    assert ask(sub, "LSUBSCRIBE", fresh) == frame("lsubscribe", fresh, 1)
    assert c1.cmd("PUBLISH", fresh, "later") == 1
    assert c1.cmd("PUBLISH", f"fx.{tag}", "later") == 0
    assert read_frames(sub, 1) == frame("lmessage", fresh, 0, "later")
    assert c0.cmd("EXISTS", f"__lvc__:{fresh}") == 0
    assert c0.cmd("GET", f"__lvc__:fx.{tag}") == retained(2, "eur")


def test_numbering_survives_a_worker_restart(make_server):
    s = make_server(workers=2)
    ch = "md.restart"
    with raw_on_worker(s, 0) as c:
        assert c.cmd("CONFIG", "SET", "lvc-channels", "md.*") == "OK"
    with raw_on_worker(s, 1) as c:
        wait_for(lambda: c.cmd("CONFIG", "GET", "lvc-channels")[1] == b"md.*", what="config")
        for i in range(3):
            c.cmd("PUBLISH", ch, f"m{i}")
    old = worker_slot_pids(s)[1]
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: worker_slot_pids(s).get(1) not in (None, old), what="worker 1 to restart")
    with raw_on_worker(s, 1) as c:
        assert c.cmd("PUBLISH", ch, "m3") == 0
        assert c.cmd("GET", lvc_key(ch)) == retained(4, "m3")
        assert ask(c, "LSUBSCRIBE", ch, replies=2) == (
            frame("lsubscribe", ch, 1) + frame("lmessage", ch, 4, "m3"))


# ---------------------------------------------------------------------------
# Races: publishers at full speed, subscribers joining and leaving.


def publisher_main(port, slot, channels):
    """Publishes `<slot>:<n>` as its n-th message on each channel, round
    robin, in pipelined batches, until a line arrives on stdin; prints
    "started" after the first batch and its last n per channel as JSON at
    the end."""
    conn = None
    for _ in range(400):
        conn = Raw(port)
        if worker_slot(conn) == slot:
            break
        conn.close()
    else:
        raise SystemExit(f"no connection on worker {slot}")
    counts = {ch: 0 for ch in channels}
    started = False
    while True:
        batch = []
        for _ in range(32):
            for ch in channels:
                counts[ch] += 1
                batch.append(encode("PUBLISH", ch, f"{slot}:{counts[ch]}"))
        conn.send(b"".join(batch))
        for _ in batch:
            r = conn.reply()
            if not isinstance(r, int):
                raise SystemExit(f"PUBLISH replied {r!r}")
        if not started:
            print("started", flush=True)
            started = True
        if select.select([sys.stdin], [], [], 0)[0]:
            break
    print(json.dumps(counts), flush=True)


class Publisher:
    """A publisher process on worker `slot` (see publisher_main)."""

    def __init__(self, server, slot, channels):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "publish", str(server.port), str(slot), *channels],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.strip() == "started", f"publisher did not start: {line!r}"

    def stop(self):
        """The last n published per channel."""
        out, _ = self.proc.communicate("stop\n", timeout=60)
        assert self.proc.returncode == 0, out
        return json.loads(out.strip().splitlines()[-1])

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Churner:
    """One subscriber that joins and leaves retained channels over and over
    on one worker and checks every subscription: the snapshot comes right
    after its confirmation and is at or after the retained value read just
    before subscribing; then come the next sequence numbers, each exactly
    once, and each publisher's messages in its order with none missing. On
    a channel with one publisher (`shared` false) message n is seq n."""

    def __init__(self, server, slot, channels, shared, seed):
        self.server, self.slot, self.channels, self.shared = server, slot, channels, shared
        self.rng = random.Random(seed)
        self.observer = raw_on_worker(server, slot)
        self.conn = None
        self.reader = None
        self.last = {}  # channel -> last sequence number seen
        self.sent = {}  # (channel, publisher) -> its last n seen
        self.subscriptions = 0
        self.messages = 0

    def close(self):
        for c in (self.conn, self.observer):
            if c is not None:
                c.close()

    def payload(self, ch, seq, msg):
        """Checks a message against its publisher's previous one."""
        publisher, n = msg.decode().split(":")
        n = int(n)
        if not self.shared:
            assert n == seq, f"{ch}: message {msg!r} with seq {seq}"
        before = self.sent.get((ch, publisher))
        assert before is None or n == before + 1, f"{ch}: {msg!r} after {publisher}:{before}"
        self.sent[(ch, publisher)] = n

    def lmessage(self, f):
        assert f[0] == b"lmessage", f
        ch, seq = f[1].decode(), f[2]
        assert ch in self.last, f"lmessage on {ch}, not subscribed"
        assert seq == self.last[ch] + 1, f"{ch} on worker {self.slot}: seq {seq} after {self.last[ch]}"
        self.payload(ch, seq, f[3])
        self.last[ch] = seq
        self.messages += 1

    def forget(self, ch):
        del self.last[ch]
        for key in [k for k in self.sent if k[0] == ch]:
            del self.sent[key]

    def confirmations(self, verb, names, floor):
        """Reads (l)(un)subscribe confirmations for `names` and the snapshots
        right after lsubscribe ones; lmessages of live subscriptions may come
        before them. LSUBSCRIBE confirms in argument order, LUNSUBSCRIBE in
        any. `floor` is the lowest snapshot allowed per channel."""
        left = list(names)
        while left:
            f = self.reader.frame()
            if f[0] == b"lmessage":
                self.lmessage(f)
                continue
            ch = f[1].decode() if f[0] == verb and f[1] is not None else None
            if verb == b"lunsubscribe":
                assert ch in left, (verb, left, f)
                left.remove(ch)
                self.forget(ch)
                continue
            assert ch == left[0], (verb, left, f)
            left.pop(0)
            snap = self.reader.frame()
            assert snap[0] == b"lmessage" and snap[1] == f[1], f"no snapshot after {f}: {snap}"
            assert snap[2] >= floor[ch], f"{ch}: snapshot {snap[2]} older than {floor[ch]}"
            self.payload(ch, snap[2], snap[3])
            self.last[ch] = snap[2]
            self.subscriptions += 1

    def connect(self):
        self.conn = raw_on_worker(self.server, self.slot)
        self.reader = FrameReader(self.conn)

    def before(self, names):
        return {ch: retained_seq(self.observer.cmd("GET", lvc_key(ch))) for ch in names}

    def read(self, per_channel):
        got = dict.fromkeys(self.last, 0)
        while min(got.values()) < per_channel:
            f = self.reader.frame()
            self.lmessage(f)
            got[f[1].decode()] += 1

    def round(self, per_channel):
        if self.conn is None:
            self.connect()
        names = self.rng.sample(self.channels, self.rng.randint(1, len(self.channels)))
        floor = self.before(names)
        self.conn.send(encode("LSUBSCRIBE", *names))
        self.confirmations(b"lsubscribe", names, floor)
        self.read(per_channel)
        how = self.rng.choice(["close", "lunsubscribe", "resubscribe", "one by one"])
        if how == "close":
            self.reader.release()
            self.conn.close()
            self.conn = None
            self.last.clear()
            self.sent.clear()
        elif how == "lunsubscribe":
            self.conn.send(encode("LUNSUBSCRIBE"))
            self.confirmations(b"lunsubscribe", names, {})
            # nothing after the last confirmation but PING's reply
            self.reader.release()
            assert self.conn.cmd("PING") == "PONG"
            self.reader = FrameReader(self.conn)
        elif how == "resubscribe":
            # leave and join again in one write: messages already on their
            # way for the old subscription must not show in the new one
            floor = dict(self.last)
            self.conn.send(encode("LUNSUBSCRIBE", *names) + encode("LSUBSCRIBE", *names))
            self.confirmations(b"lunsubscribe", names, {})
            self.confirmations(b"lsubscribe", names, floor)
            self.read(per_channel)
            self.conn.send(encode("LUNSUBSCRIBE", *names))
            self.confirmations(b"lunsubscribe", names, {})
        else:
            for ch in names:
                self.conn.send(encode("LUNSUBSCRIBE", ch))
                self.confirmations(b"lunsubscribe", [ch], {})
                if self.last:
                    self.read(1)

    def run(self, rounds, per_channel, errors):
        try:
            for _ in range(rounds):
                self.round(per_channel)
        except BaseException as e:  # reported by the test thread
            errors.append(f"subscriber on worker {self.slot}: {e!r}")


ROUNDS = 150
PER_CHANNEL = 40


@pytest.mark.parametrize("publishers,shared", [
    pytest.param({0: 3}, False, id="publisher-on-worker-0"),
    pytest.param({1: 3}, False, id="publisher-on-worker-1"),
    pytest.param({0: 2, 1: 2}, False, id="publishers-on-both-workers"),
    pytest.param({0: 2, 1: 2}, True, id="publishers-on-both-workers-same-channels"),
])
def test_subscribers_join_and_leave_while_publishers_run(two, p, publishers, shared):
    """Four subscribers, two per worker, each 150 rounds of LSUBSCRIBE to
    some of the channels, 40 messages each, then a way of leaving."""
    if shared:
        channels = {slot: [f"{p}{i}" for i in range(n)] for slot, n in publishers.items()}
    else:
        channels = {slot: [f"{p}w{slot}.{i}" for i in range(n)] for slot, n in publishers.items()}
    every = sorted({ch for names in channels.values() for ch in names})
    pubs = []
    churners = []
    try:
        for slot, names in channels.items():
            pubs.append(Publisher(two, slot, names))
        churners = [Churner(two, slot, every, shared, seed=i) for i, slot in enumerate((0, 1, 0, 1))]
        errors = []
        threads = [threading.Thread(target=c.run, args=(ROUNDS, PER_CHANNEL, errors), daemon=True)
                   for c in churners]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert not any(t.is_alive() for t in threads), "a subscriber is stuck"
        assert not errors, errors
        published = dict.fromkeys(every, 0)
        for pub in pubs:
            for ch, n in pub.stop().items():
                published[ch] += n
        assert all(c.subscriptions >= ROUNDS and c.messages >= ROUNDS * PER_CHANNEL for c in churners)
        # every PUBLISH was numbered: the last number is the count
        with raw_on_worker(two, 0) as c:
            for ch, n in published.items():
                assert retained_seq(c.cmd("GET", lvc_key(ch))) == n, ch
    finally:
        for pub in pubs:
            pub.kill()
        for c in churners:
            c.close()


if __name__ == "__main__" and sys.argv[1:2] == ["publish"]:
    publisher_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
