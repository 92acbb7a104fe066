"""SIGINT and SIGTERM as a flag a loop polls, so that it can save and stop cleanly."""

from __future__ import annotations

import signal
import threading
from typing import Callable, Optional

from tfsac.errors import TfsacError


class Interrupted(TfsacError):
    """SIGINT or SIGTERM stopped training after a checkpoint was saved."""

    def __init__(self, signum: int, where: str, run_dir: str):
        super().__init__(
            f"{signal.Signals(signum).name} at {where}: checkpoint saved; continue with "
            f"--resume --run_dir={run_dir}"
        )
        self.signum, self._args = signum, (signum, where, run_dir)

    def __reduce__(self):  # pickled (multiprocessing, Ray) by its arguments, not its message
        return type(self), self._args


class StartInterrupted(Interrupted):
    """SIGINT or SIGTERM while a run's env runners started: stopped before training."""

    def __init__(self, signum: int, what: str):
        TfsacError.__init__(
            self, f"{signal.Signals(signum).name} while {what}: stopped before training"
        )
        self.signum, self._args = signum, (signum, what)


class StopSignals:
    """SIGINT and SIGTERM as a flag a loop polls instead of an exception anywhere;
    `on_signal(signum)` runs at the first one. Outside the main thread it never fires."""

    def __init__(
        self, on_signal: Optional[Callable[[int], None]] = None, second_interrupts: bool = False
    ):
        self.received: Optional[int] = None
        self.on_signal = on_signal
        # A second signal raises KeyboardInterrupt at once (for a poller that may wait long).
        self.second_interrupts = second_interrupts
        self._old_handlers = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[sig] = signal.signal(sig, self._handle)
        return self

    def take_back(self) -> None:
        """Handles the signals again where a library (ray.init) replaced the handlers."""
        for sig in self._old_handlers:
            current = signal.getsignal(sig)
            if current != self._handle:
                self._old_handlers[sig] = current
                signal.signal(sig, self._handle)

    def _handle(self, signum, frame):
        if self.received is not None and self.second_interrupts:
            raise KeyboardInterrupt
        if self.received is None and self.on_signal is not None:
            self.on_signal(signum)
        self.received = signum

    def __exit__(self, *exc):
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
