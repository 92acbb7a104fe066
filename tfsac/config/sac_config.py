"""The SAC configuration: one dataclass of every option (declared by help group in options.py
and run_options.py, so the scripts' flags are generated from them), and the checks between
options that hold for every algorithm."""

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
)
from tfsac.config.resume import Change, resume_changes
from tfsac.config.run_options import DistOptions, OfflineOptions, OutputOptions, StopOptions
from tfsac.config.variant_options import VariantOptions
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
        values are declared with it (options.py); here, the checks between options that
        hold for every algorithm (its own: tfsac.algorithm.resolve)."""
        error = field_errors(self)
        if error:
            raise TfsacError(error)
        if self.episodes_per_rollout and self.train_freq != 1:
            raise TfsacError(
                "train_freq and episodes_per_rollout both set: collection phases are either "
                "train_freq env steps or episodes_per_rollout episodes"
            )
        if (self.sde_sample_freq != -1 or self.use_sde_at_warmup) and not self.use_sde:
            raise TfsacError("sde_sample_freq and use_sde_at_warmup need use_sde")
        if not self.log_std_min <= self.log_std_init <= self.log_std_max:
            raise TfsacError(
                f"log_std_init must lie in [log_std_min, log_std_max], got {self.log_std_init}"
            )
        if not self.log_std_min < self.log_std_max:
            raise TfsacError("log_std_min must be smaller than log_std_max")
        if self.total_steps % self.num_envs:
            raise TfsacError(
                f"total_steps ({self.total_steps}) must be a multiple of num_envs ({self.num_envs})"
            )
        self._validate_offline()
        if self.learning_starts > self.total_steps and self.total_steps:
            raise TfsacError(
                f"learning_starts ({self.learning_starts}) is larger than total_steps "
                f"({self.total_steps}): no update would ever run; for a short run lower "
                f"learning_starts too (e.g. --learning_starts={self.total_steps // 10})"
            )
        if self.n_steps > self.total_steps and self.total_steps:
            raise TfsacError(
                f"n_steps ({self.n_steps}) is larger than total_steps ({self.total_steps}): "
                "no return could sum that many rewards"
            )
        if not self.export and self.export_formats != "saved_model":
            raise TfsacError(
                f"export_formats ({self.export_formats}) needs export: with export=false "
                "nothing is exported (with a resume that saved them: give "
                "export_formats=saved_model too)"
            )
        if self.normalize_rewards and self.gamma >= 1:
            raise TfsacError(
                "normalize_rewards needs gamma < 1: it scales rewards to the discounted "
                "return's spread over the horizon 1 / (1 - gamma)"
            )
        if self.return_bound and self.normalize_rewards is False:
            raise TfsacError("return_bound needs normalize_rewards (it bounds the scaled returns)")
        if self.target_std and self.target_entropy is not None:
            raise TfsacError("target_std and target_entropy both set the entropy target: give one")
        if self.exploration_zeta and self.use_sde:
            raise TfsacError("exploration_zeta does not work with use_sde (gSDE has its own noise)")
        if self.batch_size > self.buffer_size:
            raise TfsacError(
                f"batch_size ({self.batch_size}) is larger than buffer_size ({self.buffer_size})"
            )
        self._validate_distributed()
        self._validate_her()
        return self

    def _validate_offline(self) -> None:
        """Recorded data and offline-only training (total_steps=0)."""
        if self.offline_data == "":
            raise TfsacError(
                "offline_data is empty: a Minari dataset id or a folder (leave it out for none)"
            )
        if self.init_from == "":
            raise TfsacError("init_from is empty: a tfsac run directory (leave it out for none)")
        if self.offline_data is None:
            for name, default in (("offline_updates", 0), ("offline_ratio", 0.5)):
                if getattr(self, name) != default:
                    raise TfsacError(f"{name} needs offline_data (the recorded transitions)")
        if self.total_steps == 0:
            if self.offline_data is None or not self.offline_updates:
                raise TfsacError(
                    "total_steps=0 trains on recorded data alone: it needs offline_data and "
                    "offline_updates > 0"
                )
            needs_steps = {
                "lr_schedule": self.lr_schedule != "constant",
                "num_actors": bool(self.num_actors),
                # Its return statistics come from collected episodes only.
                "normalize_rewards": self.normalize_rewards,
            }
            for what in (name for name, on in needs_steps.items() if on):
                raise TfsacError(f"{what} needs env steps (total_steps > 0)")
        elif self.offline_updates:
            raise TfsacError(
                "offline_updates is for offline-only training (total_steps=0); with env steps "
                "the updates follow gradient_steps and train_freq (an offline-only run goes "
                "on online as a new run: --init_from=<its run_dir> with its network options, "
                "and its --offline_data to keep sampling it)"
            )

    def _validate_her(self) -> None:
        for name in ("her_strategy", "her_goals_per_transition"):
            if not self.her and getattr(self, name) != field_default(name):
                raise TfsacError(f"{name} needs her (add --her: Hindsight Experience Replay)")
        if self.her and self.offline_data is not None:
            raise TfsacError(
                "her does not work with offline_data: recorded transitions come without the "
                "episodes' goals to relabel"
            )
        if self.her and self.n_steps > 1:
            raise TfsacError(
                f"her does not work with n_steps > 1 (got {self.n_steps}): the n rewards "
                "would need relabelling with the new goal too; use n_steps=1"
            )

    def _validate_distributed(self) -> None:
        if not self.num_actors:
            return
        if self.use_sde or self.episodes_per_rollout:
            what = "use_sde (gSDE)" if self.use_sde else "episodes_per_rollout"
            raise TfsacError(f"{what} does not work with env runners (num_actors > 0)")
        if self.num_envs != 1:
            raise TfsacError(
                "num_envs must be 1 with env runners (num_actors > 0): give each runner env "
                "copies with envs_per_actor"
            )
        for name in ("envs_per_actor", "train_freq"):
            if self.chunk_steps % getattr(self, name):
                raise TfsacError(
                    f"chunk_steps ({self.chunk_steps}) must be a multiple of {name} "
                    f"({getattr(self, name)})"
                )
        if self.total_steps % self.envs_per_actor:
            raise TfsacError(
                f"total_steps ({self.total_steps}) must be a multiple of envs_per_actor "
                f"({self.envs_per_actor})"
            )

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
