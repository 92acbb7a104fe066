"""What runs around the training loop on a schedule (interval triggers over env steps, as
TF-Agents' train/interval_trigger.py) and the user's hooks into it (a callback list, as
Stable-Baselines3's callbacks)."""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional

from tfsac.data.update_schedule import crossed


class IntervalTrigger:
    """Calls `action()` when the env steps cross a multiple of `interval` (never for 0),
    and at the run's end when `at_end`; returns whether it called it."""

    def __init__(self, interval: int, action: Callable[[], None], at_end: bool = False):
        self.interval, self.action, self.at_end = interval, action, at_end

    def __call__(self, step_before: int, step: int, at_end: bool) -> bool:
        due = crossed(step_before, step, self.interval) or (self.at_end and at_end)
        if due:
            self.action()
        return due


class Callback:
    """Override what you need; `train(..., callbacks=[...])` calls them in order.

    `on_log` gets each progress record (the progress.csv row with the learner's metrics);
    `on_evaluation` gets each evaluation ({step, return_mean, return_std, seed}) once its
    step's checkpoint, if one is due, is saved. An exception either raises ends training and
    propagates unchanged (a checkpoint of that step is kept).
    """

    def on_log(self, record: Dict) -> None:
        pass

    def on_evaluation(self, evaluation: Dict) -> None:
        pass


class FunctionCallback(Callback):
    """A callback from plain functions (train's `on_log` and `on_evaluation` arguments)."""

    def __init__(
        self,
        on_log: Optional[Callable[[Dict], None]] = None,
        on_evaluation: Optional[Callable[[Dict], None]] = None,
    ):
        self._on_log, self._on_evaluation = on_log, on_evaluation

    def on_log(self, record: Dict) -> None:
        if self._on_log is not None:
            self._on_log(record)

    def on_evaluation(self, evaluation: Dict) -> None:
        if self._on_evaluation is not None:
            self._on_evaluation(evaluation)


class CallbackList(Callback):
    """Several callbacks as one, called in order."""

    def __init__(self, callbacks: Iterable[Callback]):
        self.callbacks: List[Callback] = list(callbacks)

    def on_log(self, record: Dict) -> None:
        for callback in self.callbacks:
            callback.on_log(record)

    def on_evaluation(self, evaluation: Dict) -> None:
        for callback in self.callbacks:
            callback.on_evaluation(evaluation)
