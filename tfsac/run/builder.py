"""Wiring a run, as acme's builders do: the parts a `Trainer` loops over, from its checked start."""

from __future__ import annotations

import dataclasses
import os
from functools import partial
from typing import Dict, List, Optional, Tuple

import keras
import tensorflow as tf
from absl import logging

from tfsac.algorithm.learner import SACLearner
from tfsac.config import SACConfig
from tfsac.data.collector import Collector
from tfsac.data.env_checks import reward_function
from tfsac.data.envs import checked_env
from tfsac.data.her import her_buffer
from tfsac.data.mixed_replay import MixedReplay, RecordedReplay
from tfsac.data.replay import ReplayBuffer
from tfsac.data.spaces import EnvSpec
from tfsac.data.update_schedule import UpdateSchedule
from tfsac.deploy.loading import restore_checkpoint
from tfsac.errors import Fault, TfsacError
from tfsac.files import CHECKPOINTS_DIR, CONFIG_FILE, ENV_SPEC_FILE, VIDEOS_DIR, RunDir, write_json
from tfsac.run.callbacks import CallbackList, config_callbacks
from tfsac.run.checkpointing import Checkpointer
from tfsac.run.evaluation import Evaluator
from tfsac.run.loop_state import LoopState
from tfsac.run.preflight import CheckedRun, check_source
from tfsac.run.progress import ProgressLog
from tfsac.run.run_lock import RunLock
from tfsac.run.source import CollectionSource, LocalSource, env_runners
from tfsac.run.updates import Updates

ENVS_FILE = "envs.pkl"  # in a checkpoint's sidecar: the env copies mid-episode


@dataclasses.dataclass
class RunParts:
    """What a run is made of. `source` is None for a run that is already finished."""

    config: SACConfig
    run_dir: str
    spec: EnvSpec
    files: RunDir
    callbacks: CallbackList
    learner: SACLearner
    evaluator: Evaluator
    buffer: ReplayBuffer
    checkpointer: Checkpointer
    schedule: UpdateSchedule
    updates: Updates
    loop: LoopState
    resumed_from: Optional[str]
    source: Optional[CollectionSource]
    progress: ProgressLog
    lock: RunLock  # the run directory's, held while the run trains
    mixed: Optional[MixedReplay] = None  # with offline_data: what the updates sample

    def completed_summary(self) -> Dict:
        """A finished run's summary.json, after a line saying that the run is complete."""
        summary = self.files.read_summary()
        more = ""
        if summary.get("stop"):
            stop = summary["stop"]
            # Turning off the stop option that ended it continues it; after a user's
            # callback, or a stop at total_steps, only more total_steps do.
            at_end = summary.get("env_steps", 0) >= summary.get("total_steps", 0)
            option = None if at_end else stop.get("option")
            hint = "a resume with a larger total_steps continues it"
            if option in STOP_OFF:
                off, flag = STOP_OFF[option]
                hint = f"a resume with {option}={off} (--{option}={flag}) continues it"
            more = f" (stopped: {stop.get('reason')}; {hint})"
        logging.info("run in %s is already complete%s", self.run_dir, more)
        return summary


STOP_OPTIONS = ("stop_at_return", "stop_after_no_improvement", "min_evaluations")
# What turns off each stop option (a resume with it continues the run that it stopped).
STOP_OFF = {"stop_at_return": ("None", "none"), "stop_after_no_improvement": ("0", "0")}


def build_run(hooks: list, start: CheckedRun, actor_fn, critic_fn) -> RunParts:
    """The parts of a checked run (`hooks`: check_hooks's), restored from the newest
    checkpoint on a resume; writes config.json once the start is sure. The run directory's
    lock is held from before the restore until the parts are made; `Trainer.run` takes it again."""
    if start.config.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(start.config.seed)  # before the networks are made
    lock = RunLock(start.run_dir)
    lock.hold()  # an existing run directory's; a new one's once it is made
    try:
        return _make_parts(start, hooks, actor_fn, critic_fn, lock)
    finally:
        lock.release()


def _make_parts(start: CheckedRun, hooks: list, actor_fn, critic_fn, lock) -> RunParts:
    for change in start.resume_changes:
        logging.info("resume with %s", change)
    config, spec, files = start.config, start.spec, RunDir(start.run_dir)
    learner = SACLearner(spec.obs_dim, spec.action_dim, config, actor_fn, critic_fn)
    copy_env = partial(checked_env, start.env_fn)
    evaluator = Evaluator(start.eval_env, learner, spec, config, files.file(VIDEOS_DIR), copy_env)
    buffer = _replay_buffer(start)
    mixed = _mixed_replay(start, buffer)
    checkpointer = Checkpointer(files.file(CHECKPOINTS_DIR), learner, config.keep_checkpoints)
    schedule = UpdateSchedule.from_config(config)
    updates = Updates(learner, mixed or buffer, config, lambda: checkpointer.latest)
    loop, resumed_from, restored = LoopState(), None, None
    if start.resume:
        restore = _restore_latest(start.run_dir, checkpointer, buffer, schedule, updates, mixed)
        if restore is not None:
            loop, resumed_from, restored = restore
    _start_learner(start, learner, mixed, restored)
    # A resume that changes a stop option may have turned off the stop that ended the run.
    stop_changed = any(change.name in STOP_OPTIONS for change in start.resume_changes)
    finished = _finished(loop.step, config.total_steps, files.read_summary(), stop_changed)
    if not finished and not type(learner.sac.variant).__module__.startswith("tfsac."):
        # A user's variant's update, traced before anything is written: its mistakes first.
        learner.trace_update(acting=config.num_actors == 0 and config.total_steps > 0)
    source = None
    if not finished:
        source = _make_source(start, learner, schedule, actor_fn, loop.resumes)
        if restored is not None:
            source.load_state(*restored)
    calls = CallbackList([hooks[0], *config_callbacks(config), *hooks[1:]])
    progress = _open_run_dir(start, files, learner, source, calls, loop.step, lock)
    return RunParts(
        config,
        start.run_dir,
        spec,
        files,
        calls,
        learner,
        evaluator,
        buffer,
        checkpointer,
        schedule,
        updates,
        loop,
        resumed_from,
        source,
        progress,
        lock,
        mixed,
    )


def _replay_buffer(start: CheckedRun) -> ReplayBuffer:
    config, spec = start.config, start.spec
    if config.her:
        compute = reward_function(start.eval_env, spec.goal_columns, config.env_id)
        return her_buffer(config, spec, compute)
    shape = (config.buffer_size, spec.obs_dim, spec.action_dim, config.seed)
    return ReplayBuffer(*shape, n_steps=config.n_steps, gamma=config.gamma)


def _mixed_replay(start: CheckedRun, buffer: ReplayBuffer) -> Optional[MixedReplay]:
    """With offline_data, the sampler over it and `buffer` (the data alone at total_steps=0)."""
    config, data = start.config, start.recorded
    if data is None:
        return None
    what = (len(data), data.source, data.kind, data.checksum[:12])
    logging.info("offline data: %d transitions from %s (%s, sha256 %s)", *what)
    recorded = RecordedReplay(data, config.n_steps, config.gamma)
    ratio = 1.0 if config.total_steps == 0 else config.offline_ratio
    mixed = MixedReplay(buffer, recorded, ratio, config.seed)
    rows = None if ratio is None else mixed.recorded_rows(config.batch_size)
    if ratio is not None and 0 < ratio < 1 and rows in (0, config.batch_size):
        what = (ratio, config.batch_size, rows, "online" if rows == 0 else "recorded")
        logging.warning(
            "offline_ratio %g of a batch of %d is %d recorded rows per batch: %s rows only", *what
        )
    return mixed


def _start_learner(start: CheckedRun, learner, mixed: Optional[MixedReplay], restored):
    """A new run's learned state: init_from's, or fresh networks whose observation
    statistics start from the recorded rows its updates sample. A resume has the checkpoint's."""
    if restored is not None:
        return
    config = start.config
    if config.init_from is not None:  # a resume whose own checkpoints failed: not checked yet
        warm_start(learner, config, start.init_source or check_source(config, start.spec))
    elif mixed is not None and mixed.ratio != 0:
        learner.observe(mixed.recorded.data.observation)


def _finished(step: int, total_steps: int, summary: dict, stop_changed: bool) -> bool:
    """Whether summary.json is written, at total_steps or at a stop that still stands."""
    if not summary:
        return False
    stopped = summary.get("stop") and summary.get("total_steps") == total_steps
    return step >= total_steps or bool(stopped and not stop_changed)


def _open_run_dir(start: CheckedRun, files: RunDir, learner, source, calls, step, lock):
    """The run directory with the progress log open, once the start can no longer be
    refused; a resume's rows after `step` (a killed session's) are cut."""
    config = start.config
    os.makedirs(start.run_dir, exist_ok=True)
    lock.hold()  # a new run directory's, before its first file
    progress = ProgressLog(
        files,
        learner.metric_names,
        config.total_steps,
        config.tensorboard and source is not None,
        calls.on_log,
        extra_fields=source.stats_fields() if source else (),
    )
    if start.resume and source is not None:  # a finished run's stay whole
        progress.truncate(step, events=False)
    if source is not None:
        write_json(files.file(CONFIG_FILE), config.to_dict())
        write_json(files.file(ENV_SPEC_FILE), start.spec.to_dict())
    return progress


def _make_source(start: CheckedRun, learner, schedule, actor_fn, resumes) -> CollectionSource:
    config = start.config
    if config.num_actors:
        make = env_runners("make")
        return make(config, start.env_fn, start.spec, learner, schedule, actor_fn, resumes)
    collector = Collector(
        start.env_fn, start.spec, config.num_envs, config.vector_mode, config.seed, config.gamma
    )
    return LocalSource(collector, learner, schedule, config.seed, config.total_steps)


def _restore_latest(run_dir, checkpointer, buffer, schedule, updates, mixed):
    """(loop, prefix, (state, env snapshot)) of the newest checkpoint that restores, or None."""
    restored = checkpointer.restore_newest(buffer)
    if restored is None:
        logging.info("no checkpoint in %s: starting a new run", run_dir)
        return None
    prefix, state = restored
    loop = LoopState.from_dict(state)
    loop.resumes += 1
    schedule.load_state(state)
    updates.load_state(state, loop.step)
    if mixed is not None:
        mixed.load_state(state)
    logging.info("resumed from %s at step %d (%d episodes)", prefix, loop.step, loop.episodes)
    return loop, prefix, (state, checkpointer.read_blob(prefix, ENVS_FILE))


def warm_start(learner, config: SACConfig, source: Tuple[SACConfig, List[str]]) -> str:
    """Restores init_from's learned state (networks, targets, observation statistics and a
    learned temperature; not a run's course) into a new run's `learner` from check_source's
    `source`; returns the checkpoint restored."""
    source_config, prefixes = source
    learned = learner.learned_objects(temperature=source_config.learned_alpha)
    errors = []
    for prefix in prefixes:
        try:
            restore_checkpoint(tf.train.Checkpoint(**learned), prefix, "model")
        except TfsacError as e:
            errors.append(str(e))
            if len(prefixes) > 1:
                logging.warning("init_from: skipping a checkpoint that does not restore: %s", e)
            continue
        logging.info(
            "init_from %s: networks, targets%s and observation statistics; optimizers, "
            "random streams and the replay start afresh",
            prefix,
            ", temperature" if source_config.learned_alpha and config.learned_alpha else "",
        )
        return prefix
    raise Fault(
        f"init_from {config.init_from!r}: no checkpoint restores into this run ({errors[0]})"
    )
