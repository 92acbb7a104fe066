"""Learning curves (mean +- std across seeds) from one or more run directories.

    python scripts/plot.py --run_dirs=runs/pendulum_v1-seed0-...,runs/pendulum_v1-seed1-... \\
        --out=pendulum.png
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _cli import fail, parse_flags_or_fail  # noqa: E402
from absl import app, flags  # noqa: E402

flags.DEFINE_list("run_dirs", None, "Run directories (comma-separated).", required=True)
flags.DEFINE_string("out", "learning_curves.png", "PNG to write.")
flags.DEFINE_string("title", "", "Figure title (default: the env ids).")
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    # Plotting reads CSV and JSON: no TensorFlow to load.
    from tfsac.errors import TfsacError
    from tfsac.run.plotting import plot_runs

    notes = []  # what the figure cannot compare, said on stderr
    try:
        path = plot_runs(FLAGS.run_dirs, FLAGS.out, FLAGS.title, notes)
    except TfsacError as e:
        fail(str(e))
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    print(path)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags_or_fail)
