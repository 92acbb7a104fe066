"""Record episodes of an exported policy (or of uniform random actions) as a dataset that
scripts/train.py --offline_data reads: a Minari dataset (default) or a folder of .npz
episodes.

python scripts/collect.py --saved_model=saved_models/halfcheetah_v5/1 --episodes=100 \
    --noise=0.1 --output=datasets --dataset_id=halfcheetah/medium-v0
python scripts/collect.py --env=Pendulum-v1 --episodes=10 --format=npz --output=data/random
python scripts/collect.py --saved_model=saved_models/hopper_medium/1 --transitions=100000 \
    --noise=0.1 --output=datasets --dataset_id=hopper/medium-v0
"""

import json
import math
import os
import shlex
import sys

# _cli beside this file, and the checkout's tfsac when run from one (installed, the
# console script tfsac-<name> imports this module from the package tfsac_scripts).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]

from _cli import (  # noqa: E402
    IntegralParser,
    env_kwargs_from_flag,
    fail,
    import_tfsac,
    run_script,
)
from absl import flags  # noqa: E402

from tfsac.config.fields import SEED  # noqa: E402 - TF-free
from tfsac.data import recording  # noqa: E402 - TF-free
from tfsac.data.env_checks import check_env_fits, check_env_id  # noqa: E402
from tfsac.data.recording import FORMATS, check_output  # noqa: E402
from tfsac.deploy.loading import check_saved_model  # noqa: E402 - TF-free
from tfsac.deploy.metadata import read_metadata  # noqa: E402 - TF-free
from tfsac.errors import TfsacError  # noqa: E402

flags.DEFINE_string("saved_model", None, "A SavedModel version folder (default: random actions).")
flags.DEFINE_string("env", None, "Env id (default: the one the SavedModel was trained on).")
flags.DEFINE_string("env_kwargs", None, "JSON keyword arguments for gymnasium.make.")
flags.DEFINE_integer("episodes", 10, "Episodes to record.")
flags.DEFINE(
    IntegralParser(),
    "transitions",
    0,
    "Instead of --episodes: whole episodes until at least this many steps (1e5 works).",
    serializer=flags.ArgumentSerializer(),
)
flags.DEFINE_float("noise", 0.0, "Std of Gaussian noise added to the policy's actions in [-1, 1].")
flags.DEFINE_integer("seed", 0, "Seed of the first episode's reset, the noise and random actions.")
flags.DEFINE_string("output", None, "Folder to write to (Minari: the datasets folder).")
flags.DEFINE_enum("format", "minari", list(FORMATS), "Dataset format.")
flags.DEFINE_string("dataset_id", None, "Minari dataset id, e.g. halfcheetah/medium-v0.")
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    if not FLAGS.output:
        fail("--output is required: the folder the dataset goes to")
    if not math.isfinite(FLAGS.noise):
        fail(f"--noise must be a finite number, got {FLAGS.noise}")
    if FLAGS.episodes <= 0 or FLAGS.noise < 0 or FLAGS.transitions < 0:
        fail("--episodes must be positive, and --noise and --transitions >= 0")
    if error := SEED.error("--seed", FLAGS.seed):
        fail(error)
    if FLAGS.transitions and FLAGS["episodes"].present:
        fail("give --episodes or --transitions, not both")
    if FLAGS.noise and not FLAGS.saved_model:
        fail("--noise applies to a policy's actions (--saved_model); random actions have none")
    if FLAGS.dataset_id and FLAGS.format != "minari":
        fail("--dataset_id names a Minari dataset: it applies to --format=minari")
    kwargs = env_kwargs_from_flag(FLAGS.env_kwargs) if FLAGS.env_kwargs else None
    try:  # every mistake is said before TensorFlow loads and before any episode runs
        env_id = FLAGS.env
        if FLAGS.saved_model:
            check_saved_model(FLAGS.saved_model)
            env_id = env_id or read_metadata(FLAGS.saved_model).get("env_id")
        if not env_id:
            fail("--env is required (the SavedModel names no env)")
        check_env_id(env_id)
        _check_env(env_id, kwargs)
        target = check_output(FLAGS.output, FLAGS.format, FLAGS.dataset_id)
        policy = None
        if FLAGS.saved_model:
            import_tfsac()
            from tfsac.deploy.policy import saved_model_policy

            policy = saved_model_policy(FLAGS.saved_model)[0]
        episodes = recording.record_episodes(
            env_id, FLAGS.episodes, policy, FLAGS.noise, FLAGS.seed, kwargs, FLAGS.transitions
        )
        target = recording.write_dataset(
            episodes, env_id, FLAGS.output, FLAGS.format, FLAGS.dataset_id, env_kwargs=kwargs
        )
    except TfsacError as e:
        fail(str(e))
    steps = sum(len(e["rewards"]) for e in episodes)
    returns = [float(e["rewards"].sum()) for e in episodes]
    print(
        f"recorded {len(episodes)} episodes, {steps} transitions, mean return "
        f"{sum(returns) / len(returns):.1f}: {target}"
    )
    again = [f"--env={env_id}", f"--offline_data={target}"]
    if kwargs:
        again.insert(1, f"--env_kwargs={json.dumps(kwargs)}")
    print(f"train from it: python scripts/train.py {shlex.join(again)}")


def _check_env(env_id: str, kwargs) -> None:
    """The recording fits in memory (--transitions, or --episodes of the env's time limit),
    and the SavedModel, where one is given, fits the env."""
    import gymnasium as gym

    from tfsac.data.envs import env_spec, make_env
    from tfsac.run.memory_check import check_recording

    env = make_env(env_id, env_kwargs=kwargs)
    try:
        dims = gym.spaces.flatdim(env.observation_space), gym.spaces.flatdim(env.action_space)
        limit = env.spec.max_episode_steps if env.spec is not None else None
        if FLAGS.saved_model:
            check_env_fits(env_id, env_spec(env_id, env), read_metadata(FLAGS.saved_model))
    finally:
        env.close()
    if FLAGS.transitions:
        check_recording(FLAGS.transitions, *dims, f"--transitions={FLAGS.transitions}")
    elif limit:
        what = f"--episodes={FLAGS.episodes} of {limit} steps"
        check_recording(FLAGS.episodes * limit, *dims, what)


def run() -> None:
    run_script(main)


if __name__ == "__main__":
    run()
