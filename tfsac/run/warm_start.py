"""A new run that starts from another run's learned state (`init_from`): fine-tuning online
after offline-only training, or on another env with the same spaces. What the networks
learned carries over (actor, critics and their targets, a variant's networks, a learned
temperature, the observation statistics); what belongs to a run's course does not
(optimizer moments and step counts, random streams, reward statistics, gSDE noise, the
replay), so the new run's own settings apply from its first update."""

from __future__ import annotations

import os
from typing import List, Tuple

from absl import logging

from tfsac.algorithm.variants import VARIANTS  # TF-free: the declarations only
from tfsac.config import SACConfig
from tfsac.errors import TfsacError, first_line
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


def source_checkpoints(source: str) -> Tuple[str, List[str]]:
    """(the source's run directory, its checkpoint prefixes to try, newest first) for
    `source`: a run directory (its complete checkpoints) or one checkpoint's prefix
    (<run_dir>/checkpoints/ckpt-<step>)."""
    path = os.path.normpath(source)
    folder, name = os.path.split(path)
    step = None
    if os.path.basename(folder) == CHECKPOINTS_DIR and name.startswith("ckpt-"):
        path, step = os.path.dirname(folder), name[len("ckpt-") :]
        if not (step.isascii() and step.isdigit()):
            raise TfsacError(f"init_from {source!r}: not a checkpoint (ckpt-<env step>)")
    try:
        run_config(path, need_checkpoint=True, step=None if step is None else int(step))
    except TfsacError as e:
        raise TfsacError(f"init_from: {e}") from None
    folder = os.path.join(path, CHECKPOINTS_DIR)
    steps = checkpoint_steps(folder) if step is None else [int(step)]
    return path, [os.path.join(folder, f"ckpt-{s}") for s in steps]


def check_matches(source_config: SACConfig, config: SACConfig, source: str) -> None:
    """TfsacError naming the first setting in which the source run differs from `config`."""
    fields = MATCHED_FIELDS + VARIANTS[config.algorithm].resume_keeps
    saved, current = source_config.to_dict(), config.to_dict()
    for field in fields:
        old, new = saved[field], current[field]
        if (tuple(old) if isinstance(old, list) else old) != (
            tuple(new) if isinstance(new, list) else new
        ):
            raise TfsacError(
                f"init_from {source!r} was trained with {field}={old!r}, this run has "
                f"{field}={new!r}: its networks do not fit; use the same {field}"
            )


def check_source(config: SACConfig) -> List[str]:
    """The checkpoint prefixes of config.init_from to try, newest first; TfsacError where it
    is no tfsac run with checkpoints, or was trained with other networks' settings (run by
    the start's checks, without TensorFlow)."""
    run_dir, prefixes = source_checkpoints(config.init_from)
    check_matches(run_config(run_dir), config, config.init_from)
    return prefixes


def warm_start(learner, config: SACConfig) -> str:
    """Restores config.init_from's learned state into `learner` (a new run's SACLearner);
    returns the checkpoint restored. TfsacError where check_source refuses the source, or
    none of its checkpoints' learned state restores into this learner."""
    import tensorflow as tf  # this module's checks run before TensorFlow is imported

    prefixes = check_source(config)
    checkpoint = tf.train.Checkpoint(**learner.learned_objects())
    errors = []
    for prefix in prefixes:
        try:
            # Every variable of the learned state must come from the checkpoint: a source
            # with other networks (a custom actor_fn, other spaces) is refused, not mixed.
            checkpoint.restore(prefix).expect_partial().assert_existing_objects_matched()
        except (tf.errors.OpError, AssertionError, ValueError, IndexError, KeyError) as e:
            errors.append(f"{prefix}: {first_line(e)}")
            if len(prefixes) > 1:
                logging.warning("init_from: skipping a checkpoint that does not restore: %s", e)
            continue
        logging.info(
            "init_from %s: networks, targets, temperature and observation statistics; "
            "optimizers, random streams and the replay start afresh",
            prefix,
        )
        return prefix
    raise TfsacError(
        f"init_from {config.init_from!r}: no checkpoint restores into this run ({errors[0]})"
    )
