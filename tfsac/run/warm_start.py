"""A new run that starts from another run's learned state (`init_from`): fine-tuning online
after offline-only training, or on another env with the same spaces. What the networks
learned carries over (actor, critics and their targets, a variant's networks, a learned
temperature, the observation statistics); what belongs to a run's course does not
(optimizer moments and step counts, random streams, reward statistics, gSDE noise, the
replay), so the new run's own settings apply from its first update."""

from __future__ import annotations

from typing import List, Tuple

from absl import logging

from tfsac.config import SACConfig
from tfsac.errors import Fault, TfsacError


def warm_start(learner, config: SACConfig, source: Tuple[SACConfig, List[str]]) -> str:
    """Restores config.init_from's learned state into `learner` (a new run's SACLearner)
    from `source`, the source run's config and checkpoint prefixes as the start checked
    them (preflight.check_source); returns the checkpoint restored. A temperature the
    source held fixed is a setting, not learned: this run's applies."""
    import tensorflow as tf  # this module is imported before TensorFlow is

    from tfsac.deploy.loading import restore_checkpoint

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
