"""Train SAC on a gymnasium env and export the policy as a SavedModel.

python scripts/train.py --env=Pendulum-v1
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
    import_tfsac,
    run_script,
    stopped,
    version_note,
)
from absl import flags, logging  # noqa: E402

from tfsac.errors import TfsacError  # noqa: E402
from tfsac.run.preflight import check_run  # noqa: E402 - TF-free
from tfsac.scale import runner_source  # noqa: E402, F401 - registers the env runners, TF-free

define_training_flags()
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    config = config_from_flags(resume=FLAGS.resume)
    check_ignored_flags(config)
    try:  # TF is imported only once the start is known to be good (TF-free checks).
        checked = check_run(config, resume=FLAGS.resume)
    except TfsacError as e:
        fail(str(e))
    if FLAGS["offline_ratio"].present and config.total_steps == 0:
        logging.warning(  # --offline_ratio=0 would read as "no recorded rows"
            "--offline_ratio=%s is not read by offline-only training (total_steps=0): every "
            "minibatch is recorded data",
            FLAGS.offline_ratio,
        )
    elif FLAGS["offline_ratio"].present and config.offline_data is None and not FLAGS.resume:
        # RLPD's presets set it: without their data they are slow online SAC.
        logging.warning(
            "--offline_ratio=%s is given without --offline_data: this run learns online only "
            "(RLPD's presets need --offline_data=<Minari id or folder>)",
            FLAGS.offline_ratio,
        )
    tfsac = import_tfsac()
    try:
        result = tfsac.train(checked)
    except tfsac.Interrupted as e:
        stopped(str(e), e.signum)
    except tfsac.NonFiniteError as e:
        fail(str(e), code=3)
    except tfsac.TfsacError as e:
        fail(str(e))
    if result.stop_reason is not None:
        print(f"stopped at step {result.summary['env_steps']}: {result.stop_reason}")
    print(f"summary: {os.path.join(result.run_dir, 'summary.json')}")
    if config.keep_best:  # the highest version is the best evaluated policy
        print(f"best: {os.path.join(result.run_dir, 'best')}")
    if result.saved_model_path is None:
        print("saved_model: none (--export=false)")
        return
    if not os.path.isdir(result.saved_model_path):  # a finished run's, since removed
        print(f"saved_model: {result.saved_model_path} (no longer there)")
        return
    if result.already_finished:  # its export, from when it finished: nothing new published
        print(f"saved_model: {result.saved_model_path} (exported when the run finished)")
        return
    print(f"saved_model: {result.saved_model_path}")
    print(f"  {version_note(result.saved_model_path)} --export=false trains without exporting.")


def run() -> None:
    run_script(main)


if __name__ == "__main__":
    run()
