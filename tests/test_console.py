"""The browser console at /console, driven in headless Chromium over the
DevTools protocol: the page opens the `term` sub-protocol, keystrokes typed
into it run commands, and the replies appear on the page."""

import asyncio
import itertools
import json
import shutil
import subprocess
import tempfile
import urllib.request

import pytest
import websockets

from shoaltest import TARGET, free_port, wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.shoal_only,
    pytest.mark.skipif(TARGET != "shoal", reason="the console is shoal's own"),
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"),
]


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium with a DevTools port; yields that port."""
    port = free_port()
    profile = tempfile.mkdtemp(prefix="shoal-chromium-")
    proc = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
         "--no-first-run", "--no-default-browser-check", f"--user-data-dir={profile}",
         f"--remote-debugging-port={port}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def pages():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as f:
                return [p for p in json.load(f) if p["type"] == "page"]
        except OSError:
            return None

    try:
        wait_for(pages, timeout=30, what="chromium's DevTools endpoint")
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


class Page:
    """One page over the DevTools protocol."""

    def __init__(self, ws):
        self.ws = ws
        self.ids = itertools.count(1)

    async def call(self, method, **params):
        msg_id = next(self.ids)
        await self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(await self.ws.recv())
            if msg.get("id") == msg_id:
                assert "error" not in msg, msg
                return msg.get("result", {})

    async def eval(self, expression):
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def wait_eval(self, expression, what, timeout=15.0):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            value = await self.eval(expression)
            if value:
                return value
            await asyncio.sleep(0.05)
        screen = await self.eval("document.getElementById('screen').innerText")
        raise AssertionError(f"timed out waiting for {what}; screen:\n{screen}")

    async def key(self, key, code, vk, modifiers=0):
        for kind in ("keyDown", "keyUp"):
            await self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code,
                            windowsVirtualKeyCode=vk, nativeVirtualKeyCode=vk,
                            modifiers=modifiers)

    async def type(self, text):
        await self.call("Input.insertText", text=text)

    async def enter(self):
        await self.key("Enter", "Enter", 13)

    async def screen(self):
        return await self.eval("document.getElementById('screen').innerText")


async def open_console(devtools_port, http_port):
    req = urllib.request.Request(f"http://127.0.0.1:{devtools_port}/json/new?about:blank",
                                 method="PUT")
    with urllib.request.urlopen(req, timeout=5) as f:
        target = json.load(f)
    ws = await websockets.connect(target["webSocketDebuggerUrl"], max_size=None)
    page = Page(ws)
    await page.call("Page.enable")
    await page.call("Runtime.enable")
    await page.call("Page.navigate", url=f"http://127.0.0.1:{http_port}/console")
    await page.wait_eval("document.getElementById('status')?.className === 'up'",
                         "the console to connect")
    await page.wait_eval("document.getElementById('screen').innerText.includes('shoal>')",
                         "the prompt")
    await page.eval("document.getElementById('keys').focus()")
    return page, target["id"]


async def close_page(devtools_port, page, target_id):
    await page.ws.close()
    with urllib.request.urlopen(f"http://127.0.0.1:{devtools_port}/json/close/{target_id}",
                                timeout=5):
        pass


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def screen_has(text):
    return f"document.getElementById('screen').innerText.includes({json.dumps(text)})"


def test_the_console_page_is_served(server, r):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/console") as f:
        assert f.headers["Content-Type"] == "text/html; charset=utf-8"
        page = f.read().decode()
    assert "WebSocket" in page and '"term"' in page
    assert "<script src" not in page  # nothing from elsewhere


def test_typing_a_command_shows_its_reply(chromium, server, r):
    async def go():
        page, target = await open_console(chromium, server.http_port)
        await page.type("set greeting hello")
        await page.wait_eval(screen_has("shoal> set greeting hello"), "the echo")
        await page.enter()
        await page.wait_eval(screen_has("\nOK\n"), "the reply OK")
        assert r.get("greeting") == "hello"
        await page.type("get greeting")
        await page.enter()
        await page.wait_eval(screen_has('"hello"'), "the value")
        r.rpush("l", "a", "b")
        await page.type("lrange l 0 -1")
        await page.enter()
        await page.wait_eval(screen_has('1) "a"\n2) "b"'), "the list")
        await close_page(chromium, page, target)
    run(go())


def test_editing_keys_in_the_browser(chromium, server, r):
    r.set("k", "value")

    async def go():
        page, target = await open_console(chromium, server.http_port)
        # A typo fixed with Backspace.
        await page.type("get kk")
        await page.key("Backspace", "Backspace", 8)
        await page.enter()
        await page.wait_eval(screen_has('"value"'), "the reply after Backspace")
        # Left arrow, then insert in the middle.
        await page.type("gt k")
        for _ in range(3):
            await page.key("ArrowLeft", "ArrowLeft", 37)
        await page.type("e")
        await page.wait_eval(screen_has("shoal> get k"), "the edited line")
        await page.enter()
        await page.wait_eval("(document.getElementById('screen').innerText"
                             ".match(/\"value\"/g) || []).length === 2", "the second reply")
        # Up recalls the last line.
        await page.type("strlen k")
        await page.enter()
        await page.wait_eval(screen_has("(integer) 5"), "STRLEN")
        await page.eval("document.getElementById('keys').focus()")
        await page.key("ArrowUp", "ArrowUp", 38)
        await page.enter()
        await page.wait_eval("(document.getElementById('screen').innerText"
                             ".match(/\\(integer\\) 5/g) || []).length === 2", "STRLEN again")
        # Ctrl-C drops the line.
        await page.type("flushall")
        await page.key("c", "KeyC", 67, modifiers=2)
        await page.wait_eval(screen_has("shoal> flushall^C"), "^C")
        await page.enter()
        await asyncio.sleep(0.2)
        assert r.get("k") == "value"
        await close_page(chromium, page, target)
    run(go())
