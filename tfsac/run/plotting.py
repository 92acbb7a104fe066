"""Learning curves from run directories (progress.csv and the evaluations): each group of runs
(tfsac.run.run_groups) as its mean +- std over env steps or wall-clock minutes."""

from __future__ import annotations

import csv
import json
import math
import os
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfsac.errors import Fault
from tfsac.files import CHECKPOINT_STATE_FILE as STATE_FILE
from tfsac.files import CHECKPOINTS_DIR, SUMMARY_FILE, checkpoint_steps
from tfsac.run.run_groups import (
    X_AXES,
    Y_AXES,
    RunGroup,
    check_curves,
    check_plot,
    differing_fields,
    env_groups,
    settings_table,
)

PANELS = (
    ("eval_return", "evaluation return (deterministic)"),
    ("episode_return", "training return (last 10 episodes)"),
    ("critic_loss", "critic loss"),
    ("actor_loss", "actor loss"),
    ("alpha", "alpha"),
    ("entropy", "policy entropy"),
    ("eval_success_rate", "evaluation success rate"),
    ("value_loss", "value loss (V of sac_v1)"),
)
# The curves of summary.json's evaluations -> the evaluations' key; the others are
# progress.csv's columns.
EVALUATION_KEYS = {"eval_return": "return_mean", "eval_success_rate": "success_rate"}
PROGRESS_CURVES = [name for name, _ in PANELS if name not in EVALUATION_KEYS]
# A group's runs drawn one line each share its colour: these tell them apart.
LINE_STYLES, MARKERS = ("-", "--", ":", "-."), ("o", "s", "^", "v", "D")
TABLE_ROW_INCHES = 0.25


def _json_object(path: str, broken: str) -> Dict:
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError) as e:
        raise Fault(f"{broken}: {e}") from None
    if not isinstance(value, dict):
        raise Fault(f"{broken}: not a JSON object")
    return value


def read_run(run_dir: str) -> Dict:
    """A run's env, seed, config, summary (None while unfinished: its evaluations are then its
    newest checkpoint's), curves {name: (steps, values)} and "minutes" {eval curve: wall-clock
    minutes at its steps}, where every evaluation recorded them; a Fault where a file fails."""
    config_file = os.path.join(run_dir, "config.json")
    config = _json_object(config_file, f"{run_dir!r} is not a tfsac run directory")
    curves = _progress_curves(os.path.join(run_dir, "progress.csv"))
    path = os.path.join(run_dir, SUMMARY_FILE)
    summary = _json_object(path, f"cannot read {path!r}") if os.path.exists(path) else None
    holder = summary
    steps = checkpoint_steps(os.path.join(run_dir, CHECKPOINTS_DIR)) if summary is None else []
    if steps:
        path = os.path.join(run_dir, CHECKPOINTS_DIR, f"ckpt-{steps[0]}.extra", STATE_FILE)
        holder = _json_object(path, f"cannot read {path!r}")
    evaluations = (holder or {}).get("evaluations", [])
    if not isinstance(evaluations, list) or not all(
        isinstance(e, dict) and isinstance(e.get("step"), (int, float)) for e in evaluations
    ):
        raise Fault(f"cannot read {path!r}: its evaluations are not a list of them")
    minutes = {}
    try:
        for name, key in EVALUATION_KEYS.items():
            points = [e for e in evaluations if e.get(key) is not None]
            if points:
                curves[name] = (
                    np.array([int(e["step"]) for e in points]),
                    np.array([e[key] for e in points], float),
                )
                if all(e.get("wall_time_s") is not None for e in points):
                    minutes[name] = np.array([e["wall_time_s"] / 60 for e in points], float)
    except (ValueError, TypeError) as e:
        raise Fault(f"cannot read {path!r}: an evaluation that is not numbers: {e}") from None
    return {
        "env": config.get("env_id", "?"),
        "seed": config.get("seed"),
        "config": config,
        "summary": summary,
        "curves": curves,
        "minutes": minutes,
        "dir": run_dir,
        "finished": summary is not None,
    }


def _progress_curves(progress: str) -> Dict[str, tuple]:
    """The logged curves of progress.csv ({} where a run shorter than log_every has none);
    a last row without its line end (being written, or cut off) is left out."""
    if not os.path.exists(progress):
        return {}
    try:
        with open(progress, newline="") as f:
            text = f.read()
        rows = list(csv.DictReader(text.splitlines(keepends=True)))
        if rows and not text.endswith("\n"):
            rows.pop()
        curves = {}
        for name in PROGRESS_CURVES:
            points = [(int(r["step"]), float(r[name])) for r in rows if r.get(name)]
            if points:
                curves[name] = tuple(np.array(v) for v in zip(*points, strict=True))
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise Fault(f"cannot read {progress!r}: {e}") from None
    return curves


def mean_std(series: List[tuple]):
    common = sorted(set.intersection(*(set(s.tolist()) for s, _ in series)))
    stacked = np.array(
        [[dict(zip(s.tolist(), v, strict=True))[x] for x in common] for s, v in series]
    )
    return np.array(common), stacked.mean(0), stacked.std(0)


def _draw_curves(ax, group: RunGroup, name: str, color: str, x: str = "env_steps") -> bool:
    """Draws curve `name` of one group's runs: their mean +- std (a single point: an error bar)
    where all cover the same steps (returns True), else one line per run (returns False)."""
    runs = [r for r in group.runs if name in r["curves"]]
    series = [r["curves"][name] for r in runs]

    def x_of(run):  # a run's x values at its evaluation steps
        return run["curves"][name][0] if x == "env_steps" else run["minutes"][name]

    if all(np.array_equal(series[0][0], steps) for steps, _ in series):  # or none
        if series:
            steps, mean, std = mean_std(series)
            xs = mean_std([(s, x_of(r)) for r, (s, _) in zip(runs, series, strict=True)])[1]
            label = group.legend(runs)
            if len(steps) == 1:
                ax.errorbar(xs, mean, std, fmt="o", color=color, capsize=4, label=label)
            else:
                ax.plot(xs, mean, color=color, label=label)
                ax.fill_between(xs, mean - std, mean + std, color=color, alpha=0.25)
        return True
    for k, (run, (_, values)) in enumerate(zip(runs, series, strict=True)):
        state = "" if run.get("finished", True) else " (unfinished)"  # reports draw finished runs
        label = f"{group.label} seed {run['seed']}{state}"
        style = dict(linestyle=LINE_STYLES[k % len(LINE_STYLES)], marker=MARKERS[k % len(MARKERS)])
        ax.plot(x_of(run), values, color=color, linewidth=1, markersize=3, label=label, **style)
    return False


def _panels(runs: List[Dict], x: str, y: str) -> List[tuple]:
    """(curve, title) of each panel some run has: with --y one, on the wall-clock axis only
    evaluation curves (only evaluations record their time)."""
    return [
        (name, title)
        for name, title in PANELS
        if any(name in run["curves"] for run in runs)
        and (y == "all" or name == Y_AXES[y])
        and (x == "env_steps" or name in EVALUATION_KEYS)
    ]


def _timed(runs: List[Dict], panels: List[tuple], notes: List[str]) -> List[bool]:
    """For each run, whether its evaluations record their wall-clock time."""
    timed = []
    for run in runs:
        drawn = [name for name, _ in panels if name in run["curves"]]
        timed.append(bool(drawn) and all(name in run["minutes"] for name in drawn))
        if not drawn:
            notes.append(f"{run['dir']}: no evaluations yet, so it is left out")
        elif not timed[-1]:
            notes.append(
                f"{run['dir']}: its evaluations record no wall-clock time (made by a tfsac "
                "before evaluations recorded wall_time_s), so it is left out"
            )
    return timed


def _select(run_dirs, labels, x: str, y: str, notes: List[str]):
    """What a figure draws: the runs, the panels and the groups."""
    runs = [read_run(run_dir) for run_dir in run_dirs]
    panels = _panels(runs, x, y)
    timed = _timed(runs, panels, notes) if x == "wall_clock" else None
    check_curves(y, panels, timed)
    if timed is not None:
        if labels and len(labels) == len(runs):  # one per run: those of the runs kept
            labels = [label for label, keep in zip(labels, timed, strict=True) if keep]
        runs = [run for run, keep in zip(runs, timed, strict=True) if keep]
    rows = env_groups(runs, labels)
    for _, groups in rows:
        for group in groups:  # a copy of a run: its "seeds" are one
            seeds = [run["seed"] for run in group.runs]
            for seed in sorted({s for s in seeds if seeds.count(s) > 1}, key=str):
                notes.append(f"{group.label}: seed {seed} is in {seeds.count(seed)} of its runs")
            differ = differing_fields([run["config"] for run in group.runs]) if labels else []
            if differ:
                notes.append(f"{group.label}: its runs differ in {', '.join(differ)}")
    for run in runs:  # said for every panel's run, not in some legends only
        if not run["finished"] and any(name in run["curves"] for name, _ in panels):
            notes.append(f"{run['dir']}: unfinished (no summary.json), drawn as it stands")
        if not any(name in run["curves"] for name in PROGRESS_CURVES):  # an empty panel
            notes.append(f"{run['dir']}: no progress rows (progress.csv missing, empty or unread)")
    return runs, panels, rows


def _draw_panels(cells, panels, groups: List[RunGroup], x: str, notes, env: str) -> None:
    """One env's panels on the axes `cells`, a legend on the first with curves."""
    from matplotlib.ticker import MaxNLocator

    unlike = defaultdict(list)  # a group's index -> panels whose runs cover different steps
    for ax, (name, label) in zip(cells, panels, strict=False):
        for index, group in enumerate(groups):
            if not _draw_curves(ax, group, name, f"C{index % 10}", x):
                unlike[index].append(label)
        ax.set_title(f"{env}: {label}" if env else label)
        ax.set_xlabel(X_AXES[x])
        ax.set_ylabel(label)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # labels of minutes run together
        ax.grid(alpha=0.3)
    for ax in cells[len(panels) :]:  # and the panels that none of this env's runs has
        ax.set_visible(False)
    # The first panel with curves (runs without evaluations yet have none in the first).
    legend_ax = next((a for a in cells if a.get_legend_handles_labels()[0]), None)
    if legend_ax is not None:
        legend_ax.legend(fontsize="small", framealpha=0.6)  # the curves show through
    for index, labels in unlike.items():
        runs = groups[index].runs
        ends = sorted({int(r["curves"][n][0][-1]) for r in runs for n in r["curves"]})
        notes.append(
            f"{groups[index].label}: the runs cover different env steps (ending at "
            f"{', '.join(map(str, ends))}), so {', '.join(labels)} show one line per "
            "run, not a mean +- std"
        )


def figure(plt, env_rows: Sequence[Tuple[str, List[RunGroup]]], widths: Sequence[int]):
    """(the figure, its panels' axes [row, column]), the settings table beneath."""
    width = max(widths)
    if len(env_rows) == 1:  # its panels in one or two rows
        rows = 1 if width <= 2 else 2
        columns = math.ceil(width / rows)
    else:  # a row of panels per env
        rows, columns = len(env_rows), width
    # Labels name the fewest settings that tell the groups apart; the table, every one.
    table = settings_table(env_rows)
    heights = [4] * rows
    if table is not None:
        heights.append(TABLE_ROW_INCHES * (len(table[0]) + 1) + 0.4)
    fig = plt.figure(figsize=(5 * columns, sum(heights)))
    grid = fig.add_gridspec(len(heights), columns, height_ratios=heights)
    axes = np.array([[fig.add_subplot(grid[r, c]) for c in range(columns)] for r in range(rows)])
    if table is None:
        return fig, axes
    names, groups = table  # each group's heading in its curves' colour
    ax = fig.add_subplot(grid[rows, :])
    ax.axis("off")
    cells = [[values[row] for _, _, values in groups] for row in range(len(names))]
    heads = [head for head, _, _ in groups]
    drawn = ax.table(cells, rowLabels=names, colLabels=heads, loc="center", cellLoc="left")
    drawn.auto_set_font_size(False)
    drawn.set_fontsize(9)
    drawn.auto_set_column_width(list(range(len(groups))))
    for column, (_, index, _) in enumerate(groups):
        drawn[0, column].get_text().set_color(f"C{index % 10}")
    return fig, axes


def plot_runs(
    run_dirs: Sequence[str],
    out_path: str,
    title: str = "",
    notes: Optional[List[str]] = None,
    labels: Optional[Sequence[str]] = None,
    x: str = "env_steps",
    y: str = "all",
) -> str:
    """Writes an image of one panel per curve, one colour per group of runs (`labels`: one per
    group or per run), each its mean +- std (or, said in `notes`, one line per run). `x`:
    "env_steps" or "wall_clock" (evaluation curves only); `y`: "all", "return" or "success_rate"."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    notes = notes if notes is not None else []
    out_path = check_plot(run_dirs, out_path, x, y)
    runs, panels, env_rows = _select(run_dirs, labels, x, y, notes)
    drawn = [  # none is drawn empty
        [p for p in panels if any(p[0] in r["curves"] for g in groups for r in g.runs)]
        for _, groups in env_rows
    ]
    fig, axes = figure(plt, env_rows, [len(d) for d in drawn])
    for row, (env, groups) in enumerate(env_rows):
        cells = list(axes.flat) if len(env_rows) == 1 else list(axes[row])
        _draw_panels(cells, drawn[row], groups, x, notes, env if len(env_rows) > 1 else "")
    fig.suptitle(title or ", ".join(sorted({r["env"] for r in runs})))
    fig.tight_layout()
    try:
        fig.savefig(out_path, dpi=100)
    except OSError as e:
        raise Fault(f"cannot write {out_path!r}: {e}") from None
    finally:
        plt.close(fig)
    return out_path
