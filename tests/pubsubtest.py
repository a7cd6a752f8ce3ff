"""Helpers shared by the pub/sub suites: RESP frames exactly as Redis writes
them, and reading a connection's next replies or pushes as bytes."""

from shoaltest import encode

CANT = ("ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET "
        "are allowed in this context")


def item(x, resp3=False):
    if x is None:
        return b"_\r\n" if resp3 else b"$-1\r\n"
    if isinstance(x, int):
        return b":%d\r\n" % x
    if isinstance(x, str):
        x = x.encode()
    return b"$%d\r\n%s\r\n" % (len(x), x)


def frame(*items):
    """A RESP2 array of bulk strings, integers and nils."""
    return b"*%d\r\n" % len(items) + b"".join(item(i) for i in items)


def push(*items):
    """The same as a RESP3 push ('>')."""
    return b">%d\r\n" % len(items) + b"".join(item(i, True) for i in items)


def read_frames(c, n):
    """The exact bytes of the next `n` replies or pushes."""
    return b"".join(c.reply_bytes() for _ in range(n))


def ask(c, *args, replies=1):
    """Sends one command, returns the exact bytes of its `replies` replies."""
    c.send(encode(*args))
    return read_frames(c, replies)
