"""Run a trained policy: a SavedModel or a run's checkpoint (its newest, or --step's).

python scripts/evaluate.py --saved_model=saved_models/pendulum_v1/1 --episodes=10
python scripts/evaluate.py --run_dir=runs/cheetah --video_dir=videos
"""

import json
import os
import sys

# _cli beside this file, and the checkout's tfsac when run from one (installed, the
# console script tfsac-<name> imports this module from the package tfsac_scripts).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]

from _cli import env_kwargs_from_flag, fail, import_tfsac, run_script  # noqa: E402
from absl import flags  # noqa: E402

from tfsac.config.fields import EPISODES, SEED  # noqa: E402 - TF-free
from tfsac.deploy.loading import check_saved_model  # noqa: E402 - TF-free
from tfsac.errors import TfsacError  # noqa: E402
from tfsac.files import run_config  # noqa: E402 - TF-free

flags.DEFINE_string("saved_model", None, "A SavedModel version folder exported by tfsac.")
flags.DEFINE_string("run_dir", None, "A run directory: its latest checkpoint is used.")
flags.DEFINE_integer(
    "step", None, "With --run_dir: the checkpoint of this env step (default: the newest)."
)
flags.DEFINE_string("env", None, "Env id (default: the one the policy was trained on).")
flags.DEFINE_string("env_kwargs", None, "JSON keyword arguments for gymnasium.make.")
flags.DEFINE_integer(
    "episodes", None, "Episodes to run (default: as many as the run's evaluations, else 10)."
)
flags.DEFINE_bool("stochastic", False, "Sample actions instead of the deterministic mean.")
flags.DEFINE_integer(
    "seed",
    None,
    "Seed of the first episode's reset (default: the seed of the run's final evaluation, so "
    "that a deterministic evaluation repeats the return in its summary.json; else 0).",
)
flags.DEFINE_string("video_dir", None, "Record every episode as an MP4 in this folder.")
FLAGS = flags.FLAGS


def _video_prefix(info, seed: int) -> str:
    """Video names that say which policy and starts they show, so that evaluations of other
    policies into one folder sit side by side: <run>-step-<N> of a run's checkpoint, or
    <model>-v<version> of a SavedModel; then the seed (and whether actions were sampled)."""
    if FLAGS.saved_model:
        version = os.path.normpath(FLAGS.saved_model)
        model = os.path.basename(os.path.dirname(version))
        source = f"{model}-v{os.path.basename(version)}"
    else:
        run = os.path.basename(os.path.normpath(os.path.abspath(FLAGS.run_dir)))
        source = f"{run}-step-{info['checkpoint_step']}"
    return f"{source}-seed{seed}" + ("-stochastic" if FLAGS.stochastic else "")


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    if (FLAGS.saved_model is None) == (FLAGS.run_dir is None):
        fail("give exactly one of --saved_model and --run_dir")
    if FLAGS.saved_model and FLAGS.step is not None:
        fail("--step applies to --run_dir (which of its checkpoints to run)")
    for name, check in (("episodes", EPISODES), ("seed", SEED)):
        if FLAGS[name].value is not None and (error := check.error(f"--{name}", FLAGS[name].value)):
            fail(error)
    if FLAGS.video_dir and os.path.exists(FLAGS.video_dir) and not os.path.isdir(FLAGS.video_dir):
        fail(f"--video_dir {FLAGS.video_dir!r} is a file, not a folder")
    env_kwargs_from_flag(FLAGS.env_kwargs or "{}")  # its JSON: one line before TensorFlow loads
    try:  # mistakes in the paths are said before TensorFlow loads
        if FLAGS.saved_model:
            check_saved_model(FLAGS.saved_model)
        else:
            run_config(FLAGS.run_dir, need_checkpoint=True, step=FLAGS.step)
    except TfsacError as e:
        fail(str(e))
    tfsac = import_tfsac()
    from tfsac.data.env_checks import check_env_fits
    from tfsac.data.envs import remade_env_spec
    from tfsac.deploy.policy import checkpoint_policy, saved_model_policy
    from tfsac.run import evaluation

    try:
        if FLAGS.saved_model:
            policy, info = saved_model_policy(FLAGS.saved_model, FLAGS.stochastic)
        else:
            policy, info = checkpoint_policy(FLAGS.run_dir, FLAGS.stochastic, FLAGS.step)
            print(f"checkpoint: {info['checkpoint']} (step {info['checkpoint_step']})")
        env_id = FLAGS.env or info.get("env_id")
        if not env_id:
            fail("the policy does not say which env it was trained on: pass --env")
        env_kwargs = _env_kwargs(env_id, info)
        check_env_fits(env_id, remade_env_spec(env_id, env_kwargs), info)
        seed = next(s for s in (FLAGS.seed, info.get("eval_seed"), 0) if s is not None)
        episodes = FLAGS.episodes or info.get("eval_episodes") or 10
        successes = []  # each episode's info["is_success"] (goal envs), not with videos
        if FLAGS.video_dir:
            prefix = _video_prefix(info, seed)
            returns = evaluation.record_video(
                env_id, policy, FLAGS.video_dir, prefix, episodes, seed, env_kwargs
            )
        else:
            # As the training run's evaluations: episodes side by side on env copies.
            returns = _episodes(env_id, env_kwargs, policy, episodes, seed, successes)
    except tfsac.TfsacError as e:
        fail(str(e))
    rate = evaluation.success_rate(successes)
    _report(env_id, env_kwargs, returns, seed, episodes, info, rate)


def _env_kwargs(env_id: str, info) -> dict:
    """The run's env arguments (for its own env) with --env_kwargs over them, said where
    they differ: a video size given alone keeps the run's time limit."""
    trained_with = (info.get("env_kwargs") or {}) if env_id == info.get("env_id") else {}
    env_kwargs = {**trained_with, **env_kwargs_from_flag(FLAGS.env_kwargs or "{}")}
    if env_kwargs != trained_with:
        print(f"env_kwargs: {env_kwargs} (the run's: {trained_with})")
    return env_kwargs


def _episodes(env_id, env_kwargs, policy, episodes, seed, successes):
    """The returns of `episodes` side by side on env copies, as the training run's
    evaluations; an error of the env's own (its arguments, say) is one line."""
    from tfsac.data.envs import make_env
    from tfsac.run import evaluation

    copies = min(episodes, evaluation.EVAL_COPIES)
    envs = [make_env(env_id, env_kwargs=env_kwargs) for _ in range(copies)]
    try:
        return evaluation.run_episodes(envs, policy, episodes, seed, successes)
    except TfsacError:
        raise
    except Exception as e:  # noqa: BLE001 - the env's own, e.g. from its arguments
        raise TfsacError(f"{env_id} raised: {type(e).__name__}: {e}") from None
    finally:
        for env in envs:
            env.close()


def _report(env_id, env_kwargs, returns, seed, episodes, info, success_rate=None) -> None:
    """The result line, whether it repeats the training run's evaluation of these weights,
    and JSON."""
    import numpy as np

    mode = "stochastic" if FLAGS.stochastic else "deterministic"
    print(
        f"{env_id}: return {np.mean(returns):.1f} +- {np.std(returns):.1f} "
        f"over {len(returns)} {mode} episodes from seed {seed}"
        + ("" if success_rate is None else f", success rate {success_rate:.2f}")
    )
    repeats_final = (
        info.get("eval_return_mean") is not None
        and seed == info["eval_seed"]
        and episodes == info.get("eval_episodes", episodes)
        and env_id == info.get("env_id")
        and env_kwargs == (info.get("env_kwargs") or {})
        and not FLAGS.stochastic
    )
    if info.get("env_fn") and env_id == info.get("env_id"):  # not the env that trained
        print(
            f"  the training run's envs were made by env_fn {info['env_fn']} around {env_id}, "
            "whose wrappers (of rewards, time limits) this evaluation by id leaves out"
            + (
                f": its evaluation of these weights returned {info['eval_return_mean']:.1f}"
                if repeats_final
                else ""
            )
        )
    elif repeats_final:
        # The weights' own evaluation, named by its step: a checkpoint's (--step, or an older
        # one where the newest is damaged), or an export's (export.py --step exports one
        # from before the run's end, whose evaluation is not the run's final one).
        step = info.get("checkpoint_step", info.get("training_steps"))
        which = "final evaluation" if step is None else f"evaluation at step {step}"
        print(
            f"  the training run's {which} (same seed, episodes and env) returned "
            f"{info['eval_return_mean']:.1f}"
        )
    result = {
        "env": env_id,
        "episodes": len(returns),
        "stochastic": FLAGS.stochastic,
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "seed": seed,
        "returns": returns,
        "video_dir": FLAGS.video_dir,
        **({} if success_rate is None else {"success_rate": success_rate}),
    }
    print(json.dumps(result))


def run() -> None:
    run_script(main)


if __name__ == "__main__":
    run()
