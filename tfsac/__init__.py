"""tfsac: Soft Actor-Critic for TensorFlow 2 / Keras 3.

Layers, each importing only those below it: scale > run > deploy > (algorithm, data) >
config. The names below load their module (and TensorFlow) on first use.
"""

import importlib

from tfsac.logs import quiet_tensorflow_start

__version__ = "0.1.0"
# TF's C++ start-up lines are hidden in any process that imports tfsac (TFSAC_TF_LOGS=1 shows them).
quiet_tensorflow_start()

_EXPORTS = {
    "Actor": "algorithm.networks",
    "Callback": "run.callbacks",
    "Checkpointer": "run.checkpointing",
    "Collector": "data.collector",
    "Critic": "algorithm.networks",
    "EnsembleDense": "algorithm.layers",
    "EnvRunner": "scale.runners",
    "EnvSpec": "data.envs",
    "GSDEActor": "algorithm.networks",
    "Interrupted": "run.signals",
    "NonFiniteError": "run.updates",
    "Policy": "deploy.policy",
    "ReplayBuffer": "data.replay",
    "RunnerPool": "scale.runners",
    "SAC": "algorithm.sac",
    "SACConfig": "config",
    "SACLearner": "algorithm.learner",
    "SaveBestPolicy": "run.callbacks",
    "StopTrainingOnNoModelImprovement": "run.callbacks",
    "StopTrainingOnRewardThreshold": "run.callbacks",
    "TfsacError": "errors",
    "Trainer": "run.trainer",
    "TrainResult": "run.trainer",
    "UpdateSchedule": "data.update_schedule",
    "ValueNetwork": "algorithm.networks",
    "build_networks": "algorithm.networks",
    "deterministic_action": "algorithm.distributions",
    "env_factory": "data.envs",
    "env_spec": "data.envs",
    "export_policy": "deploy.export",
    "load_policy": "deploy.loading",
    "make_env": "data.envs",
    "polyak_update": "algorithm.sac",
    "squash_bijector": "algorithm.distributions",
    "tanh_normal": "algorithm.distributions",
    "train": "run.trainer",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tfsac' has no attribute {name!r}")
    if module == "run.trainer":  # the training entry points come with tfsac.scale's runners
        importlib.import_module("tfsac.scale.runner_source")
    value = getattr(importlib.import_module(f"tfsac.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS])
