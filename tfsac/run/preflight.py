"""The checks that can refuse a run's start: check_run, before anything is written and
without TensorFlow (scripts/train.py runs it before importing TensorFlow)."""

from __future__ import annotations

import dataclasses
import difflib
import os
import random
import time
from typing import List, Optional, Tuple

import gymnasium as gym
import numpy as np
from absl import logging

from tfsac.algorithm.resolve import mark_resolved, resolve  # TF-free, as the variants'
from tfsac.algorithm.variants import variant_of
from tfsac.config import SACConfig
from tfsac.config.resume import Change, check_checkpoint, check_matches
from tfsac.config.sac_config import check_new_run
from tfsac.data.env_checks import CUSTOM_ENV, check_batched_reward, check_env_api, reward_function
from tfsac.data.envs import (
    EnvFn,
    Flattened,
    checked_env,
    env_factory,
    env_spec,
    factory_name,
    remade_env_spec,
    unflattened,
)
from tfsac.data.mixed_replay import STATE_KEY
from tfsac.data.offline_data import RecordedData, check_checkpoint_data, load_recorded
from tfsac.data.spaces import EnvSpec, episode_limit, read_env_spec
from tfsac.deploy.formats import parse_formats
from tfsac.deploy.loading import check_available, read_checkpoint_state
from tfsac.errors import Fault, TfsacError
from tfsac.files import (
    CHECKPOINTS_DIR,
    VIDEOS_DIR,
    RunDir,
    check_outside_exports,
    check_writable,
    checkpoint_steps,
    default_model_name,
    source_checkpoints,
)
from tfsac.run.callbacks import Callback, FunctionCallback
from tfsac.run.memory_check import check_memory
from tfsac.run.run_lock import check_run_dir_free
from tfsac.run.source import env_runners


def checked_run_dir(config: SACConfig, resume: bool, env_fn) -> str:
    """The run directory (default runs/<model>-seed<seed>-<time>), checked; writes nothing."""
    if resume and not config.run_dir:
        raise TfsacError("resume needs the run directory of the run to continue (run_dir)")
    if env_fn is not None and config.video_every:
        raise TfsacError("video_every needs an env id: videos remake the env by id")
    model_name = config.model_name or default_model_name(config.env_id)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = config.run_dir or os.path.join("runs", f"{model_name}-seed{config.seed}-{stamp}")
    model_dir = os.path.join(config.export_dir, model_name)
    check_outside_exports(run_dir, "run_dir", model_dir if config.export else None)
    check_run_dir_free(run_dir)  # first: a run in it is why it holds one, and --resume no help
    if not resume and RunDir(run_dir).holds_a_run():
        raise TfsacError(
            f"run directory {run_dir!r} already holds a run; continue it with --resume "
            "(resume=True in Python) or choose another run directory"
        )
    check_writable(run_dir)
    videos = RunDir(run_dir).file(VIDEOS_DIR)
    if config.video_every and os.path.lexists(videos) and not os.path.isdir(videos):
        # Here, not at the first video: by then config.json is written.
        raise TfsacError(f"the video folder {videos!r} is a file, not a folder")
    if config.export:
        check_writable(model_dir)
        check_available(parse_formats(config.export_formats))
    return run_dir


def _env_name(env) -> str:
    """An env_fn env's name: its gymnasium id where that id remakes the env the policy saw,
    else custom:<name> (its class, or its id and the wrappers the id would not remake)."""
    spec = getattr(env, "spec", None)
    if spec is None or not spec.id:
        return f"{CUSTOM_ENV}{type(env.unwrapped).__name__}"
    users = unflattened(env)  # any flattening: the vector tfsac's own would give
    inner = env.unwrapped
    wrappers = [w.name for w in spec.additional_wrappers if w.name != Flattened.__name__]
    same_spaces = (
        users.observation_space == inner.observation_space
        and users.action_space == inner.action_space
    )
    if not wrappers or (same_spaces and not _changes_observations_or_actions(env)):
        return spec.id
    return f"{CUSTOM_ENV}{spec.id}+" + "+".join(wrappers)


# What gymnasium.make puts around its env: the walk stops there (the id remakes the rest).
_MAKES = (gym.wrappers.OrderEnforcing, gym.wrappers.PassiveEnvChecker)


def _changes_observations_or_actions(env) -> bool:
    """Whether a non-flattening observation or action wrapper sits around gymnasium.make's env."""
    while isinstance(env, gym.Wrapper) and not isinstance(env, _MAKES):
        flattening = isinstance(env, gym.wrappers.FlattenObservation)
        if isinstance(env, (gym.ObservationWrapper, gym.ActionWrapper)) and not flattening:
            return True
        env = env.env
    return False


def check_her(config: SACConfig, env: gym.Env, spec: EnvSpec) -> None:
    """HER needs a goal env, and a finished episode of every stream before learning starts."""
    compute = reward_function(env, spec.goal_columns, config.env_id)
    check_batched_reward(compute, spec.goal_columns, config.env_id)
    limit = episode_limit(env)
    if not limit:  # episodes may still end by termination: said, not refused
        logging.warning(
            "her samples finished episodes only, and %s has no time limit: unless its "
            "episodes end by themselves, give one (--env_kwargs='{\"max_episode_steps\": 50}')",
            config.env_id,
        )
    streams = config.num_actors * config.envs_per_actor if config.num_actors else config.num_envs
    if limit and config.learning_starts < limit * streams:
        raise TfsacError(
            f"her samples finished episodes only: learning_starts ({config.learning_starts}) "
            f"must be at least the episode length ({limit}) times the env copies ({streams}), "
            f"e.g. --learning_starts={limit * streams}"
        )


def _check_same_factory(run_dir: str, spec: EnvSpec) -> None:
    """Refuses a resume without the env_fn that made the run's envs."""
    saved = read_env_spec(run_dir)
    if saved is not None and saved.env_fn and not spec.env_fn:
        raise TfsacError(
            f"{run_dir!r} trained on envs that env_fn {saved.env_fn} made: resumed without it, "
            f"it would train and evaluate on gymnasium.make({spec.env_id!r})'s, without that "
            "factory's wrappers; resume it in Python with the same env_fn "
            "(tfsac.train(config, resume=True, env_fn=...))"
        )
    if saved is not None and spec.env_fn != saved.env_fn:  # renamed, or another env
        logging.warning(
            "env_fn %s resumes a run that %s trained: its envs must be the same",
            spec.env_fn,
            f"env_fn {saved.env_fn}" if saved.env_fn else f"gymnasium.make({spec.env_id!r})",
        )


@dataclasses.dataclass(frozen=True)
class CheckedRun:
    """A run's start as check_run checked it: the resolved config, the probed env (the
    evaluation env, closed with the run), and what was read once. It trains once."""

    config: SACConfig
    run_dir: str
    resume: bool
    env_fn: EnvFn
    eval_env: gym.Env
    spec: EnvSpec
    resume_changes: Tuple[Change, ...] = ()
    recorded: Optional[RecordedData] = None
    init_source: Optional[Tuple[SACConfig, List[str]]] = None


def check_run(
    config, export: Optional[bool] = None, resume: bool = False, env_fn=None
) -> CheckedRun:
    """`Trainer`'s arguments as a CheckedRun (which passes through as it is), or the
    TfsacError that refuses the start, before anything is written."""
    if isinstance(config, CheckedRun):
        if export is not None or resume or env_fn is not None:
            raise TfsacError(
                "a checked run holds its export, resume and env_fn: give them to check_run"
            )
        return config
    if not isinstance(config, SACConfig):  # a dict of options, say
        raise TfsacError(
            f"a run takes a tfsac.SACConfig, got {type(config).__name__}: make one with "
            "SACConfig(env_id=..., ...) or SACConfig.from_dict(...)"
        )
    if export is not None:
        config = dataclasses.replace(config, export=export)
    config = resolve(config)
    # Before any env is made: an env that draws from them as it is made draws the same.
    random.seed(config.seed)
    np.random.seed(config.seed)
    make_env = env_fn or env_factory(config.env_id, config.env_kwargs)
    name = config.env_id if env_fn is None else "env_fn"
    eval_env = checked_env(make_env, name)
    try:
        check_env_api(eval_env, name)
        return _checked_with_env(config, resume, env_fn, make_env, eval_env)
    except BaseException:
        eval_env.close()
        raise


def _checked_with_env(config, resume, env_fn, make_env, eval_env) -> CheckedRun:
    if env_fn is not None:  # the config (and the default run dir) name the env it trains on
        config = dataclasses.replace(config, env_id=_env_name(eval_env))
    run_dir = checked_run_dir(config, resume, env_fn)
    files = RunDir(run_dir)
    saved = files.read_config() if resume else None
    if resume:  # a damaged summary.json: one line before the resume says what it changes
        files.read_summary()
    own_checkpoints = resume and checkpoint_steps(os.path.join(run_dir, CHECKPOINTS_DIR))
    if own_checkpoints and saved is not None and config.init_from != saved.get("init_from"):
        # Its config.json keeps the source it started from.
        logging.info("init_from is not read by this resume: the run continues from its own")
        config = dataclasses.replace(config, init_from=saved.get("init_from"))
    changes = config.resume_changes(saved) if saved is not None else []
    if saved is None:  # a new run: a saved one may predate these checks, and still loads
        for warning in check_new_run(config):
            logging.warning("%s", warning)
    spec = env_spec(config.env_id, eval_env)
    if env_fn is not None:
        spec = dataclasses.replace(spec, env_fn=factory_name(env_fn))
    if resume:
        _check_same_factory(run_dir, spec)
    source = None
    if config.init_from and not own_checkpoints:  # a resume reads its own, not init_from's
        source = check_source(config, spec)
    if config.her:
        check_her(config, eval_env, spec)
    recorded = load_recorded(config.offline_data, spec) if config.offline_data else None
    if own_checkpoints:
        _check_checkpoint_state(run_dir, config, recorded)
    check_memory(
        config, spec.obs_dim, spec.action_dim, recorded_bytes=recorded.nbytes if recorded else 0
    )
    if config.num_actors and env_runners("check") is None:
        raise TfsacError(
            "env runners (num_actors > 0) come with tfsac.scale: import "
            "tfsac.scale.runner_source first (tfsac.train and tfsac.Trainer do)"
        )
    if config.num_actors:
        env_runners("check")(config)
    config = mark_resolved(config)  # its env_id and init_from, set here, are checked too
    return CheckedRun(
        config, run_dir, resume, make_env, eval_env, spec, tuple(changes), recorded, source
    )


def _check_checkpoint_state(run_dir: str, config: SACConfig, recorded) -> None:
    """Refuses a resume whose newest readable checkpoint (the one it restores) was made
    with other settings or other recorded data."""
    folder = os.path.join(run_dir, CHECKPOINTS_DIR)
    for step in checkpoint_steps(folder):
        prefix = os.path.join(folder, f"ckpt-{step}")
        try:
            state = read_checkpoint_state(prefix)
        except Fault:
            continue
        check_checkpoint(state["config"], config, prefix, variant_of(config).resume_keeps)
        saved = state.get(STATE_KEY)
        if recorded is None:
            return
        if saved is not None and not (
            isinstance(saved, dict) and {"checksum", "transitions", "rng"} <= set(saved)
        ):
            raise Fault(f"checkpoint {prefix}'s {STATE_KEY} entry is damaged: {saved!r:.80}")
        check_checkpoint_data(recorded, saved, prefix)
        return


def check_source(config: SACConfig, spec: EnvSpec) -> Tuple[SACConfig, List[str]]:
    """(init_from's run's config, its checkpoint prefixes, newest first); TfsacError where
    it is no run with checkpoints, or has other networks or other sizes than `spec`'s."""
    source_config, prefixes = source_checkpoints(config.init_from)
    check_matches(source_config, config, config.init_from, variant_of(config).resume_keeps)
    if (source_config.env_id, source_config.env_kwargs) == (config.env_id, config.env_kwargs):
        return source_config, prefixes
    theirs = read_env_spec(os.path.dirname(os.path.dirname(prefixes[0])))  # damaged: one line
    if theirs is None:  # a run of an earlier tfsac: its env made again, where it can be
        try:
            theirs = remade_env_spec(source_config.env_id, source_config.env_kwargs)
        except Exception:  # noqa: BLE001 - any env's failure: the restore still checks shapes
            return source_config, prefixes
    if (theirs.obs_dim, theirs.action_dim) != (spec.obs_dim, spec.action_dim):
        raise TfsacError(
            f"init_from {config.init_from!r} was trained on {theirs.env_id} (observations of "
            f"{theirs.obs_dim} numbers, actions of {theirs.action_dim}), this run's "
            f"{spec.env_id} has {spec.obs_dim} and {spec.action_dim}: its networks do not fit"
        )
    return source_config, prefixes


def check_options(options, allowed) -> None:
    """TfsacError for an option `train` does not take (`allowed`: Trainer's parameters)."""
    for name in options:
        if name not in allowed:
            near = difflib.get_close_matches(name, allowed, n=1)
            raise TfsacError(
                f"train() has no option {name!r}" + (f"; did you mean {near[0]!r}?" if near else "")
            )


def check_hooks(on_log, on_evaluation, callbacks) -> List[Callback]:
    """`train`'s hooks as callbacks: the functions as one, then `callbacks`."""
    for name, function in (("on_log", on_log), ("on_evaluation", on_evaluation)):
        if function is not None and not callable(function):
            raise TfsacError(f"{name} must be a function of one dict, got {function!r:.60}")
    try:
        callbacks = list(callbacks)
    except TypeError:
        raise TfsacError(f"callbacks must be a list of Callbacks, got {callbacks!r:.60}") from None
    for callback in callbacks:
        if not isinstance(callback, Callback):
            raise TfsacError(
                "callbacks must be tfsac.Callback instances (subclass it, or pass functions "
                f"as on_log= and on_evaluation=), got {callback!r:.60}"
            )
    return [FunctionCallback(on_log, on_evaluation), *callbacks]
