"""What a resume may change in the run it continues: how long it trains, when it stops, what
it reports and writes. Any other option would make it another run than the one saved."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Tuple

from tfsac.errors import TfsacError
from tfsac.user_modules import split

# Each change is said in one line as the run resumes.
RESUME_ADJUSTABLE = tuple(
    "total_steps eval_every eval_episodes log_every video_every progress_bar tensorboard "
    "checkpoint_every keep_checkpoints export export_dir export_formats model_name "
    "stop_at_return stop_after_no_improvement min_evaluations keep_best "
    # Env runners hold no state: their mode and cluster may change (their number: below).
    "runner_mode ray_address".split()
)


class Change(NamedTuple):
    """An option a resume changes: its name, the saved run's value and the new one."""

    name: str
    old: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.name}: {self.old!r} -> {self.new!r}"


def env_renamed(old: str, new: str) -> bool:
    """Whether env ids `old` and `new` name one env_fn env, with and without the wrappers
    that change its spaces (custom:<id>+...), either way round."""
    return str(new).startswith(f"custom:{old}+") or str(old).startswith(f"custom:{new}+")


def module_moved(old: str, new: str) -> bool:
    """Whether an algorithm or network value names the same registered class from a moved
    module ('my_algos:mean_q' -> 'algos_v2:mean_q')."""
    return split(str(old))[1] == split(str(new))[1]


# Structural fields whose value may name the same thing another way, by field: whether it does.
_RENAMES = {"env_id": env_renamed, "algorithm": module_moved, "network": module_moved}


def renamed(field: str, old, new) -> bool:
    """Whether a changed structural field names the same thing (env_renamed, module_moved)."""
    return field in _RENAMES and _RENAMES[field](old, new)


def resume_changes(old: Dict, new: Dict) -> List[Change]:
    """What `new` changes in `old` (two configs' to_dict(), through JSON); TfsacError for
    a change a resume cannot make."""
    changes = []
    for name in new:
        if name == "run_dir" or old[name] == new[name]:
            continue  # run_dir: the same folder, however it was written
        decided_elsewhere = _DECIDED_ELSEWHERE.get(name, lambda old, new: False)
        if not decided_elsewhere(old[name], new[name]) and (
            name not in RESUME_ADJUSTABLE or (name == "total_steps" and new[name] < old[name])
        ):
            why = {
                "total_steps": "only grow",
                "num_actors": "change only between counts of env runners, not to or from 0",
            }.get(name, "not change")
            raise TfsacError(
                f"{name}={_shown(name, new[name])} differs from the resumed run's "
                f"{_shown(name, old[name])}: a "
                f"resume continues the saved run, whose {name} can {why}; start a new "
                "run directory for other settings"
            )
        changes.append(Change(name, old[name], new[name]))
    return changes


def _shown(name: str, value) -> str:
    """A setting's value as its flag is written."""
    if value is None and name in ("alpha", "offline_ratio"):
        return "'auto' (learned)" if name == "alpha" else "'size'"
    return repr(value)


# Changes that checks other than the settings' decide, by field: whether this is one.
_DECIDED_ELSEWHERE = {
    **_RENAMES,
    # A resume restores its own checkpoints, never init_from's.
    "init_from": lambda old, new: True,
    # Moved data: the checkpoint's checksum of it decides.
    "offline_data": lambda old, new: None not in (old, new),
    # Not from or to none: the local collector keeps its envs' state in the checkpoint.
    "num_actors": lambda old, new: old > 0 and new > 0,
    # Hyperparameters a variant declared since take their defaults; saved ones must stay.
    "algorithm_kwargs": lambda old, new: all(k in new and new[k] == v for k, v in old.items()),
    # Options added since the run was saved (None: absent from its config.json), off then.
    **{
        name: lambda old, new: old is None and not new
        for name in ("return_bound", "target_std", "exploration_zeta")
    },
}


# What a run continued from a checkpoint (a resume's own, init_from's) must share with it.
# Config fields that change the shape of the saved state: a checkpoint made with other
# values cannot be restored into this run.
STRUCTURAL_FIELDS = tuple(
    "env_id hidden_sizes num_critics critic_layer_norm use_log_alpha buffer_size use_sde "
    "algorithm network critic_hidden_sizes".split()
)
# Settings that decide the learned state's variables or what they mean: init_from's
# source run must have had this run's values.
MATCHED_FIELDS = tuple(
    "algorithm variant network hidden_sizes critic_hidden_sizes num_critics critic_layer_norm "
    "normalize_observations use_sde use_log_alpha".split()
)


def check_checkpoint(saved: Dict, config, prefix: str, keeps: Tuple[str, ...]) -> None:
    """TfsacError where the checkpoint at `prefix`, whose state holds the config `saved`,
    was made with other structural settings (and the variant's `keeps`) than `config`, or
    trained with settings a resume cannot change (a config.json edited by hand passes the
    start's check against it)."""
    current = config.to_dict()
    # gSDE keeps one exploration matrix per env copy.
    fields = STRUCTURAL_FIELDS + (("num_envs",) if current.get("use_sde") else ()) + keeps
    for field in fields:
        old, new = saved.get(field), current.get(field)
        old, new = (tuple(v) if isinstance(v, list) else v for v in (old, new))
        if old != new and not renamed(field, old, new):
            raise TfsacError(
                f"checkpoint {prefix} was made with {field}={old!r}, this run has "
                f"{field}={new!r}; use another --run_dir or the same {field}"
            )
    try:
        config.resume_changes(saved)
    except TfsacError as e:
        raise TfsacError(f"checkpoint {prefix} was trained with other settings: {e}") from None


def check_matches(source_config, config, source: str, keeps: Tuple[str, ...]) -> None:
    """TfsacError naming the first setting (of MATCHED_FIELDS and the variant's `keeps`) in
    which init_from's source run differs from `config`."""
    for field in MATCHED_FIELDS + keeps:
        old, new = getattr(source_config, field), getattr(config, field)
        # Both configs parsed: widths are tuples on both sides.
        if old != new and not renamed(field, old, new):
            raise TfsacError(
                f"init_from {source!r} was trained with {field}={old!r}, this run has "
                f"{field}={new!r}: its networks do not fit; use the same {field}"
            )
