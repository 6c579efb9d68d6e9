"""A cap on the jobs in flight, around any backend: how a batch of episodes shares GPUs."""

from __future__ import annotations

import asyncio

from trainergym.backends import Backend, JobHandle
from trainergym.job.result import RunResult


class CappedBackend:
    """`inner` with at most `limit` jobs between submit and result (or cancel); `submit`
    waits for a free slot. `peak` is the most jobs that were ever in flight at once."""

    def __init__(self, inner: Backend, limit: int):
        self.inner, self.name = inner, inner.name
        self._slots = asyncio.Semaphore(limit)
        self._held: set[str] = set()
        self.peak = 0

    async def submit(self, bundle, task) -> JobHandle:
        """Wait for a free slot, then submit to `inner`; the slot is given back if `inner` raises.
        """
        await self._slots.acquire()
        try:
            handle = await self.inner.submit(bundle, task)
        except BaseException:
            self._slots.release()
            raise
        self._held.add(handle.job_id)
        self.peak = max(self.peak, len(self._held))
        return handle

    def _free(self, handle: JobHandle) -> None:
        if handle.job_id in self._held:
            self._held.discard(handle.job_id)
            self._slots.release()

    async def result(self, handle: JobHandle, timeout: float | None = None) -> RunResult:
        """`inner`'s result; the job's slot is freed however the wait ends."""
        try:
            return await self.inner.result(handle, timeout=timeout)
        finally:
            self._free(handle)

    async def cancel(self, handle: JobHandle) -> None:
        """Cancel on `inner`; the job's slot is freed."""
        try:
            await self.inner.cancel(handle)
        finally:
            self._free(handle)
