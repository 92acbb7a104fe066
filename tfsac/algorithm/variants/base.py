"""`Variant`, what an algorithm of the SAC family is to tfsac, and the registry `--algorithm`
selects from. The start checks read its declarations without TensorFlow, so variant files
name their TensorFlow-side modules through `lazy_module`."""

from __future__ import annotations

import dataclasses
import importlib
import json
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type

from tfsac.config import SACConfig
from tfsac.user_modules import add, registered

# What every update reports (SAC.metric_names); a variant's own metrics come after them.
UPDATE_METRICS = ("critic_loss", "actor_loss", "alpha", "alpha_loss", "entropy", "q_mean")


class lazy_module:  # noqa: N801 - stands where a module name stands
    """A module imported on its first attribute access (importing a variant imports no TF)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        return getattr(importlib.import_module(self._name), attribute)


class Variant:
    """An algorithm: its declarations (class level, TF-free) and its critic rule (an instance
    per `SAC`, run inside the compiled update). Subclass a built-in one and `register` it."""

    # ------------------------------------------------------------- declarations
    name: str = ""  # the `algorithm` option's value
    summary: str = ""  # one line for --help
    has_target_critic: bool = True  # Polyak-averaged copies of the critics
    # Config fields a checkpoint must match to be resumed (beyond the networks' shapes).
    resume_keeps: Tuple[str, ...] = ()
    # Options it reads, each with the methods that read it (a subclass that replaces them
    # reads it no more); tau and target_update_interval wherever there is a Polyak step.
    # Another variant's option set away from its default is refused.
    reads: ClassVar[Dict[str, Tuple[str, ...]]] = {}
    # Its own hyperparameters' JSON defaults: --algorithm_kwargs sets them, the update reads
    # self.kwargs[name], the classmethods config.algorithm_kwargs[name].
    hyperparameters: ClassVar[Dict[str, Any]] = {}
    peer: Optional[str] = None  # ../shared/peers' --algo for it in SB3/sb3-contrib and SBX
    # Its metrics beside SAC's (last update's values): critic_objective's and
    # after_critic_step's, then actor_objective's (held on steps that skip the actor).
    metric_names: Tuple[str, ...] = ()
    actor_metric_names: Tuple[str, ...] = ()
    seeds_needed = 2  # seeds per update: next action's [:, 0], the actor's [:, 1], then its own

    @classmethod
    def defaults(cls, config: SACConfig) -> Dict[str, Any]:
        """Values for the options left 'auto' (policy_delay, adam_beta1, critic_hidden_sizes,
        network, normalize_rewards, return_bound, target_std, exploration_zeta)."""
        return {
            "policy_delay": 1,
            "adam_beta1": 0.9,
            "critic_hidden_sizes": config.hidden_sizes,
            "network": "mlp",
            "normalize_rewards": False,
            "return_bound": 0.0,
            "target_std": 0.0,
            "exploration_zeta": 0.0,
        }

    @classmethod
    def check(cls, config: SACConfig) -> Optional[str]:
        """Why this variant cannot run the options, in one line, or None."""
        return None

    @classmethod
    def critic_outputs(cls, config: SACConfig) -> int:
        """Values per critic: 1 (a Q value) or a distribution's atoms."""
        return 1

    @classmethod
    def batch_norm(cls, config: SACConfig) -> Optional[Dict[str, Any]]:
        """BatchRenorm's arguments where the networks are batch-renormalised, else None."""
        return None

    @classmethod
    def peer_kwargs(cls, config: SACConfig) -> Tuple[Dict, Dict]:
        """(policy_kwargs, constructor kwargs) that give the peer this variant's settings."""
        return {}, {}

    # -------------------------------------------------------------- critic rule
    def __init__(self, sac, obs_dim: int):
        """`sac` is the `tfsac.algorithm.sac.SAC` whose update calls this rule."""
        self.sac = sac
        self.kwargs = dict(sac.config.algorithm_kwargs)  # every hyperparameter, resolved

    def checkpoint_objects(self) -> Dict[str, Any]:
        """What the variant adds to a checkpoint, by name (networks, optimizers)."""
        return {}

    def optimizers(self) -> Dict[str, Any]:
        """The optimizers it adds, by the learning-rate part they use (`config.rate`)."""
        return {}

    def trainable_variables(self) -> List:
        """Variables its updates write beyond SAC's networks and temperature."""
        return []

    def polyak_pairs(self) -> List[Tuple[Any, Any]]:
        """(target, online) models that the Polyak step averages; none, no step."""
        if self.sac.target_critic is None:
            return []
        return [(self.sac.target_critic, self.sac.critic)]

    def critic_objective(self, batch, reward, alpha, seeds):
        """(critic loss, the critics' values at (s, a) for q_mean, metrics of `metric_names`)
        inside the critic step's tape: by default `critic_loss(*values_and_target(...))`; a
        loss with a term of its own (CQL's) replaces this."""
        q, target = self.values_and_target(batch, reward, alpha, seeds[:, 0])
        return self.critic_loss(q, target), q, {}

    def values_and_target(self, batch, reward, alpha, seed):
        """The critics' values at (s, a) and what the critic loss compares them with."""
        raise NotImplementedError

    def critic_loss(self, q, target):
        raise NotImplementedError

    def actor_q(self, obs, action):
        """The critics' values the actor's loss reads."""
        return self.sac.critic(obs, action, training=True)

    def actor_loss(self, log_prob, q_pi, alpha):
        raise NotImplementedError

    def actor_objective(self, batch, action, log_prob, alpha, seeds):
        """(actor loss, metrics of `actor_metric_names`) at reparameterised a ~ pi(.|s): by
        default `actor_loss(log_prob, actor_q(obs, action), alpha)`; a loss that reads the
        batch (behaviour cloning on batch["action"]) replaces this."""
        q_pi = self.actor_q(batch["observation"], action)
        return self.actor_loss(log_prob, q_pi, alpha), {}

    def after_critic_step(self, obs, alpha, seeds) -> Dict[str, Any]:
        """A step of its own after the critic step (v1's V); returns its metrics."""
        return {}


VARIANTS: Dict[str, Type[Variant]] = {}


def register(cls: Type[Variant]) -> Type[Variant]:
    """Makes `cls` selectable as `algorithm=cls.name` (a class decorator); ValueError for
    declarations that name no config option or hyperparameters that are not JSON."""
    fields = {f.name for f in dataclasses.fields(SACConfig)}
    keeps, reads = cls.resume_keeps, cls.reads
    if isinstance(keeps, str) or not all(isinstance(n, str) for n in keeps):
        raise ValueError(f"variant {cls.name!r}: resume_keeps must be a tuple of option names")
    if not isinstance(reads, dict) or not all(
        isinstance(m, tuple) and all(isinstance(n, str) for n in m) for m in reads.values()
    ):
        raise ValueError(
            f"variant {cls.name!r}: reads must be a dict of option names to tuples of method names"
        )
    for attribute, names in (("resume_keeps", keeps), ("reads", tuple(reads))):
        unknown = [n for n in names if n not in fields]
        if unknown:
            raise ValueError(
                f"variant {cls.name!r}: {attribute} names {unknown[0]!r}, which is not a config "
                "option (a hyperparameter of the variant's own goes in `hyperparameters`)"
            )
    metrics = (cls.metric_names, cls.actor_metric_names)
    if any(isinstance(n, str) or not all(isinstance(m, str) for m in n) for n in metrics):
        raise ValueError(f"variant {cls.name!r}: metric names must be tuples of names")
    names = [*UPDATE_METRICS, *cls.metric_names, *cls.actor_metric_names]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"variant {cls.name!r}: the metric {twice[0]!r} is named twice")
    for option, methods in reads.items():
        missing = [m for m in methods if not callable(getattr(cls, m, None))]
        if missing:
            raise ValueError(
                f"variant {cls.name!r}: reads names {missing[0]!r} for {option}, which is no "
                "method of it"
            )
    try:  # as config.json holds them: a tuple would come back a list
        text = json.dumps(cls.hyperparameters, allow_nan=False)
        valid = isinstance(cls.hyperparameters, dict) and json.loads(text) == cls.hyperparameters
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise ValueError(
            f"variant {cls.name!r}: hyperparameters must be a dict of names to JSON values "
            f"(numbers, text, booleans, lists, not tuples), got {cls.hyperparameters!r}"
        )
    if taken := sorted(set(cls.hyperparameters) & fields):
        raise ValueError(
            f"variant {cls.name!r}: hyperparameter {taken[0]!r} is a config option: read the "
            "option, or give the hyperparameter a name of its own"
        )
    return add(VARIANTS, cls, "a variant")


def variant_of(config: SACConfig) -> Type[Variant]:
    """The registered variant that `config.algorithm` names."""
    return variant_named(config.algorithm)


def variant_named(algorithm: str) -> Type[Variant]:
    """The variant of an `algorithm` value: a registered name, or '<module>:<name>' of one
    the module registers when imported (so every process reading the config imports it)."""
    how = "@tfsac.algorithm.variants.register on its Variant class"
    return registered(algorithm, VARIANTS, "algorithm", how)
