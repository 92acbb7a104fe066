"""The training loop: `Trainer` alternates env steps and the updates they owe, with evaluation,
logging, checkpoints and the SavedModel export around them."""

from __future__ import annotations

import dataclasses
import inspect
import os
from typing import Callable, Dict, Optional, Sequence

from absl import logging

from tfsac.algorithm.learner import SACLearner
from tfsac.config import SACConfig
from tfsac.data.envs import EnvFn
from tfsac.data.replay import ReplayBuffer
from tfsac.data.spaces import EnvSpec
from tfsac.data.update_schedule import crossed
from tfsac.deploy.export import export_trained_policy
from tfsac.files import SUMMARY_FILE, write_json
from tfsac.logs import lines_above, progress_bar, progress_lines
from tfsac.run.builder import ENVS_FILE, STOP_OPTIONS, build_run
from tfsac.run.callbacks import Callback
from tfsac.run.loop_state import log_summary, run_summary
from tfsac.run.preflight import CheckedRun, check_hooks, check_options, check_run
from tfsac.run.progress import LearningSpeed, Stopwatch
from tfsac.run.signals import Interrupted, StopSignals
from tfsac.run.updates import NonFiniteError

__all__ = ["Interrupted", "NonFiniteError", "TrainResult", "Trainer", "train"]


@dataclasses.dataclass
class TrainResult:
    """What `train` and `Trainer.run` return.

    Attributes:
        learner: the trained `SACLearner` (its Keras `actor` and `critic`, and `update`).
        spec: the `EnvSpec` the networks were built for (spaces, bounds, flattening).
        buffer: the run's `ReplayBuffer`, as it stood at the end.
        run_dir: the run directory (config.json, progress.csv, checkpoints/, summary.json).
        saved_model_path: the SavedModel version folder exported at the end, or None
            without an export.
        summary: what summary.json holds (the final evaluation's `eval_return_mean` and
            `eval_return_std`, every evaluation, env steps/s, `stop` where a run stopped).
        stop_reason: why a callback or a stop option stopped the run (at whichever step), or None.
        already_finished: True where a resume found the run finished: nothing was
            trained or exported in this call.
    """

    learner: SACLearner
    spec: EnvSpec
    buffer: ReplayBuffer
    run_dir: str
    saved_model_path: Optional[str]
    summary: Dict
    stop_reason: Optional[str] = None
    already_finished: bool = False


class Trainer:
    """One SAC run: `Trainer(config, ...).run()` is `train(config, ...)`. Building makes the
    run's parts (`config`, `learner`, `run_dir`, ...; restored on a resume) to look at first."""

    def __init__(
        self,
        config: SACConfig | CheckedRun,
        export: Optional[bool] = None,
        resume: bool = False,
        on_log: Optional[Callable[[Dict], None]] = None,
        actor_fn: Optional[Callable] = None,
        critic_fn: Optional[Callable] = None,
        env_fn: Optional[EnvFn] = None,
        on_evaluation: Optional[Callable[[Dict], None]] = None,
        callbacks: Sequence[Callback] = (),
    ):
        self.parts = build_run(
            hooks=check_hooks(on_log, on_evaluation, callbacks),  # checked first
            start=check_run(config, export, resume, env_fn),
            actor_fn=actor_fn,
            critic_fn=critic_fn,
        )
        for field in dataclasses.fields(self.parts):  # trainer.config, .learner, .loop, ...
            setattr(self, field.name, getattr(self.parts, field.name))
        self.learning_clock = Stopwatch(before=self.loop.learning_time_s)
        self._checkpoint = self.resumed_from  # the newest this process knows of

    def _save_checkpoint(self) -> None:
        with self.learning_clock.paused():
            self.updates.check_finite(self.loop.step)
            self.progress.flush()
            state = {
                **self.loop.to_dict(),
                "wall_time_s": self.session_clock.seconds(),
                "learning_time_s": self.learning_clock.seconds(),
                "config": self.config.to_dict(),
                **self.schedule.state(),
                **self.source.state(),
                **self.updates.state(),
                **(self.mixed.state() if self.mixed else {}),
            }
            snapshot = self.source.snapshot()
            blobs = {ENVS_FILE: snapshot} if snapshot is not None else None
            path = self.checkpointer.save(self.loop.step, self.buffer, state, blobs)
            self._checkpoint = path
        logging.info("checkpoint at step %d: %s", self.loop.step, path)

    def _evaluate_and_record(self, scheduled: bool) -> None:
        """An evaluation now, off the learning clock; `scheduled`: one of eval_every's."""
        loop = self.loop
        with self.learning_clock.paused():
            evaluation = self.evaluator.evaluate(loop.step, len(loop.evaluations), scheduled)
            # The run's wall-clock time so far (plots' --x=wall_clock), this evaluation's too.
            evaluation["wall_time_s"] = round(self.session_clock.seconds(), 2)
            loop.evaluations.append(evaluation)
            self.progress.evaluation(evaluation)

    def _log(self) -> None:
        steps_per_s = self._speed.measure(self.loop.learning_steps, self.loop.step)
        u = self.updates
        self.progress.log(self.loop, u.metrics, steps_per_s, u.lr_factor, self.source.stats())
        if self.loop.recent_returns and steps_per_s is not None:
            ret = self.loop.mean_recent_return()
            self._bar.set_postfix(ret=f"{ret:.1f}", sps=f"{steps_per_s:.0f}", refresh=False)

    def _result(self, summary: Dict, stop_reason=None, already_finished=False) -> TrainResult:
        # Absolute, as the SavedModel's path: the caller's directory may change after.
        run_dir, saved = os.path.abspath(self.run_dir), summary.get("saved_model_path")
        parts = (self.learner, self.spec, self.buffer, run_dir, saved, summary, stop_reason)
        return TrainResult(*parts, already_finished)

    def run(self) -> TrainResult:
        """Trains to `total_steps`, or until a callback stops it; raises as `train`, and a
        Fault where another process trained in the run directory since this was built."""
        try:
            self.lock.hold()
            self.checkpointer.check_newest(self._checkpoint)
            return self._run()
        finally:
            self.lock.release()

    def _run(self) -> TrainResult:
        if self.source is None:  # the run is finished
            summary = self.parts.completed_summary()
            reason = (summary.get("stop") or {}).get("reason")
            return self._result(summary, reason, already_finished=True)
        cfg, loop = self.config, self.loop
        self.progress.truncate(loop.step)
        self.session_clock = Stopwatch(before=loop.wall_time_s)
        self.session_clock.start()
        self._speed = LearningSpeed(self.learning_clock, loop.learning_steps, cfg.total_steps)
        self._bar = bar = progress_bar(cfg.total_steps, loop.step, cfg.progress_bar)
        try:
            self.callbacks.on_training_start(self)
            with StopSignals() as stop, bar, lines_above(bar):
                self.evaluator.stop_requested = lambda: stop.received is not None
                if cfg.total_steps:
                    self._collect_and_learn(stop)
                else:
                    self._learn_offline(stop)
            self.learning_clock.stop()
        finally:
            self.source.close()
        return self._finish()

    def _collect_and_learn(self, stop: StopSignals) -> None:
        """Chunks of env steps, each followed by the updates it owes and what is due."""
        loop, source, updates = self.loop, self.source, self.updates
        continued = source.start(loop, updates.start())
        if self.resumed_from is not None and not continued:
            logging.info("resumed with new episodes (no env state from the checkpoint)")
            self.buffer.cut_episodes()
        for transitions, steps in source.chunks(loop):
            step_before = loop.step
            phase_ended, due = self._record(transitions, steps)
            updates.owed += due
            paid = updates.pay(
                loop.step,
                self.learning_clock,
                source.updates_per_call,
                source.observation,
                transitions.next_observation,
            )
            for action in paid:
                source.after_updates(updates.count, action)
            source.after_chunk(phase_ended, due)
            self._bar.update(loop.step - step_before)
            if self._after_step(step_before, stop.received):
                break  # a callback stopped the run: what remains of the source is dropped

    def _learn_offline(self, stop: StopSignals) -> None:
        """Offline-only training (total_steps=0), then the end's evaluation and checkpoint."""
        updates, total, every = self.updates, self.config.offline_updates, self.config.log_every
        self.source.start(self.loop, updates.start())
        while updates.count < total:
            updates.pay_offline(self.learning_clock, total, every)
            if updates.count % every == 0 or updates.count == total:
                self.progress.offline_updates(updates.count, total, updates.metrics)
            if stop.received is not None and updates.count < total:
                self._save_checkpoint()
                raise Interrupted(stop.received, f"offline update {updates.count}", self.run_dir)
        self._after_step(0, None)

    def _record(self, transitions, steps: int) -> tuple:
        """Books the transitions; returns (whether a collection phase ended, updates due)."""
        loop = self.loop
        step_before, loop.step = loop.step, loop.step + steps
        bad = transitions.first_nonfinite()
        if bad is not None:
            raise self.updates.nonfinite(f"the env returned a non-finite {bad} at step {loop.step}")
        self.buffer.add_transitions(transitions)
        self.updates.observe_returns(transitions.discounted_return)
        for episode_return, length in transitions.finished_episodes:
            loop.record_episode(episode_return, length)
        if self.learning_clock.running:
            loop.learning_steps += steps
        finished = len(transitions.finished_episodes)
        return self.schedule.after_env_step(step_before, loop.step, finished)

    def _after_step(self, step_before: int, stop: Optional[int]) -> bool:
        """The evaluation, row and checkpoint whose intervals the steps since `step_before`
        crossed (all at the end), the callbacks, the stop; True where a callback stopped it."""
        cfg, step, calls = self.config, self.loop.step, self.callbacks
        at_end = step >= cfg.total_steps
        scheduled = crossed(step_before, step, cfg.eval_every)
        evaluated = scheduled or at_end
        if evaluated:
            self._evaluate_and_record(scheduled)
        logged = at_end or stop is not None or crossed(step_before, step, cfg.log_every)
        if logged:
            self._log()
        if calls.stop_reason is not None and not evaluated:  # asked by on_log
            self._evaluate_and_record(scheduled=False)
            evaluated = True
        asked = stop is not None or calls.stop_reason is not None
        saved = at_end or asked or crossed(step_before, step, cfg.checkpoint_every)
        if saved:
            self._save_checkpoint()
        # After the checkpoint: a run that a callback stops (by raising) keeps this step.
        if evaluated:
            calls.on_evaluation(dict(self.loop.evaluations[-1]))
        if calls.stop_reason is not None:  # at total_steps too: a stop met is a stop
            if not logged:  # asked by on_evaluation: the stop's row
                self._log()
            if not saved:  # asked by on_evaluation
                self._save_checkpoint()
            logging.info("stopped at step %d: %s", step, calls.stop_reason)
            return True
        if stop is not None and not at_end:
            raise Interrupted(stop, f"step {step}", self.run_dir)
        return False

    def _finish(self) -> TrainResult:
        wall_time = self.session_clock.seconds()
        for part in (self.evaluator, self.progress):
            part.close()
        self.callbacks.on_training_end()
        latest = self.checkpointer.latest  # the final evaluation's (export_trained_policy)
        final = {**self.loop.evaluations[-1], "checkpoint": latest}
        reason = self.callbacks.stop_reason  # whichever step met it, the last one's too
        stop = None if reason is None else {"step": self.loop.step, "reason": reason}
        option = getattr(self.callbacks.stopped_by, "asked_by", None)
        if stop is not None and option in STOP_OPTIONS:  # the config's option that asked
            stop["option"] = option
        summary = run_summary(
            self.config,
            self.loop,
            wall_time,
            self.learning_clock.seconds(),
            stop=stop,
            # Absolute, as saved_model_path: usable from any directory.
            resumed_from=self.resumed_from and os.path.abspath(self.resumed_from),
            checkpoint=latest and os.path.abspath(latest),
            saved_model_path=export_trained_policy(self.config, self.learner, self.spec, final)
            if self.config.export
            else None,
        )
        write_json(self.files.file(SUMMARY_FILE), summary)
        log_summary(summary, self.run_dir)
        return self._result(summary, reason)


def train(config: SACConfig | CheckedRun, *, quiet: bool = False, **options) -> TrainResult:
    """Trains SAC (or the config's algorithm) on `config.env_id`, as scripts/train.py does.

    Writes the run directory (`config.run_dir`, by default `runs/<env>-seed<seed>-<time>`)
    and, with an export, the next SavedModel version under `config.export_dir`.

    Args:
        config: the run's settings.
        quiet: print nothing; otherwise the progress lines of scripts/train.py go to
            stderr (in a notebook too), without other libraries' INFO lines.
        **options: `Trainer`'s, below. A function or callback that returns False stops
            the run cleanly (the result's `stop_reason` says why).

    Other Parameters:
        export: export a SavedModel at the end; None takes `config.export`.
        resume: continue from the newest checkpoint in `config.run_dir` that restores (or
            start there when it has none). The config must be the run's saved one except
            for the resume-adjustable options (`tfsac.config.RESUME_ADJUSTABLE`), whose
            changes are logged; a larger `total_steps` continues a finished run.
        env_fn: a callable that makes the gymnasium env, used instead of `config.env_id`
            (it must pickle for `vector_mode='async'`).
        actor_fn: `(obs_dim, action_dim) -> keras.Model`, a custom actor.
        critic_fn: `(obs_dim, action_dim) -> keras.Model`, a custom critic ensemble
            (called again for the target: it must build a new model each time).
        on_log: called with each progress record (the progress.csv row).
        on_evaluation: called with each evaluation.
        callbacks: `Callback` objects, called in order after the two functions.

    Raises:
        TfsacError: an unknown option, or a setting, path or env that cannot work, before
            anything is written.
        Fault: met while running: another process training in the run directory, a file
            that fails to read or write; NonFiniteError, one, for NaN or Inf in a loss, a
            parameter or the env's output (the last good checkpoint stays the latest).
        Interrupted: SIGINT or SIGTERM, after the checkpoint is saved.
    """
    check_options(options, inspect.signature(Trainer).parameters)
    with progress_lines(enabled=not quiet):
        return Trainer(config, **options).run()
