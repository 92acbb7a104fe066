"""A stopwatch that can leave pauses out (evaluations, checkpoints, compilations)."""

from __future__ import annotations

import contextlib
import time
from typing import Optional


class Stopwatch:
    """Seconds since `start()`, without the time spent inside `paused()` blocks (which
    count only while the watch runs), plus the seconds of earlier sessions."""

    def __init__(self, before: float = 0.0):
        self.before = before
        self._t0: Optional[float] = None
        self._paused = 0.0

    @property
    def running(self) -> bool:
        return self._t0 is not None

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        """Freezes the reading (`running` is False after it)."""
        self.before, self._t0, self._paused = self.seconds(), None, 0.0

    def seconds(self) -> float:
        if self._t0 is None:
            return self.before
        return self.before + time.perf_counter() - self._t0 - self._paused

    @contextlib.contextmanager
    def paused(self):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if self._t0 is not None:
                self._paused += time.perf_counter() - t0
