"""Many tfsac runs on Ray Tune: a grid of training-flag values times seeds, or an Optuna
search; one run directory per trial under --sweep_dir, then results.csv, results.md and
learning curves there.

python scripts/sweep.py --flagfile=scripts/presets/pendulum_v1.flags --seeds=0,1,2 \\
    --grid=learning_rate=3e-4,1e-3 --sweep_dir=sweeps/pendulum
python scripts/sweep.py --search=optuna --num_samples=20 \\
    --space=learning_rate=loguniform:1e-4:3e-3 --space=tau=uniform:0.002:0.02 --sweep_dir=...
"""

import os
import sys

# _cli beside this file, and the checkout's tfsac when run from one (installed, the
# console script tfsac-<name> imports this module from the package tfsac_scripts).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]

from _cli import (  # noqa: E402
    check_ignored_flags,
    config_from_flags,
    define_training_flags,
    fail,
    hide_from_help,
    run_script,
    stopped,
)
from absl import flags  # noqa: E402

_before = set(flags.FLAGS)
define_training_flags()
TRAINING_FLAGS = sorted(set(flags.FLAGS) - _before)
# What the sweep sets for each trial, and env runners (not inside trials), are not its
# flags to give; --resume and --ray_address mean the whole sweep's.
hide_from_help(
    [
        "run_dir",
        "export_dir",
        "progress_bar",
        "num_actors",
        "envs_per_actor",
        "chunk_steps",
        "weight_sync_every",
        "runner_mode",
    ],
    helps={
        "resume": "continue the sweep in --sweep_dir: trials done are kept, the others go on "
        "from their checkpoints (the same settings are needed)",
        "ray_address": "Ray cluster to run the trials on (<host>:<port>; default: a local Ray "
        "of the sweep's own)",
    },
)

flags.DEFINE_string("sweep_dir", None, "Folder of the sweep: a run directory per trial, results.")
flags.DEFINE_list("seeds", None, "Seeds of every grid config (default: --seed).")
flags.DEFINE_multi_string(
    "grid",
    [],
    "<training flag>=<value>,<value>,... (';' between values that hold commas); repeat "
    "for more flags: the grid is every combination, times --seeds.",
)
flags.DEFINE_string("search", "", "Search method instead of a grid: optuna.")
flags.DEFINE_multi_string(
    "space",
    [],
    "Searched flag: <flag>=uniform|loguniform|int|logint:<low>:<high> (bounds inclusive) "
    "or <flag>=choice:<value>,<value>,...; repeat for more flags.",
)
flags.DEFINE_integer("num_samples", 10, "Configs a search tries.")
flags.DEFINE_enum(
    "objective", "final", ["final", "best"], "Search for the best final or best-ever eval return."
)
flags.DEFINE_enum(
    "early_stopping",
    "auto",
    ["auto", "asha", "none"],
    "ASHA stops poor trials at evaluations (auto: for searches, not for grids).",
)
flags.DEFINE_integer("cpus_per_trial", 1, "CPUs (and TF threads) of each trial.")
flags.DEFINE_integer("max_concurrent", 0, "Trials at once (0: as many as the CPUs allow).")
flags.DEFINE_integer("max_failures", 2, "Retries of a trial whose process died.")
FLAGS = flags.FLAGS


class FlagConfigs:
    """A sweep's trial configs (tfsac.scale.sweeps.plan.ConfigSource) from the parsed
    training flags plus overrides {flag: text}: each text goes through its flag's own
    parser, config_from_flags reads the flags, which are put back afterwards."""

    def __init__(self, flag_values, names, build):
        self.names = frozenset(names)
        self._flags, self._build = flag_values, build

    def __call__(self, overrides):
        from tfsac.errors import TfsacError
        from tfsac.scale.sweeps.plan import keyed_overrides, resolved_trial_config

        saved = {}
        plain, keyed = keyed_overrides(overrides, lambda name: self._flags[name].value)
        try:
            for name, text in {**plain, **keyed}.items():  # a JSON flag's keys merged last
                flag = self._flags[name]
                saved[name] = (flag.value, flag.present, flag.using_default_value)
                try:
                    flag.parse(text)
                except (flags.Error, ValueError) as e:
                    raise TfsacError(str(e)) from None
            config = self._build()
        finally:
            for name, (value, present, default) in saved.items():
                flag = self._flags[name]
                flag.value, flag.present, flag.using_default_value = value, present, default
        return resolved_trial_config(config, overrides)

    def __getstate__(self):
        # Tune pickles its search algorithm (which holds this), the class by value (it is
        # __main__'s): what its methods read is on the instance, and stays here.
        return {"names": self.names, "_flags": None, "_build": None}


def _checked(config):
    """A trial's config, refused (one line) where a flag given would be ignored in it, as
    train.py refuses it (a grid's value counts as given)."""
    check_ignored_flags(config, runner_flags=False)
    return config


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    import tfsac
    from tfsac.errors import TfsacError
    from tfsac.scale import ray_cluster
    from tfsac.scale.sweeps.driver import run_sweep
    from tfsac.scale.sweeps.plan import RESERVED_FLAGS, plan_sweep

    try:
        for name in ("run_dir", "export_dir"):
            if FLAGS[name].present:
                raise TfsacError(f"--{name}: {RESERVED_FLAGS[name]}")
        try:
            seeds = [int(s) for s in FLAGS.seeds] if FLAGS.seeds else [FLAGS.seed]
        except ValueError:
            raise TfsacError(f"--seeds must be integers, got {','.join(FLAGS.seeds)}") from None
        plan = plan_sweep(
            FlagConfigs(FLAGS, TRAINING_FLAGS, lambda: _checked(config_from_flags(tfsac))),
            FLAGS.sweep_dir,
            seeds,
            grid=FLAGS.grid,
            search=FLAGS.search,
            space=FLAGS.space,
            num_samples=FLAGS.num_samples,
            objective=FLAGS.objective,
            early_stopping=FLAGS.early_stopping,
            cpus_per_trial=FLAGS.cpus_per_trial,
            max_concurrent=FLAGS.max_concurrent,
            max_failures=FLAGS.max_failures,
        )
        ray_cluster.check_address(FLAGS.ray_address)
        ray_cluster.require_ray("sweeps", FLAGS.ray_address, tune=True, search=bool(FLAGS.search))
        outcome = run_sweep(plan, FLAGS.ray_address, resume=FLAGS.resume)
    except tfsac.Interrupted as e:  # a signal while Ray started
        stopped(str(e), e.signum)
    except TfsacError as e:
        fail(str(e))
    for path in outcome["files"][:2]:
        print(f"results: {path}")
    left, signum = outcome["unfinished"], outcome["signal"]
    if signum is not None:
        import signal

        done = len(outcome["trials"]) - len(left)
        stopped(
            f"{signal.Signals(signum).name}: the sweep stopped with {done} of "
            f"{len(outcome['trials'])} trials done; continue it with --resume",
            signum,
        )
    if left:
        fail(
            f"{len(left)} of {len(outcome['trials'])} trials did not finish (first: {left[0]}); "
            "rerun with --resume to continue them",
            code=1,
        )


def run() -> None:
    run_script(main)


if __name__ == "__main__":
    run()
