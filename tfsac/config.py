"""The SAC configuration: one dataclass, validated before anything is built.

Every field carries its help text and help group in its metadata (`option`), so
scripts/train.py's flags are generated from the fields: an option is written once.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Dict, List, Optional, Tuple

from tfsac.algorithm.schedules import parse_schedule
from tfsac.errors import TfsacError

# Help groups, in the order `--help` lists them.
ENV = "Environment"
COLLECT = "Budget and data collection"
OPTIM = "Optimisation"
ALPHA = "Entropy temperature"
VARIANT = "Variants and exploration"
NETS = "Networks"
COMPILE = "Compilation"
OUTPUT = "Evaluation, logging, outputs and checkpoints"
DIST = "Distributed collection (env runners on Ray)"
GROUPS = (ENV, COLLECT, OPTIM, ALPHA, VARIANT, NETS, COMPILE, OUTPUT, DIST)
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
    "model_name",
)


def option(default, help: str, group: str, *, flag=None, choices=None, text=None):
    """A config field with what its command-line flag needs: `help`, `group`, the flag's
    name (default: the field's), `choices` for an enum, and `text`, the flag's default for
    fields that also take a string form (parsed by SACConfig.__post_init__)."""
    metadata = {"help": help, "group": group, "flag": flag, "choices": choices, "text": text}
    if callable(default):
        return dataclasses.field(default_factory=default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


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
class SACConfig:
    """Hyperparameters and run settings for SAC (Haarnoja et al. 2018, arXiv:1812.05905).

    The defaults train Pendulum-v1 to a return near -150 in 20,000 env steps. (A long class:
    one declaration per option, each with its help text.)
    """

    # Environment and seeding.
    env_id: str = option(
        "Pendulum-v1",
        "gymnasium id; 'module:Id-v0' imports the module that registers it first",
        ENV,
        flag="env",
    )
    seed: int = option(0, "seeds the env, numpy and TF", ENV)
    # JSON-serialisable (kept in checkpoints and the SavedModel's metadata).
    env_kwargs: Dict[str, Any] = option(
        dict,
        "keyword arguments for gymnasium.make, a JSON object, e.g. '{\"max_episode_steps\": 500}'",
        ENV,
        text="{}",
    )
    num_envs: int = option(1, "env copies stepped together (a gymnasium vector env)", ENV)
    vector_mode: str = option("sync", "how the env copies step", ENV, choices=("sync", "async"))

    # Budget and data collection. train_freq and gradient_steps count env steps, so the
    # updates per env step stay the same for any num_envs.
    total_steps: int = option(20_000, "env steps to train for", COLLECT)
    learning_starts: int = option(1_000, "uniform-random env steps before updates start", COLLECT)
    train_freq: int = option(1, "env steps per collection phase (updates follow each)", COLLECT)
    gradient_steps: int = option(
        1, "updates per collection phase (-1: one per env step collected)", COLLECT
    )
    episodes_per_rollout: int = option(
        0, "collection phases of this many whole episodes instead (0: train_freq)", COLLECT
    )
    buffer_size: int = option(1_000_000, "replay capacity (transitions)", COLLECT)
    batch_size: int = option(256, "minibatch size", COLLECT)

    # Optimisation.
    learning_rate: float = option(3e-4, "Adam rate of every part without its own", OPTIM)
    actor_learning_rate: Optional[float] = option(None, "actor rate (default learning_rate)", OPTIM)
    critic_learning_rate: Optional[float] = option(
        None, "critic rate (default learning_rate)", OPTIM
    )
    alpha_learning_rate: Optional[float] = option(
        None, "temperature rate (default learning_rate)", OPTIM
    )
    value_learning_rate: Optional[float] = option(
        None, "v1's V-network rate (default learning_rate)", OPTIM
    )
    max_grad_norm: Optional[float] = option(
        None, "clip actor, critic and V gradients to this global norm (default off)", OPTIM
    )
    # A factor on every learning rate over env steps (tfsac/algorithm/schedules.py).
    lr_schedule: str = option(
        "constant", "constant | linear (to 0 at total_steps) | piecewise:<step>:<factor>,...", OPTIM
    )
    gamma: float = option(0.99, "discount factor", OPTIM)
    tau: float = option(0.005, "Polyak coefficient of the target networks", OPTIM)
    policy_delay: int = option(1, "critic updates per actor and temperature update", OPTIM)
    target_update_interval: int = option(1, "critic updates per Polyak update", OPTIM)
    reward_scale: float = option(1.0, "rewards are multiplied by this in the TD target", OPTIM)

    # Entropy temperature: a fixed `alpha`, or learned (alpha=None) from `initial_alpha`
    # towards `target_entropy` (None means -dim(A)). The strings 'auto' and 'auto_<x>'
    # (learned, starting at x) are accepted too.
    alpha: Optional[float] = option(
        None,
        "a fixed entropy coefficient, 'auto' (learned from initial_alpha) or 'auto_<x>' "
        "(learned from x)",
        ALPHA,
        text="auto",
    )
    initial_alpha: float = option(1.0, "starting alpha when it is learned", ALPHA)
    target_entropy: Optional[float] = option(
        None,
        "entropy target of the learned alpha: a float, or 'auto' = -dim(A)",
        ALPHA,
        text="auto",
    )
    use_log_alpha: bool = option(True, "optimise log-alpha (true) or alpha itself", ALPHA)

    # 'v2': twin Q networks with target Q networks (arXiv:1812.05905);
    # 'v1': the original SAC with a state-value network V and a target V (arXiv:1801.01290).
    variant: str = option(
        "v2", "v2: twin Q + target Q; v1: the original SAC with V", VARIANT, choices=("v1", "v2")
    )
    # gSDE (arXiv:2005.05719): exploration noise z(s) @ E, z(s) the actor's last hidden
    # features, E ~ N(0, exp(log_std)^2) resampled at each collection phase's start and every
    # `sde_sample_freq` env steps (-1: only then).
    use_sde: bool = option(False, "gSDE: generalized state-dependent exploration", VARIANT)
    sde_sample_freq: int = option(
        -1, "gSDE: new noise every N env steps (-1: once per collection phase)", VARIANT
    )
    use_sde_at_warmup: bool = option(
        False, "gSDE instead of uniform actions before learning_starts", VARIANT
    )
    log_std_init: float = option(-3.0, "gSDE: initial log-std of the noise matrix", VARIANT)

    # Networks.
    hidden_sizes: Tuple[int, ...] = option((256, 256), "hidden layer sizes, e.g. 256,256", NETS)
    num_critics: int = option(2, "Q networks (the target takes their minimum)", NETS)
    # DroQ-style critics, for gradient_steps > 1.
    critic_layer_norm: bool = option(False, "layer normalisation in the critics (DroQ)", NETS)
    critic_dropout: float = option(0.0, "dropout rate in the critics (DroQ uses 0.01)", NETS)
    log_std_min: float = option(-20.0, "lower clip of the policy's log-std", NETS)
    log_std_max: float = option(2.0, "upper clip of the policy's log-std", NETS)

    # Compilation. `deterministic` turns on TF op determinism: the same seed then gives the
    # same run, bit for bit, on a CPU.
    jit_compile: bool = option(True, "compile the update and action selection with XLA", COMPILE)
    deterministic: bool = option(
        False, "TF op determinism: the same seed gives the same run (CPU)", COMPILE
    )
    # Evaluation, logging and outputs.
    eval_every: int = option(5_000, "env steps between deterministic evaluations", OUTPUT)
    eval_episodes: int = option(10, "episodes per evaluation", OUTPUT)
    log_every: int = option(1_000, "env steps between progress lines", OUTPUT)
    video_every: int = option(
        0, "record one episode every N evaluations to <run_dir>/videos (0: never)", OUTPUT
    )
    # None: on when stderr is a terminal.
    progress_bar: Optional[bool] = option(
        None, "progress bar on stderr: auto (in a terminal), true or false", OUTPUT, text="auto"
    )
    tensorboard: bool = option(True, "TensorBoard summaries in <run_dir>/tensorboard", OUTPUT)
    run_dir: Optional[str] = option(
        None, "run directory (default runs/<model_name>-seed<seed>-<time>)", OUTPUT
    )
    export_dir: str = option(
        "saved_models", "SavedModels go to <export_dir>/<model_name>/<n>", OUTPUT
    )
    model_name: Optional[str] = option(
        None, "model name under export_dir (default from env)", OUTPUT
    )
    export: bool = option(
        True,
        "export the policy as a SavedModel at the end (a new version of <export_dir>/"
        "<model_name>, which TF Serving then serves); false for trial runs",
        OUTPUT,
    )

    # Checkpoints under <run_dir>/checkpoints (also at the end and on SIGINT/SIGTERM).
    checkpoint_every: int = option(5_000, "env steps between checkpoints (0: end only)", OUTPUT)
    keep_checkpoints: int = option(3, "how many recent checkpoints to keep", OUTPUT)

    # Distributed collection (tfsac/scale/runners.py): `num_actors` env runners on Ray step
    # their envs with a CPU copy of the actor and send chunks of transitions to this
    # process, which keeps the replay buffer and the update. The updates per env step
    # (train_freq, gradient_steps) hold for any number of runners.
    num_actors: int = option(
        0, "env runner processes on Ray feeding this learner (0: envs step in this process)", DIST
    )
    envs_per_actor: int = option(1, "env copies each runner steps together", DIST)
    chunk_steps: int = option(
        64, "env steps per chunk a runner sends (all its env copies' steps count)", DIST
    )
    weight_sync_every: int = option(
        64, "updates between sending the actor's weights to the runners", DIST
    )
    # sync: every runner collects one chunk with the same weights, then the learner
    # updates (reproducible with `deterministic`); async: runners collect while the learner
    # updates, each with one chunk in flight (not reproducible).
    runner_mode: str = option(
        "async",
        "async: runners collect while the learner updates; sync: in lockstep, reproducible",
        DIST,
        choices=("sync", "async"),
    )
    ray_address: Optional[str] = option(
        None, "Ray cluster to join (<host>:<port> or auto; default: a local Ray)", DIST
    )

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

    @property
    def learned_alpha(self) -> bool:
        return self.alpha is None

    def rate(self, part: str) -> float:
        """The learning rate of `part` ('actor', 'critic', 'alpha' or 'value')."""
        value = getattr(self, f"{part}_learning_rate")
        return self.learning_rate if value is None else value

    def validate(self) -> SACConfig:
        """Raises TfsacError naming the first bad field; returns self."""
        # Long, but a flat list of one check per field (or pair of fields) reads best.
        positive_ints = (
            "total_steps",
            "train_freq",
            "buffer_size",
            "batch_size",
            "eval_every",
            "eval_episodes",
            "log_every",
            "num_envs",
            "policy_delay",
            "target_update_interval",
            "envs_per_actor",
            "chunk_steps",
            "weight_sync_every",
        )
        for name in positive_ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise TfsacError(f"{name} must be a positive integer, got {value!r}")
        if self.gradient_steps != -1 and (
            not isinstance(self.gradient_steps, int) or self.gradient_steps <= 0
        ):
            raise TfsacError(
                f"gradient_steps must be a positive integer or -1 (as many as env steps "
                f"collected), got {self.gradient_steps!r}"
            )
        if self.episodes_per_rollout < 0:
            raise TfsacError(
                f"episodes_per_rollout must be >= 0 (0: off), got {self.episodes_per_rollout}"
            )
        if self.episodes_per_rollout and self.train_freq != 1:
            raise TfsacError(
                "train_freq and episodes_per_rollout both set: collection phases are either "
                "train_freq env steps or episodes_per_rollout episodes"
            )
        if self.variant not in ("v1", "v2"):
            raise TfsacError(f"variant must be 'v1' or 'v2', got {self.variant!r}")
        if self.sde_sample_freq == 0 or self.sde_sample_freq < -1:
            raise TfsacError(
                f"sde_sample_freq must be -1 (once per collection phase) or positive, got "
                f"{self.sde_sample_freq}"
            )
        if (self.sde_sample_freq != -1 or self.use_sde_at_warmup) and not self.use_sde:
            raise TfsacError("sde_sample_freq and use_sde_at_warmup need use_sde")
        if not self.log_std_min <= self.log_std_init <= self.log_std_max:
            raise TfsacError(
                f"log_std_init must lie in [log_std_min, log_std_max], got {self.log_std_init}"
            )
        if not isinstance(self.env_id, str) or not self.env_id:
            raise TfsacError("env_id must be a non-empty string")
        # The SavedModel goes to <export_dir>/<model_name>/<version>: one folder name.
        if self.model_name is not None and (
            not self.model_name
            or self.model_name in (".", "..")
            or any(sep in self.model_name for sep in ("/", "\\", os.sep))
        ):
            raise TfsacError(
                f"model_name must be a folder name without path separators, got {self.model_name!r}"
            )
        if self.total_steps % self.num_envs:
            raise TfsacError(
                f"total_steps ({self.total_steps}) must be a multiple of num_envs ({self.num_envs})"
            )
        if self.vector_mode not in ("sync", "async"):
            raise TfsacError(f"vector_mode must be 'sync' or 'async', got {self.vector_mode!r}")
        if self.video_every < 0:
            raise TfsacError(f"video_every must be >= 0, got {self.video_every}")
        if not isinstance(self.env_kwargs, dict):
            raise TfsacError(f"env_kwargs must be a dict, got {self.env_kwargs!r}")
        if self.checkpoint_every < 0:
            raise TfsacError(f"checkpoint_every must be >= 0, got {self.checkpoint_every}")
        if self.keep_checkpoints < 1:
            raise TfsacError(f"keep_checkpoints must be >= 1, got {self.keep_checkpoints}")
        if self.learning_starts < 0:
            raise TfsacError(f"learning_starts must be >= 0, got {self.learning_starts}")
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
        if not self.hidden_sizes or any(h <= 0 for h in self.hidden_sizes):
            raise TfsacError(
                f"hidden_sizes must be one or more positive integers, got {self.hidden_sizes}"
            )
        if not 0.0 <= self.critic_dropout < 1.0:
            raise TfsacError(f"critic_dropout must be in [0, 1), got {self.critic_dropout}")
        if self.num_critics < 2:
            raise TfsacError(f"num_critics must be >= 2, got {self.num_critics}")
        for name in (
            "learning_rate",
            "actor_learning_rate",
            "critic_learning_rate",
            "alpha_learning_rate",
            "value_learning_rate",
        ):
            value = getattr(self, name)
            if value is not None and not 0.0 < value < 1.0:
                raise TfsacError(f"{name} must be in (0, 1), got {value}")
        parse_schedule(self.lr_schedule)
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise TfsacError(f"max_grad_norm must be positive, got {self.max_grad_norm}")
        if not 0 < self.reward_scale < math.inf:
            raise TfsacError(f"reward_scale must be positive and finite, got {self.reward_scale}")
        if not 0.0 <= self.gamma <= 1.0:
            raise TfsacError(f"gamma must be in [0, 1], got {self.gamma}")
        if not 0.0 < self.tau <= 1.0:
            raise TfsacError(f"tau must be in (0, 1], got {self.tau}")
        if self.alpha is not None and not 0.0 < self.alpha < math.inf:
            raise TfsacError(f"alpha must be positive and finite when fixed, got {self.alpha}")
        if not 0.0 < self.initial_alpha < math.inf:
            raise TfsacError(f"initial_alpha must be positive and finite, got {self.initial_alpha}")
        if self.target_entropy is not None and not math.isfinite(self.target_entropy):
            raise TfsacError(f"target_entropy must be finite, got {self.target_entropy}")
        if not self.log_std_min < self.log_std_max:
            raise TfsacError("log_std_min must be smaller than log_std_max")
        self._validate_distributed()
        return self

    def _validate_distributed(self) -> None:
        if not isinstance(self.num_actors, int) or self.num_actors < 0:
            raise TfsacError(f"num_actors must be >= 0 (0: no env runners), got {self.num_actors}")
        if self.runner_mode not in ("sync", "async"):
            raise TfsacError(f"runner_mode must be 'sync' or 'async', got {self.runner_mode!r}")
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
