"""The options of the algorithm variants and of exploration: which variant, its own
hyperparameters, the options only some variants read, and how exploration noise is drawn."""

from __future__ import annotations

from typing import Any, Dict, Optional

from tfsac.config.fields import (
    NON_EMPTY_TEXT,
    POSITIVE_FINITE,
    POSITIVE_INT,
    Check,
    at_least,
    interval,
    option,
    options,
)
from tfsac.config.options import VARIANT


@options(VARIANT)
class VariantOptions:
    """The algorithm variant, its own options, and gSDE exploration."""

    # Checked when the config is resolved (tfsac.algorithm.resolve).
    algorithm: str = option(
        "sac",
        "the algorithm: a variant registered in tfsac/algorithm/variants/ (train.py --help "
        "lists them), or <module>:<name> of one your module registers",
        check=NON_EMPTY_TEXT,
    )
    # The resolved config holds every hyperparameter the variant declares.
    algorithm_kwargs: Dict[str, Any] = option(
        dict,
        "the algorithm's own hyperparameters, a JSON object, e.g. '{\"beta\": 0.5}' (those "
        "a variant of yours declares)",
        text="{}",
        check=Check(lambda v: isinstance(v, dict), "a dict", "{!r}"),
    )
    n_quantiles: int = option(25, "TQC: quantiles (atoms) per critic", check=POSITIVE_INT)
    top_quantiles_to_drop_per_net: int = option(
        2, "TQC: atoms per critic dropped from the pooled target", check=at_least(0)
    )
    batch_norm_momentum: float = option(
        0.99,
        "CrossQ: momentum of the batch renormalisation's moving statistics",
        check=interval(0, 1, "[)"),
    )
    renorm_warmup_steps: int = option(
        100_000,
        "CrossQ: training calls of each batch-norm layer before renormalisation starts",
        check=at_least(0),
    )

    # FlashSAC (arXiv:2604.04539): a categorical critic, Q the expectation over its bins.
    n_bins: int = option(
        101,
        "flashsac, xqc: bins of each critic's categorical distribution of returns",
        check=Check(lambda v: isinstance(v, int) and v >= 2, "an integer >= 2", "{!r}"),
    )
    bin_range: float = option(
        5.0, "flashsac, xqc: the bins span [-this, this]", check=POSITIVE_FINITE
    )
    # FlashSAC's exploration: each noise draw held for n env steps, n from a zeta law.
    exploration_zeta: Optional[float] = option(
        None,
        "hold each exploration noise draw for n env steps, P(n) ~ n^-this for n <= "
        "exploration_zeta_max (auto: off; flashsac 2; 0: off, a new draw every step)",
        text="auto",
        check=at_least(0),
    )
    exploration_zeta_max: int = option(
        16, "exploration_zeta: the longest a noise draw is held", check=POSITIVE_INT
    )

    # Kept for SAC's two versions: v1 is algorithm sac_v1, v2 is sac.
    variant: Optional[str] = option(
        None,
        "v1: algorithm sac_v1 (the original SAC with V); v2: sac",
        choices=("v1", "v2"),
    )
    # gSDE (arXiv:2005.05719): noise z(s) @ E, z(s) the actor's last hidden features.
    use_sde: bool = option(False, "gSDE: generalized state-dependent exploration")
    sde_sample_freq: int = option(
        -1,
        "gSDE: new noise every N env steps (-1: once per collection phase)",
        check=Check(lambda v: v == -1 or v > 0, "-1 (once per collection phase) or positive"),
    )
    use_sde_at_warmup: bool = option(
        False, "gSDE instead of uniform actions before learning_starts"
    )
    log_std_init: float = option(-3.0, "gSDE: initial log-std of the noise matrix")
