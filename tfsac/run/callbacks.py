"""The user's hooks into a run, as Stable-Baselines3's callbacks: a callback list, and the
built-in ones that stop a run or keep its best policy (those a config asks for too)."""

from __future__ import annotations

import math
import numbers
import os
import time
from typing import Callable, Dict, Iterable, List, Optional

import numpy as np
from absl import logging

from tfsac.config.fields import Check, checked_number, refuse_unless
from tfsac.deploy.formats import FILES, PARITY_TOLERANCE, add_formats, parse_formats
from tfsac.deploy.metadata import policy_metadata
from tfsac.files import check_plain_name, check_writable, model_versions

COUNT = Check(
    lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0,
    "a whole number >= 0",
    "{!r}",
)
BEST_DIR = "best"  # in the run directory, by default
FOLDER = Check(
    lambda v: isinstance(v, (str, os.PathLike)) and isinstance(os.fspath(v), str),
    f"a folder (a str or os.PathLike) or None for <run_dir>/{BEST_DIR}",
    "{0!r:.60} ({0.__class__.__name__})",
)


class Callback:
    """A hook into a run: subclass it, override what you need, and pass
    `train(config, callbacks=[...])`; the callbacks are called in order.

    Returning False from `on_log` or `on_evaluation` stops the run cleanly, as a
    Stable-Baselines3 callback's `_on_step` does (at a log or evaluation step: no hook runs
    every step): the final evaluation, the checkpoint, summary.json and the export are
    written, and `train` returns the result with `stop_reason` (the callback's own, where it
    set one). None or True continues. An exception ends training and propagates unchanged;
    the run's newest checkpoint stays, and a resume continues from it.

    Attributes:
        stop_reason: set it before returning False to say why the run stopped.
    """

    stop_reason: Optional[str] = None

    def on_training_start(self, trainer) -> None:
        """Runs once per session, before its first env step.

        Args:
            trainer: the `Trainer`: `trainer.config`, `trainer.learner`,
                `trainer.run_dir`, and a resumed run's evaluations so far in
                `trainer.loop.evaluations`.
        """

    def on_training_end(self) -> None:
        """Runs once when a session's training ends at total_steps or at a stop, before
        summary.json and the export; not after a signal or an exception."""

    def on_log(self, record: Dict) -> Optional[bool]:
        """Runs at every progress record (every `log_every` env steps and at the end).

        Args:
            record: the progress.csv row: step, episodes, episode_return, env steps/s,
                the learner's losses, alpha, entropy, mean Q.
        """

    def on_evaluation(self, evaluation: Dict) -> Optional[bool]:
        """Runs after each evaluation, once that step's checkpoint, if one is due, is saved.

        Args:
            evaluation: `step`, `return_mean`, `return_std`, `seed`, `wall_time_s`,
                `scheduled` (False for an evaluation off the `eval_every` steps: the run's
                end or a stop) and, on goal envs, `success_rate`.
        """


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


class StopTrainingOnRewardThreshold(Callback):
    """Stops the run at the first evaluation whose mean return is at least
    `reward_threshold`, as SB3's callback of that name. The config's `stop_at_return` makes one.

    Args:
        reward_threshold: the mean evaluation return to stop at.
        verbose: accepted for SB3's signature; a stop is always logged with its reason.
    """

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
    """Stops the run when more than `max_no_improvement_evals` evaluations in a row bring no
    new best mean return, counted after the first `min_evals`, as SB3's callback of that
    name. The config's `stop_after_no_improvement` and `min_evaluations` make one. Only
    scheduled evaluations count, a resumed run's earlier ones too.

    Args:
        max_no_improvement_evals: evaluations without a new best that are tolerated; 0
            stops at the first one.
        min_evals: evaluations before the count starts.
        verbose: accepted for SB3's signature; a stop is always logged with its reason.
    """

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


class SaveBestPolicy(Callback):
    """Exports the policy each time an evaluation's mean return beats every earlier one, as
    SB3's `EvalCallback(best_model_save_path=...)`. The config's `keep_best` makes one.

    Each new best is the next version of the model folder (the highest, which TF Serving
    serves, is the best so far), its tfsac_metadata.json naming the evaluation. The run's
    other export_formats go into the highest version when the session's training ends.
    On a resume, the run's earlier evaluations count.

    Args:
        path: the model folder; None puts it at `<run_dir>/best`.
    """

    def __init__(self, path: Optional[str] = None):
        # Checked here, not at the run's start: by then the run's first files are written.
        if path is not None:
            refuse_unless(FOLDER, "SaveBestPolicy: path", path)
            path = os.fspath(path)
            check_plain_name("SaveBestPolicy: the best policy's folder", _last_name(path))
            check_writable(path)
        self.path = path
        self.model_dir: Optional[str] = None  # `path`, or the run's <run_dir>/best
        self.best = -math.inf
        self.saved_model_path: Optional[str] = None  # the newest best version
        self._trainer = None

    def on_training_start(self, trainer) -> None:
        self._trainer = trainer
        self.model_dir = os.path.abspath(self.path or os.path.join(trainer.run_dir, BEST_DIR))
        check_plain_name("the best policy's folder", _last_name(self.model_dir))
        check_writable(self.model_dir)
        self.best = max((e["return_mean"] for e in trainer.loop.evaluations), default=-math.inf)

    def on_evaluation(self, evaluation: Dict) -> Optional[bool]:
        if evaluation["return_mean"] <= self.best:
            return None
        self.best = evaluation["return_mean"]
        from tfsac.deploy.export import export_policy  # loads TF; preflight imports us without

        trainer, config = self._trainer, self._trainer.config
        started = time.perf_counter()
        self.saved_model_path = export_policy(
            trainer.learner.actor,
            trainer.spec,
            os.path.dirname(self.model_dir),
            os.path.basename(self.model_dir),
            policy_metadata(config, trainer.spec, evaluation),
            (config.log_std_min, config.log_std_max),
        )
        logging.info(
            "new best evaluation return %.1f at step %d: exported to %s (training paused %.1f s)",
            self.best,
            evaluation["step"],
            self.saved_model_path,
            time.perf_counter() - started,
        )
        return None

    def on_training_end(self) -> None:
        """The run's export_formats beyond the SavedModel, into the highest version."""
        versions = model_versions(self.model_dir)
        if not versions:
            return
        newest = os.path.join(self.model_dir, versions[-1])
        formats = [f for f in parse_formats(self._trainer.config.export_formats) if f in FILES]
        missing = [f for f in formats if not os.path.isfile(os.path.join(newest, FILES[f]))]
        if not missing:
            return
        started = time.perf_counter()
        written = add_formats(newest, missing)
        logging.info(
            "best policy: exported %s (%.0f s), each within %g of the SavedModel's actions",
            ", ".join(written),
            time.perf_counter() - started,
            PARITY_TOLERANCE,
        )


def _last_name(path: str) -> str:
    return os.path.basename(os.path.normpath(path)) if path else path


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
