"""The `network` option's architectures: TF-free defaults and checks, and model builders."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from tfsac.algorithm.variants.base import lazy_module, variant_of
from tfsac.config import SACConfig
from tfsac.user_modules import add, registered

networks = lazy_module("tfsac.algorithm.networks")
flashnet = lazy_module("tfsac.algorithm.flashnet")
layers = lazy_module("tfsac.algorithm.layers")


class MLP:
    """ReLU MLPs (tfsac.algorithm.networks)."""

    name = "mlp"
    peer_policy = "MlpPolicy"  # SB3's and SBX's policy class
    peers: Tuple[str, ...] = ("sb3", "sbx")  # the peers that have it

    @classmethod
    def defaults(cls, config: SACConfig) -> Dict[str, Any]:
        return {"weight_decay": 0.0, "normalize_observations": False}

    @classmethod
    def check(cls, config: SACConfig) -> Optional[str]:
        """Why this architecture cannot build the options, in one line, or None."""
        if config.use_sde and config.normalize_observations:
            return (
                "use_sde has an actor of its own, without the observation normaliser: leave "
                "normalize_observations off"
            )
        return None

    @classmethod
    def normalizes(cls, config: SACConfig) -> bool:
        """Whether its networks normalise observations ('auto': its default)."""
        on = config.normalize_observations
        return bool(cls.defaults(config)["normalize_observations"] if on is None else on)

    @classmethod
    def normalizer(cls, config: SACConfig):
        """The observation normaliser its actor and critics share, or None."""
        on = cls.normalizes(config)
        return layers.ObservationNormalizer(name="obs_normalizer") if on else None

    @classmethod
    def build_actor(cls, action_dim, config, batch_norm: Optional[Dict], normalizer):
        bounds = (config.log_std_min, config.log_std_max)
        return networks.Actor(
            action_dim, config.hidden_sizes, *bounds, batch_norm, normalizer, name="actor"
        )

    @classmethod
    def build_critic(cls, config, name: str, outputs: int, batch_norm, normalizer):
        return networks.Critic(
            config.num_critics,
            config.critic_hidden_sizes,
            config.critic_layer_norm,
            config.critic_dropout,
            outputs,
            batch_norm,
            normalizer,
            name=name,
        )


class SimBa(MLP):
    """SimBa (arXiv:2410.09754, tfsac.algorithm.networks); AdamW (SBX's weight decay 1e-4)."""

    name = "simba"
    peer_policy = "SimbaPolicy"
    peers = ("sbx",)
    block = "residual block"  # what check calls the layers of one hidden size; None: any

    @classmethod
    def defaults(cls, config: SACConfig) -> Dict[str, Any]:
        return {"weight_decay": 1e-4, "normalize_observations": True}

    @classmethod
    def check(cls, config: SACConfig) -> Optional[str]:
        if config.use_sde:
            return f"network {cls.name} does not take use_sde (gSDE has its own actor)"
        if config.critic_dropout or config.critic_layer_norm:
            return (
                f"network {cls.name} has its own normalisation and no dropout: leave "
                "critic_layer_norm and critic_dropout off"
            )
        for name in ("hidden_sizes", "critic_hidden_sizes"):
            if cls.block and len(set(getattr(config, name))) > 1:
                return (
                    f"network {cls.name} adds each {cls.block} to its input, so {name} needs "
                    f"one width for every block, got {','.join(map(str, getattr(config, name)))}"
                )
        return None

    @classmethod
    def build_actor(cls, action_dim, config, batch_norm, normalizer):
        bounds = (config.log_std_min, config.log_std_max)
        return networks.SimbaActor(
            action_dim, config.hidden_sizes, normalizer, bounds, batch_norm, name="actor"
        )

    @classmethod
    def build_critic(cls, config, name, outputs, batch_norm, normalizer):
        sizes = config.critic_hidden_sizes
        return networks.SimbaCritic(
            config.num_critics, sizes, normalizer, outputs, batch_norm, name=name
        )


class FlashSAC(SimBa):
    """FlashSAC's networks (arXiv:2604.04539, tfsac.algorithm.flashnet)."""

    name = "flashsac"
    peer_policy = None
    peers = ()
    block = "block"
    models = "Flash"  # flashnet's FlashActor and FlashCritic

    @classmethod
    def defaults(cls, config: SACConfig) -> Dict[str, Any]:
        return MLP.defaults(config)  # its own normalisation, Adam without weight decay

    @classmethod
    def check(cls, config: SACConfig) -> Optional[str]:
        if config.target_subset:
            return f"network {cls.name}'s critics are evaluated whole: no target_subset"
        if variant_of(config).batch_norm(config):
            return f"network {cls.name} has batch norms of its own: not with crossq"
        return super().check(config)

    @classmethod
    def build_actor(cls, action_dim, config, batch_norm, normalizer):
        actor = getattr(flashnet, f"{cls.models}Actor")
        return actor(action_dim, config.hidden_sizes, normalizer=normalizer, name="actor")

    @classmethod
    def build_critic(cls, config, name, outputs, batch_norm, normalizer):
        critic = getattr(flashnet, f"{cls.models}Critic")
        return critic(
            config.num_critics, config.critic_hidden_sizes, outputs, normalizer, name=name
        )


class XQC(FlashSAC):
    """XQC's networks (ICLR 2026, tfsac.algorithm.flashnet); FlashSAC's checks but any widths."""

    name = "xqc"
    block = None
    models = "XQC"


ARCHITECTURES = {cls.name: cls for cls in (MLP, SimBa, FlashSAC, XQC)}


def register_architecture(cls):
    """Makes `cls` (a subclass of MLP) selectable as `network=cls.name` (a class decorator)."""
    return add(ARCHITECTURES, cls, "an architecture")


def architecture_of(config: SACConfig):
    """The architecture that `config.network` names (registered, or '<module>:<name>')."""
    how = "@tfsac.algorithm.architectures.register_architecture on its class"
    name = config.network
    if name is None:  # 'auto' in a config not resolved yet: the variant's choice
        name = variant_of(config).defaults(config).get("network", "mlp")
    return registered(name, ARCHITECTURES, "network", how)
