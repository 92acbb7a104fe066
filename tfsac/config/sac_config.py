"""The SAC configuration: one dataclass of every option (declared by help group in options.py
and run_options.py, so the scripts' flags are generated from them), and its check against
the rules between options that hold for every algorithm (rules.py)."""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from typing import Any, Dict, List

from tfsac.config.fields import check_field_types, field_errors
from tfsac.config.names import checked_keywords
from tfsac.config.options import (
    AlphaOptions,
    CollectOptions,
    CompileOptions,
    EnvOptions,
    NetOptions,
    OptimOptions,
    VariantOptions,
)
from tfsac.config.resume import Change, resume_changes
from tfsac.config.rules import NEW_RUN_RULES, RULES, check_rules
from tfsac.config.run_options import DistOptions, OfflineOptions, OutputOptions, StopOptions
from tfsac.config.schedules import duplicate_steps, schedule_steps
from tfsac.errors import TfsacError

ALPHA_FORMS = "a float, 'auto' or 'auto_<float>' (learned, starting at <float>)"


def _whole(value) -> int:
    """An integer from an int, an integral float (1e3) or the text of one; ValueError for
    anything else (32.5 is refused, not rounded)."""
    if isinstance(value, str):
        value = float(value) if any(c in value for c in ".eE") else int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(value)
    if isinstance(value, numbers.Integral) or float(value).is_integer():
        return int(value)
    raise ValueError(value)


def _sizes(value) -> tuple:
    """Layer widths from a sequence or a comma-separated text ('256,256' or SB3's '[256,256]')."""
    if isinstance(value, str):
        value = value.split(",")
    parts = [h.strip() if isinstance(h, str) else h for h in value]
    if parts and isinstance(parts[0], str) and isinstance(parts[-1], str):
        if parts[0][:1] + parts[-1][-1:] in ("[]", "()"):
            parts[0] = parts[0][1:]  # one element: both brackets in it
            parts[-1] = parts[-1][:-1]
            parts = [h.strip() for h in parts]
    return tuple(_whole(h) for h in parts)


# Options holding a JSON object, which plots and sweeps take key by key ('env_kwargs.x').
KEYWORD_OPTIONS = ("algorithm_kwargs", "env_kwargs")


def field_default(name: str):
    """The default of SACConfig field `name`."""
    return next(f.default for f in dataclasses.fields(SACConfig) if f.name == name)


def _word_or_float(name: str, value, forms: str = "a float or 'auto'", word: str = "auto"):
    """None for `word` (case-insensitive), a float for a number's string, other values as given."""
    if not isinstance(value, str):
        return value
    if value.strip().lower() == word:
        return None
    try:
        return float(value)
    except ValueError:
        raise TfsacError(f"{name} must be {forms}, got {value!r}") from None


def parse_env_kwargs(text: str, name: str = "env_kwargs") -> Dict[str, Any]:
    """Option `name`'s keyword arguments from its JSON object text; TfsacError otherwise."""

    def unique(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) < len(keys):  # json keeps the last one, without a word
            twice = sorted({k for k in keys if keys.count(k) > 1})
            raise ValueError(f"the key {twice[0]!r} appears twice")
        return dict(pairs)

    try:
        kwargs = json.loads(text, object_pairs_hook=unique)
    except ValueError as e:
        raise TfsacError(f"{name} is not valid JSON ({e}): {text}") from None
    if not isinstance(kwargs, dict):
        raise TfsacError(f"{name} must be a JSON object, got {kwargs!r}")
    return kwargs


@checked_keywords  # an unknown keyword says which field is meant (env= -> env_id=)
@dataclasses.dataclass
class SACConfig(
    DistOptions,
    StopOptions,
    OutputOptions,
    CompileOptions,
    NetOptions,
    VariantOptions,
    AlphaOptions,
    OptimOptions,
    OfflineOptions,
    CollectOptions,
    EnvOptions,
):
    """Hyperparameters and run settings for SAC (Haarnoja et al. 2018, arXiv:1812.05905)
    and its variants, one field per option. The defaults train Pendulum-v1 to a return near
    -150 in 20,000 env steps. String forms ('256,256', 'auto', 'auto_0.1') become the fields'
    types when the config is made; `validate()` checks the options against each other.
    """

    def __post_init__(self):
        """Turns the string forms that flags and JSON carry into the fields' types."""
        try:
            self.hidden_sizes = _sizes(self.hidden_sizes)
        except (TypeError, ValueError):
            raise TfsacError(
                "hidden_sizes must be integers, a sequence of widths such as (256, 256) or "
                f"'256,256', got {self.hidden_sizes!r}"
            ) from None
        if isinstance(self.alpha, str) and self.alpha.strip().lower().startswith("auto_"):
            text = self.alpha.strip()[5:]
            try:
                start = float(text)
            except ValueError:
                raise TfsacError(f"alpha must be {ALPHA_FORMS}, got {self.alpha!r}") from None
            if not 0 < start < math.inf:
                raise TfsacError(f"alpha auto_<x> starts at x: positive and finite, got {text}")
            if self.initial_alpha not in (field_default("initial_alpha"), start):
                raise TfsacError(
                    f"alpha {self.alpha} and initial_alpha {self.initial_alpha} both set the "
                    "learned alpha's start: give one of them"
                )
            self.alpha, self.initial_alpha = None, start
        self.alpha = _word_or_float("alpha", self.alpha, ALPHA_FORMS)
        self.target_entropy = _word_or_float("target_entropy", self.target_entropy)
        for name in ("progress_bar", "normalize_observations", "normalize_rewards"):
            value = getattr(self, name)
            if isinstance(value, str):
                text = value.strip().lower()
                if text not in ("auto", "true", "false"):
                    raise TfsacError(f"{name} must be auto, true or false, got {value!r}")
                setattr(self, name, {"auto": None, "true": True, "false": False}[text])
        if isinstance(self.network, str) and self.network.strip().lower() == "auto":
            self.network = None  # the variant's (tfsac.algorithm.resolve)
        ratio = "in [0, 1] or 'size'"
        self.offline_ratio = _word_or_float("offline_ratio", self.offline_ratio, ratio, "size")
        for name in KEYWORD_OPTIONS:
            if isinstance(getattr(self, name), str):
                setattr(self, name, parse_env_kwargs(getattr(self, name), name))
        self._parse_auto()
        check_field_types(self)  # after the string forms above are parsed

    def _parse_auto(self) -> None:
        """The options whose 'auto' (None) the variant fills in, from their string forms."""
        kinds = {"policy_delay": int, "adam_beta1": float, "weight_decay": float}
        kinds.update(return_bound=float, target_std=float, exploration_zeta=float)
        for name in (*kinds, "critic_hidden_sizes"):
            value = getattr(self, name)
            if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
                setattr(self, name, None)
                continue
            try:
                if name == "critic_hidden_sizes":
                    setattr(self, name, _sizes(value))
                elif kinds[name] is int:
                    setattr(self, name, _whole(value))
                elif isinstance(value, str):
                    setattr(self, name, float(value))
            except (TypeError, ValueError):
                kind = {int: "an integer", float: "a number"}.get(kinds.get(name), "integers")
                raise TfsacError(f"{name} must be 'auto' or {kind}, got {value!r}") from None

    @property
    def learned_alpha(self) -> bool:
        """Whether the entropy temperature is learned (`alpha` given as `auto` or `auto_0.1`)."""
        return self.alpha is None

    def rate(self, part: str) -> float:
        """The learning rate of `part` ('actor', 'critic', 'alpha' or 'value')."""
        value = getattr(self, f"{part}_learning_rate")
        return self.learning_rate if value is None else value

    def validate(self) -> SACConfig:
        """Raises TfsacError naming the first bad option; returns self. Each option's own
        values are declared with it (options.py), the rules between options in rules.py
        (an algorithm's own: tfsac.algorithm.resolve)."""
        error = field_errors(self)
        if error:
            raise TfsacError(error)
        check_rules(self, RULES)
        if self.learning_starts > self.total_steps and self.total_steps:
            raise TfsacError(
                f"learning_starts ({self.learning_starts}) is larger than total_steps "
                f"({self.total_steps}): no update would ever run; for a short run lower "
                f"learning_starts too (e.g. --learning_starts={self.total_steps // 10})"
            )
        return self

    def to_dict(self) -> dict:
        """The fields as a dict of JSON values, what a run's config.json holds."""
        return dataclasses.asdict(self)

    def resume_changes(self, saved: Dict[str, Any]) -> List[Change]:
        """What this config changes in `saved`, the config.json of the run it resumes;
        TfsacError for a change a resume cannot make."""
        old = json.loads(json.dumps(SACConfig.from_dict(saved).to_dict()))
        return resume_changes(old, json.loads(json.dumps(self.to_dict())))

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> SACConfig:
        """A config from `to_dict()`'s output (a run's config.json)."""
        if not isinstance(values, dict):
            raise TfsacError(f"a config is a dict of fields, got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise TfsacError(f"unknown config fields: {', '.join(sorted(unknown))}")
        return cls(**values)


# What only a learned temperature reads.
LEARNED_ALPHA_OPTIONS = ("initial_alpha", "alpha_learning_rate", "target_entropy", "use_log_alpha")


def check_new_run(config: SACConfig) -> List[str]:
    """TfsacError for settings a new run could never act on (beyond validate(): runs saved
    before these checks still load); returns warnings for options it does not read (those of
    a learned alpha beside a fixed one) or reads only at its end."""
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
