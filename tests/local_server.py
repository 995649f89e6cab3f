"""An aiohttp app on 127.0.0.1 (a free port) in a thread of its own, for the stand-ins of the test suite:
a subclass adds its routes in `routes(app)`; `with Server() as s:` serves it at `s.url` until the block ends."""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web


class LocalServer:
    name = "LocalServer"
    _thread = None
    _loop = None
    url = ""

    def routes(self, app: web.Application) -> None:  # pragma: no cover - every stand-in overrides it
        raise NotImplementedError

    def __enter__(self):
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True, name=self.name)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self.name} did not start")
        return self

    def __exit__(self, *exc) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        app = web.Application(client_max_size=16 * 1024 * 1024)
        self.routes(app)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.close()
