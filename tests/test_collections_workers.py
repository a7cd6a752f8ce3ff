"""Collections and transactions across worker processes (`--workers 2`): a
client blocked on one worker is served by a push through the other, WATCH
sees writes made through the other worker, commands that move elements
between keys stay atomic when clients on both workers race them, and a
worker killed with SIGKILL while clients fill collections leaves every
collection whole and self-consistent.

These are shoal's own (Redis has one process), so they are left out when
SHOAL_TEST_TARGET=redis; what they expect is Redis's semantics all the same.
A blocked client is recognised as Redis shows it: `b` in the flags of its
CLIENT LIST line."""

import os
import random
import signal
import threading
import time
from collections import Counter

import pytest

from shoaltest import Err, Raw, encode, wait_for
from test_workers import one_connection_per_worker, slot_pids, worker_of

pytestmark = pytest.mark.shoal_only

WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")


@pytest.fixture
def two(make_server):
    return make_server(workers=2, memory="256m")


def is_blocked(ctl, client_id):
    line = ctl.cmd("CLIENT", "LIST", "ID", str(client_id)).decode()
    for field in line.split():
        if field.startswith("flags="):
            return "b" in field[len("flags="):]
    return False


def block(ctl, waiter, *args):
    """Sends a blocking command on `waiter` (not reading the reply) and
    returns once `ctl`, maybe on the other worker, sees it blocked."""
    cid = waiter.cmd("CLIENT", "ID")
    waiter.send(encode(*args))
    wait_for(lambda: is_blocked(ctl, cid), what=f"{args[0]} to block")


def balanced_connections(server, per_worker, timeout=10.0):
    """{slot: [conn, ...]} with `per_worker` connections on each of the two
    workers (extra connections are closed)."""
    found = {0: [], 1: []}
    spare = []
    for _ in range(2000):
        if all(len(v) >= per_worker for v in found.values()):
            break
        c = Raw(server.port, timeout=timeout)
        slot = worker_of(c)
        if len(found[slot]) < per_worker:
            found[slot].append(c)
        else:
            spare.append(c)
    for c in spare:
        c.close()
    assert all(len(v) >= per_worker for v in found.values()), \
        f"could not open {per_worker} connections on each worker"
    return found


def close_all(conns):
    for c in conns:
        c.close()


# -- blocking across workers -----------------------------------------------------------

@pytest.mark.parametrize("waiter_slot", [0, 1])
def test_blpop_served_by_a_push_on_the_other_worker(two, waiter_slot):
    conns = one_connection_per_worker(two)
    try:
        waiter, pusher = conns[waiter_slot], conns[1 - waiter_slot]
        block(pusher, waiter, "BLPOP", "l", "0")
        assert pusher.cmd("LPUSH", "l", "x") == 1
        assert waiter.reply() == [b"l", b"x"]
        assert pusher.cmd("EXISTS", "l") == 0
        assert waiter.cmd("EXISTS", "l") == 0
        # the waiter's connection goes on as usual
        assert waiter.cmd("RPUSH", "l", "y") == 1
        assert pusher.cmd("LRANGE", "l", "0", "-1") == [b"y"]
    finally:
        close_all(conns.values())


def test_other_blocking_commands_across_workers(two):
    conns = one_connection_per_worker(two)
    try:
        waiter, pusher = conns[0], conns[1]
        block(pusher, waiter, "BRPOP", "a", "b", "0")
        pusher.cmd("RPUSH", "b", "1", "2")
        assert waiter.reply() == [b"b", b"2"]

        block(pusher, waiter, "BLMOVE", "src", "dst", "LEFT", "RIGHT", "0")
        pusher.cmd("RPUSH", "src", "m")
        assert waiter.reply() == b"m"
        assert pusher.cmd("LRANGE", "dst", "0", "-1") == [b"m"]

        block(waiter, pusher, "BRPOPLPUSH", "src", "dst", "0")  # the other way round
        waiter.cmd("RPUSH", "src", "n")
        assert pusher.reply() == b"n"
        assert waiter.cmd("LRANGE", "dst", "0", "-1") == [b"n", b"m"]

        block(pusher, waiter, "BLMPOP", "0", "1", "q", "RIGHT", "COUNT", "2")
        pusher.cmd("RPUSH", "q", "x", "y", "z")
        assert waiter.reply() == [b"q", [b"z", b"y"]]

        block(pusher, waiter, "BZPOPMIN", "z", "0")
        pusher.cmd("ZADD", "z", "2", "b", "1.5", "a")
        assert waiter.reply() == [b"z", b"a", b"1.5"]

        assert pusher.cmd("DEL", "z") == 1
        block(waiter, pusher, "BZMPOP", "0", "1", "z", "MAX", "COUNT", "5")
        waiter.cmd("ZADD", "z", "3", "c", "2", "b")
        assert pusher.reply() == [b"z", [[b"c", b"3"], [b"b", b"2"]]]
        assert waiter.cmd("EXISTS", "z") == 0
    finally:
        close_all(conns.values())


@pytest.mark.parametrize("pusher_slot", [0, 1])
def test_waiters_on_both_workers_are_served_in_the_order_they_blocked(two, pusher_slot):
    # One order across workers, as Redis has one: the client that blocked
    # first gets the first element wherever it is and whoever pushes.
    conns = balanced_connections(two, 3)
    try:
        first, second, third = conns[1][0], conns[0][0], conns[1][1]
        ctl, pusher = conns[0][1], conns[pusher_slot][2]
        for waiter in (first, second, third):
            block(ctl, waiter, "BLPOP", "l", "0")
        assert pusher.cmd("RPUSH", "l", "x") == 1
        assert first.reply() == [b"l", b"x"]
        # The other two still wait, in their order.
        assert pusher.cmd("RPUSH", "l", "y", "z") == 2
        assert second.reply() == [b"l", b"y"]
        assert third.reply() == [b"l", b"z"]
        assert ctl.cmd("EXISTS", "l") == 0
    finally:
        close_all(conns[0] + conns[1])


def test_a_waiter_that_fails_keeps_its_turn_and_takes_nothing(two):
    # Redis's "BRPOPLPUSH with multiple blocked clients" across workers: the
    # first client's move fails (its destination is a string), the second's
    # takes the element.
    conns = balanced_connections(two, 2)
    try:
        rd1, rd2, pusher = conns[0][0], conns[1][0], conns[0][1]
        pusher.cmd("SET", "target1", "nolist")
        block(pusher, rd1, "BRPOPLPUSH", "blist", "target1", "0")
        block(pusher, rd2, "BRPOPLPUSH", "blist", "target2", "0")
        assert pusher.cmd("LPUSH", "blist", "foo") == 1
        assert rd1.reply() == WRONGTYPE
        assert rd2.reply() == b"foo"
        assert pusher.cmd("LRANGE", "target2", "0", "-1") == [b"foo"]
    finally:
        close_all(conns[0] + conns[1])


@pytest.mark.parametrize("kind", ["list", "zset"])
def test_multi_pop_waiters_across_workers_in_order(two, kind):
    # Redis's "BLMPOP/BZMPOP with multiple blocked clients" with the four
    # clients alternating between the workers.
    conns = balanced_connections(two, 3)
    try:
        waiters = [conns[0][0], conns[1][0], conns[0][1], conns[1][1]]
        ctl = conns[0][2]
        if kind == "list":
            cmd = "BLMPOP"
            ends = ["LEFT", "RIGHT", "LEFT", "RIGHT"]
        else:
            cmd = "BZMPOP"
            ends = ["MIN", "MAX", "MIN", "MAX"]
        counts = ["1", "10", "10", "1"]
        for w, end, count in zip(waiters, ends, counts):
            block(ctl, w, cmd, "0", "2", "k1", "k2", end, "COUNT", count)
        if kind == "list":
            fill = ["LPUSH", "a", "b", "c", "d", "e"]
        else:
            fill = ["ZADD", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"]
        ctl.cmd("MULTI")
        ctl.cmd(fill[0], "k1", *fill[1:])
        ctl.cmd(fill[0], "k2", *fill[1:])
        ctl.cmd("EXEC")
        if kind == "list":
            assert waiters[0].reply() == [b"k1", [b"e"]]
            assert waiters[1].reply() == [b"k1", [b"a", b"b", b"c", b"d"]]
            assert waiters[2].reply() == [b"k2", [b"e", b"d", b"c", b"b", b"a"]]
        else:
            assert waiters[0].reply() == [b"k1", [[b"a", b"1"]]]
            assert waiters[1].reply() == [b"k1", [[b"e", b"5"], [b"d", b"4"], [b"c", b"3"],
                                                  [b"b", b"2"]]]
            assert waiters[2].reply() == [b"k2", [[b"a", b"1"], [b"b", b"2"], [b"c", b"3"],
                                                  [b"d", b"4"], [b"e", b"5"]]]
        assert ctl.cmd("EXISTS", "k1", "k2") == 0
        conns[1][2].cmd(*fill[:1], "k2", *fill[1:7])
        last = waiters[3].reply()
        assert last[0] == b"k2" and len(last[1]) == 1
    finally:
        close_all(conns[0] + conns[1])


@pytest.mark.parametrize("pusher_slot", [0, 1])
def test_a_chain_of_moves_across_workers_ends_before_the_push_reply(two, pusher_slot):
    # Redis serves the whole chain before it replies to the push: a read
    # right after the reply sees the element at the chain's end.
    conns = balanced_connections(two, 3)
    try:
        hops = [conns[0][0], conns[1][0], conns[0][1]]
        pusher = conns[pusher_slot][2]
        block(pusher, hops[0], "BLMOVE", "a", "b", "RIGHT", "LEFT", "0")
        block(pusher, hops[1], "BLMOVE", "b", "c", "LEFT", "RIGHT", "0")
        block(pusher, hops[2], "BLMOVE", "c", "d", "LEFT", "RIGHT", "0")
        assert pusher.cmd("RPUSH", "a", "foo") == 1
        assert [pusher.cmd("LRANGE", k, "0", "-1") for k in "abcd"] == [[], [], [], [b"foo"]]
        assert [h.reply() for h in hops] == [b"foo"] * 3

        # Circular: the element comes back to the list it was pushed into.
        block(pusher, hops[0], "BRPOPLPUSH", "l1", "l2", "0")
        block(pusher, hops[1], "BRPOPLPUSH", "l2", "l1", "0")
        assert pusher.cmd("RPUSH", "l1", "bar") == 1
        assert pusher.cmd("LRANGE", "l1", "0", "-1") == [b"bar"]
        assert pusher.cmd("LRANGE", "l2", "0", "-1") == []
        assert [h.reply() for h in hops[:2]] == [b"bar"] * 2

        # Pipelined: the request after the push runs after the chain too.
        pusher.cmd("DEL", "d")
        block(pusher, hops[0], "BLMOVE", "a", "b", "RIGHT", "LEFT", "0")
        block(pusher, hops[1], "BLMOVE", "b", "c", "LEFT", "RIGHT", "0")
        block(pusher, hops[2], "BLMOVE", "c", "d", "LEFT", "RIGHT", "0")
        pusher.send(encode("RPUSH", "a", "baz") + encode("LRANGE", "d", "0", "-1"))
        assert pusher.reply() == 1
        assert pusher.reply() == [b"baz"]
        assert [h.reply() for h in hops] == [b"baz"] * 3
    finally:
        close_all(conns[0] + conns[1])


@pytest.mark.parametrize("pusher_slot", [0, 1])
def test_a_move_by_a_waiter_on_another_worker_aborts_exec(two, pusher_slot):
    # Redis's "PUSH resulting from BRPOPLPUSH affect WATCH" across workers.
    conns = balanced_connections(two, 2)
    try:
        blocked, watcher, pusher = conns[0][0], conns[1][0], conns[pusher_slot][1]
        pusher.cmd("SET", "somekey", "somevalue")
        block(pusher, blocked, "BRPOPLPUSH", "src", "dst", "0")
        assert watcher.cmd("WATCH", "dst") == "OK"
        assert watcher.cmd("MULTI") == "OK"
        assert watcher.cmd("GET", "somekey") == "QUEUED"
        assert pusher.cmd("LPUSH", "src", "element") == 1
        assert watcher.cmd("EXEC") is None
        assert blocked.reply() == b"element"
    finally:
        close_all(conns[0] + conns[1])


def test_timeout_across_workers_replies_nil_and_keeps_later_pushes(two):
    conns = one_connection_per_worker(two)
    try:
        waiter, pusher = conns[0], conns[1]
        assert pusher.cmd("RPUSH", "unrelated", "x") == 1
        assert waiter.cmd("BLPOP", "l", "0.2") is None
        assert pusher.cmd("RPUSH", "l", "kept") == 1
        assert waiter.cmd("LRANGE", "l", "0", "-1") == [b"kept"]
    finally:
        close_all(conns.values())


def test_waiter_closed_on_one_worker_takes_nothing(two):
    conns = one_connection_per_worker(two)
    try:
        waiter, pusher = conns[0], conns[1]
        wid = waiter.cmd("CLIENT", "ID")
        block(pusher, waiter, "BLPOP", "l", "0")
        waiter.close()
        wait_for(lambda: pusher.cmd("CLIENT", "LIST", "ID", str(wid)) == b"",
                 what="the closed waiter to go")
        assert pusher.cmd("RPUSH", "l", "x") == 1
        assert pusher.cmd("LRANGE", "l", "0", "-1") == [b"x"]
    finally:
        close_all(conns.values())


# -- WATCH across workers ----------------------------------------------------------

@pytest.mark.parametrize("write", [
    ["SET", "k", "2"], ["RPUSH", "k", "x"], ["HSET", "k", "f", "v"], ["SADD", "k", "m"],
    ["ZADD", "k", "1", "m"], ["DEL", "k"], ["EXPIRE", "k", "100"],
])
def test_watch_aborted_by_a_write_on_the_other_worker(two, write):
    conns = one_connection_per_worker(two)
    try:
        watcher, writer = conns[0], conns[1]
        if write[0] in ("DEL", "EXPIRE"):
            watcher.cmd("SET", "k", "1")
        assert watcher.cmd("WATCH", "k") == "OK"
        assert writer.cmd(*write) in (1, "OK")
        assert watcher.cmd("MULTI") == "OK"
        assert watcher.cmd("INCR", "counter") == "QUEUED"
        assert watcher.cmd("EXEC") is None
        assert writer.cmd("EXISTS", "counter") == 0
    finally:
        close_all(conns.values())


def test_watch_not_aborted_without_a_write(two):
    conns = one_connection_per_worker(two)
    try:
        watcher, other = conns[1], conns[0]
        watcher.cmd("RPUSH", "k", "a")
        assert watcher.cmd("WATCH", "k") == "OK"
        assert other.cmd("LRANGE", "k", "0", "-1") == [b"a"]
        assert other.cmd("RPUSH", "elsewhere", "b") == 1
        watcher.cmd("MULTI")
        watcher.cmd("RPUSH", "k", "c")
        assert watcher.cmd("EXEC") == [2]
        # and a transaction on the other worker is seen whole
        other.cmd("WATCH", "k")
        watcher.cmd("MULTI")
        watcher.cmd("RPUSH", "k", "d")
        watcher.cmd("LPOP", "k")
        assert watcher.cmd("EXEC") == [3, b"a"]
        other.cmd("MULTI")
        other.cmd("LRANGE", "k", "0", "-1")
        assert other.cmd("EXEC") is None
        assert other.cmd("LRANGE", "k", "0", "-1") == [b"c", b"d"]
    finally:
        close_all(conns.values())


# -- racing clients on both workers ------------------------------------------------------

N_SET = 200
N_LIST = 200
N_ZSET = 100
RUN_SECONDS = 3.0


def test_concurrent_moves_conserve_every_element(two):
    setup = two.raw()
    members = [f"m{i}".encode() for i in range(N_SET)]
    elements = [f"e{i}".encode() for i in range(N_LIST)]
    zmembers = [f"z{i}".encode() for i in range(N_ZSET)]
    setup.cmd("SADD", "sa", *members)
    setup.cmd("RPUSH", "la", *elements)
    setup.cmd("ZADD", "za", *[x for m in zmembers for x in ("0", m)])
    setup.cmd("ZADD", "zb", *[x for m in zmembers for x in ("0", m)])
    setup.close()

    stop = threading.Event()
    errors = []
    ops = Counter()
    zincr = Counter()  # member -> net increment of za acknowledged by EXEC
    zlock = threading.Lock()

    def fail(role, what):
        errors.append((role, what))
        stop.set()

    def smove(c, role, src, dst):
        rnd = random.Random(role)
        while not stop.is_set():
            got = c.cmd("SMOVE", src, dst, rnd.choice(members))
            if got not in (0, 1):
                return fail(role, got)
            ops[role] += 1

    def lmove(c, role, args):
        while not stop.is_set():
            got = c.cmd(*args)
            if got is not None and not (isinstance(got, bytes) and got in elements):
                return fail(role, got)
            ops[role] += 1

    def zmove(c, role):
        rnd = random.Random(role)
        while not stop.is_set():
            m = rnd.choice(zmembers)
            step, opposite = rnd.choice([("1", "-1"), ("-1", "1"), ("2.5", "-2.5")])
            assert c.cmd("MULTI") == "OK"
            c.cmd("ZINCRBY", "za", step, m)
            c.cmd("ZINCRBY", "zb", opposite, m)
            got = c.cmd("EXEC")
            if not (isinstance(got, list) and len(got) == 2 and float(got[0]) == -float(got[1])):
                return fail(role, got)
            with zlock:
                zincr[m] += float(step)
            ops[role] += 1

    def check_sets(c, role):
        while not stop.is_set():
            n = c.cmd("SUNIONSTORE", f"su:{role}", "sa", "sb")
            if n != N_SET:
                return fail(role, f"SUNIONSTORE saw {n} members, not {N_SET}")
            n = c.cmd("SINTERCARD", "2", "sa", "sb")
            if n != 0:
                return fail(role, f"a member in both sets at once ({n})")
            n = c.cmd("SINTERSTORE", f"si:{role}", "sa", "sb")
            if n != 0:
                return fail(role, f"SINTERSTORE stored {n}")
            ops[role] += 1

    def check_lists(c, role):
        while not stop.is_set():
            c.cmd("MULTI")
            c.cmd("LRANGE", "la", "0", "-1")
            c.cmd("LRANGE", "lb", "0", "-1")
            got = c.cmd("EXEC")
            seen = got[0] + got[1]
            if sorted(seen) != sorted(elements):
                return fail(role, f"the lists hold {len(seen)} elements "
                                  f"({len(set(seen))} distinct), not {N_LIST}")
            ops[role] += 1

    def check_zsets(c, role):
        while not stop.is_set():
            c.cmd("MULTI")
            c.cmd("ZUNIONSTORE", f"zu:{role}", "2", "za", "zb")
            c.cmd("ZCOUNT", f"zu:{role}", "0", "0")
            got = c.cmd("EXEC")
            if got != [N_ZSET, N_ZSET]:
                return fail(role, f"ZUNIONSTORE of za and zb: {got}")
            n = c.cmd("ZINTERSTORE", f"zi:{role}", "2", "za", "zb", "AGGREGATE", "SUM")
            zero = c.cmd("ZCOUNT", f"zi:{role}", "0", "0")
            if (n, zero) != (N_ZSET, N_ZSET):
                return fail(role, f"ZINTERSTORE {n}, of them at 0: {zero}")
            ops[role] += 1

    roles = [
        ("smove a->b", lambda c, r: smove(c, r, "sa", "sb")),
        ("smove b->a", lambda c, r: smove(c, r, "sb", "sa")),
        ("lmove a->b", lambda c, r: lmove(c, r, ["LMOVE", "la", "lb", "LEFT", "RIGHT"])),
        ("rpoplpush b->a", lambda c, r: lmove(c, r, ["RPOPLPUSH", "lb", "la"])),
        ("lmove b->a", lambda c, r: lmove(c, r, ["LMOVE", "lb", "la", "LEFT", "LEFT"])),
        ("blmove a->b", lambda c, r: lmove(c, r, ["BLMOVE", "la", "lb", "RIGHT", "LEFT", "0.05"])),
        ("zincr", zmove),
        ("check sets", check_sets),
        ("check lists", check_lists),
        ("check zsets", check_zsets),
    ]
    conns = balanced_connections(two, len(roles))
    threads = []
    used = []
    for i, (name, fn) in enumerate(roles):
        for slot in (0, 1):
            role = f"{name} @w{slot}"
            c = conns[slot][i]
            used.append(c)

            def run(c=c, role=role, fn=fn):
                try:
                    fn(c, role)
                except Exception as e:  # a hang shows up as a socket timeout
                    fail(role, repr(e))

            threads.append(threading.Thread(target=run, name=role, daemon=True))
    try:
        for t in threads:
            t.start()
        stop.wait(RUN_SECONDS)
        stop.set()
        for t in threads:
            t.join(30)
        hung = [t.name for t in threads if t.is_alive()]
        assert not hung, f"clients hung: {hung}"
        assert not errors, errors[:5]
        for name, _ in roles:
            for slot in (0, 1):
                assert ops[f"{name} @w{slot}"] > 0, f"{name} on worker {slot} never ran"
        for c in used:
            assert c.cmd("PING") == "PONG"

        for c in (conns[0][0], conns[1][0]):  # the same answer from both workers
            sa, sb = set(c.cmd("SMEMBERS", "sa")), set(c.cmd("SMEMBERS", "sb"))
            assert c.cmd("SCARD", "sa") + c.cmd("SCARD", "sb") == N_SET
            assert not sa & sb and sa | sb == set(members)
            la, lb = c.cmd("LRANGE", "la", "0", "-1"), c.cmd("LRANGE", "lb", "0", "-1")
            assert c.cmd("LLEN", "la") + c.cmd("LLEN", "lb") == N_LIST
            assert sorted(la + lb) == sorted(elements)
            za = c.cmd("ZRANGE", "za", "0", "-1", "WITHSCORES")
            zb = c.cmd("ZRANGE", "zb", "0", "-1", "WITHSCORES")
            za = {m: float(s) for m, s in zip(za[::2], za[1::2])}
            zb = {m: float(s) for m, s in zip(zb[::2], zb[1::2])}
            assert set(za) == set(zb) == set(zmembers)
            for m in zmembers:
                assert za[m] == zincr[m] and zb[m] == -zincr[m], m
    finally:
        stop.set()
        close_all(conns[0] + conns[1])


# -- SIGKILL while filling collections ---------------------------------------------------

# Large enough that every collection is paged (B+trees, docs/design.md) and
# several levels deep when the workers are killed.
FILL = 100_000
BATCH = 100


def batch_args(kind, b):
    """The write command for batch number `b` of one collection type."""
    ids = range(b * BATCH, (b + 1) * BATCH)
    if kind == "list":
        return ["RPUSH", "L"] + [f"e{i:06d}" for i in ids]
    if kind == "hash":
        return ["HSET", "H"] + [x for i in ids for x in (f"f{i:06d}", f"v{i}")]
    if kind == "set":
        return ["SADD", "S"] + [f"m{i:06d}" for i in ids]
    return ["ZADD", "Z"] + [x for i in ids for x in (str(i / 4), f"z{i:06d}")]


def test_sigkill_while_filling_collections(two):
    kinds = ["list", "hash", "set", "zset"]
    acked = {k: set() for k in kinds}  # batch numbers the server answered
    uncertain = {k: set() for k in kinds}  # batches in flight when a connection died
    slot_of = {}  # kind -> slot of the writer's current connection
    progress = Counter()
    resets = Counter()
    errors = []
    done = threading.Event()

    def writer(kind):
        conn = None
        b = 0
        while b < FILL // BATCH and not done.is_set():
            if conn is None:
                try:
                    conn = Raw(two.port, timeout=10)
                    slot_of[kind] = worker_of(conn)
                except (OSError, ConnectionError):
                    if conn is not None:
                        conn.close()
                    conn = None
                    time.sleep(0.01)
                    continue
            try:
                reply = conn.cmd(*batch_args(kind, b))
            except (OSError, ConnectionError):
                conn.close()
                conn = None
                resets[kind] += 1
                uncertain[kind].add(b)  # applied whole or not at all; not sent again
                b += 1
                continue
            ok = isinstance(reply, int) if kind == "list" else reply == BATCH
            if not ok:
                errors.append((kind, b, reply))
                return
            acked[kind].add(b)
            progress[kind] += BATCH
            b += 1
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=writer, args=(k,), daemon=True) for k in kinds]
    for t in threads:
        t.start()
    try:
        for at, victim_kind in ((FILL // 4, "list"), (FILL // 2, "zset")):
            wait_for(lambda: min(progress[k] for k in kinds) >= at or errors, timeout=120,
                     what=f"{at} elements in each collection")
            assert not errors, errors[:3]
            before = slot_pids(two)
            slot = slot_of[victim_kind]
            os.kill(before[slot], signal.SIGKILL)
            wait_for(lambda: slot_pids(two).get(slot) not in (None, before[slot]),
                     timeout=30, what=f"a new worker in slot {slot}")
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a writer hung"
    finally:
        done.set()
    assert not errors, errors[:3]
    assert sum(resets.values()) > 0, "no writer was on a killed worker"
    assert two.proc.poll() is None, "the supervisor died"

    conns = one_connection_per_worker(two)
    for c in conns.values():
        c.close()
    for slot in (0, 1):
        r = None
        for _ in range(400):  # a redis-py client on each worker in turn
            cand = two.client(decode_responses=False)
            if worker_of_client(cand) == slot:
                r = cand
                break
            cand.close()
        assert r is not None, f"no connection landed on worker {slot}"
        try:
            check_filled(r, acked, uncertain)
        finally:
            r.close()


def worker_of_client(r):
    info = r.execute_command("CLIENT", "INFO")
    info = info.decode() if isinstance(info, bytes) else info
    for field in info.split():
        if field.startswith("worker="):
            return int(field[len("worker="):])
    raise AssertionError(f"no worker= in CLIENT INFO: {info!r}")


def present_batches(kind, ids, acked, uncertain):
    """Which batches `ids` (element numbers) hold; every acknowledged batch
    must be there, whole, and an uncertain one whole or not at all."""
    per = Counter(i // BATCH for i in ids)
    for b, n in per.items():
        assert b in acked[kind] or b in uncertain[kind], f"{kind}: batch {b} was never sent"
        assert n == BATCH, f"{kind}: batch {b} is torn ({n} of {BATCH} elements)"
    missing = acked[kind] - set(per)
    assert not missing, f"{kind}: acknowledged batches lost: {sorted(missing)[:5]}"
    return set(per)


def check_filled(r, acked, uncertain):
    assert r.type("L") == b"list" and r.type("H") == b"hash"
    assert r.type("S") == b"set" and r.type("Z") == b"zset"

    # list: LLEN agrees with LRANGE, no element twice, batches in order
    items = r.lrange("L", 0, -1)
    assert r.llen("L") == len(items)
    ids = [int(x[1:]) for x in items]
    assert len(set(ids)) == len(ids), "list: an element is there twice"
    assert ids == sorted(ids), "list: elements out of push order"
    present_batches("list", ids, acked, uncertain)
    assert r.lindex("L", -1) == (items[-1] if items else None)

    # hash: HLEN agrees with HGETALL, every value belongs to its field
    h = r.hgetall("H")
    assert r.hlen("H") == len(h)
    assert len(r.hkeys("H")) == len(h) and len(r.hvals("H")) == len(h)
    for f, v in h.items():
        assert v == b"v%d" % int(f[1:]), (f, v)
    present_batches("hash", [int(f[1:]) for f in h], acked, uncertain)

    # set: SCARD agrees with SMEMBERS
    s = r.smembers("S")
    assert r.scard("S") == len(s)
    present_batches("set", [int(m[1:]) for m in s], acked, uncertain)
    sample = sorted(s)[::997]
    assert r.smismember("S", sample) == [1] * len(sample)

    # zset: ZCARD agrees with ZRANGE, ZSCORE agrees with ZRANGE WITHSCORES
    flat = r.execute_command("ZRANGE", "Z", "0", "-1", "WITHSCORES")
    assert r.zcard("Z") == len(flat) // 2
    zm, zs = flat[::2], flat[1::2]
    assert len(set(zm)) == len(zm)
    assert [float(x) for x in zs] == sorted(float(x) for x in zs), "zset out of score order"
    for m, s_ in zip(zm, zs):
        assert float(s_) == int(m[1:]) / 4, (m, s_)
    present_batches("zset", [int(m[1:]) for m in zm], acked, uncertain)
    for start in range(0, len(zm), 1000):
        chunk = zm[start:start + 1000]
        want = [float(x) for x in zs[start:start + 1000]]
        # ZSCORE on a sample of each chunk, ZMSCORE on all of it.
        with r.pipeline(transaction=False) as p:
            for m in chunk[::50]:
                p.execute_command("ZSCORE", "Z", m)
            scores = p.execute()
        assert [float(x) for x in scores] == want[::50], "ZSCORE disagrees with ZRANGE WITHSCORES"
        assert [float(x) for x in r.execute_command("ZMSCORE", "Z", *chunk)] == want
    if zm:
        assert r.zrank("Z", zm[-1]) == len(zm) - 1
        assert r.zcount("Z", "-inf", "+inf") == len(zm)
