"""The learning side's options, one dataclass per help group, each option declared once with
its default, help text, flag and check (the scripts' flags and --help come from them)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Optional, Tuple

from tfsac.config.fields import (
    NON_EMPTY_TEXT,
    POSITIVE_FINITE,
    POSITIVE_INT,
    RATE,
    SEED,
    Check,
    at_least,
    interval,
    option,
)
from tfsac.config.schedules import parse_schedule

# Help groups, in the order `--help` lists them.
ENV = "Environment"
COLLECT = "Budget and data collection"
OFFLINE = "Recorded data (offline-to-online, RLPD)"
OPTIM = "Optimisation"
ALPHA = "Entropy temperature"
VARIANT = "Variants and exploration"
NETS = "Networks"
COMPILE = "Compilation"
OUTPUT = "Evaluation, logging, outputs and checkpoints"
STOP = "Stopping early and keeping the best policy"
DIST = "Distributed collection (env runners on Ray)"
GROUPS = (ENV, COLLECT, OFFLINE, OPTIM, ALPHA, VARIANT, NETS, COMPILE, OUTPUT, STOP, DIST)


@dataclasses.dataclass
class EnvOptions:
    """The env and the seed."""

    # Environment and seeding.
    env_id: str = option(
        "Pendulum-v1",
        "gymnasium id; 'module:Id-v0' imports the module that registers it first",
        ENV,
        flag="env",
        check=NON_EMPTY_TEXT,
    )
    seed: int = option(0, "seeds the env, numpy and TF", ENV, check=SEED)
    # JSON-serialisable (kept in checkpoints and the SavedModel's metadata).
    env_kwargs: Dict[str, Any] = option(
        dict,
        "keyword arguments for gymnasium.make, a JSON object, e.g. '{\"max_episode_steps\": 500}'",
        ENV,
        text="{}",
        check=Check(lambda v: isinstance(v, dict), "a dict", "{!r}"),
    )
    num_envs: int = option(
        1,
        "env copies stepped together (a gymnasium vector env; total_steps a multiple of it)",
        ENV,
        check=POSITIVE_INT,
    )
    vector_mode: str = option("sync", "how the env copies step", ENV, choices=("sync", "async"))


@dataclasses.dataclass
class CollectOptions:
    """How long to train and how env steps and updates alternate."""

    # Budget and data collection. train_freq and gradient_steps count env steps, so the
    # updates per env step stay the same for any num_envs.
    total_steps: int = option(
        20_000,
        "env steps to train for (0: train on --offline_data alone, --offline_updates updates)",
        COLLECT,
        check=at_least(0),
    )
    learning_starts: int = option(
        1_000, "uniform-random env steps before updates start", COLLECT, check=at_least(0)
    )
    train_freq: int = option(
        1, "env steps per collection phase (updates follow each)", COLLECT, check=POSITIVE_INT
    )
    gradient_steps: int = option(
        1,
        "updates per collection phase (-1: one per env step collected)",
        COLLECT,
        check=Check(
            lambda v: v == -1 or (isinstance(v, int) and v > 0),
            "a positive integer or -1 (as many as env steps collected)",
            "{!r}",
        ),
    )
    episodes_per_rollout: int = option(
        0,
        "collection phases of this many whole episodes instead (0: train_freq)",
        COLLECT,
        check=at_least(0, " (0: off)"),
    )
    buffer_size: int = option(
        1_000_000, "replay capacity (transitions)", COLLECT, check=POSITIVE_INT
    )
    batch_size: int = option(256, "minibatch size", COLLECT, check=POSITIVE_INT)
    # Hindsight Experience Replay for goal envs (tfsac/data/her.py), as SB3's
    # HerReplayBuffer: n_sampled_goal is her_goals_per_transition.
    her: bool = option(
        False,
        "Hindsight Experience Replay (goal-conditioned envs: a Dict observation with "
        "achieved_goal and desired_goal, and compute_reward)",
        COLLECT,
    )
    her_goals_per_transition: int = option(
        4,
        "her: relabelled transitions per real one in a batch (k/(k+1) of it relabelled)",
        COLLECT,
        check=POSITIVE_INT,
    )
    her_strategy: str = option(
        "future",
        "her: where new goals come from in the same episode (future: this or a later "
        "step; final: the last; episode: any)",
        COLLECT,
        choices=("future", "final", "episode"),
    )


@dataclasses.dataclass
class OptimOptions:
    """Learning rates, their schedule, discount, Polyak averaging, delays."""

    # Optimisation.
    learning_rate: float = option(
        3e-4, "Adam rate of every part without its own", OPTIM, check=RATE
    )
    actor_learning_rate: Optional[float] = option(
        None, "actor rate (default learning_rate)", OPTIM, check=RATE
    )
    critic_learning_rate: Optional[float] = option(
        None, "critic rate (default learning_rate)", OPTIM, check=RATE
    )
    alpha_learning_rate: Optional[float] = option(
        None, "temperature rate (default learning_rate)", OPTIM, check=RATE
    )
    value_learning_rate: Optional[float] = option(
        None, "v1's V-network rate (default learning_rate)", OPTIM, check=RATE
    )
    max_grad_norm: Optional[float] = option(
        None,
        "clip actor, critic and V gradients to this global norm (default off)",
        OPTIM,
        check=Check(lambda v: v > 0, "positive"),
    )
    # A factor on every learning rate over env steps (schedules.py).
    lr_schedule: str = option(
        "constant",
        "constant | linear (to 0 at total_steps) | linear:<factor>[:<steps>] (to factor) | "
        "cosine:<factor>[:<steps>] (to factor) | piecewise:<step>:<factor>,...",
        OPTIM,
        # parse_schedule raises its own error, which says what is wrong in the schedule.
        check=Check(lambda v: bool(parse_schedule(v)), "a schedule"),
    )
    gamma: float = option(0.99, "discount factor", OPTIM, check=interval(0, 1, "[]"))
    # n-step returns (as SBX's and SB3's `n_steps`): the TD target sums up to n rewards of
    # the stored episode, stopping at a termination or a truncation, and bootstraps with
    # gamma to the power of the steps taken (tfsac/data/replay.py).
    n_steps: int = option(
        1,
        "n-step returns: rewards summed in the TD target (1: one step)",
        OPTIM,
        check=POSITIVE_INT,
    )
    tau: float = option(
        0.005, "Polyak coefficient of the target networks", OPTIM, check=interval(0, 1, "(]")
    )
    # "auto" (or None) is the algorithm's own default (its variant's `defaults`).
    policy_delay: int = option(
        None,
        "critic updates per actor and temperature update (auto: 1; crossq, xqc 3; flashsac 2)",
        OPTIM,
        text="auto",
        check=POSITIVE_INT,
    )
    adam_beta1: float = option(
        None,
        "Adam's beta_1 for the actor and critics (auto: 0.9; crossq 0.5)",
        OPTIM,
        text="auto",
        check=interval(0, 1, "[)"),
    )
    weight_decay: float = option(
        None,
        "decoupled weight decay (AdamW) of the actor and critics (auto: 0; simba 1e-4)",
        OPTIM,
        text="auto",
        check=at_least(0),
    )
    target_update_interval: int = option(
        1, "critic updates per Polyak update", OPTIM, check=POSITIVE_INT
    )
    reward_scale: float = option(
        1.0, "rewards are multiplied by this in the TD target", OPTIM, check=POSITIVE_FINITE
    )
    # SB3's VecNormalize(norm_reward=True) without its staleness: the replay keeps raw
    # rewards and each update divides by the statistics of its own moment.
    normalize_rewards: Optional[bool] = option(
        None,
        "divide rewards in the update by (1 - gamma) x the running std of the discounted "
        "return (kept out of exports; returns are logged and evaluated raw): auto (on with "
        "flashsac and xqc; xqc divides by std(G) alone), true or false",
        OPTIM,
        text="auto",
    )
    # FlashSAC's normaliser (arXiv:2604.04539): returns kept inside a categorical critic's
    # bins by the largest |G| seen, not only scaled by their spread.
    return_bound: Optional[float] = option(
        None,
        "normalize_rewards: divide by max(std(G), max|G| / this) instead, so that the "
        "discounted returns stay within [-this, this] (auto: off; flashsac 5, its bins' "
        "range; 0: off)",
        OPTIM,
        text="auto",
        check=at_least(0),
    )


@dataclasses.dataclass
class AlphaOptions:
    """The entropy temperature, fixed or learned."""

    # Entropy temperature: a fixed `alpha`, or learned (alpha=None) from `initial_alpha`
    # towards `target_entropy` (None means -dim(A)). The strings 'auto' and 'auto_<x>'
    # (learned, starting at x) are accepted too.
    alpha: Optional[float] = option(
        None,
        "a fixed entropy coefficient, 'auto' (learned from initial_alpha) or 'auto_<x>' "
        "(learned from x)",
        ALPHA,
        text="auto",
        check=Check(POSITIVE_FINITE.ok, "positive and finite when fixed"),
    )
    initial_alpha: float = option(
        1.0, "starting alpha when it is learned", ALPHA, check=POSITIVE_FINITE
    )
    target_entropy: Optional[float] = option(
        None,
        "entropy target of the learned alpha: a float, or 'auto' = -dim(A)",
        ALPHA,
        text="auto",
        check=Check(math.isfinite, "finite"),
    )
    # FlashSAC's target: the entropy of a Gaussian of this std in every action dimension.
    target_std: Optional[float] = option(
        None,
        "entropy target of the learned alpha as a std sigma per action dimension: "
        "dim(A) / 2 log(2 pi e sigma^2) (auto: off; flashsac 0.15; xqc 0.1468: -dim(A) / 2; "
        "0: off)",
        ALPHA,
        text="auto",
        check=at_least(0),
    )
    use_log_alpha: bool = option(True, "optimise log-alpha (true) or alpha itself", ALPHA)


@dataclasses.dataclass
class NetOptions:
    """The actor's and critics' networks."""

    # Networks.
    hidden_sizes: Tuple[int, ...] = option(
        (256, 256),
        "hidden layer sizes, e.g. 256,256",
        NETS,
        check=Check(lambda v: v and all(h > 0 for h in v), "one or more positive integers"),
    )
    # SimBa (Lee et al. 2025, arXiv:2410.09754): a running observation normaliser, then
    # residual blocks x + Dense(Dense(LayerNorm(x), 4h, relu), h), one per hidden size.
    # The registered architectures (tfsac/algorithm/architectures.py), checked when the
    # config is resolved: a registered one of your own is a value too.
    network: Optional[str] = option(
        None,
        "mlp; simba: normalised observations and residual pre-layer-norm blocks; flashsac: "
        "FlashSAC's batch-normed inverted-residual blocks of unit-norm weights; xqc: XQC's "
        "unit-norm layers, each batch-normed before its ReLU; or <module>:<name> of an "
        "architecture your module registers (auto: mlp; flashsac's for flashsac, xqc's for "
        "xqc)",
        NETS,
        text="auto",
        check=NON_EMPTY_TEXT,
    )
    # A running mean/std of every collected observation, subtracted and divided first in
    # the actor and the critics (so in every export too): raw observations in, always.
    normalize_observations: Optional[bool] = option(
        None,
        "normalise observations by their running mean and std inside the networks and every "
        "export: auto (on with simba), true or false",
        NETS,
        text="auto",
    )
    critic_hidden_sizes: Tuple[int, ...] = option(
        None,
        "the critics' hidden layer sizes (auto: hidden_sizes; crossq 2048,2048; flashsac "
        "256,256; xqc 512,512,512,512)",
        NETS,
        text="auto",
        check=Check(lambda v: v and all(h > 0 for h in v), "one or more positive integers"),
    )
    num_critics: int = option(
        2,
        "Q networks (SAC's target takes the minimum of them, or of a random target_subset)",
        NETS,
        check=at_least(2),
    )
    # DroQ-style critics, for gradient_steps > 1.
    critic_layer_norm: bool = option(False, "layer normalisation in the critics (DroQ)", NETS)
    critic_dropout: float = option(
        0.0, "dropout rate in the critics (DroQ uses 0.01)", NETS, check=interval(0, 1, "[)")
    )
    # RLPD (Ball et al. 2023, arXiv:2302.02948) and REDQ (Chen et al. 2021,
    # arXiv:2101.05982): with a large ensemble, the target's minimum over a random subset.
    target_subset: int = option(
        0,
        "critics the target takes its minimum over: a random subset of this size, drawn "
        "anew each update (0: all of them)",
        VARIANT,
        check=at_least(0, " (0: all critics)"),
    )
    actor_q: str = option(
        "min",
        "what the actor's loss reads of the critics: their minimum (SAC) or mean (RLPD)",
        VARIANT,
        choices=("min", "mean"),
    )
    backup_entropy: bool = option(
        True,
        "the entropy term -alpha log pi(a'|s') in the TD target (RLPD's sparse tasks: off)",
        VARIANT,
    )
    log_std_min: float = option(-20.0, "lower clip of the policy's log-std", NETS)
    log_std_max: float = option(2.0, "upper clip of the policy's log-std", NETS)


@dataclasses.dataclass
class CompileOptions:
    """XLA and determinism."""

    # Compilation. `deterministic` turns on TF op determinism: the same seed then gives the
    # same run, bit for bit, on a CPU.
    jit_compile: bool = option(True, "compile the update and action selection with XLA", COMPILE)
    deterministic: bool = option(
        False, "TF op determinism: the same seed gives the same run (CPU)", COMPILE
    )
