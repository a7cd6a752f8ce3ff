"""HyperLogLog end to end (PFADD PFCOUNT PFMERGE PFDEBUG PFSELFTEST) against a
real redis-server 7.0: the same commands on both must leave the same bytes
(GET) and count the same, and an HLL copied from one to the other with
GET/SET counts the same on the other side. HLLs are strings in Redis's own
format, so the comparison is byte for byte."""

import os
import random
import threading

import pytest

from shoaltest import Err

NOT_HLL = Err("WRONGTYPE Key is not a valid HyperLogLog string value.")
CORRUPT = Err("INVALIDOBJ Corrupted HLL object detected")
WRONGTYPE = Err("WRONGTYPE Operation against a key holding the wrong kind of value")


@pytest.fixture
def ref(redis_ref):
    """A bytes client on the emptied reference redis-server."""
    c = redis_ref.client(decode_responses=False)
    c.flushall()
    yield c
    c.close()


def reply(client, *args):
    """A command's reply, or the error text it raised."""
    try:
        return client.execute_command(*args)
    except Exception as e:  # redis-py raises a subclass per error prefix
        return Err(str(e)) if not isinstance(e, (ConnectionError, TimeoutError)) else e


def both(a, b, *args):
    """Runs one command on shoal and on Redis; the replies must agree."""
    ra, rb = reply(a, *args), reply(b, *args)
    assert ra == rb, (args[:3], ra, rb)
    return ra


def elements(rng, n, tag="e"):
    return [f"{tag}-{rng.random()}".encode() for _ in range(n)]


def add_in_batches(clients, key, items, batch=100):
    """PFADD of `items`, `batch` at a time (a bare PFADD when there are
    none), on every client alike."""
    for i in range(0, max(len(items), 1), batch):
        replies = {reply(c, "PFADD", key, *items[i:i + batch]) for c in clients}
        assert len(replies) == 1, replies


@pytest.mark.parametrize("n", [0, 1, 3, 10, 100, 300, 700, 1000, 1500, 2500, 5000, 20000])
def test_pfadd_leaves_the_same_bytes_and_counts(rb, ref, n):
    rng = random.Random(n)
    items = elements(rng, n)
    add_in_batches((rb, ref), "h", items)
    assert both(rb, ref, "PFDEBUG", "ENCODING", "h") in ("sparse", "dense", b"sparse", b"dense")
    assert rb.get("h") == ref.get("h")
    card = both(rb, ref, "PFCOUNT", "h")
    if n >= 100:
        assert abs(card - n) < n * 0.05
    # PFCOUNT wrote the count into the header on both sides.
    assert rb.get("h") == ref.get("h")
    assert rb.get("h")[15] & 0x80 == 0
    both(rb, ref, "PFADD", "h", *items[: n // 2])
    assert rb.get("h") == ref.get("h")


def test_one_element_at_a_time_through_promotion(rb, ref):
    """Single-element PFADDs walk every sparse edit (split, merge, grow) up
    to the dense promotion at 3000 bytes."""
    rng = random.Random(7)
    for i, e in enumerate(elements(rng, 4000)):
        assert both(rb, ref, "PFADD", "h", e) in (0, 1)
        if i % 97 == 0:
            assert rb.get("h") == ref.get("h"), i
            both(rb, ref, "PFCOUNT", "h")
    assert rb.get("h") == ref.get("h")
    assert both(rb, ref, "PFDEBUG", "ENCODING", "h") in ("dense", b"dense")


def test_hlls_copied_with_get_set_count_the_same(rb, ref):
    rng = random.Random(11)
    for n in (5, 400, 3000, 50000):
        items = elements(rng, n)
        add_in_batches((ref,), "from-redis", items, batch=1000)
        add_in_batches((rb,), "from-shoal", items, batch=1000)
        rb.set("copy", ref.get("from-redis"))
        ref.set("copy", rb.get("from-shoal"))
        assert rb.pfcount("copy") == ref.pfcount("copy") == ref.pfcount("from-redis")
        # Adding to the copies keeps them identical.
        more = elements(rng, 50, "more")
        rb.pfadd("copy", *more)
        ref.pfadd("copy", *more)
        assert rb.get("copy") == ref.get("copy")


def test_pfmerge_and_union_count_match(rb, ref):
    rng = random.Random(3)
    sizes = {"a": 10, "b": 200, "c": 3000, "d": 40000}
    for k, n in sizes.items():
        add_in_batches((rb, ref), k, elements(rng, n, k), batch=1000)
    for keys in (["a"], ["a", "b"], ["b", "a"], ["a", "c"], ["c", "d", "a"], ["x", "a"], ["a", "x"]):
        both(rb, ref, "PFCOUNT", *keys)
        both(rb, ref, "DEL", "m")
        assert both(rb, ref, "PFMERGE", "m", *keys) in ("OK", b"OK", True)
        assert rb.get("m") == ref.get("m"), keys
        both(rb, ref, "PFCOUNT", "m")
    # The destination is merged too, sparse or dense.
    assert both(rb, ref, "PFMERGE", "a", "b") in ("OK", b"OK", True)
    assert rb.get("a") == ref.get("a")
    assert both(rb, ref, "PFMERGE", "b", "d") in ("OK", b"OK", True)
    assert rb.get("b") == ref.get("b")
    # A destination alone: created empty, or left counting the same.
    assert both(rb, ref, "PFMERGE", "new") in ("OK", b"OK", True)
    assert rb.get("new") == ref.get("new")


def test_pfdebug_like_redis(rb, ref):
    for c in (rb, ref):
        c.pfadd("h", "a", "b", "c")
        c.set("s", "not an hll")
        c.rpush("l", "x")
    both(rb, ref, "PFDEBUG", "DECODE", "h")
    both(rb, ref, "PFDEBUG", "ENCODING", "h")
    both(rb, ref, "PFDEBUG", "NOPE", "h")
    both(rb, ref, "PFDEBUG", "NOPE", "missing")
    both(rb, ref, "PFDEBUG", "GETREG", "missing")
    both(rb, ref, "PFDEBUG", "GETREG", "s")
    both(rb, ref, "PFDEBUG", "GETREG", "l")
    both(rb, ref, "PFDEBUG", "ENCODING", "h", "extra")
    regs = both(rb, ref, "PFDEBUG", "GETREG", "h")
    assert len(regs) == 16384 and sum(1 for r in regs if r) == 3
    # GETREG left both dense.
    assert rb.get("h") == ref.get("h")
    both(rb, ref, "PFDEBUG", "DECODE", "h")
    assert both(rb, ref, "PFDEBUG", "TODENSE", "h") == 0
    for c in (rb, ref):
        c.pfadd("h2", "x")
    assert both(rb, ref, "PFDEBUG", "TODENSE", "h2") == 1
    assert rb.get("h2") == ref.get("h2")


def test_errors_like_redis(rb, ref):
    for c in (rb, ref):
        c.set("s", "x" * 20)
        c.rpush("l", "x")
        c.pfadd("h", "a", "b", "c")
    assert both(rb, ref, "PFADD", "s", "a") == NOT_HLL
    assert both(rb, ref, "PFCOUNT", "s") == NOT_HLL
    assert both(rb, ref, "PFADD", "l", "a") == WRONGTYPE
    assert both(rb, ref, "PFCOUNT", "h", "l") == WRONGTYPE
    assert both(rb, ref, "PFCOUNT", "h", "s") == NOT_HLL
    assert both(rb, ref, "PFMERGE", "h", "s") == NOT_HLL
    assert both(rb, ref, "PFMERGE", "s", "h") == NOT_HLL
    both(rb, ref, "PFADD")
    both(rb, ref, "PFCOUNT")
    both(rb, ref, "PFMERGE")
    both(rb, ref, "PFSELFTEST", "x")
    both(rb, ref, "PFDEBUG", "GETREG")
    for c in (rb, ref):
        c.append("h", "hello")
    assert both(rb, ref, "PFCOUNT", "h") == CORRUPT
    assert both(rb, ref, "PFCOUNT", "h", "h") == CORRUPT
    assert both(rb, ref, "PFMERGE", "d", "h") == CORRUPT
    both(rb, ref, "PFADD", "h", "zzz")
    assert rb.get("h") == ref.get("h")


def test_corrupted_hlls_behave_like_redis(rb, ref):
    """Redis's fuzz test (random bytes over an HLL), checked reply by reply
    and byte by byte: PFCOUNT, PFADD and PFMERGE on the damaged value."""
    rng = random.Random(int(os.environ.get("HLL_FUZZ_SEED", "42")))
    for round_ in range(int(os.environ.get("HLL_FUZZ_ROUNDS", "300"))):
        n = rng.randrange(3000)
        for c in (rb, ref):
            c.delete("h", "m")
        add_in_batches((rb,), "h", elements(rng, n), batch=1000)
        value = bytearray(rb.get("h"))
        for _ in range(5):
            value[rng.randrange(len(value))] = rng.randrange(256)
            if rng.random() < 0.5:
                break
        if rng.random() < 0.2:
            value = value[: rng.randrange(16, len(value) + 1)]
        for c in (rb, ref):
            c.set("h", bytes(value))
        both(rb, ref, "PFCOUNT", "h")
        assert rb.get("h") == ref.get("h"), round_
        both(rb, ref, "PFCOUNT", "h", "nothing")
        both(rb, ref, "PFDEBUG", "DECODE", "h")
        both(rb, ref, "PFADD", "h", *elements(rng, rng.randrange(1, 20)))
        assert rb.get("h") == ref.get("h"), round_
        both(rb, ref, "PFMERGE", "m", "h")
        assert rb.get("m") == ref.get("m"), round_
        both(rb, ref, "PFCOUNT", "h")
        assert rb.get("h") == ref.get("h"), round_
        both(rb, ref, "PFDEBUG", "GETREG", "h")
        assert rb.get("h") == ref.get("h"), round_


def test_handmade_dense_registers_count_like_redis(rb, ref):
    """Dense HLLs whose registers no hash produces (up to 63, all alike):
    the estimator's edges, including its wrap past 2^63."""
    header = b"HYLL\x00\x00\x00\x00" + b"\x00" * 7 + b"\x80"
    for fill in (0x00, 0xFF, 0x41, 0x55, 0xAA, 0xC3, 0x10):
        value = header + bytes([fill]) * 12288
        for c in (rb, ref):
            c.set("d", value)
        both(rb, ref, "PFCOUNT", "d")
        assert rb.get("d") == ref.get("d"), fill
        both(rb, ref, "PFCOUNT", "d")
        both(rb, ref, "PFCOUNT", "d", "d")


def test_cache_invalidation_bit(rb):
    rb.pfadd("h", "a", "b", "c")
    rb.pfcount("h")
    assert rb.getrange("h", 15, 15) == b"\x00"
    rb.pfadd("h", "a", "b", "c")
    assert rb.getrange("h", 15, 15) == b"\x00"
    rb.pfadd("h", "1", "2", "3")
    assert rb.getrange("h", 15, 15) == b"\x80"


def test_pfcount_refresh_touches_watch(r):
    """Refreshing the cached count rewrites the value, which Redis signals
    as a modification: a WATCHing transaction fails."""
    r.pfadd("h", "a")
    with r.pipeline() as p:
        p.watch("h")
        r.pfcount("h")
        p.multi()
        p.set("x", "1")
        with pytest.raises(Exception):
            p.execute()


def test_selftest(r):
    assert r.execute_command("PFSELFTEST") in ("OK", b"OK", True)


def keyspace_events(c):
    """The key events of a PFADD/PFMERGE/PFCOUNT sequence on client `c`."""
    c.config_set("notify-keyspace-events", "KEAmn")
    try:
        p = c.pubsub()
        p.psubscribe("__keyevent@0__:*")
        p.get_message(timeout=1)
        c.pfadd("h", "a")
        c.pfadd("h", "a")
        c.pfmerge("m", "h")
        c.pfcount("h")
        c.pfcount("h", "nothing")
        got = []
        while (m := p.get_message(timeout=0.5)) is not None:
            got.append((m["channel"], m["data"]))
        p.close()
        return got
    finally:
        c.config_set("notify-keyspace-events", "")


def test_keyspace_events_like_redis(rb, ref):
    got = keyspace_events(rb)
    assert got == keyspace_events(ref)
    assert (b"__keyevent@0__:pfadd", b"m") in got


@pytest.mark.shoal_only
def test_concurrent_pfadds_on_two_workers(make_server, ref, conns):
    """PFADDs to one key from both workers at once lose no register: the
    result is the HLL Redis builds from the same elements one by one."""
    s = make_server(workers=2)
    clients = [conns(s, slot) for slot in (0, 1, 0, 1)]
    batches = [[f"c{i}-{j}".encode() for j in range(1500)] for i in range(len(clients))]

    def work(c, items):
        for e in items:
            c.cmd("PFADD", "h", e)

    threads = [threading.Thread(target=work, args=pair) for pair in zip(clients, batches)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for items in batches:
        ref.pfadd("h", *items)
    c = clients[0]
    assert c.cmd("PFDEBUG", "ENCODING", "h") == "dense"
    assert c.cmd("GET", "h") == ref.get("h")
    assert c.cmd("PFCOUNT", "h") == ref.pfcount("h")
