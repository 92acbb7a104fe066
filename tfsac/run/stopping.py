"""Callbacks that stop a run cleanly, as Stable-Baselines3's of the same names, and those a
config asks for."""

from __future__ import annotations

import math
import numbers
from typing import Dict, List, Optional

from tfsac.config.fields import Check, checked_number, refuse_unless
from tfsac.run.best_policy import SaveBestPolicy
from tfsac.run.callbacks import Callback

COUNT = Check(
    lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0,
    "a whole number >= 0",
    "{!r}",
)


class StopTrainingOnRewardThreshold(Callback):
    """Stops the run at the first evaluation whose mean return is at least
    `reward_threshold`, as SB3's callback of that name (`verbose` is accepted for its
    signature: a stop is always logged). The config's `stop_at_return` makes one."""

    def __init__(self, reward_threshold: float, verbose: int = 0):
        name = "StopTrainingOnRewardThreshold: reward_threshold"
        self.reward_threshold = checked_number(name, reward_threshold)
        self.asked_by = type(self).__name__  # the config's option, where it made this

    def on_evaluation(self, evaluation: Dict) -> Optional[bool]:
        value = evaluation["return_mean"]
        if value < self.reward_threshold:
            return None
        self.stop_reason = (
            f"evaluation return {value:.2f} reached {self.reward_threshold:g} at step "
            f"{evaluation['step']} ({self.asked_by})"
        )
        return False


class StopTrainingOnNoModelImprovement(Callback):
    """Stops the run when more than `max_no_improvement_evals` scheduled evaluations in a
    row (a resumed run's earlier ones too) bring no new best mean return, counted after the
    first `min_evals`, as SB3's callback of that name (`verbose`: for its signature). The
    config's `stop_after_no_improvement` and `min_evaluations` make one."""

    def __init__(self, max_no_improvement_evals: int, min_evals: int = 0, verbose: int = 0):
        for name, value in (
            ("max_no_improvement_evals", max_no_improvement_evals),
            ("min_evals", min_evals),
        ):
            refuse_unless(COUNT, f"StopTrainingOnNoModelImprovement: {name}", value)
        self.max_no_improvement_evals, self.min_evals = max_no_improvement_evals, min_evals
        self.asked_by = type(self).__name__  # the config's option, where it made this
        self._reset()

    def _reset(self) -> None:
        self.evaluations, self.best, self.no_improvement = 0, -math.inf, 0

    def on_training_start(self, trainer) -> None:
        self._reset()
        for evaluation in trainer.loop.evaluations:  # a resumed run's
            self._count(evaluation)

    def _count(self, evaluation: Dict) -> bool:
        """Books one evaluation; returns whether the run should stop."""
        if not evaluation.get("scheduled", True):  # given by hand, or an older run's
            return False
        value = evaluation["return_mean"]
        self.evaluations += 1
        best_before, self.best = self.best, max(self.best, value)
        if self.evaluations <= self.min_evals:
            return False
        self.no_improvement = 0 if self.best > best_before else self.no_improvement + 1
        return self.no_improvement > self.max_no_improvement_evals

    def on_evaluation(self, evaluation: Dict) -> Optional[bool]:
        if not self._count(evaluation):
            return None
        self.stop_reason = (
            f"no new best evaluation return (best {self.best:.2f}) in {self.no_improvement} "
            f"evaluations in a row at step {evaluation['step']} ({self.asked_by})"
        )
        return False


def config_callbacks(config) -> List[Callback]:
    """The callbacks the config's options ask for (keeping the best first: it sees a stop's)."""
    callbacks: List[Callback] = []
    if config.keep_best:
        callbacks.append(SaveBestPolicy())  # in <run_dir>/best
    if config.stop_at_return is not None:
        callbacks.append(StopTrainingOnRewardThreshold(config.stop_at_return))
        callbacks[-1].asked_by = "stop_at_return"
    if config.stop_after_no_improvement:
        limit = config.stop_after_no_improvement
        callbacks.append(StopTrainingOnNoModelImprovement(limit, config.min_evaluations))
        callbacks[-1].asked_by = "stop_after_no_improvement"
    return callbacks
