"""The training loop: `Trainer` wires the pieces (as acme's builder does) and `run()`
alternates env steps and the updates they owe, with evaluation, logging, checkpoints and
the SavedModel export around them."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from contextlib import nullcontext
from typing import Callable, Dict, Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from tfsac.algorithm.learner import SACLearner
from tfsac.algorithm.schedules import parse_schedule
from tfsac.config import SACConfig
from tfsac.data.collector import Collector
from tfsac.data.envs import CUSTOM_ENV, EnvFn, EnvSpec, checked_env, env_factory, env_spec
from tfsac.data.replay import ReplayBuffer
from tfsac.data.update_schedule import UpdateSchedule, crossed
from tfsac.deploy.export import default_model_name, export_policy, policy_metadata
from tfsac.errors import TfsacError
from tfsac.run.checkpointing import Checkpointer, check_compatible
from tfsac.run.evaluation import Evaluator
from tfsac.run.logs import lines_above, progress_bar, progress_lines
from tfsac.run.run_dir import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    SUMMARY_FILE,
    VIDEOS_DIR,
    LoopState,
    ProgressLog,
    RunDir,
    StopSignals,
    Stopwatch,
    check_writable,
    run_summary,
    write_json,
)
from tfsac.scale.ray_cluster import check_address, require_ray, start_ray
from tfsac.scale.runners import RunnerPool

ENVS_FILE = "envs.pkl"  # in a checkpoint's sidecar: the env copies mid-episode


class NonFiniteError(TfsacError):
    """A NaN or Inf appeared in a loss, a parameter, an observation or a reward."""


class Interrupted(TfsacError):
    """SIGINT or SIGTERM stopped training after a checkpoint was saved."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


@dataclasses.dataclass
class TrainResult:
    """What `train` returns; `summary` is also written to <run_dir>/summary.json."""

    learner: SACLearner
    spec: EnvSpec
    buffer: ReplayBuffer
    run_dir: str
    saved_model_path: Optional[str]
    summary: Dict


def default_run_dir(config: SACConfig) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{default_model_name(config.env_id)}-seed{config.seed}-{stamp}")


def _checked_run_dir(config: SACConfig, resume: bool, env_fn) -> str:
    """Checks the run directory (and what a run there needs); returns it. Writes nothing."""
    if resume and not config.run_dir:
        raise TfsacError("resume needs the run directory of the run to continue (run_dir)")
    if env_fn is not None and config.video_every:
        raise TfsacError("video_every needs an env id: videos remake the env by id")
    run_dir = config.run_dir or default_run_dir(config)
    if not resume and RunDir(run_dir).holds_a_run():
        raise TfsacError(
            f"run directory {run_dir!r} already holds a run; continue it with --resume or "
            "choose another run directory"
        )
    check_writable(run_dir)
    return run_dir


def _env_name(env) -> str:
    spec = getattr(env, "spec", None)
    return (
        spec.id if spec is not None and spec.id else f"{CUSTOM_ENV}{type(env.unwrapped).__name__}"
    )


class Trainer:
    """One SAC run: builds everything from `config`, optionally resumes, then `run()`s.

    Every check that can refuse the start (the run directory, the export folder, the env,
    a checkpoint to resume) runs before anything is written.
    """

    def __init__(
        self,
        config: SACConfig,
        export: Optional[bool] = None,
        resume: bool = False,
        on_log: Optional[Callable[[Dict], None]] = None,
        actor_fn: Optional[Callable] = None,
        critic_fn: Optional[Callable] = None,
        env_fn: Optional[EnvFn] = None,
        on_evaluation: Optional[Callable[[Dict], None]] = None,
    ):
        if export is not None:
            config = dataclasses.replace(config, export=export)
        config.validate()
        if config.deterministic:
            tf.config.experimental.enable_op_determinism()
        keras.utils.set_random_seed(config.seed)  # Python, numpy and TF global seeds
        self.env_fn = env_fn or env_factory(config.env_id, config.env_kwargs)
        eval_env = checked_env(self.env_fn, config.env_id if env_fn is None else "env_fn")
        if env_fn is not None:  # the config (and the default run dir) name the env it trains on
            config = dataclasses.replace(config, env_id=_env_name(eval_env))
        self.run_dir = _checked_run_dir(config, resume, env_fn)
        self.files = RunDir(self.run_dir)
        saved = self.files.read_config() if resume else None
        if saved is not None:
            for change in config.resume_changes(saved):
                logging.info("resume with %s", change)
        self.config = config
        self.on_evaluation = on_evaluation
        self.model_name = config.model_name or default_model_name(config.env_id)
        if config.export:
            check_writable(os.path.join(config.export_dir, self.model_name))
        self.spec = spec = env_spec(config.env_id, eval_env)
        if config.num_actors:  # env runners on Ray collect instead (started below)
            require_ray("env runners (num_actors > 0)", config.ray_address)
            check_address(config.ray_address)
            self.collector = None
        else:
            self.collector = Collector(
                self.env_fn, spec, config.num_envs, config.vector_mode, config.seed
            )
        self.learner = SACLearner(spec.obs_dim, spec.action_dim, config, actor_fn, critic_fn)
        self.evaluator = Evaluator(eval_env, self.learner, spec, config)
        self.buffer = ReplayBuffer(config.buffer_size, spec.obs_dim, spec.action_dim, config.seed)
        self.checkpointer = Checkpointer(
            self.files.file(CHECKPOINTS_DIR), self.learner, config.keep_checkpoints
        )
        self.schedule = UpdateSchedule.from_config(config)
        self.lr_schedule = parse_schedule(config.lr_schedule)
        self.lr_factor = 1.0
        self.loop = LoopState()
        self.owed_updates = 0  # env runners: updates due but not yet run (whole calls only)
        # The next step's actions, picked by the last update's call with the updated policy
        # (checkpointed: acting again after a resume would draw the action RNG twice).
        self.next_action: Optional[np.ndarray] = None
        self.resumed_from: Optional[str] = None
        if resume:
            self._restore_latest()
        self.runners: Optional[RunnerPool] = None
        self._started_ray = False
        if config.num_actors and not self._finished():
            self._start_runners(actor_fn)
        # Created once the start can no longer be refused: these write files.
        os.makedirs(self.run_dir, exist_ok=True)
        self.progress = ProgressLog(
            self.files,
            self.learner.metric_names,
            config.total_steps,
            config.tensorboard and not self._finished(),  # a finished run stays as it was
            on_log,
            extra_fields=self.runners.stats_fields() if self.runners else (),
        )
        if resume:  # rows a killed session wrote after its last checkpoint
            self.progress.truncate(self.loop.step)
        if not self._finished():  # a finished run's config.json stays as it was
            write_json(self.files.file(CONFIG_FILE), config.to_dict())
        self.learning_clock = Stopwatch(before=self.loop.learning_time_s)
        self.metrics: Optional[Dict[str, float]] = None

    def _finished(self) -> bool:
        return self.loop.step >= self.config.total_steps and bool(self.files.read_summary())

    # --------------------------------------------------------------- checkpoints
    def _restore_latest(self) -> None:
        def compatible(state: Dict, prefix: str) -> None:
            check_compatible(state["config"], self.config.to_dict(), prefix)

        restored = self.checkpointer.restore_newest(
            lambda prefix: self.checkpointer.restore(prefix, self.buffer), compatible
        )
        if restored is None:
            logging.info("no checkpoint in %s: starting a new run", self.run_dir)
            return
        prefix, state = restored
        self.loop = LoopState.from_dict(state)
        self.loop.resumes += 1
        self.schedule.load_state(state)
        self.owed_updates = state.get("owed_updates", 0)
        if state.get("next_action") is not None:
            self.next_action = np.asarray(state["next_action"], np.float32)
        if self.collector is not None:
            self.collector.load_state(state, self.checkpointer.read_blob(prefix, ENVS_FILE))
        self.resumed_from = prefix
        # The checkpoint holds the rates of its step; the config of this run decides them.
        self.lr_factor = self.lr_schedule(self.loop.step, self.config.total_steps)
        self.learner.set_learning_rate_factor(self.lr_factor)
        logging.info(
            "resumed from %s at step %d (%d episodes)", prefix, self.loop.step, self.loop.episodes
        )

    def _save_checkpoint(self) -> None:
        with self.learning_clock.paused():
            self.progress.flush()
            state = {
                **self.loop.to_dict(),
                "wall_time_s": self.session_clock.seconds(),
                "learning_time_s": self.learning_clock.seconds(),
                "config": self.config.to_dict(),
                **self.schedule.state(),
                **(self.collector.state() if self.collector is not None else {}),
                "owed_updates": self.owed_updates,
                "next_action": None if self.next_action is None else self.next_action.tolist(),
            }
            snapshot = self.collector.snapshot() if self.collector is not None else None
            blobs = {ENVS_FILE: snapshot} if snapshot is not None else None
            path = self.checkpointer.save(self.loop.step, self.buffer, state, blobs)
        logging.info("checkpoint at step %d: %s", self.loop.step, path)

    # ---------------------------------------------------------------- evaluation
    def _evaluate_and_record(self) -> None:
        cfg, loop = self.config, self.loop
        with self.learning_clock.paused():
            evaluation = self.evaluator.evaluate(loop.step, len(loop.evaluations))
            loop.evaluations.append(evaluation)
            mean, std = evaluation["return_mean"], evaluation["return_std"]
            self.progress.scalars(loop.step, {"eval/return_mean": mean, "eval/return_std": std})
            if cfg.video_every and len(loop.evaluations) % cfg.video_every == 0:
                self.evaluator.record_video(self.files.file(VIDEOS_DIR), loop.step)
        logging.info(
            "eval step %d: return %.1f +- %.1f over %d episodes",
            loop.step,
            mean,
            std,
            cfg.eval_episodes,
        )

    # ---------------------------------------------------------------------- loop
    def run(self) -> TrainResult:
        """Trains from the current step to `total_steps`; returns the finished run."""
        if self._finished():
            logging.info("run in %s is already complete", self.run_dir)
            summary = self.files.read_summary()
            saved = summary.get("saved_model_path")
            return TrainResult(self.learner, self.spec, self.buffer, self.run_dir, saved, summary)
        cfg, loop = self.config, self.loop
        self.session_clock = Stopwatch(before=loop.wall_time_s)
        self.session_clock.start()
        # Steps/s of the learning phase only (the warm-up's random actions need no network).
        self._log_clock = (self.learning_clock.seconds(), loop.learning_steps)
        bar = progress_bar(cfg.total_steps, loop.step, cfg.progress_bar)
        try:
            with StopSignals() as stop, bar, lines_above(bar):
                if self.runners is None:
                    self._run_local(stop, bar)
                else:
                    self._run_with_runners(stop, bar)
        finally:
            self._stop_runners()
        return self._finish()

    def _run_local(self, stop: StopSignals, bar) -> None:
        """Env steps in this process, each followed by the updates it owes."""
        cfg, loop = self.config, self.loop
        # A resumed run continues the checkpoint's episodes where its envs pickle, and
        # starts new ones where they do not.
        continued = self.collector.start(seed=cfg.seed + loop.episodes)
        if self.resumed_from is not None and not continued:
            logging.info("resumed with new episodes (the checkpoint holds no env state)")
        while loop.step < cfg.total_steps:
            if self.schedule.is_warmup(loop.step):
                action = None  # uniform random
            elif self.next_action is not None:
                action, self.next_action = self.next_action, None
            else:
                action = self.learner.act(self.collector.observation)
            step_before = loop.step
            transitions = self.collector.step(action)
            phase_ended, updates_due = self._record(transitions, cfg.num_envs)
            bar.update(loop.step - step_before)
            if updates_due:
                self.next_action = self._update(updates_due, self.collector.observation)
            elif self.schedule.noise_reset_due(phase_ended):
                self.learner.reset_noise()
            self._after_step(step_before, stop.received, bar)

    def _run_with_runners(self, stop: StopSignals, bar) -> None:
        """Chunks of env steps from the runners (tfsac.scale.runners), each followed by the
        updates it owes, run in calls of one fixed number of updates (another number
        would be another XLA compilation); weights go out every weight_sync_every updates."""
        cfg, loop, pool = self.config, self.loop, self.runners
        per_call = self.schedule.steps_per_phase(cfg.train_freq) * (
            cfg.chunk_steps // cfg.train_freq
        )
        updates = int(self.learner.sac.critic_optimizer.iterations.numpy())
        pool.set_weights(self.learner.actor.get_weights(), updates)
        for chunk in pool.chunks(loop.step):
            step_before = loop.step
            _, due = self._record(chunk.transitions, chunk.steps)
            pool.record_lag(chunk, updates)
            self.owed_updates += due
            at_end = loop.step >= cfg.total_steps
            while self.owed_updates >= per_call or (at_end and self.owed_updates):
                count = min(per_call, self.owed_updates)
                # The run's last call can be shorter: a new size, compiled once, off the clock.
                last = self.learning_clock.paused() if count < per_call else nullcontext()
                with last:
                    self._update(count)
                self.owed_updates -= count
                updates += count
                if crossed(updates - count, updates, cfg.weight_sync_every):
                    pool.set_weights(self.learner.actor.get_weights(), updates)
            bar.update(loop.step - step_before)
            self._after_step(step_before, stop.received, bar)

    def _record(self, transitions, steps: int) -> tuple:
        """Puts `steps` env steps' transitions into the buffer and books them; returns
        (whether a collection phase ended, the gradient steps now due)."""
        loop = self.loop
        step_before, loop.step = loop.step, loop.step + steps
        bad = transitions.first_nonfinite()
        if bad is not None:
            raise self._nonfinite(f"the env returned a non-finite {bad} at step {loop.step}")
        self.buffer.add(*transitions.as_tuple())
        for episode_return, length in transitions.finished_episodes:
            loop.record_episode(episode_return, length)
        if self.learning_clock.running:
            loop.learning_steps += steps
        finished = len(transitions.finished_episodes)
        return self.schedule.after_env_step(step_before, loop.step, finished)

    def _update(self, gradient_steps: int, observation=None) -> Optional[np.ndarray]:
        """Runs `gradient_steps` updates; with `observation`, also picks the next step's
        actions with the updated policy in the same compiled call and returns them."""
        factor = self.lr_schedule(self.loop.step, self.config.total_steps)
        # The rates are variables read by the compiled update: set them only when they move.
        if abs(factor - self.lr_factor) > 1e-3 * max(self.lr_factor, 1e-12):
            self.learner.set_learning_rate_factor(factor)
            self.lr_factor = factor
        batches = self.buffer.sample_packed(self.config.batch_size, gradient_steps)
        action = None
        if observation is None:
            self.metrics = self.learner.update(batches)
        else:
            self.metrics, action = self.learner.update_and_act(batches, observation)
        if not self.metrics["finite"]:
            names = ", ".join(self.learner.nonfinite_quantities(self.metrics)[:6])
            raise self._nonfinite(f"non-finite values at step {self.loop.step} in: {names}")
        # The clock starts after the session's first update, so that the one-off XLA
        # compilation does not count against throughput.
        if not self.learning_clock.running:
            self.learning_clock.start()
        return action

    # ------------------------------------------------------------------ runners
    def _start_runners(self, actor_fn) -> None:
        cfg = self.config
        # A local Ray offers as many CPUs as runners asked for, even beyond the cores.
        local = {} if cfg.ray_address else {"num_cpus": max(os.cpu_count() or 1, cfg.num_actors)}
        self._started_ray = start_ray(cfg.ray_address, **local)
        try:
            self.runners = RunnerPool(cfg, self.env_fn, self.spec, actor_fn, self.loop.resumes)
        except BaseException:
            self._stop_runners()
            raise
        logging.info(
            "%d env runner%s started (%s, %d env copies and %d-step chunks each)",
            cfg.num_actors,
            "s" if cfg.num_actors > 1 else "",
            cfg.runner_mode,
            cfg.envs_per_actor,
            cfg.chunk_steps,
        )

    def _stop_runners(self) -> None:
        if self.runners is not None:
            self.runners.close()
        if self._started_ray:
            import ray

            ray.shutdown()
            self._started_ray = False

    def _nonfinite(self, what: str) -> NonFiniteError:
        latest = self.checkpointer.latest or "none"
        return NonFiniteError(f"{what}; training stopped, last good checkpoint: {latest}")

    def _after_step(self, step_before: int, stop: Optional[int], bar) -> None:
        """Evaluation, logging, checkpoints and a stop request, when the env steps from
        `step_before` cross their intervals (or end the run)."""
        cfg, step = self.config, self.loop.step
        at_end = step >= cfg.total_steps
        evaluated = crossed(step_before, step, cfg.eval_every) or at_end
        if evaluated:
            self._evaluate_and_record()
        if crossed(step_before, step, cfg.log_every):
            now, steps = self.learning_clock.seconds(), self.loop.learning_steps
            last_time, last_steps = self._log_clock
            # None in the warm-up (and for a log interval without learning-phase steps).
            steps_per_s = (steps - last_steps) / (now - last_time) if steps > last_steps else None
            runners = self.runners.stats() if self.runners else None
            self.progress.log(self.loop, self.metrics, steps_per_s, self.lr_factor, runners)
            self._log_clock = (now, steps)
            if self.loop.recent_returns and steps_per_s is not None:
                ret = self.loop.mean_recent_return()
                bar.set_postfix(ret=f"{ret:.1f}", sps=f"{steps_per_s:.0f}", refresh=False)
        if at_end or stop is not None or crossed(step_before, step, cfg.checkpoint_every):
            self._save_checkpoint()
        # After the checkpoint: a run that the callback stops (by raising) keeps this step.
        if evaluated and self.on_evaluation is not None:
            self.on_evaluation(dict(self.loop.evaluations[-1]))
        if stop is not None and not at_end:
            raise Interrupted(
                f"{signal.Signals(stop).name} at step {step}: checkpoint saved in "
                f"{self.checkpointer.directory}; continue with --resume "
                f"--run_dir={self.run_dir}",
                stop,
            )

    # -------------------------------------------------------------------- finish
    def _finish(self) -> TrainResult:
        wall_time = self.session_clock.seconds()
        for part in (self.collector, self.evaluator, self.progress):
            if part is not None:
                part.close()
        final = self.loop.evaluations[-1]
        latest = self.checkpointer.latest
        summary = run_summary(
            self.config,
            self.loop,
            wall_time,
            self.learning_clock.seconds(),
            resumed_from=self.resumed_from,
            # Absolute, as saved_model_path: usable from any directory.
            checkpoint=latest and os.path.abspath(latest),
            saved_model_path=self._export(final) if self.config.export else None,
        )
        write_json(self.files.file(SUMMARY_FILE), summary)
        logging.info(
            "done: eval return %.1f +- %.1f, %.1fs, %.0f env steps/s; summary in %s",
            final["return_mean"],
            final["return_std"],
            wall_time,
            summary["env_steps_per_s"],
            self.run_dir,
        )
        saved = summary["saved_model_path"]
        return TrainResult(self.learner, self.spec, self.buffer, self.run_dir, saved, summary)

    def _export(self, final_evaluation: Dict) -> str:
        cfg = self.config
        metadata = policy_metadata(cfg, self.spec, final_evaluation)
        bounds = (cfg.log_std_min, cfg.log_std_max)
        path = export_policy(
            self.learner.actor, self.spec, cfg.export_dir, self.model_name, metadata, bounds
        )
        logging.info("exported SavedModel to %s", os.path.abspath(path))
        return os.path.abspath(path)


def train(
    config: SACConfig,
    export: Optional[bool] = None,
    resume: bool = False,
    on_log: Optional[Callable[[Dict], None]] = None,
    actor_fn: Optional[Callable] = None,
    critic_fn: Optional[Callable] = None,
    env_fn: Optional[EnvFn] = None,
    on_evaluation: Optional[Callable[[Dict], None]] = None,
    quiet: bool = False,
) -> TrainResult:
    """Trains SAC on `config.env_id`, or on the env `env_fn()` returns (any callable that
    makes a gymnasium env; it must pickle for `vector_mode='async'`); with `export` (when
    not None, it replaces config.export), exports a SavedModel at the end.

    With `resume`, continues from the newest checkpoint in `config.run_dir` that restores
    (or starts there when it has none); the config must be the run's saved one except for
    the options of config.RESUME_ADJUSTABLE, whose changes are logged. Raises TfsacError
    for bad configuration or paths before any training, NonFiniteError on NaN/Inf,
    Interrupted after a SIGINT/SIGTERM checkpoint. `actor_fn` and `critic_fn` build custom
    Keras models (networks.build_networks); `on_log` gets each progress record.
    `on_evaluation` gets each evaluation ({step, return_mean, return_std, seed}) once its
    step's checkpoint, if one is due, is saved; an exception it raises ends training and
    propagates unchanged. Unless `quiet`, the progress lines of scripts/train.py go to
    stderr (in a notebook too), in their short form, without other libraries' INFO lines.
    """
    with progress_lines(enabled=not quiet):
        trainer = Trainer(
            config, export, resume, on_log, actor_fn, critic_fn, env_fn, on_evaluation=on_evaluation
        )
        return trainer.run()
