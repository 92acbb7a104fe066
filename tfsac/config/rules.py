"""The rules between options, as rows: each line a refusal says (a format string of the
config's fields) and when it holds. `SACConfig.validate` checks `RULES`, a new run
`NEW_RUN_RULES`; the scripts read the `Needs` rows for flags given without what they need."""

from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple

from tfsac.errors import TfsacError


class Needs(NamedTuple):
    """Option `option`, given (not at its default), needs option `needed` on; with
    `any_value`, a flag given without `needed` is refused even at its default value."""

    option: str
    needed: str
    why: str
    any_value: bool = False

    @property
    def line(self) -> str:
        return f"{self.option} needs {self.needed}{self.why}"

    def broken(self, config) -> bool:
        default = type(config).__dataclass_fields__[self.option].default
        return getattr(config, self.option) != default and not getattr(config, self.needed)


HER = " (add --her: Hindsight Experience Replay)"
NEEDS = (
    Needs("offline_updates", "offline_data", " (the recorded transitions)"),
    Needs("offline_ratio", "offline_data", " (the recorded transitions)"),
    Needs("her_strategy", "her", HER, any_value=True),
    Needs("her_goals_per_transition", "her", HER, any_value=True),
)
# Checked only where a run starts afresh, so that runs saved before them still load.
NEW_RUN_NEEDS = (
    Needs("min_evaluations", "stop_after_no_improvement", ": it delays that stop only", True),
)

Rules = Dict[str, Callable[[Any], Any]]  # a refusal's line: whether a config earns it

RULES: Rules = {
    "offline_data is empty: a Minari dataset id or a folder (leave it out for none)": lambda c: (
        c.offline_data == ""
    ),
    "init_from is empty: a tfsac run directory (leave it out for none)": lambda c: (
        c.init_from == ""
    ),
    **{row.line: row.broken for row in NEEDS},
    "train_freq and episodes_per_rollout both set: collection phases are either "
    "train_freq env steps or episodes_per_rollout episodes": lambda c: (
        c.episodes_per_rollout and c.train_freq != 1
    ),
    "sde_sample_freq and use_sde_at_warmup need use_sde": lambda c: (
        (c.sde_sample_freq != -1 or c.use_sde_at_warmup) and not c.use_sde
    ),
    "log_std_init must lie in [log_std_min, log_std_max], got {log_std_init}": lambda c: (
        not c.log_std_min <= c.log_std_init <= c.log_std_max
    ),
    "log_std_min must be smaller than log_std_max": lambda c: not c.log_std_min < c.log_std_max,
    "total_steps ({total_steps}) must be a multiple of num_envs ({num_envs})": lambda c: (
        c.total_steps % c.num_envs
    ),
    # Recorded data and offline-only training (total_steps=0).
    "total_steps=0 trains on recorded data alone: it needs offline_data and "
    "offline_updates > 0": lambda c: (
        c.total_steps == 0 and (c.offline_data is None or not c.offline_updates)
    ),
    "lr_schedule needs env steps (total_steps > 0)": lambda c: (
        c.total_steps == 0 and c.lr_schedule != "constant"
    ),
    "num_actors needs env steps (total_steps > 0)": lambda c: c.total_steps == 0 and c.num_actors,
    # Its return statistics come from collected episodes only.
    "normalize_rewards needs env steps (total_steps > 0)": lambda c: (
        c.total_steps == 0 and c.normalize_rewards
    ),
    "offline_updates is for offline-only training (total_steps=0); with env steps the updates "
    "follow gradient_steps and train_freq (an offline-only run goes on online as a new run: "
    "--init_from=<its run_dir> with its network options, and its --offline_data to keep "
    "sampling it)": lambda c: c.total_steps and c.offline_updates,
    "n_steps ({n_steps}) is larger than total_steps ({total_steps}): no return could sum "
    "that many rewards": lambda c: c.total_steps and c.n_steps > c.total_steps,
    "export_formats ({export_formats}) needs export: with export=false nothing is exported "
    "(with a resume that saved them: give export_formats=saved_model too)": lambda c: (
        not c.export and c.export_formats != "saved_model"
    ),
    "normalize_rewards needs gamma < 1: it scales rewards to the discounted return's "
    "spread over the horizon 1 / (1 - gamma)": lambda c: c.normalize_rewards and c.gamma >= 1,
    # Auto (None) leaves normalize_rewards to the variant.
    "return_bound needs normalize_rewards (it bounds the scaled returns)": lambda c: (
        c.return_bound and c.normalize_rewards is False
    ),
    "target_std and target_entropy both set the entropy target: give one": lambda c: (
        c.target_std and c.target_entropy is not None
    ),
    "exploration_zeta does not work with use_sde (gSDE has its own noise)": lambda c: (
        c.exploration_zeta and c.use_sde
    ),
    "batch_size ({batch_size}) is larger than buffer_size ({buffer_size})": lambda c: (
        c.batch_size > c.buffer_size
    ),
    # Env runners (num_actors > 0).
    "use_sde (gSDE) does not work with env runners (num_actors > 0)": lambda c: (
        c.num_actors and c.use_sde
    ),
    "episodes_per_rollout does not work with env runners (num_actors > 0)": lambda c: (
        c.num_actors and c.episodes_per_rollout
    ),
    "num_envs must be 1 with env runners (num_actors > 0): give each runner env copies with "
    "envs_per_actor": lambda c: c.num_actors and c.num_envs != 1,
    "chunk_steps ({chunk_steps}) must be a multiple of envs_per_actor ({envs_per_actor})": (
        lambda c: c.num_actors and c.chunk_steps % c.envs_per_actor
    ),
    "chunk_steps ({chunk_steps}) must be a multiple of train_freq ({train_freq})": lambda c: (
        c.num_actors and c.chunk_steps % c.train_freq
    ),
    "total_steps ({total_steps}) must be a multiple of envs_per_actor ({envs_per_actor})": (
        lambda c: c.num_actors and c.total_steps % c.envs_per_actor
    ),
    # Hindsight Experience Replay.
    "her does not work with offline_data: recorded transitions come without the episodes' "
    "goals to relabel": lambda c: c.her and c.offline_data is not None,
    "her does not work with n_steps > 1 (got {n_steps}): the n rewards would need relabelling "
    "with the new goal too; use n_steps=1": lambda c: c.her and c.n_steps > 1,
}
NEW_RUN_RULES: Rules = {row.line: row.broken for row in NEW_RUN_NEEDS}


def check_rules(config, rules: Rules) -> None:
    """TfsacError with the line of the first of `rules` that `config` breaks."""
    for line, broken in rules.items():
        if broken(config):
            raise TfsacError(line.format_map(vars(config)))
