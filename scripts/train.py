"""Train SAC on a gymnasium env and export the policy as a SavedModel.

python scripts/train.py --env=Pendulum-v1
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _cli import (  # noqa: E402
    config_from_flags,
    define_training_flags,
    fail,
    import_tfsac,
    parse_flags_or_fail,  # noqa: E402
)
from absl import app, flags  # noqa: E402

define_training_flags()
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    tfsac = import_tfsac()  # TF is imported only once the flags are known to be good.
    config = config_from_flags(tfsac)
    try:
        result = tfsac.train(config, resume=FLAGS.resume)
    except tfsac.Interrupted as e:
        fail(str(e), code=128 + e.signum)
    except tfsac.NonFiniteError as e:
        fail(str(e), code=3)
    except tfsac.TfsacError as e:
        fail(str(e))
    print(f"summary: {os.path.join(result.run_dir, 'summary.json')}")
    print(f"saved_model: {result.saved_model_path}")


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags_or_fail)
