"""The sizes that set a run's memory, estimated from its options and its env's sizes before
anything is written (run/preflight.py refuses a run where they clearly cannot fit in this
machine's memory: TensorFlow would otherwise fail mid-build). TF-free."""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from tfsac.algorithm.variants import variant_of
from tfsac.data.her import HerReplayBuffer
from tfsac.data.replay import ReplayBuffer

FLOAT = 4  # bytes of a float32
# Refused above this share of physical memory: only what clearly cannot fit.
SHARE = 0.8
# Copies of every network parameter during training: the weights, Adam's two moments and
# the target network's copy.
PARAMETER_COPIES = 4


def physical_memory() -> Optional[int]:
    """Bytes of this machine's memory, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _mlp_parameters(sizes: List[int]) -> int:
    return sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=False))


def memory_estimates(
    config, obs_dim: int, action_dim: int, recorded_bytes: int = 0
) -> List[Tuple[str, int, str]]:
    """(option, bytes, what) for each of a resolved config's largest allocations: the replay buffer
    (with HER's episode index), the networks' parameters (with their optimizer and target
    copies), the widest hidden activations of a batch, TQC's pairwise quantile loss and the
    recorded data (`recorded_bytes`, as loaded)."""
    critics = config.num_critics
    buffer_class = HerReplayBuffer if config.her else ReplayBuffer
    critic_out = variant_of(config).critic_outputs(config)
    actor = _mlp_parameters([obs_dim, *config.hidden_sizes, 2 * action_dim])
    critic = _mlp_parameters([obs_dim + action_dim, *config.critic_hidden_sizes, critic_out])
    widest = max([*config.hidden_sizes, *config.critic_hidden_sizes])
    # The critics' sizes are the actor's unless set apart ('auto').
    critic_option = (
        "critic_hidden_sizes"
        if tuple(config.critic_hidden_sizes) != tuple(config.hidden_sizes)
        else "hidden_sizes"
    )
    widest_option = "hidden_sizes" if max(config.hidden_sizes) == widest else critic_option
    estimates = [
        (
            "buffer_size",
            config.buffer_size * buffer_class.bytes_per_row(obs_dim, action_dim),
            f"the replay buffer ({config.buffer_size} transitions of {obs_dim} observation "
            f"and {action_dim} action floats{' and their HER episode index' * config.her})",
        ),
        (
            "hidden_sizes" if actor >= critics * critic else critic_option,
            (actor + critics * critic) * PARAMETER_COPIES * FLOAT,
            f"the networks' {actor + critics * critic} parameters (each with its Adam "
            "moments and target copy)",
        ),
        (
            "batch_size" if config.batch_size >= widest else widest_option,
            config.batch_size * widest * (critics + 1) * FLOAT,
            f"a batch's widest hidden activations ({config.batch_size} x {widest} floats "
            "per network)",
        ),
    ]
    if critic_out > 1:  # a distributional variant's atoms (TQC's quantiles)
        atoms = critics * critic_out
        estimates.append(
            (
                "n_quantiles",
                # Eq. 12 of TQC compares every critic's atoms with every pooled target atom.
                atoms * config.batch_size * atoms * FLOAT,
                f"the quantile loss (num_critics x batch_size x n_quantiles x "
                f"num_critics x n_quantiles = {atoms} x {config.batch_size} x {atoms} floats)",
            )
        )
    if recorded_bytes:
        estimates.append(("offline_data", recorded_bytes, "the recorded data"))
    return estimates
