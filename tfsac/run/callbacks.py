"""The user's hooks into a run: a callback list, as Stable-Baselines3's callbacks."""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional

import numpy as np
from absl import logging


class Callback:
    """A hook into a run: subclass it, override what you need, and pass
    `train(config, callbacks=[...])`; the callbacks are called in order.

    Returning False from `on_log` or `on_evaluation` stops the run cleanly, as SB3's
    `_on_step` does: the final evaluation, checkpoint, summary.json and export are written,
    and the result's `stop_reason` is the one set here before returning False (or says which
    hook stopped it). An exception propagates; a resume continues from the newest checkpoint.
    """

    stop_reason: Optional[str] = None

    def on_training_start(self, trainer) -> None:
        """Runs once per session, before its first env step, with the `Trainer` (its
        `config`, `learner`, `run_dir`, and a resumed run's `loop.evaluations` so far)."""

    def on_training_end(self) -> None:
        """Runs once when a session's training ends at total_steps or at a stop, before
        summary.json and the export; not after a signal or an exception."""

    def on_log(self, record: Dict) -> Optional[bool]:
        """Runs with each progress record (the progress.csv row: every `log_every` steps)."""

    def on_evaluation(self, evaluation: Dict) -> Optional[bool]:
        """Runs after each evaluation (`step`, `return_mean`, `return_std`, `seed`,
        `wall_time_s`, `scheduled`: False off the `eval_every` steps, and on goal envs
        `success_rate`), once that step's due checkpoint is saved."""


class FunctionCallback(Callback):
    """train's `on_log` and `on_evaluation` functions as a callback (False stops the run)."""

    def __init__(self, on_log: Optional[Callable] = None, on_evaluation: Optional[Callable] = None):
        self._on_log, self._on_evaluation = on_log, on_evaluation

    def on_log(self, record: Dict) -> Optional[bool]:
        return None if self._on_log is None else self._on_log(record)

    def on_evaluation(self, evaluation: Dict) -> Optional[bool]:
        return None if self._on_evaluation is None else self._on_evaluation(evaluation)


class CallbackList(Callback):
    """Several callbacks as one, each called in order (all of them, also after one asked to
    stop); `stop_reason` says the first stop asked for, None while none was."""

    def __init__(self, callbacks: Iterable[Callback]):
        self.callbacks: List[Callback] = list(callbacks)
        self.stop_reason: Optional[str] = None
        self.stopped_by: Optional[Callback] = None  # the callback that asked first
        self._warned = set()  # (callback, method) whose non-bool answer was said

    def on_training_start(self, trainer) -> None:
        for callback in self.callbacks:
            if callback.on_training_start(trainer) is not None:  # SB3's cannot stop either
                logging.warning(
                    "%s.on_training_start returned a value, which stops nothing: return False "
                    "from on_log or on_evaluation to stop the run",
                    type(callback).__name__,
                )

    def on_training_end(self) -> None:
        for callback in self.callbacks:
            callback.on_training_end()

    def on_log(self, record: Dict) -> Optional[bool]:
        return self._call("on_log", record)

    def on_evaluation(self, evaluation: Dict) -> Optional[bool]:
        return self._call("on_evaluation", evaluation)

    def _call(self, method: str, argument: Dict) -> Optional[bool]:
        stop = False
        for callback in self.callbacks:
            if self._asks_to_stop(callback, method, getattr(callback, method)(argument)):
                stop = True
                if self.stop_reason is None:
                    self.stop_reason = _stopped_by(callback, method, argument["step"])
                    self.stopped_by = callback
        return False if stop else None

    def _asks_to_stop(self, callback: Callback, method: str, answer) -> bool:
        """False (numpy's too) stops; anything else goes on, a non-bool said once per hook
        (a one-line logger's `f.write` returns a number)."""
        if answer is None or isinstance(answer, (bool, np.bool_)):
            return answer is not None and not answer
        if (id(callback), method) not in self._warned:
            self._warned.add((id(callback), method))
            logging.warning(
                "%s.%s returned %.40r, not a bool: going on (only False stops the run; this "
                "is said once)",
                type(callback).__name__,
                method,
                answer,
            )
        return False


def _stopped_by(callback: Callback, method: str, step: int) -> str:
    """The reason a callback that returned False gives, or which one it was and where."""
    if callback.stop_reason:
        return callback.stop_reason
    function = getattr(callback, f"_{method}", None)  # a FunctionCallback's function
    who = getattr(function, "__qualname__", None) or f"{type(callback).__name__}.{method}"
    return f"{who} returned False at step {step}"
