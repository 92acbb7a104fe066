"""Write a trained policy in more formats: LiteRT (policy.tflite) and ONNX (policy.onnx),
beside an exported SavedModel, or as a new version from a run's checkpoint (its newest, or
the one of env step --step).

python scripts/export.py --saved_model=saved_models/pendulum_v1/1 --formats=tflite,onnx
python scripts/export.py --run_dir=runs/cheetah --formats=saved_model,onnx
python scripts/export.py --run_dir=runs/cheetah --step=20000 --formats=saved_model
python scripts/export.py --saved_model=saved_models/pendulum_v1/1 --formats=tflite --quantize=int8
"""

import os
import sys

# _cli beside this file, and the checkout's tfsac when run from one (installed, the
# console script tfsac-<name> imports this module from the package tfsac_scripts).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]

from _cli import fail, import_tfsac, run_script, version_note  # noqa: E402
from absl import flags  # noqa: E402

from tfsac.config.run_options import EXPORT_FORMATS  # noqa: E402
from tfsac.deploy.formats import QUANTIZATIONS, parse_formats  # noqa: E402 - TF-free
from tfsac.deploy.loading import (  # noqa: E402 - TF-free
    check_available,
    check_export,
    check_saved_model,
)
from tfsac.errors import TfsacError  # noqa: E402
from tfsac.files import (  # noqa: E402
    check_plain_name,
    check_writable,
    default_model_name,
    run_config,
)

flags.DEFINE_string("saved_model", None, "A SavedModel version folder: the files go beside it.")
flags.DEFINE_string("run_dir", None, "A run directory: a new version from its latest checkpoint.")
flags.DEFINE_integer(
    "step", None, "With --run_dir: the checkpoint of this env step (default: the newest)."
)
flags.DEFINE_string("formats", "tflite,onnx", f"Comma list of {', '.join(EXPORT_FORMATS)}.")
flags.DEFINE_string("export_dir", "saved_models", "With --run_dir: where the version goes.")
flags.DEFINE_string("model_name", None, "With --run_dir: the model name (default from the env).")
flags.DEFINE_enum(
    "quantize",
    "none",
    QUANTIZATIONS,
    "LiteRT post-training quantization: float16 weights or dynamic-range int8; the largest "
    "action error it causes on 1,000 observations from the space is printed.",
)
FLAGS = flags.FLAGS


def _checked():
    """Every check that can refuse the export, before TensorFlow loads; returns the formats
    and, with --run_dir, the run's config."""
    if (FLAGS.saved_model is None) == (FLAGS.run_dir is None):
        raise TfsacError("give exactly one of --saved_model and --run_dir")
    formats = parse_formats(FLAGS.formats)
    if not formats or any(f not in EXPORT_FORMATS for f in formats):
        raise TfsacError(
            f"--formats must be a comma list of {', '.join(EXPORT_FORMATS)}, got {FLAGS.formats!r}"
        )
    if FLAGS.saved_model and FLAGS.step is not None:
        raise TfsacError("--step applies to --run_dir (which of its checkpoints to export)")
    if FLAGS.model_name is not None:
        if FLAGS.saved_model:
            raise TfsacError("--model_name applies to --run_dir (a new version of that model)")
        check_plain_name("--model_name", FLAGS.model_name)
    if FLAGS.quantize != "none" and "tflite" not in formats:
        raise TfsacError("--quantize applies to tflite: add it to --formats")
    check_available(formats)
    if FLAGS.saved_model:
        check_saved_model(FLAGS.saved_model)
        check_writable(FLAGS.saved_model)
        return formats, None
    config = run_config(FLAGS.run_dir, need_checkpoint=True, step=FLAGS.step)
    check_export(FLAGS.export_dir, _model_name(config))  # before TensorFlow loads
    return formats, config


def _model_name(config) -> str:
    """--model_name, else the run's own model_name, else the env's default name."""
    return FLAGS.model_name or config.model_name or default_model_name(config.env_id)


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        formats, config = _checked()
    except TfsacError as e:
        fail(str(e))
    if FLAGS.saved_model and set(formats) <= {"saved_model"}:
        print(
            f"nothing to do: {FLAGS.saved_model} is a SavedModel already; --formats=tflite,onnx "
            "writes the other formats beside it"
        )
        return
    tfsac = import_tfsac()
    from tfsac.deploy.export import export_policy, mark_checkpoint
    from tfsac.deploy.formats import add_formats, check_readable
    from tfsac.deploy.loading import checkpoint_learner, load_policy
    from tfsac.deploy.metadata import policy_metadata

    try:
        if FLAGS.saved_model:
            # A readable tfsac policy, else one line before anything is written.
            check_readable(FLAGS.saved_model)
            load_policy(FLAGS.saved_model)
            add_formats(FLAGS.saved_model, formats, FLAGS.quantize, say=print)
            _say_quantization_error(FLAGS.saved_model)
            return
        learner, spec, info = checkpoint_learner(FLAGS.run_dir, FLAGS.step)
        final = {  # the evaluation of these weights, where the run made one
            "step": info["checkpoint_step"],
            "return_mean": info.get("eval_return_mean"),
            "seed": info.get("eval_seed"),
        }
        if "eval_success_rate" in info:
            final["success_rate"] = info["eval_success_rate"]
        metadata, name = policy_metadata(config, spec, final), _model_name(config)
        args = (metadata, info["checkpoint"], FLAGS.export_dir, name, formats, FLAGS.quantize)
        published = mark_checkpoint(*args)
        if published:  # the same weights are not published twice
            print(f"{published} holds {info['checkpoint']} already: nothing exported")
            return
        path = export_policy(
            learner.actor,
            spec,
            FLAGS.export_dir,
            name,
            metadata,
            (config.log_std_min, config.log_std_max),
            ("saved_model", *formats),
            FLAGS.quantize,
            say=print,
        )
    except tfsac.TfsacError as e:
        fail(str(e))
    print(f"  from {info['checkpoint']}; {version_note(path)}")
    _say_quantization_error(path)


def _say_quantization_error(version_dir) -> None:
    if FLAGS.quantize == "none":
        return
    from tfsac.deploy.formats import quantization_error

    error = quantization_error(version_dir)
    # The quantized model takes policy.tflite's name: say so (it replaced any float32 one).
    print(
        f"{os.path.join(version_dir, 'policy.tflite')} is the {FLAGS.quantize}-quantized "
        "model (tfsac_metadata.json says so as tflite_quantization; the SavedModel is "
        "unchanged)"
    )
    print(f"{FLAGS.quantize} quantization: largest action error {error:.3g} on 1000 observations")


def run() -> None:
    run_script(main)


if __name__ == "__main__":
    run()
