"""tfsac: Soft Actor-Critic for TensorFlow 2 / Keras 3."""

__version__ = "0.1.0"

from tfsac.checkpointing import Checkpointer  # noqa: E402
from tfsac.config import SACConfig  # noqa: E402
from tfsac.distributions import deterministic_action, squash_bijector, tanh_normal  # noqa: E402
from tfsac.envs import EnvSpec, env_spec, make_env  # noqa: E402
from tfsac.errors import TfsacError  # noqa: E402
from tfsac.export import export_policy, load_policy  # noqa: E402
from tfsac.learner import SACLearner, polyak_update  # noqa: E402
from tfsac.loop import Interrupted, NonFiniteError, Trainer, TrainResult, train  # noqa: E402
from tfsac.networks import Actor, Critic, EnsembleDense, build_networks  # noqa: E402
from tfsac.replay import ReplayBuffer  # noqa: E402

__all__ = [
    "Actor",
    "Checkpointer",
    "Interrupted",
    "NonFiniteError",
    "Trainer",
    "Critic",
    "EnsembleDense",
    "EnvSpec",
    "ReplayBuffer",
    "SACConfig",
    "SACLearner",
    "TfsacError",
    "TrainResult",
    "build_networks",
    "deterministic_action",
    "env_spec",
    "export_policy",
    "load_policy",
    "make_env",
    "polyak_update",
    "squash_bijector",
    "tanh_normal",
    "train",
]
