"""The checks of a new run's settings beyond SACConfig.validate(): they run only where a run
starts afresh, so runs saved before them still load."""

from __future__ import annotations

from typing import List

from tfsac.config.rules import NEW_RUN_RULES, check_rules
from tfsac.config.sac_config import SACConfig, field_default
from tfsac.config.schedules import duplicate_steps, schedule_steps
from tfsac.errors import TfsacError

# What only a learned temperature reads.
LEARNED_ALPHA_OPTIONS = ("initial_alpha", "alpha_learning_rate", "target_entropy", "use_log_alpha")


def check_new_run(config: SACConfig) -> List[str]:
    """TfsacError for settings a new run could never act on; returns warnings for options
    it does not read (those of a learned alpha beside a fixed one) or reads only at its end."""
    check_rules(config, NEW_RUN_RULES)
    if steps := duplicate_steps(config.lr_schedule):
        raise TfsacError(
            f"lr_schedule {config.lr_schedule!r} gives step {steps[0]} two factors: give each "
            "step one"
        )
    updates = _updates(config)
    intervals = {  # resolved ('auto' is the variant's) where a run starts
        "policy_delay": (config.policy_delay, "the actor would never be updated"),
        "target_update_interval": (config.target_update_interval, "the targets would stay"),
    }
    for name, (every, what) in intervals.items():
        if updates and isinstance(every, int) and 0 < updates[0] < every:  # 0: asked for
            raise TfsacError(f"{name} ({every}) is more than {updates[1]}: {what}")
    warnings = _unreachable(config)
    if config.learned_alpha:
        return warnings
    return warnings + [
        f"{name}={getattr(config, name)} is not read: alpha is fixed at {config.alpha:g} "
        "(alpha=auto learns it)"
        for name in LEARNED_ALPHA_OPTIONS
        if getattr(config, name) != field_default(name)
    ]


def _updates(config: SACConfig):
    """(the updates a new run makes, said), where they are known ahead: None with
    episodes_per_rollout or env runners, whose episodes or chunks set the phases."""
    if config.total_steps == 0:
        return (config.offline_updates, f"offline_updates ({config.offline_updates})")
    if config.episodes_per_rollout or config.num_actors:
        return None
    phases = (config.total_steps - config.learning_starts) // config.train_freq
    per_phase = config.train_freq if config.gradient_steps == -1 else config.gradient_steps
    return (
        phases * per_phase,
        f"the run's {phases * per_phase} updates (total_steps - learning_starts = "
        f"{config.total_steps - config.learning_starts} env steps, gradient_steps="
        f"{config.gradient_steps} every train_freq={config.train_freq})",
    )


def evaluations_before_end(config: SACConfig) -> int:
    """The most eval_every evaluations a new run makes before the one at its end (a stop
    there stops nothing)."""
    return max(config.total_steps - 1, 0) // config.eval_every


def _unreachable(config: SACConfig) -> List[str]:
    """TfsacError for a stop, video or schedule step this run never comes to; warnings for
    options that act only at its end."""
    before, total = evaluations_before_end(config), config.total_steps
    made = f"eval_every={config.eval_every} and total_steps={total} make"
    where = f"{made} {before} evaluation{'s' * (before != 1)} before the run's last one"
    if config.stop_at_return is not None and not before:
        raise TfsacError(
            f"stop_at_return is read at evaluations, and {where}: it could never stop the run"
        )
    if config.stop_after_no_improvement:
        # The first counted evaluation sets the best; the stop needs N + 1 after it.
        needed = max(config.min_evaluations, 1) + config.stop_after_no_improvement + 1
        if before < needed:
            raise TfsacError(
                f"stop_after_no_improvement={config.stop_after_no_improvement} with "
                f"min_evaluations={config.min_evaluations} needs {needed} evaluations, and "
                f"{where}: it could never stop the run"
            )
    if config.video_every > before + 1:
        raise TfsacError(
            f"video_every={config.video_every} records one episode every {config.video_every} "
            f"evaluations, and {made} {before + 1} with the run's last one: it would record none"
        )
    late = [s for s in schedule_steps(config.lr_schedule) if total and s >= total]
    if late:
        raise TfsacError(
            f"lr_schedule {config.lr_schedule!r} gives a factor from step {late[0]}, not before "
            f"total_steps ({total}): it would never apply"
        )
    warnings = []
    if config.keep_best and not before:
        warnings.append(
            f"keep_best keeps the best of the evaluations, and {where}: its best is the "
            "final policy, as the export's"
        )
    for name, what in (
        ("eval_every", "evaluates"),
        ("checkpoint_every", "checkpoints"),
        ("log_every", "logs progress"),
    ):
        every = getattr(config, name)
        if total and every > total and every != field_default(name):
            warnings.append(
                f"{name}={every} is more than total_steps ({total}): the run {what} only at its end"
            )
    return warnings
