"""Learning curves from run directories (progress.csv and summary/checkpoint evaluations)."""

from __future__ import annotations

import csv
import json
import os
from collections import defaultdict
from typing import Dict, List, Optional, Sequence

import numpy as np

from tfsac.errors import TfsacError

PANELS = (
    ("eval_return", "evaluation return (deterministic)"),
    ("episode_return", "training return (last 10 episodes)"),
    ("critic_loss", "critic loss"),
    ("actor_loss", "actor loss"),
    ("alpha", "alpha"),
    ("entropy", "policy entropy"),
)
# Drawn after the others where a run's evaluations report it (goal envs).
SUCCESS_PANEL = ("eval_success", "evaluation success rate")


def legend_label(env: str, seeds: int) -> str:
    return f"{env} ({seeds} seed{'s' if seeds != 1 else ''})"


def read_run(run_dir: str) -> Dict:
    """A run's env, seed and curves: {name: (steps, values)}."""
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise TfsacError(f"{run_dir!r} is not a tfsac run directory: {e}") from None
    progress = os.path.join(run_dir, "progress.csv")
    rows = []
    if os.path.exists(progress):  # a run shorter than log_every has none
        try:
            with open(progress, newline="") as f:
                rows = list(csv.DictReader(f))
        except (OSError, ValueError) as e:
            raise TfsacError(f"cannot read {progress!r}: {e}") from None
    curves = {}
    for name in ("episode_return", "critic_loss", "actor_loss", "alpha", "entropy"):
        points = [(int(r["step"]), float(r[name])) for r in rows if r.get(name)]
        if points:
            curves[name] = tuple(np.array(v) for v in zip(*points, strict=True))
    evaluations = []
    summary = os.path.join(run_dir, "summary.json")
    if os.path.exists(summary):
        try:
            with open(summary) as f:
                evaluations = json.load(f).get("evaluations", [])
        except (OSError, ValueError, AttributeError) as e:
            raise TfsacError(f"cannot read {summary!r}: {e}") from None
    if evaluations:
        curves["eval_return"] = (
            np.array([e["step"] for e in evaluations]),
            np.array([e["return_mean"] for e in evaluations]),
        )
        rated = [e for e in evaluations if "success_rate" in e]
        if rated:
            curves["eval_success"] = (
                np.array([e["step"] for e in rated]),
                np.array([e["success_rate"] for e in rated]),
            )
    return {"env": config.get("env_id", "?"), "seed": config.get("seed"), "curves": curves}


def mean_std(series: List[tuple]):
    """Mean and std across runs on the steps all of them share."""
    common = sorted(set.intersection(*(set(s.tolist()) for s, _ in series)))
    stacked = np.array(
        [[dict(zip(s.tolist(), v, strict=True))[x] for x in common] for s, v in series]
    )
    return np.array(common), stacked.mean(0), stacked.std(0)


def _draw_curves(ax, env: str, runs: List[Dict], name: str) -> bool:
    """Draws curve `name` of one env's runs: their mean +- std where all cover the same
    steps (returns True), else one line per run over its own steps (returns False)."""
    series = [r["curves"][name] for r in runs]
    if all(np.array_equal(series[0][0], steps) for steps, _ in series):  # or none
        if series:
            steps, mean, std = mean_std(series)
            ax.plot(steps, mean, label=legend_label(env, len(series)))
            ax.fill_between(steps, mean - std, mean + std, alpha=0.25)
        return True
    for run, (steps, values) in zip(runs, series, strict=True):
        ax.plot(steps, values, "o-", linewidth=1, markersize=3, label=f"{env} seed {run['seed']}")
    return False


def plot_runs(
    run_dirs: Sequence[str], out_path: str, title: str = "", notes: Optional[List[str]] = None
) -> str:
    """Writes a PNG with one panel per curve; runs of the same env are averaged (mean +-
    std across seeds) where they cover the same env steps, and drawn one line per run,
    each over its own steps, where they do not (each such env is then said in `notes`);
    different envs get their own lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not run_dirs:
        raise TfsacError("no run directories to plot")
    if not os.path.splitext(out_path)[1]:
        out_path += ".png"  # what matplotlib writes for a name without an extension
    groups = defaultdict(list)
    for run_dir in run_dirs:
        run = read_run(run_dir)
        groups[run["env"]].append(run)
    panels = PANELS
    if any("eval_success" in r["curves"] for runs in groups.values() for r in runs):
        panels = (PANELS[0], SUCCESS_PANEL, *PANELS[1:])
    columns = (len(panels) + 1) // 2
    fig, axes = plt.subplots(2, columns, figsize=(5 * columns, 8))
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    extension = os.path.splitext(out_path)[1][1:].lower()
    if extension not in fig.canvas.get_supported_filetypes():
        plt.close(fig)
        raise TfsacError(
            f"cannot write {out_path!r}: unsupported image format {extension!r} "
            f"(supported: {', '.join(sorted(fig.canvas.get_supported_filetypes()))})"
        )
    unlike = defaultdict(list)  # env -> panels whose runs cover different steps
    for ax, (name, label) in zip(axes.flat, panels, strict=False):
        for env, runs in groups.items():
            if not _draw_curves(ax, env, [r for r in runs if name in r["curves"]], name):
                unlike[env].append(label)
        ax.set_title(label)
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
    if axes.flat[0].get_legend_handles_labels()[0]:  # runs without evaluations have none
        axes.flat[0].legend()
    for env, labels in unlike.items():
        ends = sorted({int(r["curves"][n][0][-1]) for r in groups[env] for n in r["curves"]})
        (notes if notes is not None else []).append(
            f"{env}: the runs cover different env steps (ending at "
            f"{', '.join(map(str, ends))}), so {', '.join(labels)} show one line per run, "
            "not a mean +- std"
        )
    fig.suptitle(title or ", ".join(sorted(groups)))
    fig.tight_layout()
    try:
        fig.savefig(out_path, dpi=100)
    except OSError as e:
        raise TfsacError(f"cannot write {out_path!r}: {e}") from None
    finally:
        plt.close(fig)
    return out_path
