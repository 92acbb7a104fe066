"""XQC's networks (Palenicek et al., ICLR 2026; the authors' xqc/networks/mlp.py, XQCBlock,
and common.py's norm_network): batch normalisation of the input, then per hidden size a
bias-free unit-norm linear layer (tfsac.algorithm.unit_layers.UnitDense), a batch norm and
a ReLU (the norm before the activation), and unit-norm heads with free biases.

Their batch norm is plain batch normalisation (momentum 0.99, epsilon 1e-3, a free scale
and offset, the biased batch variance): CrossQ's BatchRenorm of tfsac.algorithm.layers
while it warms up, here for good. The authors initialise orthogonally with gain sqrt(2)
and then scale every weight vector to unit norm, which leaves UnitDense's orthogonal start."""

from __future__ import annotations

from typing import Optional, Sequence

import keras

from tfsac.algorithm.layers import ActorFrame, BatchRenorm, EnsembleCritic
from tfsac.algorithm.unit_layers import UnitDense

# BatchRenorm counts its training calls in float32, which stops at 2^24: a warm-up this
# long never ends, so it stays plain batch normalisation.
NEVER = 2**25


def batch_norm(name: str) -> BatchRenorm:
    return BatchRenorm(momentum=0.99, warmup_steps=NEVER, epsilon=1e-3, name=name)


def trunk(hidden_sizes: Sequence[int], ensemble: int) -> keras.Sequential:
    """UnitDense -> batch norm -> ReLU per hidden size."""
    layers = []
    for i, h in enumerate(hidden_sizes):
        layers += [
            UnitDense(h, ensemble, name=f"hidden_{i}"),
            batch_norm(f"batch_norm_{i}"),
            keras.layers.ReLU(name=f"relu_{i}"),
        ]
    return keras.Sequential(layers, name="trunk")


class XQCActor(ActorFrame):
    """Observation -> (mean, log_std): the trunk, then unit-norm heads with biases; log_std
    clipped to the authors' [-10, 2]."""

    def __init__(
        self,
        action_dim: int,
        hidden_sizes: Sequence[int],
        normalizer: Optional[keras.layers.Layer] = None,
        **kw,
    ):
        super().__init__(action_dim, (-10.0, 2.0), normalizer, **kw)
        self.input_norm = batch_norm("input_norm")
        self.trunk = trunk(hidden_sizes, 0)
        self.mean = UnitDense(action_dim, use_bias=True, name="mean")
        self.log_std = UnitDense(action_dim, use_bias=True, name="log_std")

    def features(self, x, training):
        return self.trunk(x, training=training)


class XQCCritic(EnsembleCritic):
    """The ensemble of XQC critics (EnsembleCritic's frame)."""

    def __init__(
        self,
        num_critics: int,
        hidden_sizes: Sequence[int],
        outputs: int = 1,
        normalizer: Optional[keras.layers.Layer] = None,
        **kw,
    ):
        super().__init__(num_critics, outputs, normalizer, **kw)
        self.input_norm = batch_norm("input_norm")
        self.trunk = trunk(hidden_sizes, num_critics)
        self.head = UnitDense(outputs, num_critics, use_bias=True, name="q")

    def features(self, x, training, members):
        return self.trunk(x, training=training)
