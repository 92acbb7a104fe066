"""Exporting the policy through keras.export.ExportArchive as a SavedModel TF Serving loads:
serving_default, sample, metadata and (goal envs) goal_default and goal_sample."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from typing import Callable, Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from tfsac.algorithm.distributions import policy_params, squash_bijector
from tfsac.data.spaces import EnvSpec
from tfsac.deploy.formats import (
    FILES,
    parse_formats,
    temp_folder,
    with_quantization,
    write_formats,
    written_lines,
)
from tfsac.deploy.loading import check_export
from tfsac.deploy.metadata import (
    METADATA_FILE,
    policy_metadata,
    read_metadata,
    sample_observations,
)
from tfsac.errors import Fault, first_line
from tfsac.files import default_model_name, model_versions
from tfsac.logs import absl_verbosity

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
WARMUP_BATCHES = (1, 64)  # one client's request, and a batch as TF Serving's batching makes


def build_archive(
    actor: keras.Model, spec: EnvSpec, metadata: dict, log_std_bounds=(-20.0, 2.0)
) -> keras.export.ExportArchive:
    bijector = squash_bijector(spec.action_low, spec.action_high)
    low = np.asarray(spec.action_low, np.float32)
    high = np.asarray(spec.action_high, np.float32)
    obs_spec = tf.TensorSpec([None, spec.obs_dim], tf.float32, name="observation")

    def to_bounds(pre_squash, observation):
        # The clip guards rounding; a non-finite observation gets NaN actions: x * 0 == 0 is
        # false for NaN and inf in every runtime (a large constant is 65504 in float16).
        action = tf.clip_by_value(bijector.forward(pre_squash), low, high)
        finite = tf.reduce_all(tf.equal(observation * 0.0, 0.0), -1, True)
        return tf.where(finite, action, tf.constant(np.nan, action.dtype))

    # A loaded signature does not hold callers to its declared shape: checked in the graph.
    @tf.function(input_signature=[obs_spec])
    def serving_default(observation):
        observation = tf.ensure_shape(observation, obs_spec.shape)
        loc, _ = actor(observation)
        return {"action": to_bounds(loc, observation)}

    @tf.function(input_signature=[obs_spec])
    def sample(observation):
        observation = tf.ensure_shape(observation, obs_spec.shape)
        loc, log_std = policy_params(actor, observation, log_std_bounds)
        noise = tf.exp(log_std) * tf.random.normal(tf.shape(loc))
        return {"action": to_bounds(loc + noise, observation)}

    metadata_json = json.dumps(metadata, sort_keys=True)

    @tf.function(input_signature=[])
    def metadata_fn():
        return {"metadata": tf.constant(metadata_json)}

    archive = keras.export.ExportArchive()
    archive.track(actor)
    archive.add_endpoint("serving_default", serving_default)
    archive.add_endpoint("sample", sample)
    if spec.goal_columns:
        for name, flat in (("goal_default", serving_default), ("goal_sample", sample)):
            archive.add_endpoint(name, goal_endpoint(flat, spec.goal_columns))
    archive.add_endpoint("metadata", metadata_fn)
    return archive


def goal_endpoint(flat, columns):
    """A signature of a goal env's Dict keys, joined in `columns`' order for `flat`."""
    keys = {
        k: tf.TensorSpec([None, stop - first], tf.float32, name=k) for k, first, stop in columns
    }

    @tf.function(input_signature=[keys])
    def endpoint(observation):
        # Each key's width, not only the total: mixed-up keys would still give an action.
        parts = [
            tf.ensure_shape(observation[k], [None, stop - first]) for k, first, stop in columns
        ]
        return flat(tf.concat(parts, axis=-1))

    return endpoint


def write_warmup_requests(version_dir: str, model_name: str, spec: EnvSpec) -> None:
    """Writes the requests TF Serving replays on loading the version (the graph's first runs)."""
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    path = os.path.join(version_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for batch in WARMUP_BATCHES:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name="serving_default")
            )
            observations = sample_observations(
                spec.observation_space_json, spec.obs_dim, batch, seed=batch
            )
            request.inputs["observation"].CopyFrom(tf.make_tensor_proto(observations))
            log = prediction_log_pb2.PredictLog(request=request)
            writer.write(prediction_log_pb2.PredictionLog(predict_log=log).SerializeToString())


def export_policy(
    actor: keras.Model,
    spec: EnvSpec,
    export_dir: str,
    model_name: str,
    metadata: dict,
    log_std_bounds=(-20.0, 2.0),
    formats=("saved_model",),
    quantization: str = "none",
    say: Optional[Callable[[str], None]] = None,
) -> str:
    """Writes a new version under <export_dir>/<model_name>/, renamed into place from a hidden
    folder (never a partial one to serve), and returns its path; `say` gets a line a file."""
    model_dir = check_export(export_dir, model_name)
    os.makedirs(model_dir, exist_ok=True)  # the check created it and removed it again
    version = max(map(int, model_versions(model_dir)), default=0) + 1
    final = os.path.join(model_dir, str(version))
    tmp = temp_folder(model_dir)  # removes those that dead exports left
    try:
        # The SavedModel writer logs several INFO lines per export through absl.
        with absl_verbosity(logging.WARNING):
            build_archive(actor, spec, metadata, log_std_bounds).write_out(tmp, verbose=False)
        with open(os.path.join(tmp, METADATA_FILE), "w") as f:
            json.dump(with_quantization(metadata, formats, quantization), f, indent=2)
        write_warmup_requests(tmp, model_name, spec)
        checked = write_formats(tmp, formats, metadata, quantization)  # from the SavedModel
        # mkdtemp's 0700 would hide it from a TF Serving container of another user.
        umask = os.umask(0o022)  # reading the umask means setting it; set back at once
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
        os.rename(tmp, final)
    except (OSError, tf.errors.OpError) as e:  # OpError: TF's own writes (e.g. a full disk)
        raise Fault(f"cannot export the SavedModel to {final!r}: {first_line(e)}") from None
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    if say:
        say(f"exported SavedModel to {os.path.abspath(final)}")
        for line in written_lines(os.path.abspath(final), checked):
            say(line)
    return final


def export_trained_policy(config, learner, spec: EnvSpec, final_evaluation: dict) -> str:
    """Exports a run's policy as its model's next version (its absolute path), or returns the
    newest where it holds the final checkpoint's weights already (a resume after a kill)."""
    model_name = config.model_name or default_model_name(config.env_id)
    metadata = policy_metadata(config, spec, final_evaluation)
    checkpoint = final_evaluation.get("checkpoint")
    if checkpoint:
        published = mark_checkpoint(metadata, checkpoint, config.export_dir, model_name)
        if published:
            logging.info("the final checkpoint's policy is already exported as %s", published)
            return published
    bounds = (config.log_std_min, config.log_std_max)
    formats = parse_formats(config.export_formats)
    args = (learner.actor, spec, config.export_dir, model_name, metadata, bounds, formats)
    return os.path.abspath(export_policy(*args, say=lambda line: logging.info("%s", line)))


def mark_checkpoint(
    metadata: dict,
    checkpoint: str,
    export_dir: str,
    model_name: str,
    formats=(),
    quantization: str = "none",
) -> Optional[str]:
    """Records in `metadata` which checkpoint the weights come from; returns the model's
    newest version where it holds them already, with each of `formats`, else None."""
    metadata["checkpoint"] = _checkpoint_identity(checkpoint)
    model_dir = os.path.join(export_dir, model_name)
    versions = model_versions(model_dir)
    if not versions:
        return None
    newest = os.path.abspath(os.path.join(model_dir, versions[-1]))
    try:
        recorded = read_metadata(newest)
    except Fault:  # a sidecar damaged since: not a version to stand for this one
        return None
    if recorded.get("checkpoint") != metadata["checkpoint"]:
        return None
    if "tflite" in formats and recorded.get("tflite_quantization", "none") != quantization:
        return None
    wanted = [FILES[f] for f in formats if f in FILES]
    return newest if all(os.path.isfile(os.path.join(newest, f)) for f in wanted) else None


def _checkpoint_identity(checkpoint: str) -> dict:
    """The checkpoint's name and SHA-1s of its path (served metadata) and index file."""
    with open(f"{checkpoint}.index", "rb") as f:
        digest = hashlib.sha1(f.read()).hexdigest()
    where = hashlib.sha1(os.path.abspath(checkpoint).encode()).hexdigest()
    return {"name": os.path.basename(checkpoint), "path_sha1": where, "index_sha1": digest}
