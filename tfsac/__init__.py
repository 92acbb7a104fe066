"""tfsac: Soft Actor-Critic for TensorFlow 2 / Keras 3.

The package is split into layers, each importing only those below it: `scale` (Ray env
runners, sweeps) above `run` (the builder, the trainer's loop, checkpoints, evaluation)
above `deploy` (exports, loading a policy) above `algorithm` (the update, losses,
networks) and `data` (envs, collection, replay), above the config, the run directory's
format (`files`) and the console's lines (`logs`); docs/guide/adding-an-algorithm.md draws it.
The names below load their module (and TensorFlow) on first use, so that tools which need
no TensorFlow (the render worker, plotting) start fast and stay out of TF's process.
"""

import importlib

from tfsac.logs import quiet_tensorflow_start

__version__ = "0.1.0"
# TF's C++ start-up lines (a CUDA error on machines without a GPU, oneDNN notices) are
# hidden in any process that imports tfsac; TFSAC_TF_LOGS=1 shows them (README).
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
    "SaveBestPolicy": "run.best_policy",
    "StopTrainingOnNoModelImprovement": "run.stopping",
    "StopTrainingOnRewardThreshold": "run.stopping",
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
# The training entry points come with the env runners that tfsac.scale registers with
# the run layer (which cannot import the layer above it).
_WITH = {"run.trainer": "scale.runner_source"}


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tfsac' has no attribute {name!r}")
    if module in _WITH:
        importlib.import_module(f"tfsac.{_WITH[module]}")
    value = getattr(importlib.import_module(f"tfsac.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS])
