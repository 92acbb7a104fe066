"""SimBa networks (Lee et al. 2025, arXiv:2410.09754): the shared observation normaliser (on
by default; SBX's SimbaPolicy has none), a linear embedding, residual blocks and a last Norm
before the heads; Norm is layer norm, or with CrossQ batch renorm (as SBX's SimBa CrossQ)."""

from __future__ import annotations

from functools import partial
from typing import Dict, Optional

import keras

from tfsac.algorithm.layers import (
    ActorFrame,
    BatchRenorm,
    EnsembleCritic,
    EnsembleDense,
    EnsembleLayerNorm,
    ObservationNormalizer,
    block_stack,
    call_layer,
    call_sequential,
)


def _norm(batch_norm: Optional[Dict], ensemble: int, name: str):
    if batch_norm:
        return BatchRenorm(**batch_norm, name=name)
    if ensemble:
        return EnsembleLayerNorm(ensemble, name=name)
    return keras.layers.LayerNormalization(epsilon=1e-5, name=name)


class ResidualBlock(keras.layers.Layer):
    """x + Dense(ReLU(Dense(Norm(x), 4 width)), width), He-initialised; [n, B, width] with
    `ensemble` = n, else [B, width]."""

    def __init__(self, width: int, ensemble: int = 0, batch_norm=None, **kwargs):
        super().__init__(**kwargs)
        self.norm = _norm(batch_norm, ensemble, "norm")
        if ensemble:
            dense = partial(EnsembleDense, ensemble, kernel_init="he_normal")
        else:
            dense = partial(keras.layers.Dense, kernel_initializer=keras.initializers.HeNormal())
        self.expand = dense(4 * width, "relu", name="expand")
        self.project = dense(width, name="project")

    takes_members = True  # passed on to an ensemble's layers

    def call(self, x, training=None, members=None):
        h = call_layer(self.expand, call_layer(self.norm, x, training, members), None, members)
        return x + call_layer(self.project, h, None, members)


class SimbaActor(ActorFrame):
    """Observation -> (mean, log_std), log_std clipped: the embedding, one residual block per
    hidden size, a last Norm, the heads."""

    def __init__(
        self,
        action_dim: int,
        hidden_sizes,
        normalizer: Optional[ObservationNormalizer],
        log_std_bounds=(-20.0, 2.0),
        batch_norm: Optional[Dict] = None,
        **kw,
    ):
        super().__init__(action_dim, log_std_bounds, normalizer, **kw)
        self.input_norm = BatchRenorm(**batch_norm, name="input_norm") if batch_norm else None
        self.embed = keras.layers.Dense(hidden_sizes[0], name="embed")
        self.blocks = block_stack(ResidualBlock, hidden_sizes, 0, batch_norm)
        self.out_norm = _norm(batch_norm, 0, "out_norm")
        self.mean = keras.layers.Dense(action_dim, name="mean")
        self.log_std = keras.layers.Dense(action_dim, name="log_std")

    def numpy_plan(self) -> list:
        """As networks.Actor.numpy_plan."""
        if self.forward_replaced(SimbaActor):
            return None
        normalize = ["normalize"] if self.normalizer is not None else []
        renorm = ["batch_renorm"] if self.input_norm is not None else []
        norm = "batch_renorm" if renorm else "layer_norm"
        blocks = [f"block:{norm}"] * len(self.blocks.layers)
        return [*normalize, *renorm, "dense", *blocks, norm]

    def features(self, x, training):
        return self.out_norm(self.blocks(self.embed(x), training=training), training=training)


class SimbaCritic(EnsembleCritic):
    """The critic ensemble with SimBa members: Q values [n, B] (or [n, B, outputs])."""

    def __init__(
        self,
        num_critics: int,
        hidden_sizes,
        normalizer: Optional[ObservationNormalizer],
        outputs: int = 1,
        batch_norm: Optional[Dict] = None,
        **kw,
    ):
        super().__init__(num_critics, outputs, normalizer, **kw)
        self.input_norm = BatchRenorm(**batch_norm, name="input_norm") if batch_norm else None
        self.embed = EnsembleDense(num_critics, hidden_sizes[0], name="embed")
        self.blocks = block_stack(ResidualBlock, hidden_sizes, num_critics, batch_norm)
        self.out_norm = _norm(batch_norm, num_critics, "out_norm")
        self.head = EnsembleDense(num_critics, outputs, name="q")

    def features(self, x, training, members):
        x = call_sequential(self.blocks, self.embed(x, members=members), training, members)
        return call_layer(self.out_norm, x, training, members)
