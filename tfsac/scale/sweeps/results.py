"""A sweep's results: one row per config (mean +- std over its done seeds), written as
results.csv, results.md and learning-curve PNGs."""

from __future__ import annotations

import csv
import io
import math
import os
import statistics
from typing import Dict, Iterable, List, Optional

from tfsac.files import CHECKPOINTS_DIR, checkpoint_steps, new_file, read_json, write_atomic
from tfsac.run.plotting import plot_runs, read_run
from tfsac.scale.sweeps.trial import DONE, TRIAL_FILE, finished_run


def trial_outcome(entry: Dict) -> Dict:
    """A trial's final evaluation return, success rate, env steps and wall time."""
    run_dir = entry["spec"]["run_dir"]
    summary = finished_run(run_dir)
    if summary is not None:
        status, evaluations = "finished", summary["evaluations"]
        wall_time = summary["wall_time_s"]
    else:
        record = read_json(os.path.join(run_dir, TRIAL_FILE), None) or {}
        status, evaluations = entry.get("status", "pending"), record.get("evaluations") or []
        wall_time = entry.get("wall_time_s")
    returns = [e["return_mean"] for e in evaluations]
    steps = evaluations[-1]["step"] if evaluations else 0
    if status not in DONE:  # where a --resume continues it: its newest checkpoint
        steps = max([steps, *checkpoint_steps(os.path.join(run_dir, CHECKPOINTS_DIR))])
    return {
        "status": status,
        "return": returns[-1] if returns else None,
        "success_rate": evaluations[-1].get("success_rate") if evaluations else None,
        "best": max(returns) if returns else None,
        "steps": steps,
        "wall_time_s": wall_time,
    }


def _fmt(value: Optional[float], digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def summarize(trials: Dict[str, Dict]) -> List[Dict]:
    """One row per config: mean +- std over its done trials' final returns, and more. A trial
    not done counts in the status column only, so means never mix in partial runs."""
    groups: Dict[str, List[Dict]] = {}
    for entry in trials.values():
        groups.setdefault(entry["spec"]["tag"], []).append(entry)
    rows = []
    for tag, entries in groups.items():
        outcomes = [(trial_outcome(e), e["spec"]) for e in entries]
        done = [(o, s) for o, s in outcomes if o["status"] in DONE and o["return"] is not None]
        returns = [o["return"] for o, _ in done]
        walls = [o["wall_time_s"] for o, _ in done if o["wall_time_s"] is not None]
        rates = [o["success_rate"] for o, _ in done if o["success_rate"] is not None]
        best = max(done, key=lambda x: x[0]["return"])[1]["run_dir"] if done else ""
        rows.append(
            {
                "config": tag,
                "overrides": " ".join(
                    f"--{k}={v}" for k, v in entries[0]["spec"]["overrides"].items()
                ),
                "seeds": " ".join(str(s["seed"]) for _, s in outcomes),
                "status": _status(o for o, _ in outcomes),
                "return_mean": sum(returns) / len(returns) if returns else None,
                "return_std": statistics.pstdev(returns) if len(returns) > 1 else None,
                "success_rate": sum(rates) / len(rates) if rates else None,
                # statistics.mean of ints: an int where the mean is whole
                "env_steps": statistics.mean(o["steps"] for o, _ in done) if done else None,
                "wall_time_s": sum(walls) / len(walls) if walls else None,
                "best_run_dir": best,
            }
        )
    return rows


def _status(outcomes: Iterable[Dict]) -> str:
    """'2 finished, 1 pending (at 60000 env steps)': counts by status; for trials not done,
    the env steps of their newest checkpoint or evaluation."""
    by_status: Dict[str, List[int]] = {}
    for o in outcomes:
        by_status.setdefault(o["status"], []).append(o["steps"])
    parts = []
    for status, steps in sorted(by_status.items()):
        part = f"{len(steps)} {status}"
        if status not in DONE and any(steps):
            part += f" (at {', '.join(str(s) for s in steps)} env steps)"
        parts.append(part)
    return ", ".join(parts)


COMPARISON_FILE = "comparison.png"  # every config's curves in one figure


def _plot(run_dirs: List[str], path: str, title: str, labels=None) -> str:
    """plot_runs to `path`, atomically."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{os.path.splitext(name)[0]}.tmp.png")
    new_file(tmp, "wb").close()  # a link planted there is removed, not followed
    os.replace(plot_runs(run_dirs, tmp, title=title, labels=labels), path)
    return path


def write_results(sweep_dir: str, trials: Dict[str, Dict]) -> List[str]:
    """results.csv and results.md, best final return first, a learning-curve PNG per config,
    and comparison.png where two or more have runs; returns their paths."""
    rows = summarize(trials)
    rows.sort(
        key=lambda r: -math.inf if r["return_mean"] is None else r["return_mean"], reverse=True
    )
    files, runs, labels = [], [], []
    for row in rows:
        run_dirs = [  # the config's trials with something to plot
            e["spec"]["run_dir"]
            for e in trials.values()
            if e["spec"]["tag"] == row["config"]
            and os.path.exists(os.path.join(e["spec"]["run_dir"], "config.json"))
            and read_run(e["spec"]["run_dir"])["curves"]
        ]
        row["curves"] = ""
        if run_dirs:
            path = os.path.join(sweep_dir, row["config"], "learning_curves.png")
            files.append(_plot(run_dirs, path, row["config"]))
            row["curves"] = os.path.relpath(path, sweep_dir)
            runs += run_dirs
            labels += [row["overrides"] or "base"] * len(run_dirs)
    comparison = None
    if len(set(labels)) > 1:
        path = os.path.join(sweep_dir, COMPARISON_FILE)
        comparison = _plot(runs, path, f"{os.path.basename(sweep_dir)}: configs", labels)
        files.append(comparison)
    out = io.StringIO()
    writer = csv.DictWriter(out, RESULT_FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    csv_path = os.path.join(sweep_dir, "results.csv")
    write_atomic(csv_path, out.getvalue())
    md_path = os.path.join(sweep_dir, "results.md")
    write_atomic(md_path, _markdown(rows, sweep_dir, comparison))
    return [csv_path, md_path, *files]


RESULT_FIELDS = [
    "config",
    "overrides",
    "seeds",
    "status",
    "return_mean",
    "return_std",
    "success_rate",
    "env_steps",
    "wall_time_s",
    "best_run_dir",
    "curves",
]


def _markdown(rows: List[Dict], sweep_dir: str, comparison: Optional[str]) -> str:
    """results.md's table; paths relative to the sweep directory."""
    lines = []
    if comparison:
        lines += [f"All configs' curves: [{COMPARISON_FILE}]({COMPARISON_FILE})", ""]
    rates = any(r["success_rate"] is not None for r in rows)
    lines += [
        "| config | seeds | final eval return (mean ± std) |"
        + (" final success rate |" if rates else "")
        + " env steps | wall time (s) | status | best run | curves |",
        "| --- | --- | --- |" + (" --- |" if rates else "") + " --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        ret = _fmt(r["return_mean"])
        if r["return_std"] is not None:
            ret += f" ± {r['return_std']:.1f}"
        best = os.path.relpath(r["best_run_dir"], sweep_dir) if r["best_run_dir"] else ""
        curves = f"[png]({r['curves']})" if r["curves"] else ""
        rate = f" {_fmt(r['success_rate'], 2)} |" if rates else ""
        config = (r["overrides"] or "base").replace("|", "\\|")  # a bar would end the cell
        lines.append(
            f"| {config} | {r['seeds']} | {ret} |{rate} "
            f"{_fmt(r['env_steps'], 0)} | {_fmt(r['wall_time_s'], 0)} | {r['status']} | {best} "
            f"| {curves} |"
        )
    return "\n".join(lines) + "\n"
