"""A new run that starts from another run's learned state (`init_from`): fine-tuning online
after offline-only training, or on another env with the same spaces. What the networks
learned carries over (actor, critics and their targets, a variant's networks, a learned
temperature, the observation statistics); what belongs to a run's course does not
(optimizer moments and step counts, random streams, reward statistics, gSDE noise, the
replay), so the new run's own settings apply from its first update."""

from __future__ import annotations

import os
import re
from typing import List, Tuple

from absl import logging

from tfsac.algorithm.variants import variant_of  # TF-free: the declarations only
from tfsac.config import SACConfig
from tfsac.config.resume import renamed
from tfsac.data.envs import remade_env_spec
from tfsac.data.spaces import EnvSpec, read_env_spec
from tfsac.errors import TfsacError
from tfsac.files import CHECKPOINTS_DIR, checkpoint_steps, run_config

# Settings that decide the learned state's variables or what they mean: the source run
# must have had this run's values (as a resume must; see checkpointing.STRUCTURAL_FIELDS).
MATCHED_FIELDS = (
    "algorithm",
    "variant",
    "network",
    "hidden_sizes",
    "critic_hidden_sizes",
    "num_critics",
    "critic_layer_norm",
    "normalize_observations",
    "use_sde",
    "use_log_alpha",
)


def source_checkpoints(source: str) -> Tuple[SACConfig, List[str]]:
    """(the source run's config, its checkpoint prefixes to try, newest first) for
    `source`: a run directory (its complete checkpoints) or one checkpoint's prefix
    (<run_dir>/checkpoints/ckpt-<step>)."""
    path = os.path.normpath(source)
    folder, name = os.path.split(path)
    step = None
    if os.path.basename(folder) == CHECKPOINTS_DIR and name.startswith("ckpt-"):
        path, step = os.path.dirname(folder), name[len("ckpt-") :]
        if not (step.isascii() and step.isdigit()):
            # One of a checkpoint's files: the checkpoint is their common prefix.
            prefix = re.fullmatch(r"(ckpt-[0-9]+)\.(index|extra|data-.*)", name)
            hint = f": name its prefix, {os.path.join(folder, prefix[1])}" if prefix else ""
            raise TfsacError(f"init_from {source!r}: not a checkpoint (ckpt-<env step>){hint}")
    try:
        config = run_config(path, need_checkpoint=True, step=None if step is None else int(step))
    except TfsacError as e:
        raise TfsacError(f"init_from: {e}") from None
    folder = os.path.join(path, CHECKPOINTS_DIR)
    steps = checkpoint_steps(folder) if step is None else [int(step)]
    return config, [os.path.join(folder, f"ckpt-{s}") for s in steps]


def check_matches(source_config: SACConfig, config: SACConfig, source: str) -> None:
    """TfsacError naming the first setting in which the source run differs from `config`."""
    for field in MATCHED_FIELDS + variant_of(config).resume_keeps:
        old, new = getattr(source_config, field), getattr(config, field)
        # Both configs parsed: widths are tuples on both sides.
        if old != new and not renamed(field, old, new):
            raise TfsacError(
                f"init_from {source!r} was trained with {field}={old!r}, this run has "
                f"{field}={new!r}: its networks do not fit; use the same {field}"
            )


def check_spaces(source_config: SACConfig, config: SACConfig, spec: EnvSpec, run_dir) -> None:
    """TfsacError where the source's env gives other observation or action sizes than this
    run's (`spec`): as its env_spec.json says, else as its env made again; passed over
    where neither can say (a custom env of a tfsac that wrote no env_spec.json)."""
    same = (source_config.env_id, source_config.env_kwargs) == (config.env_id, config.env_kwargs)
    if same:
        return
    theirs = read_env_spec(run_dir)  # a damaged env_spec.json: one line
    if theirs is None:  # a run of an earlier tfsac: its env made again, where it can be
        try:
            theirs = remade_env_spec(source_config.env_id, source_config.env_kwargs)
        except Exception:  # noqa: BLE001 - any env's failure: the restore still checks shapes
            return
    if (theirs.obs_dim, theirs.action_dim) != (spec.obs_dim, spec.action_dim):
        raise TfsacError(
            f"init_from {config.init_from!r} was trained on {theirs.env_id} (observations of "
            f"{theirs.obs_dim} numbers, actions of {theirs.action_dim}), this run's "
            f"{spec.env_id} has {spec.obs_dim} and {spec.action_dim}: its networks do not fit"
        )


def check_source(config: SACConfig, spec: EnvSpec) -> Tuple[SACConfig, List[str]]:
    """(the source run's config, the checkpoint prefixes of config.init_from to try, newest
    first); TfsacError where it is no tfsac run with checkpoints, was trained with other
    networks' settings or on other spaces than `spec`'s (run by the start's checks,
    without TensorFlow)."""
    source_config, prefixes = source_checkpoints(config.init_from)
    check_matches(source_config, config, config.init_from)
    check_spaces(source_config, config, spec, os.path.dirname(os.path.dirname(prefixes[0])))
    return source_config, prefixes


def warm_start(learner, config: SACConfig, spec: EnvSpec) -> str:
    """Restores config.init_from's learned state into `learner` (a new run's SACLearner, for
    `spec`); returns the checkpoint restored. TfsacError where check_source refuses the
    source, or none of its checkpoints' learned state restores into this learner. A
    temperature the source held fixed is a setting, not learned: this run's applies."""
    import tensorflow as tf  # this module's checks run before TensorFlow is imported

    from tfsac.deploy.loading import restore_checkpoint

    source_config, prefixes = check_source(config, spec)
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
    raise TfsacError(
        f"init_from {config.init_from!r}: no checkpoint restores into this run ({errors[0]})"
    )
