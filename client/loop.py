"""The client's private asyncio event loop, on a daemon thread, and blocking calls into it.

All network I/O of a FileSystem runs on this loop, so many unit reads can be in flight and raced
without a thread each; ``call`` and ``submit`` let ordinary threads use it.
"""

import asyncio
import concurrent.futures
import threading
from typing import Awaitable, Callable

from hedgefs.client.errors import HedgefsError


class LoopThread:
    def __init__(self, name: str = "hedgefs-client"):
        self._lifecycle = threading.Lock()
        self._closed = False
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def call(self, coro):
        """Run a coroutine on the loop and wait for its result (from any thread but the loop's)."""
        return self.submit(coro).result()

    def submit(self, coro) -> concurrent.futures.Future:
        with self._lifecycle:
            if self._closed:
                coro.close()
                raise HedgefsError("the hedgefs client is closed")
            return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the loop thread as soon as it is free (RuntimeError once closed)."""
        self.loop.call_soon_threadsafe(callback)

    def close(self, shutdown: Callable[[], Awaitable[None]]) -> None:
        """Cancel what is still running, await ``shutdown()`` on the loop, then stop the thread."""
        with self._lifecycle:
            if self._closed:
                return
            self._closed = True

        async def finish():
            # Reads abandoned by an error (or a caller that went away) still have unit reads in
            # flight; cancel them so they end here, not as warnings when the loop is destroyed.
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            await shutdown()

        asyncio.run_coroutine_threadsafe(finish(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()
