"""The optimizers of SAC's parts: how one is made from the config, and the rate each starts
from before --lr_schedule scales it."""

from __future__ import annotations

from typing import Dict

import keras

from tfsac.algorithm.resolve import options_read
from tfsac.config import SACConfig


def make_optimizer(config: SACConfig, part: str) -> keras.optimizers.Optimizer:
    """Adam (AdamW with `weight_decay`) at the config's rate for `part`, with its beta_1
    and gradient clip."""
    kwargs = dict(
        beta_1=config.adam_beta1, global_clipnorm=config.max_grad_norm, name=f"{part}_adam"
    )
    if config.weight_decay:
        return keras.optimizers.AdamW(config.rate(part), weight_decay=config.weight_decay, **kwargs)
    return keras.optimizers.Adam(config.rate(part), **kwargs)


def base_rates(sac) -> Dict[str, float]:
    """Each optimizer's rate before --lr_schedule scales it: the config's for SAC's parts
    and for a variant's part whose rate option it reads (v1's value), else the rate the
    variant made its optimizer with. An optimizer made with a Keras LearningRateSchedule
    follows that schedule alone (left out)."""
    taken = {"actor", "critic", *sac.temperature.optimizers()}
    reads = options_read(type(sac.variant))
    rates = {}
    for part, optimizer in sac.optimizers().items():
        if part in taken or f"{part}_learning_rate" in reads:
            rates[part] = sac.config.rate(part)
        elif not isinstance(
            getattr(optimizer, "_learning_rate", None),
            keras.optimizers.schedules.LearningRateSchedule,
        ):
            rates[part] = float(optimizer.learning_rate.numpy())
    return rates
