"""The deploy layer's checks of what a user hands it, and loading a policy from a SavedModel or
a run's checkpoint. TF-free at import: the scripts check before TensorFlow loads."""

from __future__ import annotations

import importlib.util
import json
import logging as logging_module
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np
from absl import logging

from tfsac.data.env_checks import CUSTOM_ENV
from tfsac.data.envs import remade_env_spec
from tfsac.data.spaces import EnvSpec, read_env_spec
from tfsac.errors import Fault, TfsacError, first_line
from tfsac.files import CHECKPOINT_STATE_FILE as STATE_FILE
from tfsac.files import (
    CHECKPOINTS_DIR,
    ENV_SPEC_FILE,
    check_plain_name,
    check_writable,
    checkpoint_steps,
    model_versions,
    run_config,
)

# The packages each format needs at export time (the `deploy` extra installs them).
_NEEDS = {"tflite": ("ai_edge_litert",), "onnx": ("tf2onnx", "onnx", "onnxruntime")}


def check_saved_model(path: str) -> None:
    """TfsacError unless `path` holds a SavedModel (without loading it)."""
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        versions = model_versions(path, servable=True)
        if versions:  # TF Serving's model folder, the versions inside
            newest = os.path.join(path, versions[-1])
            raise TfsacError(
                f"{path!r} is a model folder of versions: name one, e.g. {newest} (the newest)"
            )
        if os.path.isfile(os.path.join(path, "config.json")):
            raise TfsacError(
                f"{path!r} is a run directory, not a SavedModel: name it with --run_dir, or "
                f"its export (saved_models/<model>/<version>) with --saved_model"
            )
        raise TfsacError(f"no SavedModel at {path!r} (expected {path}/saved_model.pb)")


def policy_source(path: str, step: Optional[int]) -> Tuple[str, bool]:
    """(the folder Policy.load reads, whether it is a SavedModel)."""
    versions = model_versions(path, servable=True)
    if versions and not os.path.isfile(os.path.join(path, "config.json")):
        path = os.path.join(path, versions[-1])
        logging.info("loading %s, the highest version (the one TF Serving serves)", path)
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        if step is not None:
            raise TfsacError(f"step applies to a run directory; {path!r} is a SavedModel")
        return path, True
    if os.path.isfile(os.path.join(path, "config.json")):
        return path, False
    raise TfsacError(
        f"{path!r} is neither a SavedModel version folder (saved_model.pb) nor a tfsac "
        "run directory (config.json)"
    )


def check_available(formats: Sequence[str]) -> None:
    """TfsacError, before anything is written, when a format's converter is missing."""
    for name in formats:
        missing = [m for m in _NEEDS.get(name, ()) if importlib.util.find_spec(m) is None]
        if missing:
            raise TfsacError(
                f"the {name} export needs {', '.join(missing)}: pip install 'tfsac[deploy]' "
                '(or -e ".[deploy]" in a checkout)'
            )


def check_export(export_dir: str, model_name: str) -> str:
    """The model folder an export writes into: a plain name, writable, room for an int64 version."""
    model_dir = os.path.join(export_dir, check_plain_name("model_name", model_name))
    check_writable(model_dir)
    highest = max(map(int, model_versions(model_dir)), default=0)
    if highest >= 2**63 - 1:
        raise TfsacError(
            f"{model_dir!r} holds version {highest}, the highest TF Serving reads: a "
            "higher one would never be served; export under another model name"
        )
    return model_dir


def predict_input(space, obs_dim: int, observation: Any, deterministic) -> Tuple[np.ndarray, bool]:
    """What `Policy.predict` was handed, checked: ([N, obs_dim] float32, whether it was one
    observation). Non-finite values are refused (the exported files would answer NaN)."""
    if not isinstance(deterministic, (bool, np.bool_)):
        raise TfsacError(f"deterministic must be True or False, got {deterministic!r}")
    batch, single = _flat_batch(space, obs_dim, observation)
    if not np.isfinite(batch).all():
        rows = np.flatnonzero(~np.isfinite(batch).all(axis=1)).tolist()
        where = "" if single else f" (batch rows {rows[:10]})"
        raise TfsacError(
            f"the observation holds NaN or infinite values{where} (as float32, the "
            "policy's input: beyond 3.4e38 is infinite)"
        )
    return batch, single


def _flat_batch(space: Optional[gym.Space], obs_dim: int, observation: Any):
    if space is None or (isinstance(space, gym.spaces.Box) and len(space.shape) == 1):
        array = _numbers(observation)
        if array.ndim in (1, 2) and array.shape[-1] == obs_dim:
            return array.reshape(-1, obs_dim), array.ndim == 1
        raise TfsacError(
            f"expected an observation of shape ({obs_dim},) or a batch of shape "
            f"(N, {obs_dim}), got shape {array.shape}"
        )
    if _contains(space, observation):
        return gym.spaces.flatten(space, observation)[None].astype(np.float32), True
    if isinstance(space, gym.spaces.Box):
        array = _numbers(observation)
        if array.ndim and array.shape[1:] == space.shape:
            return array.reshape(len(array), obs_dim), False
    items = _items(space, observation)
    if items and all(_contains(space, item) for item in items):
        rows = [gym.spaces.flatten(space, item) for item in items]
        return np.stack(rows).astype(np.float32), False
    raise TfsacError(
        _dict_mismatch(space, observation)
        or f"expected an observation of {space} or a list of them, got {observation!r}"[:300]
    )


def _dict_mismatch(space: gym.Space, observation: Any) -> Optional[str]:
    """What is wrong, by key, with a dict given for a Dict space; None where it is no key's."""
    if not (isinstance(space, gym.spaces.Dict) and isinstance(observation, dict)):
        return None
    missing = sorted(set(space.spaces) - set(observation))
    extra = sorted(set(observation) - set(space.spaces))
    if missing or extra:
        return f"observation keys: missing {missing}, not in the env's space {extra}"
    boxes = {k: sub.shape for k, sub in space.spaces.items() if isinstance(sub, gym.spaces.Box)}
    batches = set()
    for key, want in boxes.items():  # other parts' values: the generic line
        shape = np.shape(observation[key])
        if want and shape not in (want, shape[:1] + want):
            return f"observation key {key!r} of shape {shape}, the env's is {want}"
        batches.add(shape[0] if len(shape) > len(want) else None)
    if len(batches) > 1 and len(boxes) == len(space.spaces):
        return f"observation keys of different batch sizes: {sorted(map(str, batches))}"
    return None


def _items(space: gym.Space, observation: Any) -> Optional[list]:
    """A batch one by one: a vector env's Dict or Tuple batch, or a list; None if neither."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        try:
            obs = observation
            first = next(iter(obs.values() if isinstance(obs, dict) else obs))
            while isinstance(first, (dict, tuple)):  # nested spaces: down to an array
                first = next(iter(first.values() if isinstance(first, dict) else first))
            batched = gym.vector.utils.batch_space(space, len(first))
            return list(gym.vector.utils.iterate(batched, observation))
        except (TypeError, KeyError, IndexError, ValueError, StopIteration, AssertionError):
            pass
    try:
        return list(observation)
    except TypeError:
        return None


def _numbers(observation: Any) -> np.ndarray:
    """`observation` as a float32 array; TfsacError where it is not numbers."""
    try:
        with np.errstate(over="ignore"):  # beyond float32's range is said by predict
            return np.asarray(observation, np.float32)
    except (TypeError, ValueError) as e:
        raise TfsacError(
            f"the observation must be numbers ({first_line(e)}), got {observation!r}"[:300]
        ) from None


def _contains(space: gym.Space, observation) -> bool:
    """Whether `observation` is one of `space` (a list for a Box); Discrete parts flatten to
    one-hot columns, so their values index: integers only (not 1.5, not '1', not True)."""
    try:
        if isinstance(space, gym.spaces.Dict):
            return (
                isinstance(observation, dict)
                and set(observation) == set(space.spaces)
                and all(_contains(space[k], v) for k, v in observation.items())
            )
        if isinstance(space, gym.spaces.Tuple):
            return (
                isinstance(observation, (tuple, list))
                and len(observation) == len(space)
                and all(_contains(s, o) for s, o in zip(space, observation, strict=True))
            )
        array = np.asarray(observation)
        if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            integers = array.shape == space.shape and array.dtype.kind in "iu"
            return integers and space.contains(array.astype(space.dtype))
        if isinstance(space, gym.spaces.MultiBinary):  # 0 and 1, as ints or floats
            return array.dtype.kind in "biuf" and space.contains(array)
        if isinstance(space, gym.spaces.Box):
            return array.shape == space.shape and array.dtype.kind in "biuf"
    except (TypeError, ValueError):
        return False
    return False


class CheckpointReader:
    """The checkpoints under `directory`, and a tf.train.Checkpoint of the learner's variables."""

    def __init__(self, directory: str, learner):
        import tensorflow as tf

        self.directory = directory
        self.step = tf.Variable(0, dtype=tf.int64, name="step")
        self.checkpoint = tf.train.Checkpoint(step=self.step, **learner.checkpoint_objects())

    def candidates(self) -> List[str]:
        """Prefixes of the checkpoints whose TF files are complete, newest first."""
        return [self.prefix(s) for s in checkpoint_steps(self.directory)]

    def prefix(self, step: int) -> str:
        return os.path.join(self.directory, f"ckpt-{step}")

    @staticmethod
    def extra_dir(prefix: str) -> str:
        return prefix + ".extra"

    def read_state(self, prefix: str) -> Dict:
        return read_checkpoint_state(prefix)


def read_checkpoint_state(prefix: str) -> Dict:
    """Checkpoint `prefix`'s state.json (TF-free); Fault where it does not read."""
    try:
        with open(os.path.join(CheckpointReader.extra_dir(prefix), STATE_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Fault(f"checkpoint {prefix!r} is incomplete or corrupt: {e}") from None


class CheckpointMismatch(TfsacError):
    """A checkpoint that reads but holds other variables than its model: never skipped."""


def restore_checkpoint(checkpoint, prefix: str, match: str) -> None:
    """Restores `prefix`, `match` 'all' (a resume) or 'model' (it may hold more); Fault for
    files that do not read, CheckpointMismatch for other variables."""
    import tensorflow as tf

    try:
        status = checkpoint.restore(prefix).expect_partial()
        if match == "all":
            status.assert_consumed()
        else:
            status.assert_existing_objects_matched()
        return
    except (tf.errors.OpError, ValueError, AssertionError, IndexError, KeyError) as e:
        # Other shapes, objects or dtypes are another model's files; anything else is damage.
        error = Fault(f"checkpoint {prefix!r} cannot be restored: {first_line(e)}")
        if isinstance(e, (ValueError, AssertionError)) or (
            isinstance(e, tf.errors.InvalidArgumentError) and "dtype" in str(e)
        ):
            error = CheckpointMismatch(
                f"checkpoint {prefix!r} holds other variables than this run's model "
                f"({first_line(e)}): other settings, networks or algorithm code made it (an "
                "edited config.json, a changed network or algorithm module, or actor_fn and "
                "critic_fn networks, which train(..., resume=True) takes again and its "
                "SavedModel holds)"
            )
    logger = logging_module.getLogger("tensorflow")
    if not any(isinstance(f, _UnrestoredValues) for f in logger.filters):
        logger.addFilter(_UnrestoredValues())
    raise error


class _UnrestoredValues(logging_module.Filter):
    """Hides TensorFlow's page of warnings after a failed restore: tfsac said why in one line."""

    TEXTS = ("deleted with unrestored values", "could not be found in the restored object")

    def filter(self, record) -> bool:
        return not any(text in record.getMessage() for text in self.TEXTS)


# The signatures every tfsac export has, each `observation` [batch, width] -> `action`.
POLICY_SIGNATURES = ("serving_default", "sample")


def load_policy(path: str):
    """The loaded SavedModel; TfsacError where it is no tfsac policy, Fault if it won't load."""
    import tensorflow as tf

    check_saved_model(path)
    try:
        model = tf.saved_model.load(path)
    # IndexError: a truncated variables file ("Read less bytes than requested").
    except (OSError, ValueError, IndexError, tf.errors.OpError) as e:
        raise Fault(f"cannot load the SavedModel at {path!r}: {first_line(e)}") from None
    for name in POLICY_SIGNATURES:
        fn = model.signatures.get(name)
        inputs = fn.structured_input_signature[1] if fn is not None else {}
        outputs = fn.structured_outputs if fn is not None else {}
        if set(inputs) != {"observation"} or "action" not in outputs:
            raise TfsacError(
                f"the SavedModel at {path!r} is not a tfsac policy: it has no {name!r} "
                f"signature from 'observation' to 'action' (its signatures: "
                f"{', '.join(sorted(model.signatures)) or 'none'})"
            )
    return model


def checkpoint_learner(run_dir: str, step: Optional[int] = None):
    """(learner, env spec, info) from the run's checkpoint of env step `step` (default: the
    newest that restores); info: config, spaces, checkpoint, and that step's evaluation."""
    from tfsac.algorithm.learner import SACLearner

    config = run_config(run_dir, need_checkpoint=step is not None, step=step)
    spec = _run_env_spec(run_dir, config.env_id, config.env_kwargs)
    learner = SACLearner(spec.obs_dim, spec.action_dim, config)
    folder = os.path.join(run_dir, CHECKPOINTS_DIR)
    reader = CheckpointReader(folder, learner)
    for prefix in reader.candidates() if step is None else [reader.prefix(step)]:
        try:  # the learner only, no replay buffer
            state = reader.read_state(prefix)
            restore_checkpoint(reader.checkpoint, prefix, "model")
            break
        except Fault as e:  # a damaged checkpoint is skipped, one of other networks refused
            if step is not None:
                raise
            logging.warning("skipping a damaged checkpoint: %s", e)
    else:
        raise TfsacError(f"no checkpoint that restores in {folder!r}")
    info = config.to_dict()
    info.update(
        observation_dim=spec.obs_dim,
        action_low=list(spec.action_low),
        action_high=list(spec.action_high),
        observation_space_json=spec.observation_space_json,
        checkpoint=prefix,
        checkpoint_step=state["step"],
        **({"env_fn": spec.env_fn} if spec.env_fn else {}),
    )
    last = (state.get("evaluations") or [{"step": None}])[-1]
    # The evaluation of these weights, for scripts/evaluate.py to repeat: not an earlier one.
    if last["step"] == state["step"]:
        info.update(eval_seed=last["seed"], eval_return_mean=last["return_mean"])
        if "success_rate" in last:  # a goal env's
            info["eval_success_rate"] = last["success_rate"]
    return learner, spec, info


def _run_env_spec(run_dir: str, env_id: str, env_kwargs: Optional[dict] = None) -> EnvSpec:
    """The env a run's networks saw: its env_spec.json, or (an older run) its env remade."""
    spec = read_env_spec(run_dir)
    if spec is not None:
        return spec
    if env_id.startswith(CUSTOM_ENV):
        raise TfsacError(
            f"{run_dir!r} trained on an env made by an env_fn "
            f"({env_id[len(CUSTOM_ENV) :]}) and has no {ENV_SPEC_FILE} (an earlier "
            "tfsac wrote none): use the run's SavedModel export instead (scripts: "
            "--saved_model=<version folder>; Python: tfsac.Policy.load(<version folder>))"
        )
    return remade_env_spec(env_id, env_kwargs)
