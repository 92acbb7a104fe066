"""The memory a run (or scripts/collect.py's recording) needs, estimated before anything is
written and refused where it clearly cannot fit (TensorFlow would fail mid-build). TF-free."""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from tfsac.algorithm.variants import variant_of
from tfsac.data.her import HerReplayBuffer
from tfsac.data.replay import ReplayBuffer
from tfsac.errors import TfsacError

FLOAT = 4  # bytes of a float32
SHARE = 0.8  # refused above this share of physical memory: only what clearly cannot fit
PARAMETER_COPIES = 4  # the weights, Adam's two moments and the target network's copy


def physical_memory() -> Optional[int]:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _mlp_parameters(sizes: List[int]) -> int:
    return sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=False))


def memory_estimates(
    config, obs_dim: int, action_dim: int, recorded_bytes: int = 0
) -> List[Tuple[str, int, str]]:
    """(option, bytes, what) for each of a resolved config's largest allocations: replay,
    parameters, a batch's widest activations, TQC's quantile loss and the recorded data."""
    critics = config.num_critics
    buffer_class = HerReplayBuffer if config.her else ReplayBuffer
    critic_out = variant_of(config).critic_outputs(config)
    actor = _mlp_parameters([obs_dim, *config.hidden_sizes, 2 * action_dim])
    critic = _mlp_parameters([obs_dim + action_dim, *config.critic_hidden_sizes, critic_out])
    widest = max([*config.hidden_sizes, *config.critic_hidden_sizes])
    # The critics' sizes are the actor's unless set apart ('auto').
    same = tuple(config.critic_hidden_sizes) == tuple(config.hidden_sizes)
    critic_option = "hidden_sizes" if same else "critic_hidden_sizes"
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


def check_memory(
    config, obs_dim: int, action_dim: int, memory: Optional[int] = None, recorded_bytes: int = 0
) -> None:
    """TfsacError, naming the option behind the largest allocation, where the estimates
    exceed SHARE of `memory` (default: this machine's; nothing is refused where unknown)."""
    memory = physical_memory() if memory is None else memory
    if not memory:
        return
    estimates = memory_estimates(config, obs_dim, action_dim, recorded_bytes)
    total = sum(size for _, size, _ in estimates)
    if total <= SHARE * memory:
        return
    name, size, what = max(estimates, key=lambda e: e[1])
    value = getattr(config, name)
    shown = ",".join(map(str, value)) if isinstance(value, tuple) else repr(value)
    raise TfsacError(
        f"{name}={shown} needs about {_bytes(size)} for {what}; the run "
        f"needs about {_bytes(total)}, more than {SHARE:.0%} of this machine's "
        f"{_bytes(memory)} of memory"
    )


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024:
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def check_recording(steps: int, obs_dim: int, action_dim: int, what: str) -> None:
    """TfsacError where recording `steps` transitions (float64 fields, held until written,
    then copied once more) clearly cannot fit; `what` names the option that asked for them."""
    memory = physical_memory()
    size = 2 * steps * 8 * (obs_dim + action_dim + 3)
    if memory and size > SHARE * memory:
        raise TfsacError(
            f"{what} needs about {_bytes(size)} to record, more than {SHARE:.0%} of this "
            f"machine's {_bytes(memory)} of memory"
        )
