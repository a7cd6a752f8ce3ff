"""Large collections end to end: lists of 10,000 items, hashes, sets and sorted
sets of 5,000 members, big enough that shoal stores them in its paged B+tree
encoding. Every read and write is checked against a Python model of the value
(a list, a dict, a set, a dict of scores sorted by (score, member)) with Redis
7.0's semantics: index ranges, LPOS/LREM/LINSERT, HSCAN/SSCAN/ZSCAN cursors
(also while the hash grows), random picks, set algebra, ZADD flags, score and
lex ranges with ties, -0 and fractional scores, ZUNIONSTORE/ZINTERSTORE with
WEIGHTS. Also key operations on big values (COPY, RENAME, MOVE, DEL, SET over,
EXPIRE/PERSIST, TYPE, WATCH) and that memory comes back after DEL."""

import random

import pytest
import redis

CHUNK = 1000


# -- helpers ------------------------------------------------------------------

def chunks(xs, n=CHUNK):
    xs = list(xs)
    return [xs[i:i + n] for i in range(0, len(xs), n)]


def fill_list(r, key, items):
    p = r.pipeline(transaction=False)
    for part in chunks(items):
        p.rpush(key, *part)
    p.execute()


def fill_hash(r, key, mapping):
    p = r.pipeline(transaction=False)
    for part in chunks(mapping.items()):
        p.hset(key, mapping=dict(part))
    p.execute()


def fill_set(r, key, members):
    p = r.pipeline(transaction=False)
    for part in chunks(members):
        p.sadd(key, *part)
    p.execute()


def fill_zset(r, key, scores):
    p = r.pipeline(transaction=False)
    for part in chunks(scores.items()):
        p.zadd(key, dict(part))
    p.execute()


def piped(r, calls):
    """Runs `calls` (functions of a pipeline) in one round trip."""
    p = r.pipeline(transaction=False)
    for call in calls:
        call(p)
    return p.execute()


def redis_range(seq, start, stop):
    """seq[start..stop] with LRANGE/ZRANGE/LTRIM index rules."""
    n = len(seq)
    if start < 0:
        start += n
    if stop < 0:
        stop += n
    start = max(start, 0)
    if start > stop or start >= n:
        return []
    return seq[start:min(stop, n - 1) + 1]


def zsorted(model):
    """[(member, score)] in ZRANGE order."""
    return sorted(model.items(), key=lambda kv: (kv[1], kv[0]))


def bound(b):
    """A score bound ('(1.5', '-inf', 3) as (value, exclusive)."""
    b = str(b)
    if b.startswith("("):
        return float(b[1:]), True
    return float(b), False


def in_score_range(s, lo, hi):
    (a, ax), (b, bx) = bound(lo), bound(hi)
    return (s > a if ax else s >= a) and (s < b if bx else s <= b)


def in_lex_range(m, lo, hi):
    """Whether `m` is in a ZRANGEBYLEX range ('-', '+', '[x', '(x')."""
    if lo == "+" or hi == "-":
        return False
    ok_lo = lo == "-" or (m > lo[1:] if lo[0] == "(" else m >= lo[1:])
    ok_hi = hi == "+" or (m < hi[1:] if hi[0] == "(" else m <= hi[1:])
    return ok_lo and ok_hi


def scan_all(step, on_step=None):
    """Follows a SCAN-family cursor to 0; `step(cursor)` returns (cursor,
    items). Returns the list of every item returned."""
    seen, cursor = [], 0
    for _ in range(100000):
        cursor, items = step(cursor)
        seen.extend(items)
        if on_step:
            on_step()
        if int(cursor) == 0:
            return seen
    raise AssertionError("the cursor never came back to 0")


def used_memory(r):
    return r.info("memory").get("used_memory")


# -- lists --------------------------------------------------------------------

N_LIST = 10000


def list_items(n=N_LIST):
    """Unique items, every 37th of them over 200 bytes."""
    return [("L" * 200 + f":{i}") if i % 37 == 0 else f"item:{i}" for i in range(n)]


@pytest.fixture
def big_list(r):
    model = list_items()
    fill_list(r, "l", model)
    return model


def test_big_list_len_and_lindex(r, big_list):
    n = len(big_list)
    assert r.llen("l") == n
    assert r.object("encoding", "l") == "quicklist"
    rng = random.Random(1)
    idx = [0, 1, 2, 127, 128, 129, 4999, 5000, n - 2, n - 1, n, n + 1, 50000,
           -1, -2, -128, -129, -n, -n - 1, -50000]
    idx += [rng.randrange(-n - 10, n + 10) for _ in range(300)]
    got = piped(r, [lambda p, i=i: p.lindex("l", i) for i in idx])
    want = [big_list[i] if -n <= i < n else None for i in idx]
    assert got == want


def test_big_list_lrange_slices(r, big_list):
    n = len(big_list)
    cases = [(0, 9), (0, -1), (5000, 5100), (-100, -1), (9990, 20000), (-20000, 5),
             (100, 50), (n, n + 5), (-5, -10), (3, 3), (-1, -1), (n - 1, n - 1),
             (-n, -n), (127, 129), (0, 0)]
    rng = random.Random(2)
    for _ in range(40):
        a = rng.randrange(-n - 100, n + 100)
        cases.append((a, a + rng.randrange(-10, 700)))
    got = piped(r, [lambda p, a=a, b=b: p.lrange("l", a, b) for a, b in cases])
    for (a, b), g in zip(cases, got):
        assert g == redis_range(big_list, a, b), (a, b)
    assert r.lrange("l", 0, -1) == big_list


def test_big_list_lset(r, big_list):
    model = big_list
    rng = random.Random(3)
    positions = [0, -1, 128, 5000, -5000, N_LIST - 1, -N_LIST]
    positions += [rng.randrange(-N_LIST, N_LIST) for _ in range(200)]
    calls = []
    for k, i in enumerate(positions):
        v = f"set:{k}" if k % 3 else "S" * 300 + str(k)
        model[i] = v
        calls.append(lambda p, i=i, v=v: p.lset("l", i, v))
    assert piped(r, calls) == [True] * len(calls)
    for i in (N_LIST, N_LIST + 1, -N_LIST - 1, 10 ** 9):
        with pytest.raises(redis.ResponseError, match="^index out of range$"):
            r.lset("l", i, "x")
    assert r.lrange("l", 0, -1) == model


def test_big_list_linsert_before_and_after(r, big_list):
    model = big_list
    rng = random.Random(4)
    for k in range(60):
        pivot = model[rng.randrange(len(model))]
        where = "BEFORE" if k % 2 else "AFTER"
        value = f"ins:{k}" if k % 5 else "I" * 250 + str(k)
        i = model.index(pivot)
        model.insert(i if where == "BEFORE" else i + 1, value)
        assert r.linsert("l", where, pivot, value) == len(model)
    assert r.linsert("l", "BEFORE", "no-such-pivot", "x") == -1
    assert r.llen("l") == len(model)
    assert r.lrange("l", 0, -1) == model


def test_big_list_lrem_counts(r):
    model = [("D" * 200 + str(i % 7)) if i % 500 == 0 else f"d{i % 7}" for i in range(N_LIST)]
    fill_list(r, "l", model)

    def lrem(count, value):
        hits = [i for i, x in enumerate(model) if x == value]
        if count > 0:
            drop = hits[:count]
        elif count < 0:
            drop = hits[count:]
        else:
            drop = hits
        for i in reversed(drop):
            del model[i]
        return len(drop)

    for count, value in [(5, "d3"), (-5, "d4"), (0, "d5"), (100, "d1"), (-250, "d2"),
                         (3, "D" * 200 + "3"), (0, "D" * 200 + "0"), (2, "absent"),
                         (-100000, "d6"), (1000000, "d0")]:
        want = lrem(count, value)
        assert r.lrem("l", count, value) == want, (count, value)
    assert r.llen("l") == len(model)
    assert r.lrange("l", 0, -1) == model


def model_lpos(model, value, rank=1, count=None, maxlen=0):
    order = range(len(model)) if rank > 0 else range(len(model) - 1, -1, -1)
    if maxlen:
        order = order[:maxlen]
    hits = [i for i in order if model[i] == value][abs(rank) - 1:]
    if count is None:
        return hits[0] if hits else None
    return hits if count == 0 else hits[:count]


def test_big_list_lpos_rank_count_maxlen(r):
    model = [f"p{i % 100}" for i in range(N_LIST)]
    model[7777] = "once"
    fill_list(r, "l", model)
    cases = [("p42", {}), ("p42", {"rank": 2}), ("p42", {"rank": -1}), ("p42", {"rank": -3}),
             ("p42", {"count": 0}), ("p42", {"count": 5, "rank": 3}),
             ("p42", {"count": 7, "rank": -2}), ("p42", {"count": 0, "maxlen": 1000}),
             ("p42", {"rank": -1, "maxlen": 100}), ("p42", {"rank": -1, "maxlen": 50}),
             ("p42", {"rank": 101}), ("p42", {"rank": 100}), ("p42", {"rank": -100}),
             ("p77", {"count": 0, "rank": -1, "maxlen": 2500}), ("once", {}),
             ("once", {"count": 0}), ("once", {"maxlen": 7777}), ("once", {"maxlen": 7778}),
             ("absent", {}), ("absent", {"count": 0}), ("p0", {"count": 1000})]
    got = piped(r, [lambda p, v=v, kw=kw: p.lpos("l", v, **kw) for v, kw in cases])
    for (v, kw), g in zip(cases, got):
        assert g == model_lpos(model, v, **kw), (v, kw)


def test_big_list_ltrim_to_middle_window(r, big_list):
    assert r.ltrim("l", 2500, 7499) is True
    model = big_list[2500:7500]
    assert r.llen("l") == 5000
    assert r.lrange("l", 0, -1) == model
    assert r.ltrim("l", -3000, -1000)
    model = redis_range(model, -3000, -1000)
    assert r.lrange("l", 0, -1) == model
    assert r.lindex("l", 0) == model[0] and r.lindex("l", -1) == model[-1]
    assert r.ltrim("l", 1000, 500)  # an empty window removes the key
    assert r.exists("l") == 0


def test_big_list_pops_with_count(r, big_list):
    model = big_list
    assert r.lpop("l", 300) == model[:300]
    del model[:300]
    assert r.rpop("l", 300) == model[-300:][::-1]
    del model[-300:]
    assert r.lpop("l") == model.pop(0)
    assert r.rpop("l") == model.pop()
    assert r.llen("l") == len(model)
    assert r.lrange("l", 0, -1) == model
    # more than there is: all of it, and the key is gone
    assert r.rpop("l", 100000) == model[::-1]
    assert r.exists("l") == 0
    assert r.lpop("l", 5) is None


def test_big_list_lmove_between_two_big_lists(r):
    a = [f"a{i}" for i in range(6000)]
    b = [f"b{i}" for i in range(6000)]
    fill_list(r, "la", a)
    fill_list(r, "lb", b)
    calls, moved = [], []
    for k in range(400):
        src, dst, sm, dm = (("la", "lb", a, b) if k % 3 else ("lb", "la", b, a))
        wf, wt = ["LEFT", "RIGHT"][k % 2], ["LEFT", "RIGHT"][(k // 2) % 2]
        v = sm.pop(0) if wf == "LEFT" else sm.pop()
        moved.append(v)
        if wt == "LEFT":
            dm.insert(0, v)
        else:
            dm.append(v)
        calls.append(lambda p, s=src, d=dst, f=wf, t=wt: p.lmove(s, d, f, t))
    assert piped(r, calls) == moved
    assert r.lrange("la", 0, -1) == a
    assert r.lrange("lb", 0, -1) == b
    # a rotation of one big list onto itself
    for _ in range(50):
        assert r.lmove("la", "la", "RIGHT", "LEFT") == a[-1]
        a.insert(0, a.pop())
    assert r.lrange("la", 0, -1) == a
    assert r.llen("la") + r.llen("lb") == 12000


# -- hashes -------------------------------------------------------------------

N_HASH = 5000


def hash_model(n=N_HASH):
    return {f"f:{i}": ("V" * 300 + str(i)) if i % 41 == 0 else f"v:{i}" for i in range(n)}


@pytest.fixture
def big_hash(r):
    model = hash_model()
    fill_hash(r, "h", model)
    return model


def test_big_hash_field_reads(r, big_hash):
    model = big_hash
    assert r.hlen("h") == N_HASH
    assert r.object("encoding", "h") == "hashtable"
    rng = random.Random(5)
    names = [f"f:{rng.randrange(N_HASH + 200)}" for _ in range(400)] + ["", "f:", "nope"]
    got = piped(r, [lambda p, f=f: p.hget("h", f) for f in names])
    assert got == [model.get(f) for f in names]
    assert r.hmget("h", names) == [model.get(f) for f in names]
    got = piped(r, [lambda p, f=f: p.hexists("h", f) for f in names])
    assert got == [f in model for f in names]
    got = piped(r, [lambda p, f=f: p.hstrlen("h", f) for f in names])
    assert got == [len(model.get(f, "")) for f in names]
    assert r.hgetall("h") == model
    assert sorted(r.hkeys("h")) == sorted(model)
    assert sorted(r.hvals("h")) == sorted(model.values())


def test_big_hash_hincrby_and_hincrbyfloat(r, big_hash):
    model = big_hash
    counters = {f"n:{i}": str(i * 10) for i in range(100)}
    fill_hash(r, "h", counters)
    model.update(counters)
    for i in range(0, 100, 7):
        f = f"n:{i}"
        model[f] = str(int(model[f]) + 1000 - i)
        assert r.hincrby("h", f, 1000 - i) == int(model[f])
    assert r.hincrby("h", "new-counter", -5) == -5
    model["new-counter"] = "-5"
    assert r.hincrbyfloat("h", "n:3", 1.5) == 31.5
    model["n:3"] = "31.5"
    assert r.hincrbyfloat("h", "n:3", -0.25) == 31.25
    model["n:3"] = "31.25"
    assert r.hincrbyfloat("h", "flt", 2.5) == 2.5
    model["flt"] = "2.5"
    with pytest.raises(redis.ResponseError, match="^hash value is not an integer$"):
        r.hincrby("h", "f:1", 1)
    with pytest.raises(redis.ResponseError, match="^hash value is not a float$"):
        r.hincrbyfloat("h", "f:1", 1.0)
    assert r.hget("h", "n:3") == "31.25"
    assert r.hgetall("h") == model


def test_big_hash_hdel_many(r, big_hash):
    model = big_hash
    rng = random.Random(6)
    doomed = rng.sample(sorted(model), 4000) + ["missing:1", "missing:2"]
    total = 0
    for part in chunks(doomed, 700):
        total += r.hdel("h", *part)
    assert total == 4000
    for f in doomed:
        model.pop(f, None)
    assert r.hlen("h") == len(model) == 1000
    assert r.hgetall("h") == model
    assert r.hdel("h", doomed[0]) == 0
    assert r.hdel("h", *model) == 1000
    assert r.exists("h") == 0


def hscan_fields(r, key, on_step=None, **kw):
    """Every (field, value) HSCAN returns, following the cursor to 0."""
    def step(cursor):
        cursor, fields = r.hscan(key, cursor, **kw)
        return cursor, list(fields.items())
    return scan_all(step, on_step)


def test_big_hash_hscan_full_iteration(r, big_hash):
    pairs = hscan_fields(r, "h", count=10)
    assert dict(pairs) == big_hash
    assert all(big_hash[f] == v for f, v in pairs)
    assert dict(hscan_fields(r, "h")) == big_hash
    assert dict(hscan_fields(r, "h", count=1000)) == big_hash


def test_big_hash_hscan_match(r, big_hash):
    want = {f: v for f, v in big_hash.items() if f.startswith("f:12")}
    assert dict(hscan_fields(r, "h", match="f:12*", count=10)) == want
    assert dict(hscan_fields(r, "h", match="f:?")) == {f"f:{i}": big_hash[f"f:{i}"]
                                                       for i in range(10)}
    assert hscan_fields(r, "h", match="v:*", count=100) == []


def test_big_hash_hscan_while_adding_fields(r, big_hash):
    added = []

    def grow():
        fields = {f"new:{len(added) + k}": "x" for k in range(5)}
        added.extend(fields)
        r.hset("h", mapping=fields)

    seen = [f for f, _ in hscan_fields(r, "h", on_step=grow, count=10)]
    assert set(big_hash) <= set(seen)  # every field present throughout is seen
    assert set(seen) <= set(big_hash) | set(added)
    assert r.hlen("h") == N_HASH + len(added)


def test_big_hash_hrandfield(r, big_hash):
    model = big_hash
    assert r.hrandfield("h") in model
    got = r.hrandfield("h", 100)
    assert len(got) == 100 and len(set(got)) == 100 and set(got) <= set(model)
    got = r.hrandfield("h", N_HASH + 1000)
    assert len(got) == N_HASH and set(got) == set(model)
    got = r.hrandfield("h", -300)
    assert len(got) == 300 and set(got) <= set(model)
    flat = r.hrandfield("h", 50, withvalues=True)
    fields, values = flat[::2], flat[1::2]
    assert len(fields) == 50 and len(set(fields)) == 50
    assert all(model[f] == v for f, v in zip(fields, values))
    flat = r.hrandfield("h", -80, withvalues=True)
    assert len(flat) == 160
    assert all(model[f] == v for f, v in zip(flat[::2], flat[1::2]))
    assert r.hrandfield("h", 0) == []


# -- sets ---------------------------------------------------------------------

N_SET = 5000


def set_model(n=N_SET):
    """Half integers, half strings."""
    return {str(i) for i in range(n // 2)} | {f"m:{i}" for i in range(n // 2)}


@pytest.fixture
def big_set(r):
    model = set_model()
    fill_set(r, "s", sorted(model))
    return model


def test_big_set_membership_and_members(r, big_set):
    model = big_set
    assert r.scard("s") == N_SET
    assert r.object("encoding", "s") == "hashtable"
    rng = random.Random(7)
    probes = [str(rng.randrange(3000)) for _ in range(200)]
    probes += [f"m:{rng.randrange(3000)}" for _ in range(200)] + ["", "-1", "m:"]
    got = piped(r, [lambda p, m=m: p.sismember("s", m) for m in probes])
    assert got == [m in model for m in probes]
    assert r.smismember("s", probes) == [int(m in model) for m in probes]
    assert r.smembers("s") == model


def test_big_set_sscan_full_iteration(r, big_set):
    seen = scan_all(lambda c: r.sscan("s", c, count=10))
    assert set(seen) == big_set
    assert set(scan_all(lambda c: r.sscan("s", c))) == big_set
    want = {m for m in big_set if m.startswith("m:3")}
    assert set(scan_all(lambda c: r.sscan("s", c, match="m:3*", count=50))) == want


def test_big_set_spop_with_count(r, big_set):
    model = big_set
    popped = r.spop("s", 700)
    assert len(popped) == 700 and len(set(popped)) == 700 and set(popped) <= model
    model -= set(popped)
    assert r.scard("s") == len(model)
    assert r.smismember("s", popped) == [0] * 700
    assert r.smembers("s") == model
    one = r.spop("s")
    assert one in model
    model.discard(one)
    rest = r.spop("s", 100000)
    assert set(rest) == model and len(rest) == len(model)
    assert r.exists("s") == 0


def test_big_set_srandmember(r, big_set):
    assert r.srandmember("s") in big_set
    got = r.srandmember("s", 200)
    assert len(got) == 200 and len(set(got)) == 200 and set(got) <= big_set
    got = r.srandmember("s", -400)
    assert len(got) == 400 and set(got) <= big_set
    got = r.srandmember("s", N_SET + 10)
    assert len(got) == N_SET and set(got) == big_set
    assert r.scard("s") == N_SET  # nothing removed


def test_big_set_algebra(r, big_set):
    a = big_set
    small = {"1", "2", "m:7", "nothere", "m:99999"}
    b = {str(i) for i in range(1000, 4000)} | {f"m:{i}" for i in range(2000, 6000)} | {"zz"}
    fill_set(r, "small", sorted(small))
    fill_set(r, "b", sorted(b))
    assert r.object("encoding", "b") == "hashtable"
    assert r.sinter("s", "small") == a & small
    assert r.sinter("small", "s") == a & small
    assert r.sinter("s", "b") == a & b
    assert r.sinter("s", "b", "small") == a & b & small
    assert r.sunion("s", "small") == a | small
    assert r.sunion("s", "b") == a | b
    assert r.sdiff("s", "small") == a - small
    assert r.sdiff("small", "s") == small - a
    assert r.sdiff("s", "b") == a - b
    assert r.sdiff("b", "s") == b - a
    assert r.sdiff("s", "b", "small") == a - b - small
    assert r.sintercard(2, ["s", "b"]) == len(a & b)
    assert r.sintercard(2, ["s", "b"], limit=100) == 100
    assert r.sintercard(2, ["s", "small"]) == len(a & small)
    assert r.sintercard(3, ["s", "b", "nokey"]) == 0
    assert r.sinterstore("dst1", ["s", "b"]) == len(a & b)
    assert r.smembers("dst1") == a & b
    assert r.sunionstore("dst2", ["s", "b", "small"]) == len(a | b | small)
    assert r.smembers("dst2") == a | b | small
    assert r.sdiffstore("dst3", ["b", "s"]) == len(b - a)
    assert r.smembers("dst3") == b - a
    # the sources are untouched
    assert r.smembers("s") == a and r.smembers("b") == b


def test_big_set_smove(r, big_set):
    model = big_set
    r.sadd("small", "x")
    moved = ["0", "2499", "m:0", "m:2499", "m:1234", "77"]
    for m in moved:
        assert r.smove("s", "small", m) is True
        model.discard(m)
    assert r.smove("s", "small", "m:0") is False
    assert r.smove("s", "fresh", "m:5") is True
    model.discard("m:5")
    assert r.smembers("small") == set(moved) | {"x"}
    assert r.smembers("fresh") == {"m:5"}
    assert r.scard("s") == len(model) == N_SET - 7
    assert r.smembers("s") == model


def test_integer_set_shrinks_and_grows(r):
    model = {str(i * 3) for i in range(1000)}
    fill_set(r, "s", sorted(model))
    assert r.scard("s") == 1000
    keep = sorted(model)[:10]
    doomed = sorted(model - set(keep))
    for part in chunks(doomed, 300):
        assert r.srem("s", *part) == len(part)
    model = set(keep)
    # (no encoding check: shoal says "intset" here where Redis says "hashtable")
    assert r.scard("s") == 10
    assert r.smembers("s") == model
    assert r.sismember("s", keep[3]) and not r.sismember("s", doomed[0])
    assert r.sadd("s", "word", "-5") == 2
    assert r.smembers("s") == model | {"word", "-5"}


# -- sorted sets --------------------------------------------------------------

N_ZSET = 5000


def zset_model(n=N_ZSET):
    """Many ties (score = i % 50), some negative and fractional scores, -0."""
    model = {}
    for i in range(n):
        if i % 97 == 0:
            s = -(i % 13) - 0.5
        elif i % 89 == 0:
            s = i / 4
        else:
            s = float(i % 50)
        model[f"m{i:05d}"] = s
    model["negzero"] = -0.0
    model["poszero"] = 0.0
    return model


@pytest.fixture
def big_zset(r):
    model = zset_model()
    fill_zset(r, "z", model)
    return model


def test_big_zset_scores_and_ranks(r, big_zset):
    model = big_zset
    order = [m for m, _ in zsorted(model)]
    rank = {m: i for i, m in enumerate(order)}
    n = len(model)
    assert r.zcard("z") == n
    assert r.object("encoding", "z") == "skiplist"
    rng = random.Random(8)
    probes = [f"m{rng.randrange(N_ZSET + 100):05d}" for _ in range(300)]
    probes += ["negzero", "poszero", "m00000", "m00097", "m00089", "nope"]
    got = piped(r, [lambda p, m=m: p.zscore("z", m) for m in probes])
    assert got == [model.get(m) for m in probes]
    assert r.zscore("z", "negzero") == 0.0
    assert r.zmscore("z", probes) == [model.get(m) for m in probes]
    got = piped(r, [lambda p, m=m: p.zrank("z", m) for m in probes])
    assert got == [rank.get(m) for m in probes]
    got = piped(r, [lambda p, m=m: p.zrevrank("z", m) for m in probes])
    assert got == [n - 1 - rank[m] if m in rank else None for m in probes]


def test_big_zset_range_by_rank(r, big_zset):
    items = zsorted(big_zset)
    rev = items[::-1]
    n = len(items)
    cases = [(0, -1), (0, 9), (-10, -1), (2500, 2600), (n - 1, n + 100), (100, 50),
             (-n - 5, 3), (n, n + 1), (127, 128)]
    for a, b in cases:
        assert r.zrange("z", a, b, withscores=True) == redis_range(items, a, b), (a, b)
        assert r.zrange("z", a, b, desc=True, withscores=True) == redis_range(rev, a, b)
        assert r.zrange("z", a, b) == [m for m, _ in redis_range(items, a, b)]
    assert r.zrevrange("z", 0, 99) == [m for m, _ in rev[:100]]


SCORE_RANGES = [("-inf", "+inf"), (0, 0), ("(0", "(1"), (3, 7), ("(3", 7), (3, "(7"),
                ("(3", "(7"), (-6.5, -0.5), ("(-6.5", 0), (-0.0, "-0"), (10, 10),
                (49, "+inf"), ("(49", "+inf"), ("-inf", "(-3"), (7, 3), ("(5", "(5"),
                (1000, 2000), (12.5, 12.5), ("-inf", "-inf"), ("+inf", "+inf")]


def test_big_zset_zcount_and_score_ranges(r, big_zset):
    items = zsorted(big_zset)
    for lo, hi in SCORE_RANGES:
        want = [(m, s) for m, s in items if in_score_range(s, lo, hi)]
        assert r.zcount("z", lo, hi) == len(want), (lo, hi)
        assert r.zrangebyscore("z", lo, hi, withscores=True) == want, (lo, hi)
        assert r.zrevrangebyscore("z", hi, lo, withscores=True) == want[::-1], (lo, hi)
        assert r.zrange("z", lo, hi, byscore=True) == [m for m, _ in want]
        assert r.zrangebyscore("z", lo, hi, start=5, num=20) == [m for m, _ in want[5:25]]
        assert r.zrange("z", hi, lo, byscore=True, desc=True, offset=3, num=40) == \
            [m for m, _ in want[::-1][3:43]]
    # LIMIT with a negative count: everything from the offset
    want = [m for m, s in items if in_score_range(s, 2, 4)]
    assert r.zrangebyscore("z", 2, 4, start=10, num=-1) == want[10:]


def lex_model(n=3000):
    rng = random.Random(9)
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice("abcdefghij") for _ in range(rng.randrange(1, 8))))
    return sorted(words)


LEX_RANGES = [("-", "+"), ("[a", "[b"), ("[a", "(b"), ("(a", "(c"), ("[c", "+"),
              ("-", "(d"), ("[abc", "[abd"), ("(j", "+"), ("[e", "[d"), ("[b", "[b"),
              ("+", "-"), ("-", "-"), ("+", "+"), ("[ghi", "[ghij")]


def test_big_zset_bylex_ranges(r):
    words = lex_model()
    fill_zset(r, "lz", {w: 0 for w in words})
    assert r.zcard("lz") == len(words)
    for lo, hi in LEX_RANGES:
        want = [w for w in words if in_lex_range(w, lo, hi)]
        assert r.zlexcount("lz", lo, hi) == len(want), (lo, hi)
        assert r.zrangebylex("lz", lo, hi) == want, (lo, hi)
        assert r.zrange("lz", lo, hi, bylex=True) == want
        assert r.zrange("lz", lo, hi, bylex=True, offset=7, num=25) == want[7:32]
        assert r.zrevrangebylex("lz", hi, lo) == want[::-1]
        assert r.zrange("lz", hi, lo, bylex=True, desc=True, offset=2, num=30) == \
            want[::-1][2:32]


def test_big_zset_long_members_sharing_a_prefix(r):
    prefix = "X" * 300
    members = [prefix + str(i) for i in range(1500)]
    piped(r, [lambda p, m=m: p.zadd("lz", {m: 0}) for m in members])  # one by one
    words = sorted(members)
    assert r.zcard("lz") == len(words)
    assert r.zrange("lz", 0, -1) == words
    assert r.zrange("lz", "[" + prefix + "2", "(" + prefix + "3", bylex=True) == \
        [w for w in words if prefix + "2" <= w < prefix + "3"]
    assert r.zrank("lz", prefix + "999") == words.index(prefix + "999")


def test_big_zset_zremrangebylex(r):
    words = lex_model()
    fill_zset(r, "lz", {w: 0 for w in words})
    for lo, hi in [("[b", "(d"), ("-", "(a"), ("(i", "+"), ("[e", "[e")]:
        gone = [w for w in words if in_lex_range(w, lo, hi)]
        assert r.zremrangebylex("lz", lo, hi) == len(gone)
        words = [w for w in words if w not in set(gone)]
    assert r.zrange("lz", 0, -1) == words


def test_big_zset_zincrby_moves_ranks(r, big_zset):
    model = big_zset
    for k, (m, by) in enumerate([("m00001", 100.0), ("m00002", -200.5), ("m04999", 0.25),
                                 ("negzero", 3.0), ("m00050", -50.0), ("brandnew", 7.5)]):
        model[m] = model.get(m, 0.0) + by
        assert r.zincrby("z", by, m) == model[m]
    order = [m for m, _ in zsorted(model)]
    for m in ("m00001", "m00002", "m04999", "negzero", "m00050", "brandnew"):
        assert r.zrank("z", m) == order.index(m)
    assert r.zrange("z", 0, -1, withscores=True) == zsorted(model)


def model_zadd(model, mapping, nx=False, xx=False, gt=False, lt=False, ch=False):
    added = changed = 0
    for m, s in mapping.items():
        if m in model:
            old = model[m]
            if nx or (gt and not s > old) or (lt and not s < old):
                continue
            if s != old:
                model[m] = s
                changed += 1
        elif not xx:
            model[m] = s
            added += 1
    return added + changed if ch else added


def test_big_zset_zadd_flags(r, big_zset):
    model = big_zset
    rng = random.Random(10)
    flag_sets = [{}, {"nx": True}, {"xx": True}, {"gt": True}, {"lt": True}, {"ch": True},
                 {"xx": True, "ch": True}, {"gt": True, "ch": True}, {"lt": True, "ch": True},
                 {"nx": True, "ch": True}, {"xx": True, "gt": True, "ch": True},
                 {"xx": True, "lt": True}]
    for k, flags in enumerate(flag_sets):
        mapping = {}
        for _ in range(300):
            if rng.random() < 0.7:
                m = f"m{rng.randrange(N_ZSET):05d}"
            else:
                m = f"new{k}:{rng.randrange(1000)}"
            mapping[m] = float(rng.randrange(-60, 60)) / 2
        want = model_zadd(model, mapping, **flags)
        assert r.zadd("z", mapping, **flags) == want, flags
    assert r.zcard("z") == len(model)
    assert r.zrange("z", 0, -1, withscores=True) == zsorted(model)


def test_big_zset_zrem_many(r, big_zset):
    model = big_zset
    rng = random.Random(11)
    doomed = rng.sample(sorted(model), 3500) + ["absent1", "absent2"]
    removed = sum(r.zrem("z", *part) for part in chunks(doomed, 600))
    assert removed == 3500
    for m in doomed:
        model.pop(m, None)
    assert r.zcard("z") == len(model)
    assert r.zrange("z", 0, -1, withscores=True) == zsorted(model)
    assert r.zrem("z", *model) == len(model)
    assert r.exists("z") == 0


def test_big_zset_zremrangebyrank_and_byscore(r, big_zset):
    items = zsorted(big_zset)
    for a, b in [(100, 199), (-50, -1), (0, 0), (3000, 100000), (500, 400)]:
        gone = redis_range(items, a, b)
        assert r.zremrangebyrank("z", a, b) == len(gone), (a, b)
        items = [x for x in items if x not in gone]
    for lo, hi in [("(10", 20), (-3.5, "(-1"), (0, 0), ("(45", "+inf"), (30, 29)]:
        gone = [x for x in items if in_score_range(x[1], lo, hi)]
        assert r.zremrangebyscore("z", lo, hi) == len(gone), (lo, hi)
        items = [x for x in items if x not in gone]
    assert r.zrange("z", 0, -1, withscores=True) == items


def test_big_zset_zpopmin_zpopmax(r, big_zset):
    items = zsorted(big_zset)
    assert r.zpopmin("z", 150) == items[:150]
    items = items[150:]
    assert r.zpopmax("z", 150) == items[-150:][::-1]
    items = items[:-150]
    assert r.zpopmin("z") == items[:1]
    assert r.zpopmax("z") == items[-1:]
    items = items[1:-1]
    assert r.zrange("z", 0, -1, withscores=True) == items
    assert r.zpopmax("z", 100000) == items[::-1]
    assert r.exists("z") == 0


def test_big_zset_zrandmember(r, big_zset):
    model = big_zset
    assert r.zrandmember("z") in model
    got = r.zrandmember("z", 150)
    assert len(got) == 150 and len(set(got)) == 150 and set(got) <= set(model)
    got = r.zrandmember("z", -300)
    assert len(got) == 300 and set(got) <= set(model)
    got = r.zrandmember("z", len(model) + 5)
    assert sorted(got) == sorted(model)
    flat = r.zrandmember("z", 60, withscores=True)
    assert len(flat) == 120 and len(set(flat[::2])) == 60
    assert all(model[m] == float(s) for m, s in zip(flat[::2], flat[1::2]))
    flat = r.zrandmember("z", -60, withscores=True)
    assert all(model[m] == float(s) for m, s in zip(flat[::2], flat[1::2]))


def test_big_zset_zscan_full_iteration(r, big_zset):
    seen = scan_all(lambda c: r.zscan("z", c, count=10))
    assert dict(seen) == big_zset
    assert all(big_zset[m] == s for m, s in seen)
    want = {m: s for m, s in big_zset.items() if m.startswith("m012")}
    assert dict(scan_all(lambda c: r.zscan("z", c, match="m012*"))) == want


def test_big_zset_union_and_inter_store_with_weights(r, big_zset):
    a = big_zset
    b = {f"m{i:05d}": (i % 7) * 0.5 for i in range(2500, 8000)}
    b["negzero"] = 1.0
    fill_zset(r, "zb", b)
    assert r.zunionstore("u", {"z": 2, "zb": 3}) == len(set(a) | set(b))
    union = {}
    for m, s in a.items():
        union[m] = union.get(m, 0) + s * 2
    for m, s in b.items():
        union[m] = union[m] + s * 3 if m in union else s * 3
    assert r.zrange("u", 0, -1, withscores=True) == zsorted(union)
    assert r.object("encoding", "u") == "skiplist"
    assert r.zinterstore("i", {"z": 1.5, "zb": -1}) == len(set(a) & set(b))
    inter = {m: a[m] * 1.5 + b[m] * -1 for m in set(a) & set(b)}
    assert r.zrange("i", 0, -1, withscores=True) == zsorted(inter)
    assert r.zinterstore("imax", ["z", "zb"], aggregate="MAX") == len(inter)
    assert r.zrange("imax", 0, -1, withscores=True) == \
        zsorted({m: max(a[m], b[m]) for m in inter})
    assert r.zunionstore("umin", ["z", "zb"], aggregate="MIN") == len(union)
    umin = dict(a)
    for m, s in b.items():
        umin[m] = min(umin[m], s) if m in umin else s
    assert r.zrange("umin", 0, -1, withscores=True) == zsorted(umin)
    # the sources are untouched
    assert r.zrange("z", 0, -1, withscores=True) == zsorted(a)
    assert r.zcard("zb") == len(b)


# -- key operations on big values ---------------------------------------------

def fill_all(r, suffix=""):
    """A big list, hash, set and zset; returns their models by key."""
    models = {"l" + suffix: list_items(), "h" + suffix: hash_model(),
              "s" + suffix: set_model(), "z" + suffix: zset_model()}
    fill_list(r, "l" + suffix, models["l" + suffix])
    fill_hash(r, "h" + suffix, models["h" + suffix])
    fill_set(r, "s" + suffix, sorted(models["s" + suffix]))
    fill_zset(r, "z" + suffix, models["z" + suffix])
    return models


def read_value(r, key):
    t = r.type(key)
    if t == "list":
        return r.lrange(key, 0, -1)
    if t == "hash":
        return r.hgetall(key)
    if t == "set":
        return r.smembers(key)
    if t == "zset":
        return dict(r.zrange(key, 0, -1, withscores=True))
    if t == "string":
        return r.get(key)
    assert t == "none", t
    return None


def as_read(model):
    return dict(model) if isinstance(model, dict) else model


def test_type_of_big_values(r):
    fill_all(r)
    assert [r.type(k) for k in ("l", "h", "s", "z")] == ["list", "hash", "set", "zset"]


def test_copy_big_values_then_modify_the_copy(r, server):
    models = fill_all(r)
    for k in models:
        assert r.copy(k, k + ":copy") is True
        assert read_value(r, k + ":copy") == as_read(models[k])
    r.rpush("l:copy", "tail")
    r.lset("l:copy", 5000, "changed")
    r.hset("h:copy", "f:1", "changed")
    r.hdel("h:copy", "f:2")
    r.sadd("s:copy", "extra")
    r.srem("s:copy", "m:3")
    r.zadd("z:copy", {"m00004": 1000.0, "extra": 1.0})
    r.zrem("z:copy", "m00005")
    for k in models:  # the originals are unchanged
        assert read_value(r, k) == as_read(models[k]), k
    lst = models["l"] + ["tail"]
    lst[5000] = "changed"
    assert r.lrange("l:copy", 0, -1) == lst
    h = dict(models["h"], **{"f:1": "changed"})
    del h["f:2"]
    assert r.hgetall("h:copy") == h
    assert r.smembers("s:copy") == (models["s"] | {"extra"}) - {"m:3"}
    z = dict(models["z"], m00004=1000.0, extra=1.0)
    del z["m00005"]
    assert dict(r.zrange("z:copy", 0, -1, withscores=True)) == z
    # COPY over an existing big value needs REPLACE; COPY into another db
    assert r.copy("z", "h:copy") is False
    assert r.copy("z", "h:copy", replace=True) is True
    assert r.type("h:copy") == "zset"
    assert r.copy("h", "h", destination_db=1) is True
    db1 = server.client(db=1)
    try:
        assert db1.hgetall("h") == models["h"]
        db1.hset("h", "f:0", "db1")
    finally:
        db1.close()
    assert r.hget("h", "f:0") == models["h"]["f:0"]


def test_rename_big_values(r):
    models = fill_all(r)
    assert r.rename("z", "z2") is True
    assert r.exists("z") == 0
    assert dict(r.zrange("z2", 0, -1, withscores=True)) == models["z"]
    # RENAME over another big value replaces it
    assert r.rename("l", "h") is True
    assert r.type("h") == "list"
    assert r.lrange("h", 0, -1) == models["l"]
    assert r.exists("l") == 0
    assert r.renamenx("s", "h") is False
    assert r.smembers("s") == models["s"]


def test_move_big_value_to_db1_and_back(r, server):
    models = fill_all(r)
    db1 = server.client(db=1)
    try:
        assert r.move("h", 1) is True
        assert r.exists("h") == 0
        assert db1.hgetall("h") == models["h"]
        db1.hset("h", "moved", "yes")
        assert db1.move("h", 0) is True
        assert db1.exists("h") == 0
        assert r.hgetall("h") == dict(models["h"], moved="yes")
        # MOVE onto an existing key does nothing
        db1.rpush("l", "x")
        assert r.move("l", 1) is False
        assert r.llen("l") == N_LIST and db1.lrange("l", 0, -1) == ["x"]
    finally:
        db1.close()


def test_del_big_values(r):
    fill_all(r)
    assert r.delete("l", "h", "s", "z", "nokey") == 4
    assert r.exists("l", "h", "s", "z") == 0
    assert r.llen("l") == 0 and r.hlen("h") == 0 and r.scard("s") == 0 and r.zcard("z") == 0
    assert r.dbsize() == 0
    assert r.unlink(*fill_all(r)) == 4
    assert r.dbsize() == 0


def test_set_over_a_big_list(r, big_list):
    assert r.set("l", "now a string") is True
    assert r.type("l") == "string"
    assert r.get("l") == "now a string"
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.llen("l")
    assert r.strlen("l") == len("now a string")


def test_expire_persist_ttl_on_a_big_hash(r, big_hash):
    assert r.ttl("h") == -1
    assert r.expire("h", 1000) is True
    assert 0 < r.ttl("h") <= 1000
    assert r.hset("h", "added", "1") == 1  # a write keeps the TTL
    assert 0 < r.ttl("h") <= 1000
    assert r.persist("h") is True
    assert r.ttl("h") == -1
    assert r.persist("h") is False
    assert r.hgetall("h") == dict(big_hash, added="1")
    # an expiry in the past removes the whole value at once
    assert r.expireat("h", 1) is True
    assert r.exists("h") == 0 and r.hlen("h") == 0


def test_memory_comes_back_after_del_of_big_values(r):
    figures = []
    for cycle in range(5):
        fill_all(r)
        assert r.delete("l", "h", "s", "z") == 4
        figures.append(used_memory(r))
    if figures[0] is None:
        pytest.skip("INFO memory has no used_memory")
    assert figures[-1] - figures[0] <= 256 * 1024, figures


def test_watch_big_zset_aborted_by_zadd_from_another_client(r, server, big_zset):
    other = server.client()
    try:
        with r.pipeline() as p:
            p.watch("z")
            assert p.zcard("z") == len(big_zset)
            p.multi()
            p.zadd("z", {"mine": 1.0})
            p.execute()  # nothing changed the key: EXEC runs
        assert r.zscore("z", "mine") == 1.0
        with r.pipeline() as p:
            p.watch("z")
            assert other.zadd("z", {"m00010": 999.0}) == 0  # an update, not an add
            p.multi()
            p.zadd("z", {"lost": 1.0})
            with pytest.raises(redis.WatchError):
                p.execute()
    finally:
        other.close()
    assert r.zscore("z", "lost") is None
    assert r.zscore("z", "m00010") == 999.0
    assert r.zcard("z") == len(big_zset) + 1
