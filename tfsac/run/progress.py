"""The progress log: a record per log interval to progress.csv, TensorBoard and the console,
and the clocks that time it (a stopwatch that leaves pauses out, the learning speed)."""

from __future__ import annotations

import contextlib
import csv
import glob
import io
import os
import time
from typing import Callable, Dict, List, Optional, Sequence

import tensorflow as tf
from absl import logging

from tfsac.algorithm.sac import SAC
from tfsac.errors import Fault
from tfsac.files import (
    PROGRESS_FIELDS,
    PROGRESS_FILE,
    TENSORBOARD_DIR,
    RunDir,
    new_file,
    open_in_place,
)
from tfsac.run.loop_state import LoopState


def _runner_text(extra: Dict[str, Optional[float]]) -> str:
    """' | policy lag 96 | runners 130, 128 steps/s' for env runners' statistics."""
    if not extra:
        return ""
    lag, most = extra.get("policy_lag"), extra.get("policy_lag_max")
    rates = [v for k, v in extra.items() if k.startswith("runner")]
    rates_text = ", ".join("-" if v is None else f"{v:.0f}" for v in rates)
    lag_text = "-" if lag is None else f"{lag:.0f}" + ("" if most is None else f" (max {most:.0f})")
    return f" | policy lag {lag_text} | runners {rates_text} steps/s"


_SHOWN = ("critic_loss", "actor_loss", "alpha", "entropy")  # SAC's, on the progress line


def _drop_events_after(folder: str, step: int) -> None:
    """Rewrites the event files in `folder` without their summaries after `step` (a killed
    session's); a file that cannot be rewritten is said, not fatal."""
    for path in sorted(glob.glob(os.path.join(glob.escape(folder), "events.out.tfevents.*"))):
        records, cut = [], False
        try:
            for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
                records.append(record)
        except tf.errors.OpError:  # DataLossError: the record the kill cut short
            cut = True
        kept = [r for r in records if _kept(tf.compat.v1.Event.FromString(r), step)]
        if len(kept) == len(records) and not cut:
            continue
        # Not named *tfevents*: TensorBoard would read a leftover as another event file.
        tmp = os.path.join(folder, ".rewrite.tmp")
        try:
            new_file(tmp).close()  # its own file, not a link's target
            with tf.io.TFRecordWriter(tmp) as writer:
                for record in kept:
                    writer.write(record)
            os.replace(tmp, path)
        except (OSError, tf.errors.OpError) as e:
            logging.warning(
                "cannot drop TensorBoard scalars after step %d from %s: %s", step, path, e
            )
        else:
            logging.info(
                "%s: %d summary events after step %d dropped", path, len(records) - len(kept), step
            )
        finally:
            if os.path.lexists(tmp):
                os.remove(tmp)


def _kept(event, step: int) -> bool:
    return not event.HasField("summary") or event.step <= step


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
        self.run_dir = run_dir
        self.metric_names = tuple(metric_names)
        # The line's losses: SAC's, a variant's own after the critics' (v1's value_loss);
        # SAC's others (alpha_loss, q_mean) go to the files only.
        own = [n for n in self.metric_names if n not in SAC.metric_names]
        self._shown = (_SHOWN[0], *own, *_SHOWN[1:])
        self.extra_fields = tuple(extra_fields)  # e.g. env runners' statistics
        self.total_steps = total_steps
        self.on_log = on_log
        self.writer = (
            tf.summary.create_file_writer(run_dir.file(TENSORBOARD_DIR)) if tensorboard else None
        )

    def truncate(self, step: int, events: bool = True) -> None:
        """Drops progress rows and, with `events`, TensorBoard scalars after `step`."""
        if events:
            if self.writer is not None:
                self.writer.flush()  # its own file whole: read, it is left as it is
            _drop_events_after(self.run_dir.file(TENSORBOARD_DIR), step)
        path = self.run_dir.file(PROGRESS_FILE)
        if not os.path.exists(path):
            return
        try:
            with open(path, newline="") as f:
                text = f.read()
            reader = csv.DictReader(io.StringIO(text))
            rows = list(reader)
            if rows and "step" not in reader.fieldnames:
                raise ValueError(f"no step column in {reader.fieldnames}")
            # A row cut short (a file truncated by hand or a full disk) lacks fields.
            # A last row cut in its last field looks whole: the file ends without a newline.
            whole = rows if text.endswith("\n") else rows[:-1]
            complete = [r for r in whole if None not in r and None not in r.values()]
            kept = [r for r in complete if int(r["step"]) <= step]
        except (OSError, UnicodeDecodeError, csv.Error, ValueError) as e:
            raise Fault(
                f"cannot read {path}: {e}; move it away to continue the run without its "
                "earlier rows"
            ) from None
        if len(complete) < len(rows):
            logging.warning("%s: %d incomplete rows dropped", path, len(rows) - len(complete))
        self._write_rows(kept, mode="w")

    def _write_rows(self, rows: List[Dict], mode: str = "a") -> None:
        path = self.run_dir.file(PROGRESS_FILE)
        header = mode == "w" or not os.path.exists(path)
        with open_in_place(path, mode) as f:
            writer = csv.DictWriter(
                f,
                (*PROGRESS_FIELDS, *self.metric_names, *self.extra_fields),
                extrasaction="ignore",
            )
            if header:
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
        # No steps timed since the last line: the warm-up, unless updates ran (a stop's line).
        speed = "warm-up" if metrics is None else "- steps/s"
        logging.info(
            "step %d/%d | episodes %d | return %s | %s%s%s",
            loop.step,
            self.total_steps,
            loop.episodes,
            "-" if ret is None else f"{ret:.1f}",
            speed if steps_per_s is None else f"{steps_per_s:.0f} steps/s",
            "".join(f" | {k} {record[k]:.4g}" for k in self._shown if k in record),
            _runner_text(extra),
        )
        if self.on_log is not None:
            self.on_log(record)

    def offline_updates(self, count: int, total: int, metrics: Dict) -> None:
        """Offline-only training's line and TensorBoard curves after `count` updates."""
        text = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())
        logging.info("offline update %d of %d: %s", count, total, text)
        self.scalars(count, {f"learner/{k}": metrics[k] for k in self.metric_names})

    def scalars(self, step: int, scalars: Dict[str, Optional[float]]) -> None:
        if self.writer is None:
            return
        with self.writer.as_default(step=step):
            for name, value in scalars.items():
                if value is not None:
                    tf.summary.scalar(name, value)

    def evaluation(self, evaluation: Dict) -> None:
        names = ("return_mean", "return_std", "success_rate")
        scalars = {f"eval/{k}": evaluation[k] for k in names if k in evaluation}
        self.scalars(evaluation["step"], scalars)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


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
