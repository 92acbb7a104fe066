"""The options of what a run writes and where it collects: evaluation, logs, exports,
checkpoints and env runners on Ray."""

from __future__ import annotations

import math
from typing import Optional

from tfsac.config.fields import (
    EPISODES,
    POSITIVE_INT,
    Check,
    at_least,
    auto_option,
    option,
    options,
)
from tfsac.config.options import DIST, OFFLINE, OUTPUT, STOP
from tfsac.paths import PLAIN_NAME, is_plain_name

EXPORT_FORMATS = ("saved_model", "tflite", "onnx")


def _formats_ok(text) -> bool:
    names = [n.strip() for n in str(text).split(",") if n.strip()]
    return bool(names) and all(n in EXPORT_FORMATS for n in names)


@options(OFFLINE)
class OfflineOptions:
    # tfsac/data/offline_data.py
    # Read-only: a checkpoint names it and its checksum, never copies it.
    offline_data: Optional[str] = option(
        None,
        "recorded transitions: a Minari dataset id or path, a tfsac run directory, or a "
        "folder of .npz episodes (default: none)",
    )
    # 0.5 is RLPD's symmetric sampling (arXiv:2302.02948).
    offline_ratio: Optional[float] = option(
        0.5,
        "share of every minibatch drawn from offline_data (exact per batch; 0: online only, "
        "1: recorded only), or 'size': uniform over recorded and online rows together",
        Check(lambda v: v is None or 0.0 <= v <= 1.0, "in [0, 1] or 'size'"),
        text="0.5",
    )
    offline_updates: int = option(
        0,
        "with total_steps=0: gradient steps on offline_data alone (offline SAC, a baseline)",
        at_least(0),
    )
    init_from: Optional[str] = option(
        None,
        "start a new run from another run's networks, targets and learned temperature (to "
        "fine-tune an offline-only run online, say): its run directory (newest checkpoint) "
        "or <run_dir>/checkpoints/ckpt-<step> (default: fresh networks)",
    )


@options(OUTPUT)
class OutputOptions:
    eval_every: int = option(5_000, "env steps between deterministic evaluations", POSITIVE_INT)
    eval_episodes: int = option(10, "episodes per evaluation", EPISODES)
    log_every: int = option(1_000, "env steps between progress lines", POSITIVE_INT)
    video_every: int = option(
        0, "record one episode every N evaluations to <run_dir>/videos (0: never)", at_least(0)
    )
    progress_bar: Optional[bool] = auto_option(
        "progress bar on stderr: auto (in a terminal), true or false"
    )
    tensorboard: bool = option(True, "TensorBoard summaries in <run_dir>/tensorboard")
    run_dir: Optional[str] = option(
        None, "run directory (default runs/<model_name>-seed<seed>-<time>)"
    )
    export_dir: str = option("saved_models", "SavedModels go to <export_dir>/<model_name>/<n>")
    model_name: Optional[str] = option(
        None,
        "model name under export_dir (default from env)",
        Check(is_plain_name, PLAIN_NAME, "{!r}"),
    )
    export: bool = option(
        True,
        "export the policy as a SavedModel at the end (a new version of <export_dir>/"
        "<model_name>, which TF Serving then serves); false for trial runs",
    )
    export_formats: str = option(
        "saved_model",
        "what an export writes into its version folder, a comma list of saved_model (always "
        "written), tflite (policy.tflite) and onnx (policy.onnx)",
        Check(_formats_ok, f"a comma list of {', '.join(EXPORT_FORMATS)}", "{!r}"),
    )

    # Checkpoints under <run_dir>/checkpoints (also at the end and on SIGINT/SIGTERM).
    checkpoint_every: int = option(
        5_000, "env steps between checkpoints (0: end only)", at_least(0)
    )
    keep_checkpoints: int = option(3, "how many recent checkpoints to keep", at_least(1))


@options(STOP)
class StopOptions:
    # The stopping callbacks of tfsac/run/callbacks.py.
    stop_at_return: Optional[float] = option(
        None,
        "stop once an evaluation's mean return reaches this (SB3's "
        "StopTrainingOnRewardThreshold; default: never)",
        Check(math.isfinite, "a finite number"),
    )
    stop_after_no_improvement: int = option(
        0,
        "stop when more than this many evaluations in a row bring no new best return (SB3's "
        "StopTrainingOnNoModelImprovement max_no_improvement_evals; 0: never)",
        at_least(0),
    )
    min_evaluations: int = option(
        0,
        "evaluations before stop_after_no_improvement starts counting (SB3's min_evals)",
        at_least(0),
    )
    keep_best: bool = option(
        False,
        "export the policy at each new best evaluation return as the next version of "
        "<run_dir>/best (SB3's EvalCallback best_model_save_path)",
    )


@options(DIST)
class DistOptions:
    # The updates per env step (train_freq, gradient_steps) hold for any number of runners.
    num_actors: int = option(
        0,
        "env runner processes on Ray feeding this learner (0: envs step in this process)",
        Check(lambda v: isinstance(v, int) and v >= 0, ">= 0 (0: no env runners)"),
    )
    envs_per_actor: int = option(1, "env copies each runner steps together", POSITIVE_INT)
    chunk_steps: int = option(
        64, "env steps per chunk a runner sends (all its env copies' steps count)", POSITIVE_INT
    )
    weight_sync_every: int = option(
        64, "updates between sending the actor's weights to the runners", POSITIVE_INT
    )
    runner_mode: str = option(
        "async",
        "async: runners collect while the learner updates; sync: in lockstep, reproducible",
        choices=("sync", "async"),
    )
    ray_address: Optional[str] = option(
        None, "Ray cluster to join (<host>:<port> or auto; default: a local Ray)"
    )
