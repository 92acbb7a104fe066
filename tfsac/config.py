"""The SAC configuration: one dataclass, validated before anything is built."""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Dict, Optional, Tuple

from tfsac.errors import TfsacError
from tfsac.schedules import parse_schedule


@dataclasses.dataclass
class SACConfig:
    """Hyperparameters and run settings for SAC (Haarnoja et al. 2018, arXiv:1812.05905).

    The defaults train Pendulum-v1 to a return near -150 in 20,000 env steps.
    """

    # Environment and seeding.
    env_id: str = "Pendulum-v1"
    seed: int = 0
    # Keyword arguments for gymnasium.make (JSON-serialisable, kept in checkpoints).
    env_kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)

    # Budget and data collection (Spinning Up's start_steps / update_every map onto
    # learning_starts and train_freq = gradient_steps = k).
    total_steps: int = 20_000
    learning_starts: int = 1_000
    train_freq: int = 1
    # Updates per collection phase; -1: as many as env steps were collected in it.
    gradient_steps: int = 1
    # Collect whole episodes instead of train_freq env steps: the updates run after every
    # `episodes_per_rollout` finished episodes (0: off; lightning_baselines3's option).
    episodes_per_rollout: int = 0
    buffer_size: int = 1_000_000
    batch_size: int = 256
    # Env copies stepped together (gymnasium vector env, "sync" or "async"). train_freq and
    # gradient_steps count env steps, so the updates per env step stay the same for any n.
    num_envs: int = 1
    vector_mode: str = "sync"

    # Optimisation.
    learning_rate: float = 3e-4
    # Per-part rates (None: learning_rate; `value` is v1's V network), and global-norm
    # gradient clipping (None: off).
    actor_learning_rate: Optional[float] = None
    critic_learning_rate: Optional[float] = None
    alpha_learning_rate: Optional[float] = None
    value_learning_rate: Optional[float] = None
    max_grad_norm: Optional[float] = None
    # A factor on every learning rate over env steps (tfsac/schedules.py): 'constant',
    # 'linear' (to 0 at total_steps) or 'piecewise:<step>:<factor>,...'.
    lr_schedule: str = "constant"
    gamma: float = 0.99
    tau: float = 0.005
    # Actor and alpha update every `policy_delay` critic updates (the notebook's
    # policy_update_freq, CleanRL's policy_frequency); targets every target_update_interval.
    policy_delay: int = 1
    target_update_interval: int = 1
    # Rewards are multiplied by this in the soft Bellman target (prt_rl's reward_scale).
    reward_scale: float = 1.0

    # Entropy temperature: a fixed `alpha`, or learned (alpha=None) from `initial_alpha`
    # towards `target_entropy` (None means -dim(A)).
    alpha: Optional[float] = None
    initial_alpha: float = 1.0
    target_entropy: Optional[float] = None
    # Optimise log-alpha (True) or alpha itself (False, prt_rl's use_log_entropy=False).
    use_log_alpha: bool = True

    # 'v2': twin Q networks with target Q networks (arXiv:1812.05905, the default);
    # 'v1': the original SAC with a state-value network V and a target V (arXiv:1801.01290).
    variant: str = "v2"

    # gSDE, generalized state-dependent exploration (Raffin et al. 2021, arXiv:2005.05719):
    # exploration noise eps(s) = z(s) @ E with z(s) the actor's last hidden features and E
    # ~ N(0, exp(log_std)^2) resampled at each collection phase's start and every
    # `sde_sample_freq` env steps (-1: only then); `log_std_init` starts the learned
    # [features, action_dim] log-std matrix; `use_sde_at_warmup` explores with gSDE instead
    # of uniform actions before learning_starts.
    use_sde: bool = False
    sde_sample_freq: int = -1
    use_sde_at_warmup: bool = False
    log_std_init: float = -3.0

    # Networks.
    hidden_sizes: Tuple[int, ...] = (256, 256)
    num_critics: int = 2
    # DroQ-style critics (layer normalisation, dropout), for gradient_steps > 1.
    critic_layer_norm: bool = False
    critic_dropout: float = 0.0
    log_std_min: float = -20.0
    log_std_max: float = 2.0

    # Compilation: XLA on the update step and on action selection. `deterministic` turns
    # on TF op determinism: the same seed then gives the same run, bit for bit, on CPU.
    jit_compile: bool = True
    deterministic: bool = False
    # Drive the env loop from one TF graph call per stretch of env steps (the env steps
    # through tf.numpy_function, the updates and actions are the same compiled calls)
    # instead of one eager call per step: the same run, less per-step dispatch. False
    # steps the envs from the calling thread (for envs that must run there).
    graph_loop: bool = True

    # Evaluation, logging and outputs.
    eval_every: int = 5_000
    eval_episodes: int = 10
    log_every: int = 1_000
    # A video of one deterministic episode every `video_every` evaluations (0: never),
    # in <run_dir>/videos.
    video_every: int = 0
    # Progress bar on stderr: None means on when stderr is a terminal.
    progress_bar: Optional[bool] = None
    tensorboard: bool = True
    run_dir: Optional[str] = None
    export_dir: str = "saved_models"
    model_name: Optional[str] = None

    # Checkpoints under <run_dir>/checkpoints: every `checkpoint_every` env steps (0: only
    # at the end and on SIGINT/SIGTERM), keeping the last `keep_checkpoints`.
    checkpoint_every: int = 5_000
    keep_checkpoints: int = 3

    def __post_init__(self):
        self.hidden_sizes = tuple(int(h) for h in self.hidden_sizes)

    @property
    def learned_alpha(self) -> bool:
        return self.alpha is None

    def steps_per_update(self, collected: int) -> int:
        """Gradient steps for a collection phase of `collected` env steps."""
        return collected if self.gradient_steps == -1 else self.gradient_steps

    def rate(self, part: str) -> float:
        """The learning rate of `part` ('actor', 'critic', 'alpha' or 'value')."""
        value = getattr(self, f"{part}_learning_rate")
        return self.learning_rate if value is None else value

    def validate(self) -> SACConfig:
        """Raises TfsacError naming the first bad field; returns self."""
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
                f"({self.total_steps}): no update would ever run"
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
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
