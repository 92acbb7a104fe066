"""The function each sweep trial runs in its Ray worker process: one ordinary tfsac run,
reporting its evaluations to Tune. TensorFlow and Ray are imported only when it runs."""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
from typing import Any, Dict, List, Optional

from tfsac.config import SACConfig
from tfsac.errors import TfsacError, first_line
from tfsac.files import read_json, write_atomic
from tfsac.logs import OwnInfoOnly
from tfsac.run.run_lock import check_run_dir_free
from tfsac.scale.sweeps.state import TRIAL_FILE


def _thread_names() -> Dict[str, int]:
    """This process's threads by name (Linux): TF's inter-op pool is tf_Compute, XLA's
    intra-op pool tf_XLAEigen; a trial records them to show its thread limits held."""
    counts: Dict[str, int] = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            counts[name] = counts.get(name, 0) + 1
    except OSError:
        pass
    return counts


def _cpu_seconds() -> Optional[float]:
    """CPU time of this process so far (imports included), where the OS tells it."""
    try:
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
    except ImportError:
        return None
    return usage.ru_utime + usage.ru_stime


def _metrics(evaluations: List[Dict], finished: bool) -> Dict[str, Any]:
    returns = [e["return_mean"] for e in evaluations]
    return {
        "eval_return": returns[-1],
        "best_eval_return": max(returns),
        "env_steps": evaluations[-1]["step"],
        "finished": finished,
    }


class TrialRecord:
    """The trial's own record in its run directory (TRIAL_FILE): its attempts (a retry is
    another), the evaluations it reported, and an error or its threads and CPU time."""

    def __init__(self, run_dir: str, name: str):
        self.path = os.path.join(run_dir, TRIAL_FILE)
        self.data = read_json(self.path, None) or {"name": name, "evaluations": []}
        self.data.setdefault("attempts", []).append(
            {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        )
        self.save()

    def save(self) -> None:
        write_atomic(self.path, json.dumps(self.data, indent=2))

    def evaluated(self, evaluation: Dict) -> List[Dict]:
        """Records an evaluation; returns the evaluations so far. A retry resumes from a
        checkpoint that may predate evaluations already recorded: those are replaced."""
        kept = [e for e in self.data["evaluations"] if e["step"] < evaluation["step"]]
        self.data["evaluations"] = [*kept, evaluation]
        self.save()
        return self.data["evaluations"]

    def failed(self, error: str) -> None:
        self.data["error"] = error
        self.save()

    def finished(self, evaluations: List[Dict]) -> None:
        self.data["evaluations"] = evaluations
        self.data["attempts"][-1].update(threads_by_name=_thread_names(), cpu_s=_cpu_seconds())
        self.save()


def _set_up_worker(threads: int, run_dir: str) -> None:
    """TF's thread pools (before its first op in this worker process, which fixes their
    sizes), and the run's train.log with tfsac's own lines."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # in the trial's worker only
    from absl import logging as absl_logging

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    os.makedirs(run_dir, exist_ok=True)
    handler = logging.FileHandler(os.path.join(run_dir, "train.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.addFilter(OwnInfoOnly())  # TF's and other libraries' INFO chatter stays out
    absl_logging.get_absl_logger().addHandler(handler)
    absl_logging.set_verbosity(absl_logging.INFO)


def run_trial(tune_config: Dict) -> None:
    """The Tune trainable: one tfsac run, resumed from its own checkpoint when there is one
    (a retry), reporting each evaluation to Tune (which may stop it there)."""
    spec = tune_config["trial"]
    config = SACConfig.from_dict(spec["config"])
    check_run_dir_free(config.run_dir)  # before its log and record: another run's files
    _set_up_worker(spec["threads"], config.run_dir)
    from ray import tune

    from tfsac.run.trainer import train  # TensorFlow: in the trial's worker only

    record = TrialRecord(config.run_dir, spec["name"])

    def on_evaluation(evaluation: Dict) -> None:
        if evaluation["step"] < config.total_steps:  # the last: with the summary, below
            tune.report(_metrics(record.evaluated(evaluation), finished=False))

    try:
        result = train(config, resume=True, on_evaluation=on_evaluation)
    except TfsacError as e:
        # A bad env, NaN losses, an unwritable disk: a retry would fail the same way.
        record.failed(first_line(e))
        failed = {"eval_return": math.nan, "best_eval_return": math.nan, "env_steps": 0}
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
