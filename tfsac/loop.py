"""The training loop: env interaction, updates, evaluation, logging, checkpoints, export."""

from __future__ import annotations

import collections
import csv
import dataclasses
import json
import os
import signal
import sys
import threading
import time
from typing import Callable, Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf
import tqdm
from absl import logging

from tfsac import __version__
from tfsac.checkpointing import Checkpointer, check_compatible
from tfsac.config import SACConfig
from tfsac.distributions import unit_to_bounds
from tfsac.envs import EnvSpec, env_spec, make_env, make_vector_env
from tfsac.errors import TfsacError
from tfsac.evaluation import record_video, run_episodes
from tfsac.export import check_writable, default_model_name, export_policy
from tfsac.learner import ACT, NO_ACTION, RESET, RESET_AND_ACT, UPDATE_AND_ACT, SACLearner
from tfsac.replay import ReplayBuffer
from tfsac.schedules import parse_schedule

SUMMARY_FILE = "summary.json"
PROGRESS_FILE = "progress.csv"
PROGRESS_FIELDS = ("step", "episodes", "episode_return", "episode_length", "env_steps_per_s")
# The graph loop hands control back to Python at least this often, so that signal handlers
# (which Python runs only on the main thread, between its own calls) stay responsive.
STRETCH_SECONDS = 0.5


def _crossed(previous: int, step: int, every: int) -> bool:
    """Whether a multiple of `every` lies in (previous, step]; never for every = 0."""
    return every > 0 and step // every > previous // every


def _first_bad(values):
    values = np.atleast_1d(values)
    return values[~np.isfinite(values)][0]


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


def _holds_a_run(run_dir: str) -> bool:
    """Whether `run_dir` has files of an earlier run (which a new run would overwrite)."""
    names = ("config.json", SUMMARY_FILE, PROGRESS_FILE, "checkpoints")
    return any(os.path.exists(os.path.join(run_dir, name)) for name in names)


def write_json(path: str, data: Dict) -> None:
    """Writes JSON atomically (temp file + rename) so readers never see half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


class _StopSignals:
    """Turns SIGINT/SIGTERM into a flag the loop polls, so it can save and stop cleanly."""

    def __init__(self):
        self.received: Optional[int] = None
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        self.received = signum

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class Trainer:
    """One SAC run: builds everything from `config`, optionally resumes, then `run()`s."""

    def __init__(
        self,
        config: SACConfig,
        export: bool = True,
        resume: bool = False,
        on_log: Optional[Callable[[Dict], None]] = None,
        actor_fn: Optional[Callable] = None,
        critic_fn: Optional[Callable] = None,
        on_evaluation: Optional[Callable[[Dict], None]] = None,
    ):
        config.validate()
        if resume and not config.run_dir:
            raise TfsacError("resume needs the run directory of the run to continue (run_dir)")
        self.config = config
        self.export = export
        self.on_log = on_log
        self.on_evaluation = on_evaluation
        self.run_dir = config.run_dir or default_run_dir(config)
        if not resume and _holds_a_run(self.run_dir):
            raise TfsacError(
                f"run directory {self.run_dir!r} already holds a run; continue it with "
                "--resume or choose another run directory"
            )
        check_writable(self.run_dir)
        self.model_name = config.model_name or default_model_name(config.env_id)
        if export:
            check_writable(os.path.join(config.export_dir, self.model_name))

        if config.deterministic:
            tf.config.experimental.enable_op_determinism()
        keras.utils.set_random_seed(config.seed)  # Python, numpy and TF global seeds
        kw = config.env_kwargs
        self.eval_env = make_env(config.env_id, env_kwargs=kw)  # checks the id and spaces
        self.spec = env_spec(config.env_id, self.eval_env)
        self.env = make_vector_env(config.env_id, config.num_envs, config.vector_mode, kw)
        self.learner = SACLearner(
            self.spec.obs_dim, self.spec.action_dim, config, actor_fn, critic_fn
        )
        self.buffer = ReplayBuffer(
            config.buffer_size, self.spec.obs_dim, self.spec.action_dim, config.seed
        )
        self.checkpointer = Checkpointer(
            os.path.join(self.run_dir, "checkpoints"), self.learner, config.keep_checkpoints
        )
        self.writer = (
            tf.summary.create_file_writer(os.path.join(self.run_dir, "tensorboard"))
            if config.tensorboard
            else None
        )
        self.action_rng = np.random.default_rng(config.seed)
        self.lr_schedule = parse_schedule(config.lr_schedule)
        self.lr_factor = 1.0
        # Loop state; everything here goes into checkpoints.
        self.step = 0
        self.episodes = 0
        self.pending_env_steps = 0  # learning-phase env steps not yet paid for in updates
        # The current collection phase (train_freq env steps or episodes_per_rollout
        # episodes): its env steps and finished episodes.
        self.rollout_steps = 0
        self.rollout_episodes = 0
        self.recent_returns: collections.deque = collections.deque(maxlen=10)
        self.recent_lengths: collections.deque = collections.deque(maxlen=10)
        self.evaluations: List[Dict] = []
        self.elapsed_before = 0.0  # wall time of earlier sessions of this run
        # Learning-phase throughput: env steps after learning_starts and their wall time
        # (evaluations and checkpoint writes excluded), summed over a resumed run's sessions.
        self.learning_steps = 0
        self.learning_time_before = 0.0
        self._learning_t0: Optional[float] = None
        self._paused_time = 0.0
        self.resumed_from = None
        # The graph loop (config.graph_loop), built on its first use.
        self._stretch = None
        self._no_batches = np.zeros(
            (0, config.batch_size, self.buffer.storage.shape[1]), np.float32
        )
        if resume:
            self._restore_latest()
        # A resume of a finished run trains nothing (see run) and keeps its config.json.
        if self.step < config.total_steps or not os.path.exists(self._summary_path()):
            write_json(os.path.join(self.run_dir, "config.json"), config.to_dict())

    # ------------------------------------------------------------------ state
    def _loop_state(self, elapsed: float) -> Dict:
        return {
            "config": self.config.to_dict(),
            "episodes": self.episodes,
            "pending_env_steps": self.pending_env_steps,
            "rollout_steps": self.rollout_steps,
            "rollout_episodes": self.rollout_episodes,
            "recent_returns": list(self.recent_returns),
            "recent_lengths": list(self.recent_lengths),
            "evaluations": self.evaluations,
            "wall_time_s": self.elapsed_before + elapsed,
            "learning_steps": self.learning_steps,
            "learning_time_s": self._learning_time(),
            "action_rng": self.action_rng.bit_generator.state,
        }

    def _restore_latest(self) -> None:
        prefix = self.checkpointer.latest_to_restore()
        if prefix is None:
            logging.info("no checkpoint in %s: starting a new run", self.run_dir)
            self._truncate_progress(0)  # rows of an earlier session that saved no checkpoint
            return
        state = self.checkpointer.read_state(prefix)
        check_compatible(state["config"], self.config.to_dict(), prefix)
        state = self.checkpointer.restore(prefix, self.buffer)
        self.step = state["step"]
        self.episodes = state["episodes"]
        self.pending_env_steps = state["pending_env_steps"]
        self.rollout_steps = state.get("rollout_steps", 0)
        self.rollout_episodes = state.get("rollout_episodes", 0)
        self.recent_returns.extend(state["recent_returns"])
        self.recent_lengths.extend(state["recent_lengths"])
        self.evaluations = state["evaluations"]
        self.elapsed_before = state["wall_time_s"]
        self.learning_steps = state["learning_steps"]
        self.learning_time_before = state["learning_time_s"]
        self.action_rng.bit_generator.state = state["action_rng"]
        self.resumed_from = prefix
        # The checkpoint holds the rates of its step; the config of this run decides them.
        self.lr_factor = self.lr_schedule(self.step, self.config.total_steps)
        self.learner.set_learning_rate_factor(self.lr_factor)
        self._truncate_progress(self.step)
        logging.info("resumed from %s at step %d (%d episodes)", prefix, self.step, self.episodes)

    def _save_checkpoint(self, elapsed: float) -> str:
        t0 = time.perf_counter()
        if self.writer is not None:
            self.writer.flush()
        path = self.checkpointer.save(self.step, self.buffer, self._loop_state(elapsed))
        if self._learning_t0 is not None:
            self._paused_time += time.perf_counter() - t0
        logging.info("checkpoint at step %d: %s", self.step, path)
        return path

    # ---------------------------------------------------------------- logging
    def _truncate_progress(self, step: int) -> None:
        """Drops progress rows written after the checkpoint we resume from."""
        path = os.path.join(self.run_dir, PROGRESS_FILE)
        if not os.path.exists(path):
            return
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if int(r["step"]) <= step]
        self._write_progress_rows(rows, mode="w")

    def _write_progress_rows(self, rows: List[Dict], mode: str = "a") -> None:
        path = os.path.join(self.run_dir, PROGRESS_FILE)
        new_file = mode == "w" or not os.path.exists(path)
        with open(path, mode, newline="") as f:
            fields = (*PROGRESS_FIELDS, *self.learner.metric_names)
            writer = csv.DictWriter(f, fields, extrasaction="ignore")
            if new_file:
                writer.writeheader()
            writer.writerows(rows)

    def _log(self, metrics, steps_per_s: float) -> None:
        record = {
            "step": self.step,
            "episodes": self.episodes,
            "episode_return": float(np.mean(self.recent_returns)) if self.recent_returns else None,
            "episode_length": float(np.mean(self.recent_lengths)) if self.recent_lengths else None,
            "env_steps_per_s": steps_per_s,
        }
        if metrics is not None:
            record.update({k: float(metrics[k]) for k in self.learner.metric_names})
        self._write_progress_rows([record])
        self._summaries(
            {
                "train/episode_return": record["episode_return"],
                "train/episode_length": record["episode_length"],
                "train/env_steps_per_s": steps_per_s,
                "learner/learning_rate_factor": self.lr_factor,
                **{f"learner/{k}": record.get(k) for k in self.learner.metric_names},
            }
        )
        ret = record["episode_return"]
        logging.info(
            "step %d/%d | episodes %d | return %s | %.0f steps/s%s",
            self.step,
            self.config.total_steps,
            self.episodes,
            "-" if ret is None else f"{ret:.1f}",
            steps_per_s,
            "".join(
                f" | {k} {record[k]:.4g}"
                for k in ("critic_loss", "actor_loss", "alpha", "entropy")
                if k in record
            ),
        )
        if self.on_log is not None:
            self.on_log(record)

    def _summaries(self, scalars: Dict[str, Optional[float]]) -> None:
        """TensorBoard scalars at the current env step (None values are skipped)."""
        if self.writer is None:
            return
        with self.writer.as_default(step=self.step):
            for name, value in scalars.items():
                if value is not None:
                    tf.summary.scalar(name, value)

    # ------------------------------------------------------------- evaluation
    def _policy(self, obs):
        """Deterministic env actions: the squashed mean, mapped onto the bounds."""
        unit = self.learner.act(obs, deterministic=True)
        return unit_to_bounds(unit, self.spec.action_low, self.spec.action_high)

    def evaluate(self, episodes: int) -> List[float]:
        """Deterministic episodes (the squashed mean action) on the evaluation env."""
        # Seeded by the eval count, so a resumed run evaluates on the same starts.
        seed = self.config.seed + 100 + len(self.evaluations)
        return run_episodes(self.eval_env, self._policy, episodes, seed=seed)

    def _record_video(self) -> None:
        cfg = self.config
        folder = os.path.join(self.run_dir, "videos")
        record_video(
            cfg.env_id,
            self._policy,
            folder,
            f"step-{self.step}",
            seed=cfg.seed + 7,
            env_kwargs=cfg.env_kwargs,
        )
        logging.info("video of step %d in %s", self.step, folder)

    def _learning_time(self) -> float:
        if self._learning_t0 is None:
            return self.learning_time_before
        session = time.perf_counter() - self._learning_t0 - self._paused_time
        return self.learning_time_before + session

    def _evaluate_and_record(self) -> None:
        t0 = time.perf_counter()
        returns = self.evaluate(self.config.eval_episodes)
        if self._learning_t0 is not None:
            self._paused_time += time.perf_counter() - t0
        self.evaluations.append(
            {
                "step": self.step,
                "return_mean": float(np.mean(returns)),
                "return_std": float(np.std(returns)),
            }
        )
        self._summaries(
            {"eval/return_mean": float(np.mean(returns)), "eval/return_std": float(np.std(returns))}
        )
        if self.config.video_every and len(self.evaluations) % self.config.video_every == 0:
            t0 = time.perf_counter()
            self._record_video()
            if self._learning_t0 is not None:
                self._paused_time += time.perf_counter() - t0
        logging.info(
            "eval step %d: return %.1f +- %.1f over %d episodes",
            self.step,
            np.mean(returns),
            np.std(returns),
            len(returns),
        )

    # ------------------------------------------------------------------- loop
    def _check_finite_transition(self, next_obs, reward) -> None:
        if not np.all(np.isfinite(reward)):
            raise NonFiniteError(
                f"the env returned a non-finite reward ({_first_bad(reward)}) at step "
                f"{self.step}; training stopped, last good checkpoint: "
                f"{self.checkpointer.latest or 'none'}"
            )
        if not np.all(np.isfinite(next_obs)):
            raise NonFiniteError(
                f"the env returned a non-finite observation at step {self.step}; "
                f"training stopped, last good checkpoint: {self.checkpointer.latest or 'none'}"
            )

    def _rate_factor_moved(self) -> Optional[float]:
        """The schedule's rate factor at this step, when it moved from the one in use."""
        factor = self.lr_schedule(self.step, self.config.total_steps)
        # Rates are variables read by the compiled update; set them only when they move.
        moved = abs(factor - self.lr_factor) > 1e-3 * max(self.lr_factor, 1e-12)
        return factor if moved else None

    def _nonfinite_error(self, metrics) -> NonFiniteError:
        names = ", ".join(self.learner.nonfinite_quantities(metrics)[:6])
        return NonFiniteError(
            f"non-finite values at step {self.step} in: {names}; training stopped, "
            f"last good checkpoint: {self.checkpointer.latest or 'none'}"
        )

    def _update(self, gradient_steps: int, obs):
        """Runs `gradient_steps` updates and picks the actions for `obs` (the next step's)
        with the updated policy, in one compiled call."""
        factor = self._rate_factor_moved()
        if factor is not None:
            self.learner.set_learning_rate_factor(factor)
            self.lr_factor = factor
        batches = self.buffer.sample_packed(self.config.batch_size, gradient_steps)
        metrics, action = self.learner.update_and_act(batches, obs)
        if not metrics["finite"]:
            raise self._nonfinite_error(metrics)
        return metrics, action

    def _end_of_step(self, previous_step: int, finished_episodes: int):
        """Books the env steps since `previous_step`; returns (whether a collection phase
        ended, the gradient steps now due). Updates are owed for env steps taken after
        `learning_starts`: `gradient_steps` (-1: one per env step) for every `train_freq`
        env steps, or, with `episodes_per_rollout`, after that many finished episodes."""
        cfg = self.config
        self.rollout_steps += self.step - previous_step
        self.rollout_episodes += finished_episodes
        new = self.step - max(previous_step, cfg.learning_starts)
        if new > 0:
            self.pending_env_steps += new
        if cfg.episodes_per_rollout:
            ended = self.rollout_episodes >= cfg.episodes_per_rollout
            collected = self.pending_env_steps if ended else 0
            if ended:
                self.pending_env_steps = 0
            due = cfg.steps_per_update(collected) if collected else 0
        else:
            calls, self.pending_env_steps = divmod(self.pending_env_steps, cfg.train_freq)
            due = calls * cfg.steps_per_update(cfg.train_freq)
            ended = due > 0 or (
                self.step <= cfg.learning_starts
                and _crossed(previous_step, self.step, cfg.train_freq)
            )
        if ended:
            self.rollout_steps = self.rollout_episodes = 0
        return ended, due

    def _random_step(self) -> bool:
        """Whether the next env step takes uniform random actions (the warm-up)."""
        cfg = self.config
        return self.step + cfg.num_envs <= cfg.learning_starts and not cfg.use_sde_at_warmup

    def _noise_reset_due(self, rollout_ended: bool) -> bool:
        """gSDE without an update: new noise at a phase's start and every sde_sample_freq."""
        cfg = self.config
        steps = self.rollout_steps
        return cfg.use_sde and (
            rollout_ended or _crossed(steps - cfg.num_envs, steps, cfg.sde_sample_freq)
        )

    def _env_step(self, unit_action):
        """Steps every env copy with `unit_action` in [-1, 1] (None: uniform random) and
        books the transitions; returns (previous step, whether a collection phase ended,
        the gradient steps now due)."""
        n, spec = self.config.num_envs, self.spec
        if unit_action is None:
            unit_action = self.action_rng.uniform(-1.0, 1.0, (n, spec.action_dim))
            unit_action = unit_action.astype(np.float32)
        previous, self.step = self.step, self.step + n
        obs = self._obs
        action = unit_to_bounds(unit_action, spec.action_low, spec.action_high)
        new_obs, reward, terminated, truncated, info = self.env.step(action)
        new_obs = np.asarray(new_obs, np.float32)
        done = np.logical_or(terminated, truncated)
        # The buffer needs each copy's true successor: after an episode ends the vector env
        # already returns the next episode's first observation.
        next_obs = new_obs
        if done.any():
            next_obs = new_obs.copy()
            for i in np.flatnonzero(done):
                next_obs[i] = info["final_obs"][i]
        self._check_finite_transition(next_obs, reward)
        self.buffer.add_batch(obs, unit_action, reward, next_obs, terminated)
        self._episode_returns += reward
        self._episode_lengths += 1
        finished = np.flatnonzero(done)
        for i in finished:
            self.recent_returns.append(float(self._episode_returns[i]))
            self.recent_lengths.append(int(self._episode_lengths[i]))
            self.episodes += 1
            self._episode_returns[i], self._episode_lengths[i] = 0.0, 0
        self._obs = new_obs
        self._bar.update(n)
        if self._learning_t0 is not None:
            self.learning_steps += n
        return (previous, *self._end_of_step(previous, len(finished)))

    def _events_due(self, previous: int) -> bool:
        """Whether the step from `previous` ends the run or is due an evaluation, a log
        line, a checkpoint or a stop."""
        cfg = self.config
        return (
            self.step >= cfg.total_steps
            or self._stop.received is not None
            or any(
                _crossed(previous, self.step, every)
                for every in (cfg.eval_every, cfg.log_every, cfg.checkpoint_every)
            )
        )

    def _train_step(self, rollout_ended: bool, due: int):
        """An env step's updates (or new gSDE noise) in eager calls; returns the next
        step's actions when the update call chose them, else None."""
        if due:  # with gSDE, this call also draws the next phase's noise
            self._metrics, next_action = self._update(due, self._obs)
            # The clock starts after the first update of this session, so the one-off XLA
            # compilation is not counted as throughput.
            if self._learning_t0 is None:
                self._learning_t0 = time.perf_counter()
            return next_action
        if self._noise_reset_due(rollout_ended):
            self.learner.reset_noise()
        return None

    def _handle_events(self, previous: int) -> None:
        """After the step from `previous` and its updates: evaluation, logging, checkpoints
        and stop requests."""
        if not self._events_due(previous):
            return
        cfg = self.config
        at_end = self.step >= cfg.total_steps
        evaluated = _crossed(previous, self.step, cfg.eval_every) or at_end
        if evaluated:
            self._evaluate_and_record()
        if _crossed(previous, self.step, cfg.log_every):
            now = time.perf_counter()
            last_time, last_step = self._log_clock
            steps_per_s = (self.step - last_step) / (now - last_time)
            self._log(self._metrics, steps_per_s)
            self._log_clock = (now, self.step)
            if self.recent_returns:
                self._bar.set_postfix(
                    ret=f"{np.mean(self.recent_returns):.1f}",
                    sps=f"{steps_per_s:.0f}",
                    refresh=False,
                )
        stop = self._stop.received
        periodic = _crossed(previous, self.step, cfg.checkpoint_every)
        if at_end or periodic or stop is not None:
            self._save_checkpoint(time.perf_counter() - self._session_start)
        # After the checkpoint: a run that the callback stops (by raising) keeps this step.
        if evaluated and self.on_evaluation is not None:
            self.on_evaluation(dict(self.evaluations[-1]))
        if stop is not None and not at_end:
            raise Interrupted(
                f"{signal.Signals(stop).name} at step {self.step}: checkpoint saved in "
                f"{self.checkpointer.directory}; continue with --resume "
                f"--run_dir={self.run_dir}",
                stop,
            )

    # ------------------------------------------------------------ graph loop
    def _graph_env_step(self, action):
        """One env step of the graph loop, run by tf.numpy_function: the env part in
        Python, then what the eager loop would call next, as a learner mode for
        `SACLearner.graph_step`. Returns (observations, batches, mode, learning rates,
        whether the stretch goes on). An exception is kept for `_run_stretch` to raise."""
        cfg = self.config
        try:
            previous, ended, due = self._env_step(None if self._random_step() else action)
            self._last_step = (previous, ended, due)
            batches = self._no_batches
            if due:
                factor = self._rate_factor_moved()
                if factor is not None:
                    self.lr_factor = factor
                    self._rates = self.learner.learning_rates(factor)
                batches = self.buffer.sample_packed(cfg.batch_size, due)
                mode = UPDATE_AND_ACT
                self._stretch_updated = True
            elif self._random_step():
                mode = RESET if self._noise_reset_due(ended) else NO_ACTION
            else:
                mode = RESET_AND_ACT if self._noise_reset_due(ended) else ACT
            go = not (
                self._events_due(previous)
                or (due and self._learning_t0 is None)  # the clock starts after it
                or time.perf_counter() > self._stretch_deadline
            )
        except Exception as e:  # noqa: BLE001 - raised again by _run_stretch, in the caller
            self._stretch_error = e
            return self._obs, self._no_batches, np.int32(NO_ACTION), self._rates, np.False_
        self._last_mode = mode
        return self._obs, batches, np.int32(mode), self._rates, np.bool_(go)

    def _build_stretch(self):
        n, obs_dim, action_dim = self.config.num_envs, self.spec.obs_dim, self.spec.action_dim
        width = self._no_batches.shape[-1]
        learner = self.learner
        num_rates = len(learner.learning_rates(1.0))

        def body(action, values, finite, go):
            obs, batches, mode, rates, go = tf.numpy_function(
                self._graph_env_step,
                [action],
                [tf.float32, tf.float32, tf.int32, tf.float32, tf.bool],
                stateful=True,
                name="env_step",
            )
            obs = tf.ensure_shape(obs, [n, obs_dim])
            batches = tf.ensure_shape(batches, [None, None, width])
            rates = tf.ensure_shape(rates, [num_rates])
            mode, go = tf.ensure_shape(mode, []), tf.ensure_shape(go, [])
            values, finite, action = learner.graph_step(mode, batches, obs, rates, values, action)
            return action, values, finite, go

        @tf.function(input_signature=[tf.TensorSpec([n, action_dim], tf.float32)])
        def stretch(action):
            values = tf.zeros([len(learner.metric_names)])
            action, values, finite, _ = tf.while_loop(
                lambda action, values, finite, go: tf.logical_and(finite, go),
                body,
                [action, values, tf.constant(True), tf.constant(True)],
            )
            return values, finite, action

        return stretch.get_concrete_function()

    def _run_stretch(self, action):
        """Runs env steps inside one graph call, starting with `action` (None: random),
        through the first step that needs Python afterwards: one with an evaluation, a log
        line, a checkpoint, a stop request or the run's end, the session's first update
        (the clock starts after it), or the first after STRETCH_SECONDS. Each step's
        updates and actions are the learner's compiled calls in the eager loop's order.
        Returns the last step's (previous step, phase ended, updates due) and the next
        step's actions when the graph chose them, else None."""
        if self._stretch is None:
            self._stretch = self._build_stretch()
        if action is None:  # the env step draws it (the same generator as the eager loop)
            action = np.zeros((self.config.num_envs, self.spec.action_dim), np.float32)
        self._stretch_error = None
        self._stretch_updated = False
        self._last_mode = NO_ACTION
        self._rates = self.learner.learning_rates(self.lr_factor)
        self._stretch_deadline = time.perf_counter() + STRETCH_SECONDS
        values, finite, action = self._stretch(tf.convert_to_tensor(action))
        if self._stretch_error is not None:
            raise self._stretch_error
        if self._stretch_updated:
            self._metrics = self.learner.metrics_dict(values, finite)
            if not self._metrics["finite"]:
                raise self._nonfinite_error(self._metrics)
            if self._learning_t0 is None:
                self._learning_t0 = time.perf_counter()
        acted = self._last_mode in (ACT, RESET_AND_ACT, UPDATE_AND_ACT)
        return self._last_step, action.numpy() if acted else None

    def run(self) -> TrainResult:
        cfg, spec = self.config, self.spec
        if self.step >= cfg.total_steps and os.path.exists(self._summary_path()):
            logging.info("run in %s is already complete", self.run_dir)
            with open(self._summary_path()) as f:
                summary = json.load(f)
            return TrainResult(
                self.learner,
                spec,
                self.buffer,
                self.run_dir,
                summary.get("saved_model_path"),
                summary,
            )

        n = cfg.num_envs
        self._session_start = time.perf_counter()
        self._metrics = None
        self._log_clock = (self._session_start, self.step)
        # A resumed run cannot restore the envs' internal state: it starts new episodes.
        obs, _ = self.env.reset(seed=cfg.seed + self.episodes)
        self._obs = np.asarray(obs, np.float32)
        self._episode_returns = np.zeros(n)
        self._episode_lengths = np.zeros(n, np.int64)
        next_action = None
        with _StopSignals() as self._stop, self._progress_bar() as self._bar:
            while self.step < cfg.total_steps:
                if self._random_step():
                    action = None
                elif next_action is not None:  # chosen by the last update's call
                    action, next_action = next_action, None
                else:
                    action = self.learner.act(self._obs)
                if cfg.graph_loop:
                    (previous, _, _), next_action = self._run_stretch(action)
                else:
                    previous, ended, due = self._env_step(action)
                    next_action = self._train_step(ended, due)
                self._handle_events(previous)
        wall_time = self.elapsed_before + (time.perf_counter() - self._session_start)
        return self._finish(wall_time)

    def _progress_bar(self):
        cfg = self.config
        enabled = cfg.progress_bar if cfg.progress_bar is not None else sys.stderr.isatty()
        return tqdm.tqdm(
            total=cfg.total_steps,
            initial=self.step,
            disable=not enabled,
            unit="step",
            dynamic_ncols=True,
            mininterval=0.5,
        )

    def _summary_path(self) -> str:
        return os.path.join(self.run_dir, SUMMARY_FILE)

    def _finish(self, wall_time: float) -> TrainResult:
        cfg, spec = self.config, self.spec
        self.env.close()
        self.eval_env.close()
        if self.writer is not None:
            self.writer.close()
        final = self.evaluations[-1]
        summary = {
            "env": cfg.env_id,
            "seed": cfg.seed,
            "total_steps": cfg.total_steps,
            "episodes": self.episodes,
            "eval_return_mean": final["return_mean"],
            "eval_return_std": final["return_std"],
            "eval_episodes": cfg.eval_episodes,
            "evaluations": self.evaluations,
            "wall_time_s": wall_time,
            "env_steps_per_s": cfg.total_steps / wall_time,
            # From learning_starts on: acting, env steps and updates, evaluations excluded.
            "learning_env_steps_per_s": (
                self.learning_steps / self._learning_time() if self.learning_steps else None
            ),
            "resumed_from": self.resumed_from,
            "checkpoint": self.checkpointer.latest,
            "saved_model_path": None,
            "tfsac_version": __version__,
        }
        saved_model_path = None
        if self.export:
            metadata = {
                "tfsac_version": __version__,
                "env_id": cfg.env_id,
                "env_kwargs": cfg.env_kwargs,
                "training_steps": cfg.total_steps,
                "observation_dim": spec.obs_dim,
                "observation_space": spec.observation_space,
                "observation_flattening": spec.observation_flattening,
                "action_space": spec.action_space,
                "action_low": list(spec.action_low),
                "action_high": list(spec.action_high),
                "eval_return_mean": final["return_mean"],
            }
            saved_model_path = os.path.abspath(
                export_policy(
                    self.learner.actor,
                    spec,
                    cfg.export_dir,
                    self.model_name,
                    metadata,
                    (cfg.log_std_min, cfg.log_std_max),
                )
            )
            summary["saved_model_path"] = saved_model_path
            logging.info("exported SavedModel to %s", saved_model_path)
        write_json(self._summary_path(), summary)
        logging.info(
            "done: eval return %.1f +- %.1f, %.1fs, %.0f env steps/s; summary in %s",
            final["return_mean"],
            final["return_std"],
            wall_time,
            summary["env_steps_per_s"],
            self.run_dir,
        )
        return TrainResult(self.learner, spec, self.buffer, self.run_dir, saved_model_path, summary)


def train(
    config: SACConfig,
    export: bool = True,
    resume: bool = False,
    on_log: Optional[Callable[[Dict], None]] = None,
    actor_fn: Optional[Callable] = None,
    critic_fn: Optional[Callable] = None,
    on_evaluation: Optional[Callable[[Dict], None]] = None,
) -> TrainResult:
    """Trains SAC on `config.env_id`; with `export`, exports a SavedModel at the end.

    With `resume`, continues from the latest checkpoint in `config.run_dir` (or starts
    there when it has none). Raises TfsacError for bad configuration or paths before any
    training, NonFiniteError on NaN/Inf, Interrupted after a SIGINT/SIGTERM checkpoint.
    `actor_fn` and `critic_fn` build custom Keras models (networks.build_networks).
    `on_evaluation` gets each evaluation ({step, return_mean, return_std}) once its step's
    checkpoint, if one is due, is saved; an exception it raises ends training and
    propagates unchanged.
    """
    trainer = Trainer(config, export, resume, on_log, actor_fn, critic_fn, on_evaluation)
    return trainer.run()
