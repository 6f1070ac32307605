"""The poll loop of reloaded files: a failing step is logged and polling goes on."""
from __future__ import annotations

import asyncio

import pytest

from webhook.runtime import reload


async def test_every_keeps_polling_after_a_failing_step() -> None:
    calls: list[int] = []

    async def step() -> None:
        calls.append(len(calls))
        if len(calls) == 1:
            raise RuntimeError("transient")
        raise asyncio.CancelledError  # the second call is the one we waited for: stop polling

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(reload.every(0, step), 10)  # fails instead of hanging if polling stopped
    assert calls == [0, 1]
