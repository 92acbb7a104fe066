"""tfsac: Soft Actor-Critic for TensorFlow 2 / Keras 3.

The names below load their module (and TensorFlow) on first use, so that tools which need
no TensorFlow (the render worker, plotting) start fast and stay out of TF's process.
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Actor": "networks",
    "Checkpointer": "checkpointing",
    "Collector": "collector",
    "Critic": "networks",
    "EnsembleDense": "networks",
    "EnvRunner": "distributed",
    "EnvSpec": "envs",
    "GSDEActor": "networks",
    "Interrupted": "loop",
    "NonFiniteError": "loop",
    "Policy": "policy",
    "ReplayBuffer": "replay",
    "RunnerPool": "distributed",
    "SAC": "sac",
    "SACConfig": "config",
    "SACLearner": "learner",
    "TfsacError": "errors",
    "Trainer": "loop",
    "TrainResult": "loop",
    "UpdateSchedule": "update_schedule",
    "ValueNetwork": "networks",
    "build_networks": "networks",
    "deterministic_action": "distributions",
    "env_factory": "envs",
    "env_spec": "envs",
    "export_policy": "export",
    "load_policy": "export",
    "make_env": "envs",
    "polyak_update": "sac",
    "squash_bijector": "distributions",
    "tanh_normal": "distributions",
    "train": "loop",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tfsac' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"tfsac.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS])
