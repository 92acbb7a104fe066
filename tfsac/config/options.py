"""The learning side's options, the variants' included, one dataclass per help group, each
declared once with its default, help, flag and check (the scripts' flags come from them)."""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

from tfsac.config.fields import (
    NON_EMPTY_TEXT,
    POSITIVE_FINITE,
    POSITIVE_INT,
    RATE,
    SEED,
    WIDTHS,
    Check,
    at_least,
    auto_option,
    interval,
    json_option,
    option,
    options,
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


@options(ENV)
class EnvOptions:
    env_id: str = option(
        "Pendulum-v1",
        "gymnasium id; 'module:Id-v0' imports the module that registers it first",
        NON_EMPTY_TEXT,
        flag="env",
    )
    seed: int = option(0, "seeds the env, numpy and TF", SEED)
    env_kwargs: Dict[str, Any] = json_option(
        "keyword arguments for gymnasium.make, a JSON object, e.g. '{\"max_episode_steps\": 500}'",
    )
    num_envs: int = option(
        1,
        "env copies stepped together (a gymnasium vector env; total_steps a multiple of it)",
        POSITIVE_INT,
    )
    vector_mode: str = option("sync", "how the env copies step", choices=("sync", "async"))


@options(COLLECT)
class CollectOptions:
    # train_freq and gradient_steps count env steps: the updates per env step stay for any num_envs.
    total_steps: int = option(
        20_000,
        "env steps to train for (0: train on --offline_data alone, --offline_updates updates)",
        at_least(0),
    )
    learning_starts: int = option(
        1_000, "uniform-random env steps before updates start", at_least(0)
    )
    train_freq: int = option(
        1, "env steps per collection phase (updates follow each)", POSITIVE_INT
    )
    gradient_steps: int = option(
        1,
        "updates per collection phase (-1: one per env step collected)",
        Check(
            lambda v: v == -1 or (isinstance(v, int) and v > 0),
            "a positive integer or -1 (as many as env steps collected)",
            "{!r}",
        ),
    )
    episodes_per_rollout: int = option(
        0,
        "collection phases of this many whole episodes instead (0: train_freq)",
        at_least(0, " (0: off)"),
    )
    buffer_size: int = option(1_000_000, "replay capacity (transitions)", POSITIVE_INT)
    batch_size: int = option(256, "minibatch size", POSITIVE_INT)
    # HER as SB3's HerReplayBuffer (tfsac/data/her.py).
    her: bool = option(
        False,
        "Hindsight Experience Replay (goal-conditioned envs: a Dict observation with "
        "achieved_goal and desired_goal, and compute_reward)",
    )
    her_goals_per_transition: int = option(
        4,
        "her: relabelled transitions per real one in a batch (k/(k+1) of it relabelled)",
        POSITIVE_INT,
    )
    her_strategy: str = option(
        "future",
        "her: where new goals come from in the same episode (future: this or a later "
        "step; final: the last; episode: any)",
        choices=("future", "final", "episode"),
    )


@options(OPTIM)
class OptimOptions:
    learning_rate: float = option(3e-4, "Adam rate of every part without its own", RATE)
    actor_learning_rate: Optional[float] = option(None, "actor rate (default learning_rate)", RATE)
    critic_learning_rate: Optional[float] = option(
        None, "critic rate (default learning_rate)", RATE
    )
    alpha_learning_rate: Optional[float] = option(
        None, "temperature rate (default learning_rate)", RATE
    )
    value_learning_rate: Optional[float] = option(
        None, "v1's V-network rate (default learning_rate)", RATE
    )
    max_grad_norm: Optional[float] = option(
        None,
        "clip actor, critic and V gradients to this global norm (default off)",
        Check(lambda v: v > 0, "positive"),
    )
    # parse_schedule raises its own error, which says what is wrong in the schedule.
    lr_schedule: str = option(
        "constant",
        "constant | linear (to 0 at total_steps) | linear:<factor>[:<steps>] (to factor) | "
        "cosine:<factor>[:<steps>] (to factor) | piecewise:<step>:<factor>,...",
        Check(lambda v: bool(parse_schedule(v)), "a schedule"),
    )
    gamma: float = option(0.99, "discount factor", interval(0, 1, "[]"))
    # As SBX's and SB3's `n_steps` (tfsac/data/replay.py).
    n_steps: int = option(
        1, "n-step returns: rewards summed in the TD target (1: one step)", POSITIVE_INT
    )
    tau: float = option(0.005, "Polyak coefficient of the target networks", interval(0, 1, "(]"))
    # "auto" (or None) is the algorithm's own default (its variant's `defaults`).
    policy_delay: int = auto_option(
        "critic updates per actor and temperature update (auto: 1; crossq, xqc 3; flashsac 2)",
        POSITIVE_INT,
    )
    adam_beta1: float = auto_option(
        "Adam's beta_1 for the actor and critics (auto: 0.9; crossq 0.5)", interval(0, 1, "[)")
    )
    weight_decay: float = auto_option(
        "decoupled weight decay (AdamW) of the actor and critics (auto: 0; simba 1e-4)", at_least(0)
    )
    target_update_interval: int = option(1, "critic updates per Polyak update", POSITIVE_INT)
    reward_scale: float = option(
        1.0, "rewards are multiplied by this in the TD target", POSITIVE_FINITE
    )
    # SB3's VecNormalize(norm_reward=True) without its staleness: the replay keeps raw
    # rewards and each update divides by the statistics of its own moment.
    normalize_rewards: Optional[bool] = auto_option(
        "divide rewards in the update by (1 - gamma) x the running std of the discounted "
        "return (kept out of exports; returns are logged and evaluated raw): auto (on with "
        "flashsac and xqc; xqc divides by std(G) alone), true or false"
    )
    # FlashSAC's normaliser (arXiv:2604.04539): returns kept inside a categorical critic's
    # bins by the largest |G| seen, not only scaled by their spread.
    return_bound: Optional[float] = auto_option(
        "normalize_rewards: divide by max(std(G), max|G| / this) instead, so that the "
        "discounted returns stay within [-this, this] (auto: off; flashsac 5, its bins' "
        "range; 0: off)",
        at_least(0),
    )


@options(ALPHA)
class AlphaOptions:
    # None: learned from `initial_alpha` towards `target_entropy` (None: -dim(A)).
    alpha: Optional[float] = auto_option(
        "a fixed entropy coefficient, 'auto' (learned from initial_alpha) or 'auto_<x>' "
        "(learned from x)",
        Check(POSITIVE_FINITE.ok, "positive and finite when fixed"),
    )
    initial_alpha: float = option(1.0, "starting alpha when it is learned", POSITIVE_FINITE)
    target_entropy: Optional[float] = auto_option(
        "entropy target of the learned alpha: a float, or 'auto' = -dim(A)",
        Check(math.isfinite, "finite"),
    )
    # FlashSAC's target: the entropy of a Gaussian of this std in every action dimension.
    target_std: Optional[float] = auto_option(
        "entropy target of the learned alpha as a std sigma per action dimension: "
        "dim(A) / 2 log(2 pi e sigma^2) (auto: off; flashsac 0.15; xqc 0.1468: -dim(A) / 2; "
        "0: off)",
        at_least(0),
    )
    use_log_alpha: bool = option(True, "optimise log-alpha (true) or alpha itself")


@options(NETS)
class NetOptions:
    hidden_sizes: Tuple[int, ...] = option((256, 256), "hidden layer sizes, e.g. 256,256", WIDTHS)
    # SimBa: Lee et al. 2025, arXiv:2410.09754. Checked when the config is resolved
    # (tfsac/algorithm/architectures.py).
    network: Optional[str] = auto_option(
        "mlp; simba: normalised observations and residual pre-layer-norm blocks; flashsac: "
        "FlashSAC's batch-normed inverted-residual blocks of unit-norm weights; xqc: XQC's "
        "unit-norm layers, each batch-normed before its ReLU; or <module>:<name> of an "
        "architecture your module registers (auto: mlp; flashsac's for flashsac, xqc's for "
        "xqc)",
        NON_EMPTY_TEXT,
    )
    normalize_observations: Optional[bool] = auto_option(
        "normalise observations by their running mean and std inside the networks and every "
        "export: auto (on with simba), true or false"
    )
    critic_hidden_sizes: Tuple[int, ...] = auto_option(
        "the critics' hidden layer sizes (auto: hidden_sizes; crossq 2048,2048; flashsac "
        "256,256; xqc 512,512,512,512)",
        WIDTHS,
    )
    num_critics: int = option(
        2,
        "Q networks (SAC's target takes the minimum of them, or of a random target_subset)",
        at_least(2),
    )
    # DroQ-style critics, for gradient_steps > 1.
    critic_layer_norm: bool = option(False, "layer normalisation in the critics (DroQ)")
    critic_dropout: float = option(
        0.0, "dropout rate in the critics (DroQ uses 0.01)", interval(0, 1, "[)")
    )
    # RLPD (Ball et al. 2023, arXiv:2302.02948), REDQ (Chen et al. 2021, arXiv:2101.05982).
    target_subset: int = option(
        0,
        "critics the target takes its minimum over: a random subset of this size, drawn "
        "anew each update (0: all of them)",
        at_least(0, " (0: all critics)"),
        group=VARIANT,
    )
    actor_q: str = option(
        "min",
        "what the actor's loss reads of the critics: their minimum (SAC) or mean (RLPD)",
        choices=("min", "mean"),
        group=VARIANT,
    )
    backup_entropy: bool = option(
        True,
        "the entropy term -alpha log pi(a'|s') in the TD target (RLPD's sparse tasks: off)",
        group=VARIANT,
    )
    log_std_min: float = option(-20.0, "lower clip of the policy's log-std")
    log_std_max: float = option(2.0, "upper clip of the policy's log-std")


@options(COMPILE)
class CompileOptions:
    jit_compile: bool = option(True, "compile the update and action selection with XLA")
    deterministic: bool = option(False, "TF op determinism: the same seed gives the same run (CPU)")


@options(VARIANT)
class VariantOptions:
    # Checked when the config is resolved (tfsac.algorithm.resolve).
    algorithm: str = option(
        "sac",
        "the algorithm: a variant registered in tfsac/algorithm/variants/ (train.py --help "
        "lists them), or <module>:<name> of one your module registers",
        NON_EMPTY_TEXT,
    )
    # The resolved config holds every hyperparameter the variant declares.
    algorithm_kwargs: Dict[str, Any] = json_option(
        "the algorithm's own hyperparameters, a JSON object, e.g. '{\"beta\": 0.5}' (those "
        "a variant of yours declares)",
    )
    n_quantiles: int = option(25, "TQC: quantiles (atoms) per critic", POSITIVE_INT)
    top_quantiles_to_drop_per_net: int = option(
        2, "TQC: atoms per critic dropped from the pooled target", at_least(0)
    )
    batch_norm_momentum: float = option(
        0.99,
        "CrossQ: momentum of the batch renormalisation's moving statistics",
        interval(0, 1, "[)"),
    )
    renorm_warmup_steps: int = option(
        100_000,
        "CrossQ: training calls of each batch-norm layer before renormalisation starts",
        at_least(0),
    )

    # FlashSAC (arXiv:2604.04539): a categorical critic, Q the expectation over its bins.
    n_bins: int = option(
        101,
        "flashsac, xqc: bins of each critic's categorical distribution of returns",
        Check(lambda v: isinstance(v, int) and v >= 2, "an integer >= 2", "{!r}"),
    )
    bin_range: float = option(5.0, "flashsac, xqc: the bins span [-this, this]", POSITIVE_FINITE)
    # FlashSAC's exploration: each noise draw held for n env steps, n from a zeta law.
    exploration_zeta: Optional[float] = auto_option(
        "hold each exploration noise draw for n env steps, P(n) ~ n^-this for n <= "
        "exploration_zeta_max (auto: off; flashsac 2; 0: off, a new draw every step)",
        at_least(0),
    )
    exploration_zeta_max: int = option(
        16, "exploration_zeta: the longest a noise draw is held", POSITIVE_INT
    )

    # Kept for SAC's two versions: v1 is algorithm sac_v1, v2 is sac.
    variant: Optional[str] = option(
        None, "v1: algorithm sac_v1 (the original SAC with V); v2: sac", choices=("v1", "v2")
    )
    # gSDE (arXiv:2005.05719): noise z(s) @ E, z(s) the actor's last hidden features.
    use_sde: bool = option(False, "gSDE: generalized state-dependent exploration")
    sde_sample_freq: int = option(
        -1,
        "gSDE: new noise every N env steps (-1: once per collection phase)",
        Check(lambda v: v == -1 or v > 0, "-1 (once per collection phase) or positive"),
    )
    use_sde_at_warmup: bool = option(
        False, "gSDE instead of uniform actions before learning_starts"
    )
    log_std_init: float = option(-3.0, "gSDE: initial log-std of the noise matrix")
