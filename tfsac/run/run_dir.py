"""A run's directory and the services around a training loop: the file layout (the one
place its names are written), the progress log (CSV, TensorBoard, console, a callback), a
stopwatch that can leave pauses out, and the loop's own state as checkpoints keep it."""

from __future__ import annotations

import collections
import contextlib
import csv
import dataclasses
import json
import os
import re
import signal
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
from absl import logging

from tfsac.errors import TfsacError

CONFIG_FILE = "config.json"
PROGRESS_FILE = "progress.csv"
SUMMARY_FILE = "summary.json"
TENSORBOARD_DIR = "tensorboard"
CHECKPOINTS_DIR = "checkpoints"
VIDEOS_DIR = "videos"
PROGRESS_FIELDS = ("step", "episodes", "episode_return", "episode_length", "env_steps_per_s")


def check_writable(directory: str) -> None:
    """Raises TfsacError unless `directory` can be created and written to. Leaves no trace:
    the folders it creates for the check are removed again (a start that fails later must
    not leave empty run or model folders behind); writers create them when they write."""
    missing = []  # deepest first
    path = os.path.abspath(directory)
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        missing.append(path)
        path = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".tfsac-write-check-"):
            pass
    except OSError as e:
        raise TfsacError(f"cannot write to {directory!r}: {e.strerror or e}") from None
    finally:
        for path in missing:
            try:
                os.rmdir(path)
            except OSError:  # not created after all, or no longer empty
                pass


def default_model_name(env_id: str) -> str:
    """'HalfCheetah-v5' -> 'halfcheetah_v5' (a name TF Serving accepts in URLs)."""
    return re.sub(r"[^a-z0-9]+", "_", env_id.lower()).strip("_") or "policy"


def run_config(run_dir: str, need_checkpoint: bool = False):
    """The SACConfig of the run in `run_dir`; TfsacError where it holds none, or with
    `need_checkpoint` where it holds no checkpoint files (it reads none of them)."""
    from tfsac.config import SACConfig

    try:
        with open(os.path.join(run_dir, CONFIG_FILE)) as f:
            config = SACConfig.from_dict(json.load(f))
    except (OSError, ValueError, TypeError, TfsacError) as e:
        raise TfsacError(f"{run_dir!r} is not a tfsac run directory: {e}") from None
    checkpoints = os.path.join(run_dir, CHECKPOINTS_DIR)
    if need_checkpoint and not (
        os.path.isdir(checkpoints) and any(n.endswith(".index") for n in os.listdir(checkpoints))
    ):
        raise TfsacError(f"no checkpoint that restores in {run_dir!r}/checkpoints")
    return config


def read_json(path: str, default=None):
    """The JSON in `path`, `default` where there is no such file; TfsacError if unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as e:
        raise TfsacError(f"cannot read {path}: {e}") from None


def write_json(path: str, data: Dict) -> None:
    """Writes JSON atomically (temp file + rename) so readers never see half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


class RunDir:
    """Paths inside one run directory."""

    def __init__(self, path: str):
        self.path = path

    def __str__(self) -> str:
        return self.path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def holds_a_run(self) -> bool:
        """Whether it has files of an earlier run (which a new run would overwrite)."""
        names = (CONFIG_FILE, SUMMARY_FILE, PROGRESS_FILE, CHECKPOINTS_DIR)
        return any(os.path.exists(self.file(name)) for name in names)

    def read_config(self) -> Optional[Dict]:
        """The run's config.json (a SACConfig dict), or None before a run started here."""
        return self._read(CONFIG_FILE)

    def read_summary(self) -> Optional[Dict]:
        """The finished run's summary, or None while the run is not finished."""
        return self._read(SUMMARY_FILE)

    def _read(self, name: str) -> Optional[Dict]:
        return read_json(self.file(name))


class StopSignals:
    """SIGINT and SIGTERM as a flag that a loop polls (so that it can save and stop
    cleanly) instead of an exception anywhere; `on_signal(signum)` runs at the first one.
    Outside the main thread (where signals cannot be caught) it never fires."""

    def __init__(self, on_signal: Optional[Callable[[int], None]] = None):
        self.received: Optional[int] = None
        self.on_signal = on_signal
        self._old_handlers = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.received is None and self.on_signal is not None:
            self.on_signal(signum)
        self.received = signum

    def __exit__(self, *exc):
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)


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


@dataclasses.dataclass
class LoopState:
    """The training loop's Python state; checkpoints save `to_dict()` (JSON)."""

    step: int = 0
    episodes: int = 0
    recent_returns: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=10)
    )
    recent_lengths: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=10)
    )
    evaluations: List[Dict] = dataclasses.field(default_factory=list)
    wall_time_s: float = 0.0  # of the sessions before this one
    # Learning-phase throughput: env steps from learning_starts on and their wall time
    # (evaluations and checkpoint writes left out), over all sessions of the run.
    learning_steps: int = 0
    learning_time_s: float = 0.0
    resumes: int = 0  # sessions after the first (env runners seed from it)

    def record_episode(self, episode_return: float, length: int) -> None:
        self.recent_returns.append(episode_return)
        self.recent_lengths.append(length)
        self.episodes += 1

    def mean_recent_return(self) -> Optional[float]:
        return float(np.mean(self.recent_returns)) if self.recent_returns else None

    def mean_recent_length(self) -> Optional[float]:
        return float(np.mean(self.recent_lengths)) if self.recent_lengths else None

    def to_dict(self) -> Dict:
        state = dataclasses.asdict(self)
        state["recent_returns"] = list(self.recent_returns)
        state["recent_lengths"] = list(self.recent_lengths)
        return state

    @classmethod
    def from_dict(cls, state: Dict) -> LoopState:
        loop = cls(**{f.name: state[f.name] for f in dataclasses.fields(cls) if f.name in state})
        loop.recent_returns = collections.deque(state.get("recent_returns", []), maxlen=10)
        loop.recent_lengths = collections.deque(state.get("recent_lengths", []), maxlen=10)
        return loop


def run_summary(config, loop: LoopState, wall_time: float, learning_time: float, **paths) -> Dict:
    """summary.json of a finished run; `paths`: resumed_from, checkpoint, saved_model_path."""
    from tfsac import __version__

    final = loop.evaluations[-1]
    return {
        "env": config.env_id,
        "seed": config.seed,
        "total_steps": config.total_steps,
        "episodes": loop.episodes,
        "eval_return_mean": final["return_mean"],
        "eval_return_std": final["return_std"],
        "eval_episodes": config.eval_episodes,
        "evaluations": loop.evaluations,
        "wall_time_s": wall_time,
        "env_steps_per_s": config.total_steps / wall_time,
        # From learning_starts on: acting, env steps and updates, evaluations excluded.
        "learning_env_steps_per_s": (
            loop.learning_steps / learning_time if loop.learning_steps else None
        ),
        "resumed_from": paths["resumed_from"],
        "checkpoint": paths["checkpoint"],
        "saved_model_path": paths["saved_model_path"],
        "tfsac_version": __version__,
    }


def _runner_text(extra: Dict[str, Optional[float]]) -> str:
    """' | policy lag 96 | runners 130, 128 steps/s' for env runners' statistics."""
    if not extra:
        return ""
    lag = extra.get("policy_lag")
    rates = [v for k, v in extra.items() if k.startswith("runner")]
    rates_text = ", ".join("-" if v is None else f"{v:.0f}" for v in rates)
    lag_text = "-" if lag is None else f"{lag:.0f}"
    return f" | policy lag {lag_text} | runners {rates_text} steps/s"


class ProgressLog:
    """One record per log interval to progress.csv, TensorBoard, the console and `on_log`;
    TensorBoard scalars of evaluations and the learner."""

    def __init__(
        self,
        run_dir: RunDir,
        metric_names: Sequence[str],
        total_steps: int,
        tensorboard: bool,
        on_log: Optional[Callable[[Dict], None]] = None,
        extra_fields: Sequence[str] = (),
    ):
        import tensorflow as tf  # the writer; run_dir's other services need no TF

        self.run_dir = run_dir
        self.metric_names = tuple(metric_names)
        self.extra_fields = tuple(extra_fields)  # e.g. env runners' statistics
        self.total_steps = total_steps
        self.on_log = on_log
        self._tf = tf
        self.writer = (
            tf.summary.create_file_writer(run_dir.file(TENSORBOARD_DIR)) if tensorboard else None
        )

    def truncate(self, step: int) -> None:
        """Drops progress rows after `step` (those of a session after the checkpoint that a
        resumed run continues from)."""
        path = self.run_dir.file(PROGRESS_FILE)
        if not os.path.exists(path):
            return
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if int(r["step"]) <= step]
        self._write_rows(rows, mode="w")

    def _write_rows(self, rows: List[Dict], mode: str = "a") -> None:
        path = self.run_dir.file(PROGRESS_FILE)
        new_file = mode == "w" or not os.path.exists(path)
        with open(path, mode, newline="") as f:
            writer = csv.DictWriter(
                f,
                (*PROGRESS_FIELDS, *self.metric_names, *self.extra_fields),
                extrasaction="ignore",
            )
            if new_file:
                writer.writeheader()
            writer.writerows(rows)

    def log(
        self,
        loop: LoopState,
        metrics: Optional[Dict],
        steps_per_s: Optional[float],
        lr_factor: float,
        extra: Optional[Dict[str, Optional[float]]] = None,
    ):
        """One progress record; `extra` holds the values of `extra_fields`."""
        extra = extra or {}
        record = {
            "step": loop.step,
            "episodes": loop.episodes,
            "episode_return": loop.mean_recent_return(),
            "episode_length": loop.mean_recent_length(),
            "env_steps_per_s": steps_per_s,
        }
        if metrics is not None:
            record.update({k: float(metrics[k]) for k in self.metric_names})
        record.update(extra)
        self._write_rows([record])
        self.scalars(
            loop.step,
            {
                "train/episode_return": record["episode_return"],
                "train/episode_length": record["episode_length"],
                "train/env_steps_per_s": steps_per_s,
                "learner/learning_rate_factor": lr_factor,
                **{f"learner/{k}": record.get(k) for k in self.metric_names},
                **{f"runners/{k}": v for k, v in extra.items()},
            },
        )
        ret = record["episode_return"]
        logging.info(
            "step %d/%d | episodes %d | return %s | %s%s%s",
            loop.step,
            self.total_steps,
            loop.episodes,
            "-" if ret is None else f"{ret:.1f}",
            "warm-up" if steps_per_s is None else f"{steps_per_s:.0f} steps/s",
            "".join(
                f" | {k} {record[k]:.4g}"
                for k in ("critic_loss", "actor_loss", "alpha", "entropy")
                if k in record
            ),
            _runner_text(extra),
        )
        if self.on_log is not None:
            self.on_log(record)

    def scalars(self, step: int, scalars: Dict[str, Optional[float]]) -> None:
        """TensorBoard scalars at env step `step` (None values are skipped)."""
        if self.writer is None:
            return
        with self.writer.as_default(step=step):
            for name, value in scalars.items():
                if value is not None:
                    self._tf.summary.scalar(name, value)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
