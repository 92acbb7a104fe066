"""The SAC configuration: one dataclass of every option (declared by help group in
tfsac/options.py, each with its help text and the check of its own values, so
scripts/train.py's flags are generated from the fields: an option is written once),
validated before anything is built, and what a resume may change."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List

from tfsac.errors import TfsacError
from tfsac.option_fields import check_field_types

# The group names, GROUPS and option too: code that predates tfsac/options.py imports them
# from here.
from tfsac.options import (  # noqa: F401
    ALPHA,
    COLLECT,
    COMPILE,
    DIST,
    ENV,
    GROUPS,
    NETS,
    OPTIM,
    OUTPUT,
    VARIANT,
    AlphaOptions,
    CollectOptions,
    CompileOptions,
    EnvOptions,
    NetOptions,
    OptimOptions,
    VariantOptions,
    field_errors,
    option,
)
from tfsac.run_options import DistOptions, OutputOptions

# Fields of earlier versions, ignored in the config.json of their runs.
REMOVED_FIELDS = {"graph_loop"}
# What a resumed run may change (each change is said in one line): how long it runs, what
# it reports and writes. Any other option would make it another run than the one saved.
RESUME_ADJUSTABLE = (
    "total_steps",
    "eval_every",
    "eval_episodes",
    "log_every",
    "video_every",
    "progress_bar",
    "tensorboard",
    "checkpoint_every",
    "keep_checkpoints",
    "export",
    "export_dir",
    "export_formats",
    "model_name",
)


ALPHA_FORMS = "a float, 'auto' or 'auto_<float>' (learned, starting at <float>)"


def _auto_or_float(name: str, value, forms: str = "a float or 'auto'"):
    """None for 'auto' (case-insensitive), a float for a number or its string."""
    if not isinstance(value, str):
        return value
    if value.strip().lower() == "auto":
        return None
    try:
        return float(value)
    except ValueError:
        raise TfsacError(f"{name} must be {forms}, got {value!r}") from None


def parse_env_kwargs(text: str) -> Dict[str, Any]:
    """env_kwargs from its JSON text (a JSON object); TfsacError on anything else."""
    try:
        kwargs = json.loads(text)
    except ValueError as e:
        raise TfsacError(f"env_kwargs is not valid JSON ({e}): {text}") from None
    if not isinstance(kwargs, dict):
        raise TfsacError(f"env_kwargs must be a JSON object, got {kwargs!r}")
    return kwargs


@dataclasses.dataclass
class SACConfig(
    DistOptions,
    OutputOptions,
    CompileOptions,
    NetOptions,
    VariantOptions,
    AlphaOptions,
    OptimOptions,
    CollectOptions,
    EnvOptions,
):
    """Hyperparameters and run settings for SAC (Haarnoja et al. 2018, arXiv:1812.05905):
    the options of every help group (tfsac/options.py; dataclasses take the last base's
    fields first, so the fields keep the order --help lists them in).

    The defaults train Pendulum-v1 to a return near -150 in 20,000 env steps.
    """

    def __post_init__(self):
        """Turns the string forms that flags and JSON carry into the fields' types."""
        try:
            self.hidden_sizes = tuple(int(h) for h in self.hidden_sizes)
        except (TypeError, ValueError):
            raise TfsacError(f"hidden_sizes must be integers, got {self.hidden_sizes!r}") from None
        if isinstance(self.alpha, str) and self.alpha.strip().lower().startswith("auto_"):
            text = self.alpha.strip()[5:]
            try:
                self.alpha, self.initial_alpha = None, float(text)
            except ValueError:
                raise TfsacError(f"alpha must be {ALPHA_FORMS}, got {self.alpha!r}") from None
        self.alpha = _auto_or_float("alpha", self.alpha, ALPHA_FORMS)
        self.target_entropy = _auto_or_float("target_entropy", self.target_entropy)
        if isinstance(self.progress_bar, str):
            text = self.progress_bar.strip().lower()
            if text not in ("auto", "true", "false"):
                raise TfsacError(
                    f"progress_bar must be auto, true or false, got {self.progress_bar!r}"
                )
            self.progress_bar = {"auto": None, "true": True, "false": False}[text]
        if isinstance(self.env_kwargs, str):
            self.env_kwargs = parse_env_kwargs(self.env_kwargs)
        self._resolve_auto()
        check_field_types(self)  # after the string forms above are parsed

    def algorithm_defaults(self) -> Dict[str, Any]:
        """What 'auto' means for the options whose default depends on the algorithm or the
        network: CrossQ's paper settings (policy delay 3, Adam beta_1 0.5, critics of
        2048), SimBa's AdamW (SBX's weight decay)."""
        crossq = self.algorithm == "crossq"
        return {
            "policy_delay": 3 if crossq else 1,
            "adam_beta1": 0.5 if crossq else 0.9,
            "critic_hidden_sizes": (2048, 2048) if crossq else self.hidden_sizes,
            "weight_decay": 1e-4 if self.network == "simba" else 0.0,
        }

    def _resolve_auto(self) -> None:
        """Replaces None/'auto' by `algorithm_defaults()` and the rest's strings by values."""
        kinds = {"policy_delay": int, "adam_beta1": float, "weight_decay": float}
        for name, default in self.algorithm_defaults().items():
            value = getattr(self, name)
            if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
                setattr(self, name, default)
                continue
            try:
                if name == "critic_hidden_sizes":
                    parts = value.split(",") if isinstance(value, str) else value
                    setattr(self, name, tuple(int(h) for h in parts))
                elif isinstance(value, str) or kinds[name] is int:
                    setattr(self, name, kinds[name](value))
            except (TypeError, ValueError):
                kind = {int: "an integer", float: "a number"}.get(kinds.get(name), "integers")
                raise TfsacError(f"{name} must be 'auto' or {kind}, got {value!r}") from None

    @property
    def learned_alpha(self) -> bool:
        return self.alpha is None

    def rate(self, part: str) -> float:
        """The learning rate of `part` ('actor', 'critic', 'alpha' or 'value')."""
        value = getattr(self, f"{part}_learning_rate")
        return self.learning_rate if value is None else value

    def validate(self) -> SACConfig:
        """Raises TfsacError naming the first bad option; returns self. Each option's own
        values are declared with it (tfsac/options.py); here, the checks between options."""
        error = field_errors(self)
        if error:
            raise TfsacError(error)
        if self.episodes_per_rollout and self.train_freq != 1:
            raise TfsacError(
                "train_freq and episodes_per_rollout both set: collection phases are either "
                "train_freq env steps or episodes_per_rollout episodes"
            )
        if self.algorithm != "sac" and self.variant != "v2":
            raise TfsacError(f"algorithm {self.algorithm} needs variant v2 (v1 is SAC's own)")
        if self.algorithm == "crossq" and self.use_sde:
            raise TfsacError("algorithm crossq does not take use_sde (its actor is batch-normed)")
        if self.network == "simba" and self.use_sde:
            raise TfsacError("network simba does not take use_sde (gSDE has its own actor)")
        if self.network == "simba" and (self.critic_dropout or self.critic_layer_norm):
            raise TfsacError(
                "network simba has its own normalisation and no dropout: leave "
                "critic_layer_norm and critic_dropout off"
            )
        for name in ("hidden_sizes", "critic_hidden_sizes"):
            if self.network == "simba" and len(set(getattr(self, name))) > 1:
                raise TfsacError(
                    f"network simba adds each residual block to its input, so {name} needs "
                    f"one width for every block, got {','.join(map(str, getattr(self, name)))}"
                )
        if self.top_quantiles_to_drop_per_net >= self.n_quantiles:
            raise TfsacError(
                f"top_quantiles_to_drop_per_net ({self.top_quantiles_to_drop_per_net}) must be "
                f"smaller than n_quantiles ({self.n_quantiles}): no atom would be left"
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
        if self.learning_starts > self.total_steps:
            raise TfsacError(
                f"learning_starts ({self.learning_starts}) is larger than total_steps "
                f"({self.total_steps}): no update would ever run; for a short run lower "
                f"learning_starts too (e.g. --learning_starts={self.total_steps // 10})"
            )
        if self.batch_size > self.buffer_size:
            raise TfsacError(
                f"batch_size ({self.batch_size}) is larger than buffer_size ({self.buffer_size})"
            )
        self._validate_distributed()
        return self

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
        return dataclasses.asdict(self)

    def resume_changes(self, saved: Dict[str, Any]) -> List[str]:
        """What this config changes in `saved`, the config.json of the run it resumes, as
        'name: old -> new' texts; raises TfsacError for a change that a resume cannot make
        (only RESUME_ADJUSTABLE options, and total_steps only upward)."""
        old = json.loads(json.dumps(SACConfig.from_dict(saved).to_dict()))
        new = json.loads(json.dumps(self.to_dict()))
        changes = []
        for name in (f.name for f in dataclasses.fields(self)):
            if name == "run_dir" or old[name] == new[name]:
                continue  # run_dir: the same folder, however it was written
            if name not in RESUME_ADJUSTABLE or (name == "total_steps" and new[name] < old[name]):
                why = "only grow" if name == "total_steps" else "not change"
                raise TfsacError(
                    f"{name}={new[name]!r} differs from the resumed run's {old[name]!r}: a "
                    f"resume continues the saved run, whose {name} can {why}; start a new "
                    "run directory for other settings"
                )
            changes.append(f"{name}: {old[name]!r} -> {new[name]!r}")
        return changes

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> SACConfig:
        """A config from `to_dict()`'s output (a run's config.json), including one written
        by an earlier tfsac whose fields have since been removed."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - known - REMOVED_FIELDS
        if unknown:
            raise TfsacError(f"unknown config fields: {', '.join(sorted(unknown))}")
        return cls(**{k: v for k, v in values.items() if k in known})
