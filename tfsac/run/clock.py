"""A stopwatch that can leave pauses out (evaluations, checkpoints, compilations)."""

from __future__ import annotations

import contextlib
import time
from typing import Optional

from absl import logging


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


class LearningSpeed:
    """Learning-phase env steps/s between log lines; at the first, a warning for a long run."""

    def __init__(self, clock: Stopwatch, learning_steps: int, total_steps: int):
        self.clock, self.total_steps = clock, total_steps
        self._last = (clock.seconds(), learning_steps)
        self._timed = False

    def measure(self, learning_steps: int, step: int) -> Optional[float]:
        """Env steps/s since the last call (None without learning-phase steps since)."""
        now = self.clock.seconds()
        last_time, last_steps = self._last
        self._last = (now, learning_steps)
        if learning_steps <= last_steps:
            return None
        speed = (learning_steps - last_steps) / (now - last_time)
        if not self._timed:
            self._timed = True
            notice = long_run_notice(self.total_steps - step, speed)
            if notice:
                logging.warning(notice)
        return speed


def long_run_notice(steps_left: int, steps_per_s: float, limit_s: float = 3600.0) -> Optional[str]:
    """A line when `steps_left` env steps at `steps_per_s` take longer than `limit_s`."""
    if steps_per_s <= 0 or steps_left / steps_per_s <= limit_s:
        return None
    hours = steps_left / steps_per_s / 3600
    return (
        f"at {steps_per_s:.0f} env steps/s, the {steps_left:,} steps left take about "
        f"{hours:.1f} hours; the presets' comments give CPU settings and their speeds"
    )
