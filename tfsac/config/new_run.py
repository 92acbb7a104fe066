"""The checks of a new run's settings beyond SACConfig.validate(): a run saved before
them must still load (resume, evaluate, export), so they run only where a run starts
afresh (tfsac.run.preflight.check_run, a sweep's plan)."""

from __future__ import annotations

from typing import List

from tfsac.config.sac_config import SACConfig, field_default
from tfsac.config.schedules import duplicate_steps
from tfsac.errors import TfsacError

# What only a learned temperature reads.
LEARNED_ALPHA_OPTIONS = ("initial_alpha", "alpha_learning_rate", "target_entropy", "use_log_alpha")


def check_new_run(config: SACConfig) -> List[str]:
    """TfsacError for min_evaluations without its stop, a piecewise schedule giving two
    factors from one step, or an offline-only run whose actor would never step
    (policy_delay > offline_updates); returns warnings: options only a learned alpha
    reads, beside a fixed one (a preset's, say)."""
    if config.min_evaluations and not config.stop_after_no_improvement:
        # A new run's mistake; a resume that turns the stop off keeps its saved value.
        raise TfsacError(
            "min_evaluations needs stop_after_no_improvement: it delays that stop only"
        )
    if steps := duplicate_steps(config.lr_schedule):
        raise TfsacError(
            f"lr_schedule {config.lr_schedule!r} gives step {steps[0]} two factors: give each "
            "step one"
        )
    if config.total_steps == 0 and config.offline_updates:  # offline only
        intervals = {  # resolved ('auto' is the variant's) where a run starts
            "policy_delay": (config.policy_delay, "the actor would never be updated"),
            "target_update_interval": (config.target_update_interval, "the targets would stay"),
        }
        for name, (every, what) in intervals.items():
            if isinstance(every, int) and every > config.offline_updates:
                raise TfsacError(
                    f"{name} ({every}) is more than offline_updates ({config.offline_updates}): "
                    f"{what}"
                )
    if config.learned_alpha:
        return []
    return [
        f"{name}={getattr(config, name)} is not read: alpha is fixed at {config.alpha:g} "
        "(alpha=auto learns it)"
        for name in LEARNED_ALPHA_OPTIONS
        if getattr(config, name) != field_default(name)
    ]
