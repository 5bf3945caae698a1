"""``run_async(coroutine)``: ``asyncio.run`` that also works while the session browser runs;
``off_running_loop(function, *args)`` for code that calls ``asyncio.run`` itself (the reference
client's ``mcp-check``).

The session's sync Playwright keeps an event loop running in the main thread (tests/support/
console.py), and ``asyncio.run`` refuses to start inside a running loop. Then the call runs in a
thread of its own, whose database connections are closed when it ends; otherwise it runs here, as
it always did.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from django.db import connections

T = TypeVar("T")


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def off_running_loop(function: Callable[..., T], *args: Any) -> T:
    if not _loop_running():
        return function(*args)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as error:  # re-raised in the test's thread
            outcome["error"] = error
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, name="run-async")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    return off_running_loop(asyncio.run, coroutine)
