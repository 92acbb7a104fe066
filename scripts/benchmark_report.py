"""The table and figures of docs/benchmarks.md: tfsac runs (a sweep's trials) beside peer
runs (the JSON lines of ../shared/peers/learn.py) on the same envs and seeds.

    python scripts/benchmark_report.py --runs='sweeps/benchmark/*/*/seed*' \
        --peer_results='sweeps/benchmark/sbx/*.json' --out_dir=docs/benchmarks

Prints a Markdown table (per env and library: seeds, the final evaluation return as mean ±
std over seeds, env steps/s) and writes it to <out_dir>/results.md, with one PNG of the
evaluation curves (mean ± std over seeds) per env.
"""

import glob
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _cli import fail, import_tfsac, parse_flags_or_fail  # noqa: E402
from absl import app, flags  # noqa: E402

flags.DEFINE_string("runs", None, "Glob of tfsac run directories.", required=True)
flags.DEFINE_string("peer_results", "", "Glob of learn.py JSON files (one run each).")
flags.DEFINE_string("out_dir", "docs/benchmarks", "Folder of results.md and the PNGs.")
FLAGS = flags.FLAGS


def tfsac_runs(pattern):
    """(env, run) pairs of the finished runs that `pattern` matches; run = {seed, steps,
    returns, final, steps_per_s}."""
    from tfsac.run.plotting import read_run

    found = []
    for run_dir in sorted(glob.glob(pattern)):
        summary_path = os.path.join(run_dir, "summary.json")
        if not os.path.exists(summary_path):
            print(f"skipped (not finished): {run_dir}", file=sys.stderr)
            continue
        with open(summary_path) as f:
            summary = json.load(f)
        run = read_run(run_dir)
        steps, returns = run["curves"]["eval_return"]
        found.append(
            (
                summary["env"],
                dict(
                    seed=summary["seed"],
                    steps=steps,
                    returns=returns,
                    final=summary["eval_return_mean"],
                    steps_per_s=summary["env_steps_per_s"],
                ),
            )
        )
    return found


def peer_runs(pattern):
    """(env, lib, run) of each learn.py JSON file that `pattern` matches."""
    import numpy as np

    found = []
    for path in sorted(glob.glob(pattern)) if pattern else []:
        with open(path) as f:
            line = json.loads(f.read().strip().splitlines()[-1])
        steps, returns = (np.array(v) for v in zip(*line["curve"], strict=True))
        run = dict(
            seed=line["seed"],
            steps=steps,
            returns=returns,
            final=line["eval_return_mean"],
            steps_per_s=line["env_steps_per_s"],
        )
        found.append((line["env"], line["lib"], run))
    return found


def write_report(groups, out_dir):
    """results.md and one PNG per env; returns the table's lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from tfsac.run.plotting import mean_std

    os.makedirs(out_dir, exist_ok=True)
    lines = [
        "| env | library | seeds | final return (mean ± std over seeds) | env steps/s |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for env, libs in sorted(groups.items()):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for lib, runs in sorted(libs.items()):
            finals = np.array([r["final"] for r in runs])
            seeds = ",".join(str(r["seed"]) for r in sorted(runs, key=lambda r: r["seed"]))
            rate = np.mean([r["steps_per_s"] for r in runs])
            lines.append(
                f"| {env} | {lib} | {seeds} | {finals.mean():.0f} ± {finals.std():.0f} | "
                f"{rate:.0f} |"
            )
            steps, mean, std = mean_std([(r["steps"], r["returns"]) for r in runs])
            ax.plot(steps, mean, label=f"{lib} ({len(runs)} seeds)")
            ax.fill_between(steps, mean - std, mean + std, alpha=0.25)
        ax.set_title(f"{env}: deterministic evaluation return")
        ax.set_xlabel("env steps")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, f"{env.lower().replace('-', '_')}.png"), dpi=100)
        plt.close(fig)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return lines


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    import_tfsac()
    groups = defaultdict(lambda: defaultdict(list))
    for env, run in tfsac_runs(FLAGS.runs):
        groups[env]["tfsac"].append(run)
    for env, lib, run in peer_runs(FLAGS.peer_results):
        groups[env][lib].append(run)
    if not groups:
        fail(f"no finished runs match --runs={FLAGS.runs} or --peer_results={FLAGS.peer_results}")
    print("\n".join(write_report(groups, FLAGS.out_dir)))


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags_or_fail)
