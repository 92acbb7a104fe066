"""Helpers shared by the absl scripts: one-line errors instead of tracebacks, and a
quiet TensorFlow start-up. Kept out of `tfsac` so that flag errors need no TF import."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import tempfile
from typing import List, NoReturn

from absl import flags

# TF's Python-side C++ log filter; the lines printed before absl::InitializeLog ignore it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def fail(message: str, code: int = 2) -> NoReturn:
    """Prints `error: <message>` as one line on stderr and exits with `code`."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def parse_flags_or_fail(argv: List[str]) -> List[str]:
    """An `app.run` flags parser whose errors are one line (absl's add a usage hint)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        fail(str(e))


@contextlib.contextmanager
def _native_stderr_captured():
    """Sends the process's fd 2 to a temp file; replays it if the block raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def keep_freed_memory() -> None:
    """Lets glibc reuse freed multi-MB blocks instead of returning them to the kernel.

    Each compiled update allocates and frees its XLA buffers (MBs); glibc's defaults hand
    such blocks back with munmap/trim and fault them in again on the next call. Keeping
    them (mmap threshold 32 MB, trim threshold 1 GB; the same as MALLOC_MMAP_THRESHOLD_ /
    MALLOC_TRIM_THRESHOLD_) measured +5% env steps/s and +15% update calls/s on
    HalfCheetah (docs/performance.md). A no-op where the C library is not glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 * 1024 * 1024)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1024 * 1024 * 1024)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def import_tfsac():
    """Imports tfsac (and TF) without the C++ start-up lines that TF prints before its
    log filter is set up (CUDA probing on CPU machines, oneDNN notices)."""
    keep_freed_memory()
    with _native_stderr_captured():
        import tensorflow as tf

        tf.constant(0.0)  # creates the eager context, which logs the CUDA probe
        import tfsac
    return tfsac


def define_training_flags() -> None:
    """The flags of scripts/train.py, which every script that trains or measures shares."""
    flags.DEFINE_string("env", "Pendulum-v1", "gymnasium environment id.")
    flags.DEFINE_string(
        "env_kwargs", "{}", "JSON keyword arguments for gymnasium.make, e.g. '{\"g\": 9.81}'."
    )
    flags.DEFINE_integer("seed", 0, "Seed for the env, numpy and TF.")
    flags.DEFINE_integer("total_steps", 20_000, "Environment steps to train for.")
    flags.DEFINE_integer("learning_starts", 1_000, "Uniform-random steps before learning.")
    flags.DEFINE_integer("batch_size", 256, "Minibatch size.")
    flags.DEFINE_integer("buffer_size", 1_000_000, "Replay buffer capacity (transitions).")
    flags.DEFINE_float("learning_rate", 3e-4, "Adam learning rate (actor, critics, alpha).")
    flags.DEFINE_float("actor_learning_rate", None, "Actor rate (default --learning_rate).")
    flags.DEFINE_float("critic_learning_rate", None, "Critic rate (default --learning_rate).")
    flags.DEFINE_float("alpha_learning_rate", None, "Alpha rate (default --learning_rate).")
    flags.DEFINE_float(
        "max_grad_norm", None, "Clip actor and critic gradients to this global norm."
    )
    flags.DEFINE_string(
        "lr_schedule", "constant", "constant | linear | piecewise:<step>:<factor>,... (env steps)"
    )
    flags.DEFINE_bool("use_log_alpha", True, "Optimise log-alpha (true) or alpha itself.")
    flags.DEFINE_float("reward_scale", 1.0, "Multiply rewards by this in the TD target.")
    flags.DEFINE_bool("critic_layer_norm", False, "Layer normalisation in the critics (DroQ).")
    flags.DEFINE_float("critic_dropout", 0.0, "Dropout rate in the critics (DroQ uses 0.01).")
    flags.DEFINE_integer("policy_delay", 1, "Critic updates per actor and alpha update.")
    flags.DEFINE_integer("target_update_interval", 1, "Critic updates per target update.")
    flags.DEFINE_float("gamma", 0.99, "Discount factor.")
    flags.DEFINE_float("tau", 0.005, "Polyak coefficient of the target critics.")
    flags.DEFINE_string(
        "alpha",
        "auto",
        "Entropy coefficient: a fixed positive float, 'auto' (learned from --initial_alpha) or "
        "'auto_<x>' (learned from x, e.g. auto_0.1).",
    )
    flags.DEFINE_float("initial_alpha", 1.0, "Starting alpha when it is learned.")
    flags.DEFINE_string("target_entropy", "auto", "Target entropy: a float, or 'auto' = -dim(A).")
    flags.DEFINE_list("hidden_sizes", ["256", "256"], "Hidden layer sizes, e.g. 256,256.")
    flags.DEFINE_integer("num_critics", 2, "Number of Q networks (the target takes their min).")
    flags.DEFINE_integer("train_freq", 1, "Env steps between updates.")
    flags.DEFINE_integer("num_envs", 1, "Env copies stepped together (a gymnasium vector env).")
    flags.DEFINE_enum("vector_mode", "sync", ["sync", "async"], "How the env copies step.")
    flags.DEFINE_integer(
        "gradient_steps", 1, "Gradient steps per collection phase (-1: one per env step)."
    )
    flags.DEFINE_integer(
        "episodes_per_rollout", 0, "Update after this many whole episodes (0: every train_freq)."
    )
    flags.DEFINE_enum(
        "variant", "v2", ["v1", "v2"], "v2: twin Q + target Q; v1: the original SAC with V."
    )
    flags.DEFINE_float("value_learning_rate", None, "V network rate, v1 (default --learning_rate).")
    flags.DEFINE_bool("use_sde", False, "gSDE: generalized state-dependent exploration.")
    flags.DEFINE_integer(
        "sde_sample_freq", -1, "gSDE: new noise every N env steps (-1: per phase)."
    )
    flags.DEFINE_bool("use_sde_at_warmup", False, "gSDE instead of uniform actions at warmup.")
    flags.DEFINE_float("log_std_init", -3.0, "gSDE: initial log-std of the noise matrix.")
    flags.DEFINE_integer("eval_every", 5_000, "Env steps between evaluations.")
    flags.DEFINE_integer("eval_episodes", 10, "Deterministic episodes per evaluation.")
    flags.DEFINE_integer("log_every", 1_000, "Env steps between progress lines.")
    flags.DEFINE_integer("video_every", 0, "Record a video every N evaluations (0: never).")
    flags.DEFINE_enum(
        "progress_bar", "auto", ["auto", "true", "false"], "Progress bar (auto: on in a terminal)."
    )
    flags.DEFINE_bool("tensorboard", True, "Write TensorBoard summaries to <run_dir>/tensorboard.")
    flags.DEFINE_bool("jit_compile", True, "Compile the update and action selection with XLA.")
    flags.DEFINE_bool(
        "graph_loop",
        True,
        "Run stretches of env steps inside one TF graph call (less per-step dispatch); "
        "false steps the envs from the main thread.",
    )
    flags.DEFINE_bool("deterministic", False, "TF op determinism: same seed, same run (CPU).")
    flags.DEFINE_bool("resume", False, "Continue the run in --run_dir from its last checkpoint.")
    flags.DEFINE_integer("checkpoint_every", 5_000, "Env steps between checkpoints (0: end only).")
    flags.DEFINE_integer("keep_checkpoints", 3, "How many recent checkpoints to keep.")
    flags.DEFINE_string("run_dir", None, "Run directory (default runs/<env>-seed<seed>-<time>).")
    flags.DEFINE_string("export_dir", "saved_models", "Where SavedModels are exported.")
    flags.DEFINE_string("model_name", None, "Model name under export_dir (default from --env).")


def _float_or_auto(name: str, value: str):
    if value.strip().lower() == "auto":
        return None
    try:
        return float(value)
    except ValueError:
        fail(f"--{name} must be a float or 'auto', got {value!r}")


def env_kwargs_from_flag(value: str) -> dict:
    """Parses --env_kwargs (a JSON object); exits with one line on anything else."""
    try:
        kwargs = json.loads(value)
    except ValueError as e:
        fail(f"--env_kwargs is not valid JSON ({e}): {value}")
    if not isinstance(kwargs, dict):
        fail(f"--env_kwargs must be a JSON object, got {value}")
    return kwargs


def _alpha_from_flag(value: str, initial_alpha: float) -> dict:
    """'auto' | 'auto_<x>' | '<float>' -> the alpha and initial_alpha config fields (the
    forms lightning_baselines3 and SB3 accept for ent_coef)."""
    text = value.strip().lower()
    if text.startswith("auto_"):
        try:
            return {"alpha": None, "initial_alpha": float(text[5:])}
        except ValueError:
            fail(f"--alpha must be a float, 'auto' or 'auto_<float>', got {value!r}")
    alpha = _float_or_auto("alpha", value)
    return {"alpha": alpha, "initial_alpha": initial_alpha}


def config_from_flags(tfsac):
    """Builds a validated-later SACConfig from the parsed flags (exits on a bad value)."""
    FLAGS = flags.FLAGS
    try:
        hidden_sizes = tuple(int(h) for h in FLAGS.hidden_sizes)
    except ValueError:
        fail(f"--hidden_sizes must be integers, got {','.join(FLAGS.hidden_sizes)}")
    return tfsac.SACConfig(
        env_id=FLAGS.env,
        env_kwargs=env_kwargs_from_flag(FLAGS.env_kwargs),
        seed=FLAGS.seed,
        total_steps=FLAGS.total_steps,
        learning_starts=FLAGS.learning_starts,
        batch_size=FLAGS.batch_size,
        buffer_size=FLAGS.buffer_size,
        learning_rate=FLAGS.learning_rate,
        actor_learning_rate=FLAGS.actor_learning_rate,
        critic_learning_rate=FLAGS.critic_learning_rate,
        alpha_learning_rate=FLAGS.alpha_learning_rate,
        value_learning_rate=FLAGS.value_learning_rate,
        variant=FLAGS.variant,
        use_sde=FLAGS.use_sde,
        sde_sample_freq=FLAGS.sde_sample_freq,
        use_sde_at_warmup=FLAGS.use_sde_at_warmup,
        log_std_init=FLAGS.log_std_init,
        episodes_per_rollout=FLAGS.episodes_per_rollout,
        max_grad_norm=FLAGS.max_grad_norm,
        reward_scale=FLAGS.reward_scale,
        use_log_alpha=FLAGS.use_log_alpha,
        lr_schedule=FLAGS.lr_schedule,
        critic_layer_norm=FLAGS.critic_layer_norm,
        critic_dropout=FLAGS.critic_dropout,
        policy_delay=FLAGS.policy_delay,
        target_update_interval=FLAGS.target_update_interval,
        gamma=FLAGS.gamma,
        tau=FLAGS.tau,
        **_alpha_from_flag(FLAGS.alpha, FLAGS.initial_alpha),
        target_entropy=_float_or_auto("target_entropy", FLAGS.target_entropy),
        hidden_sizes=hidden_sizes,
        num_critics=FLAGS.num_critics,
        train_freq=FLAGS.train_freq,
        num_envs=FLAGS.num_envs,
        vector_mode=FLAGS.vector_mode,
        gradient_steps=FLAGS.gradient_steps,
        eval_every=FLAGS.eval_every,
        eval_episodes=FLAGS.eval_episodes,
        log_every=FLAGS.log_every,
        video_every=FLAGS.video_every,
        progress_bar={"auto": None, "true": True, "false": False}[FLAGS.progress_bar],
        tensorboard=FLAGS.tensorboard,
        jit_compile=FLAGS.jit_compile,
        graph_loop=FLAGS.graph_loop,
        deterministic=FLAGS.deterministic,
        checkpoint_every=FLAGS.checkpoint_every,
        keep_checkpoints=FLAGS.keep_checkpoints,
        run_dir=FLAGS.run_dir,
        export_dir=FLAGS.export_dir,
        model_name=FLAGS.model_name,
    )
