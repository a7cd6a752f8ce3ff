"""Pub/sub under stress: a subscriber that stops reading is cut off by
`client-output-buffer-limit pubsub` while the publisher and the other
subscribers go on (checked against redis-server 7.0 too), and a worker
killed with SIGKILL takes its subscribers with it and leaves no ghost
subscriptions behind (shoal only)."""

import os
import re
import signal
import socket
import threading
import uuid

import pytest

from shoaltest import FrameReader, encode, raw_on_worker, wait_for, worker_slot_pids


def uniq():
    return f"t{uuid.uuid4().hex[:10]}:"


def message(ch, payload):
    return b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
        len(ch), ch, len(payload), payload)


def subscribe(c, verb, name, count=1):
    c.send(encode(verb, name))
    assert c.reply() == [verb.lower().encode(), name.encode(), count]


def client_ids(c):
    return {int(m) for m in re.findall(rb"(?:^|\n)id=(\d+) ", c.cmd("CLIENT", "LIST"))}


class Readers:
    """Subscribers that read every message in threads and report how many
    they have, so that the publisher can stay a few messages ahead of them
    (flow control, not timing) while another subscriber reads nothing."""

    def __init__(self, conns, n):
        self.n = n
        self.got = [[] for _ in conns]
        self.errors = []
        self.cond = threading.Condition()
        self.threads = [threading.Thread(target=self._run, args=(c, out), daemon=True)
                        for c, out in zip(conns, self.got)]
        for t in self.threads:
            t.start()

    def _run(self, c, out):
        reader = FrameReader(c)
        try:
            for _ in range(self.n):
                f = reader.frame()
                with self.cond:
                    out.append(f)
                    self.cond.notify_all()
        except Exception as e:  # reported by the test thread
            with self.cond:
                self.errors.append(e)
                self.cond.notify_all()
        finally:
            reader.release()

    def wait_until(self, count, timeout=60):
        with self.cond:
            ok = self.cond.wait_for(
                lambda: self.errors or min(len(g) for g in self.got) >= count, timeout)
        assert ok, f"readers stuck below {count}: {[len(g) for g in self.got]}"
        assert not self.errors, self.errors

    def join(self):
        for t in self.threads:
            t.join(60)
        assert not self.errors, self.errors


# ---------------------------------------------------------------------------
# client-output-buffer-limit pubsub


@pytest.mark.parametrize("target,slow_slot", [
    ("redis", None),
    pytest.param("shoal", 0, marks=pytest.mark.shoal_only, id="shoal-slow-on-publisher-worker"),
    pytest.param("shoal", 1, marks=pytest.mark.shoal_only, id="shoal-slow-on-other-worker"),
])
def test_subscriber_that_stops_reading_is_disconnected(make_server, target, slow_slot):
    srv = make_server(kind="redis") if target == "redis" else make_server(workers=2)
    opened = []

    def conn(slot):
        c = srv.raw(timeout=60) if slot is None else raw_on_worker(srv, slot, timeout=60)
        opened.append(c)
        return c

    try:
        shoal = target == "shoal"
        pub = conn(0 if shoal else None)
        assert pub.cmd("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 256kb 60") == "OK"
        assert pub.cmd("CONFIG", "GET", "client-output-buffer-limit")[1].endswith(
            b"pubsub 1048576 262144 60")
        ch = uniq() + "firehose"
        # the slow subscriber: a small receive buffer, and it never reads
        slow = conn(slow_slot)
        slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        slow_id = slow.cmd("CLIENT", "ID")
        subscribe(slow, "SUBSCRIBE", ch)
        # readers: one per worker on shoal
        readers = [conn(s) for s in ((0, 1) if shoal else (None,))]
        for c in readers:
            subscribe(c, "SUBSCRIBE", ch)
        # 200 x 64 KiB: far beyond the 1 MiB hard limit plus socket buffers, and
        # below the default 32 MiB (so only the CONFIG SET can cut it off)
        n = 200
        payloads = [b"%06d" % i + bytes([65 + i % 26]) * (65536 - 6) for i in range(n + 1)]
        rd = Readers(readers, n + 1)
        replies = []
        for i in range(n):
            rd.wait_until(i - 2)  # the readers are at most 3 messages behind
            replies.append(pub.cmd("PUBLISH", ch, payloads[i]))
        assert replies[0] == len(readers) + 1, "the slow subscriber was not counted at first"
        assert set(replies) <= {len(readers), len(readers) + 1}, sorted(set(replies))
        # the slow one is gone from the counts and from CLIENT LIST
        wait_for(lambda: pub.cmd("PUBSUB", "NUMSUB", ch) == [ch.encode(), len(readers)],
                 what="NUMSUB without the slow subscriber")
        wait_for(lambda: slow_id not in client_ids(pub), what="the slow client to leave CLIENT LIST")
        assert pub.cmd("PUBLISH", ch, payloads[n]) == len(readers)
        rd.join()
        want = [[b"message", ch.encode(), pl] for pl in payloads]
        for c, got in zip(readers, rd.got):
            assert len(got) == n + 1
            assert got == want, "a reader lost or reordered messages"
            assert c.cmd("PING") == [b"pong", b""]
        # its socket: a prefix of the stream, then end of file (or reset)
        data, closed = slow.read_all(timeout=10)
        assert closed, "the slow subscriber's connection is still open"
        stream = b"".join(message(ch.encode(), pl) for pl in payloads[:n])
        assert len(data) < len(stream) and stream.startswith(data)
        assert pub.cmd("PING") == "PONG"
    finally:
        for c in opened:
            c.close()


# ---------------------------------------------------------------------------
# A worker killed under its subscribers (shoal only).


@pytest.mark.shoal_only
def test_sigkill_of_a_worker_with_subscribers(make_server):
    srv = make_server(workers=2)
    p = uniq()
    ch, only1, pat0, pat1, sh = p + "ch", p + "only1", p + "c*", p + "*h", p + "sh"
    opened = []

    def conn(slot):
        c = raw_on_worker(srv, slot, timeout=30)
        opened.append(c)
        return c

    try:
        pub = conn(0)
        live_ch, live_pat = conn(0), conn(0)
        subscribe(live_ch, "SUBSCRIBE", ch)
        subscribe(live_pat, "PSUBSCRIBE", pat0)
        doomed = [conn(1) for _ in range(4)]
        subscribe(doomed[0], "SUBSCRIBE", ch)
        subscribe(doomed[1], "PSUBSCRIBE", pat1)
        subscribe(doomed[2], "SSUBSCRIBE", sh)
        subscribe(doomed[3], "SUBSCRIBE", only1)
        assert pub.cmd("PUBLISH", ch, "before") == 4
        assert pub.cmd("PUBSUB", "NUMSUB", ch, only1) == [ch.encode(), 2, only1.encode(), 1]
        assert pub.cmd("PUBSUB", "NUMPAT") == 2
        assert pub.cmd("PUBSUB", "SHARDNUMSUB", sh) == [sh.encode(), 1]
        for c in (live_ch, live_pat, doomed[0], doomed[1]):
            assert c.reply()[-1] == b"before"

        pids = worker_slot_pids(srv)
        assert sorted(pids) == [0, 1]
        os.kill(pids[1], signal.SIGKILL)
        for c in doomed:
            data, closed = c.read_all(timeout=10)
            assert closed and data == b"", (data[:100], closed)

        # worker 0 keeps delivering every message, while slot 1 restarts
        n = 2000
        rd = Readers([live_ch, live_pat], n)
        replies = []
        for start in range(0, n, 200):
            replies += pub.pipeline(*[("PUBLISH", ch, b"%d" % i) for i in range(start, start + 200)])
        # the dead worker's receivers may still count until the supervisor has
        # reaped it, never again after that
        assert all(isinstance(r, int) and 2 <= r <= 4 for r in replies), sorted(set(replies))
        assert replies == sorted(replies, reverse=True), "a ghost receiver came back"
        rd.join()
        assert [f[-1] for f in rd.got[0]] == [b"%d" % i for i in range(n)]
        assert [f[-1] for f in rd.got[1]] == [b"%d" % i for i in range(n)]
        assert all(f[:3] == [b"pmessage", pat0.encode(), ch.encode()] for f in rd.got[1])

        wait_for(lambda: worker_slot_pids(srv).get(1) not in (None, pids[1]), timeout=30,
                 what="a new worker in slot 1")
        assert worker_slot_pids(srv)[0] == pids[0]
        # no ghosts of the dead worker's subscriptions: the supervisor drops
        # them before it starts the successor, so they are gone by now
        assert pub.cmd("PUBSUB", "NUMSUB", ch, only1) == [ch.encode(), 1, only1.encode(), 0]
        assert pub.cmd("PUBSUB", "NUMPAT") == 1
        assert pub.cmd("PUBSUB", "SHARDNUMSUB", sh) == [sh.encode(), 0]
        assert sorted(pub.cmd("PUBSUB", "CHANNELS", p + "*")) == [ch.encode()]
        assert pub.cmd("PUBSUB", "SHARDCHANNELS", p + "*") == []
        assert pub.cmd("PUBLISH", ch, "after") == 2
        assert pub.cmd("PUBLISH", only1, "after") == 0
        assert pub.cmd("SPUBLISH", sh, "after") == 0
        assert live_ch.reply() == [b"message", ch.encode(), b"after"]
        assert live_pat.reply() == [b"pmessage", pat0.encode(), ch.encode(), b"after"]

        # the new worker 1 takes subscribers again, counted from worker 0
        fresh = conn(1)
        subscribe(fresh, "SUBSCRIBE", ch)
        assert pub.cmd("PUBSUB", "NUMSUB", ch) == [ch.encode(), 2]
        assert pub.cmd("PUBLISH", ch, "again") == 3
        assert fresh.reply() == [b"message", ch.encode(), b"again"]
        assert live_ch.reply() == [b"message", ch.encode(), b"again"]
        q1 = conn(1)
        assert q1.cmd("PUBSUB", "NUMSUB", ch) == [ch.encode(), 2]
        assert q1.cmd("PUBSUB", "NUMPAT") == 1
    finally:
        for c in opened:
            c.close()
