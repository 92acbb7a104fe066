"""Learning curves (mean +- std across seeds) from one or more run directories.

One group of runs per configuration, labelled by the config fields that differ between the
groups (or by --labels).

    python scripts/plot.py --run_dirs=runs/pendulum_v1-seed0-...,runs/pendulum_v1-seed1-... \\
        --out=pendulum.png
    python scripts/plot.py --run_dirs=runs/sac-0,runs/sac-1,runs/tqc-0 --labels=SAC,SAC,TQC
    python scripts/plot.py --run_dirs=... --x=wall_clock --y=success_rate
"""

import os
import sys

# _cli beside this file, and the checkout's tfsac when run from one (installed, the
# console script tfsac-<name> imports this module from the package tfsac_scripts).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]

from _cli import fail, run_script  # noqa: E402
from absl import flags  # noqa: E402

flags.DEFINE_list("run_dirs", None, "Run directories (comma-separated).", required=True)
flags.DEFINE_string("out", "learning_curves.png", "PNG to write.")
flags.DEFINE_string("title", "", "Figure title (default: the env ids).")
flags.DEFINE_list(
    "labels",
    None,
    "Legend labels instead of the differing config fields: one per group (in the order of "
    "their first runs) or one per run (runs with the same label are one group).",
)
flags.DEFINE_enum(
    "x",
    "env_steps",
    ["env_steps", "wall_clock"],
    "x axis: env steps, or wall-clock minutes "
    "(the evaluation panels, from the time each evaluation records).",
)
flags.DEFINE_enum(
    "y",
    "all",
    ["all", "return", "success_rate"],
    "Every panel, or only the evaluation return or success rate.",
)
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    # Plotting reads CSV and JSON: no TensorFlow to load.
    from tfsac.errors import TfsacError
    from tfsac.run.plotting import plot_runs

    notes = []  # what the figure cannot compare, said on stderr
    try:
        path = plot_runs(
            FLAGS.run_dirs, FLAGS.out, FLAGS.title, notes, FLAGS.labels, FLAGS.x, FLAGS.y
        )
    except TfsacError as e:
        fail(str(e))
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    print(path)


def run() -> None:
    run_script(main)


if __name__ == "__main__":
    run()
