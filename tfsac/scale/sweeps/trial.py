"""A sweep's state files (sweep.json, trials.json, each run's trial.json), a trial's spec made
on the driver (`TrialFactory`), and `run_trial`: one tfsac run in a Ray worker, told to Tune."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import logging
import logging.handlers
import math
import os
import re
import socket
import time
from typing import Any, Callable, Dict, List, Optional

from tfsac.algorithm.resolve import mark_resolved
from tfsac.config import SACConfig
from tfsac.errors import TfsacError, first_line
from tfsac.files import check_plain_name, read_json, write_json
from tfsac.logs import OwnInfoOnly

SWEEP_FILE = "sweep.json"  # what the sweep is: a --resume must ask for the same
TRIALS_FILE = "trials.json"  # each trial's spec and status, as the driver saw them
TRIAL_FILE = "trial.json"  # in a run directory: the trial's attempts and evaluations
DONE = ("finished", "stopped")  # not run again by --resume
TAG_LENGTH = 100


class SweepState:
    """trials.json: every trial's spec, status and outcome, rewritten on each change."""

    def __init__(self, sweep_dir: str):
        self.path = os.path.join(sweep_dir, TRIALS_FILE)
        self.trials: Dict[str, Dict] = read_json(self.path, {})

    def update(self, name: str, **fields) -> None:
        self.trials.setdefault(name, {}).update(fields)
        write_json(self.path, self.trials)

    def done(self, spec: Dict) -> bool:
        status = self.trials.get(spec["name"], {}).get("status")
        return status in DONE or bool(finished_run(spec["run_dir"]))


def finished_run(run_dir: str) -> Optional[Dict]:
    """The summary.json of a run trained to its total_steps, else None."""
    summary = read_json(os.path.join(run_dir, "summary.json"), None) or {}
    config = read_json(os.path.join(run_dir, "config.json"), None) or {}
    done = bool(summary) and summary.get("total_steps") == config.get("total_steps")
    return summary if done else None


def config_tag(overrides: Dict[str, str]) -> str:
    """A folder name for a config: 'learning_rate=0.001_batch_size=512' ('base' for none)."""
    if not overrides:
        return "base"
    text = "_".join(f"{k}={v}" for k, v in overrides.items())
    tag = re.sub(r"[^A-Za-z0-9._=+-]+", "-", text).strip("-").replace("=-", "=")
    if len(tag) > TAG_LENGTH:
        digest = hashlib.sha1(text.encode()).hexdigest()[:8]
        tag = f"{tag[: TAG_LENGTH - 9]}-{digest}"
    return tag


@dataclasses.dataclass
class TrialFactory:
    """Trial specs, JSON-able dicts that Tune passes to `run_trial`."""

    configs: Callable[[Dict[str, str]], SACConfig]
    sweep_dir: str
    threads: int

    def __call__(self, tag: str, overrides: Dict[str, str], seed: int, **extra) -> Dict:
        run_dir = os.path.join(
            self.sweep_dir, check_plain_name("a sweep run name", tag), f"seed{seed}"
        )
        per_trial = {
            "seed": str(seed),
            "run_dir": run_dir,
            "export_dir": os.path.join(run_dir, "saved_models"),
            "progress_bar": "false",
        }
        config = self.configs({**overrides, **per_trial})
        paths = {}  # the paths it reads made absolute: trials run in Tune's folders
        if config.init_from:
            paths["init_from"] = os.path.abspath(config.init_from)
        if config.offline_data and os.path.exists(config.offline_data):
            paths["offline_data"] = os.path.abspath(config.offline_data)
        return {
            "name": f"{tag}/seed{seed}",
            "tag": tag,
            "seed": seed,
            "overrides": dict(overrides),
            "run_dir": run_dir,
            "threads": self.threads,
            "config": dataclasses.replace(config, **paths).to_dict(),
            **extra,
        }


def _usage() -> Dict[str, Any]:
    """This process's threads by name (Linux: they show the thread limits held) and its CPU
    seconds so far (imports included), where the OS tells them."""
    threads: collections.Counter = collections.Counter()
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as f:
                threads[f.read().strip()] += 1
    try:
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
    except ImportError:
        return {"threads_by_name": dict(threads), "cpu_s": None}
    return {"threads_by_name": dict(threads), "cpu_s": usage.ru_utime + usage.ru_stime}


def _metrics(evaluations: List[Dict], finished: bool) -> Dict[str, Any]:
    returns = [e["return_mean"] for e in evaluations]
    return {
        "eval_return": returns[-1],
        "best_eval_return": max(returns),
        "env_steps": evaluations[-1]["step"],
        "finished": finished,
    }


class TrialRecord:
    """The trial's record in its run directory: attempts, evaluations, an error or its usage."""

    def __init__(self, run_dir: str, name: str):
        self.path = os.path.join(run_dir, TRIAL_FILE)
        self.data = read_json(self.path, None) or {"name": name, "evaluations": []}
        self.data.setdefault("attempts", []).append(
            {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        )
        self.save()

    def save(self, **fields) -> None:
        self.data.update(fields)
        write_json(self.path, self.data)

    def evaluated(self, evaluation: Dict) -> List[Dict]:
        """Records an evaluation (a retry's replace those after its checkpoint); returns all."""
        kept = [e for e in self.data["evaluations"] if e["step"] < evaluation["step"]]
        self.save(evaluations=[*kept, evaluation])
        return self.data["evaluations"]

    def finished(self, evaluations: List[Dict]) -> None:
        self.data["attempts"][-1].update(_usage())
        self.save(evaluations=evaluations)


def _log_to_file(run_dir: str, early: logging.handlers.MemoryHandler) -> None:
    """The run's train.log with tfsac's own lines, beginning with those `early` held."""
    from absl import logging as absl_logging

    os.makedirs(run_dir, exist_ok=True)
    handler = logging.FileHandler(os.path.join(run_dir, "train.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.addFilter(OwnInfoOnly())  # TF's and other libraries' INFO chatter stays out
    logger = absl_logging.get_absl_logger()
    logger.removeHandler(early)
    early.setTarget(handler)
    early.close()  # flushes into train.log
    logger.addHandler(handler)


def run_trial(tune_config: Dict) -> None:
    """The Tune trainable: one tfsac run, resumed on a retry, reporting each evaluation to Tune."""
    spec = tune_config["trial"]
    config = mark_resolved(SACConfig.from_dict(spec["config"]))  # resolved, checked on the driver
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # in the trial's worker only

    # TF's thread pools, before its first op in this worker process (which fixes them).
    tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(spec["threads"])
    from absl import logging as absl_logging
    from ray import tune

    from tfsac.run.preflight import check_run
    from tfsac.run.trainer import train

    # Checked before the trial writes its log and record, its lines held for train.log.
    early = logging.handlers.MemoryHandler(10_000, flushLevel=logging.CRITICAL + 1)
    absl_logging.get_absl_logger().addHandler(early)
    absl_logging.set_verbosity(absl_logging.INFO)
    failed = {"eval_return": math.nan, "best_eval_return": math.nan, "env_steps": 0}
    try:
        checked = check_run(config, resume=True)
    except TfsacError as e:
        tune.report({**failed, "error": first_line(e)})
        return
    _log_to_file(config.run_dir, early)
    record = TrialRecord(config.run_dir, spec["name"])

    def on_evaluation(evaluation: Dict) -> None:
        if evaluation["step"] < config.total_steps:  # the last: with the summary, below
            tune.report(_metrics(record.evaluated(evaluation), finished=False))

    try:
        result = train(checked, on_evaluation=on_evaluation)
    except TfsacError as e:
        # A bad env, NaN losses, an unwritable disk: a retry would fail the same way.
        record.save(error=first_line(e))
        tune.report({**failed, "error": record.data["error"]})
        return
    summary = result.summary
    record.finished(summary["evaluations"])
    tune.report(
        {
            **_metrics(summary["evaluations"], finished=True),
            "wall_time_s": summary["wall_time_s"],
            "env_steps_per_s": summary["env_steps_per_s"],
        }
    )
