"""A synchronous wrapper: the asyncio client on an event loop of its own
thread, every method called without `await`."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any, Iterator

from .client import Client, Job, Session


class _Loop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="shellvisor", daemon=True)
        self.thread.start()

    def call(self, awaitable: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(awaitable, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


class _Sync:
    """Wraps an object of the asyncio client: coroutines run to completion,
    async iterators become iterators, sessions and jobs are wrapped too."""

    def __init__(self, target: Any, loop: _Loop) -> None:
        self._target = target
        self._loop = loop

    def _wrap(self, value: Any) -> Any:
        return _Sync(value, self._loop) if isinstance(value, (Session, Job)) else value

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            if inspect.isawaitable(result):
                return self._wrap(self._loop.call(result))
            if inspect.isasyncgen(result):
                return self._iterate(result)
            return self._wrap(result)

        return call

    def _iterate(self, generator: Any) -> Iterator[Any]:
        try:
            while True:
                try:
                    yield self._wrap(self._loop.call(generator.__anext__()))
                except StopAsyncIteration:
                    return
        finally:
            self._loop.call(generator.aclose())


class SyncClient(_Sync):
    """`Client` without asyncio:

        with SyncClient() as sv:
            print(sv.session("demo").run("echo hi").output)
    """

    def __init__(self, **options: Any) -> None:
        loop = _Loop()
        super().__init__(Client(**options), loop)
        try:
            loop.call(self._target.start())
        except BaseException:
            loop.stop()
            raise

    def close(self) -> None:
        try:
            self._loop.call(self._target.close())
        finally:
            self._loop.stop()

    def __enter__(self) -> "SyncClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
