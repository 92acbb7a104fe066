"""An algorithm in a user's own module, named '<module>:<name>' as gymnasium names env ids
('my_package.envs:MyEnv-v0'): the scripts train, resume and evaluate it from the folder
that holds the module, with nothing under tfsac/ changed; a missing module, one that
registers no such algorithm and one that fails to import are one line each."""

import json
import sys
import textwrap

import pytest
from conftest import run_script, tiny_config

from tfsac import TfsacError, train
from tfsac.algorithm.variants import VARIANTS, variant_named

# The variant of docs/architecture.md ("Adding an algorithm"), in a file of its own.
MEAN_Q = textwrap.dedent("""
    import tensorflow as tf

    from tfsac.algorithm import losses
    from tfsac.algorithm.variants import register
    from tfsac.algorithm.variants.sac import SoftDoubleQ


    @register
    class MeanQ(SoftDoubleQ):
        name = "user_mean_q"
        summary = "SAC on the mean of its critics"
        peer = None

        def td_target(self, batch, reward, alpha, seed):
            next_q, next_log_prob = self.next_values(batch, seed)
            mean = tf.reduce_mean(next_q, axis=0, keepdims=True)
            return losses.soft_td_target(
                reward, batch["terminated"], mean, next_log_prob, alpha, batch["discount"]
            )
""")


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    """tmp_path/my_algos.py (MeanQ) and two broken modules beside it, importable here; the
    registry and sys.modules as they were afterwards."""
    (tmp_path / "my_algos.py").write_text(MEAN_Q)
    (tmp_path / "no_algos.py").write_text("X = 1\n")
    (tmp_path / "bad_algos.py").write_text("import os\n\nraise RuntimeError('not today')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    VARIANTS.pop("user_mean_q", None)
    for name in ("my_algos", "no_algos", "bad_algos"):
        sys.modules.pop(name, None)


def test_the_scripts_train_and_evaluate_an_algorithm_of_the_users_module(tmp_path):
    (tmp_path / "my_algos.py").write_text(MEAN_Q)
    args = [
        "--env=Pendulum-v1",
        "--algorithm=my_algos:user_mean_q",
        "--total_steps=200",
        "--learning_starts=100",
        "--batch_size=16",
        "--hidden_sizes=8",
        "--eval_every=200",
        "--eval_episodes=1",
        "--checkpoint_every=200",
        "--run_dir=run",
        "--export_dir=export",
    ]
    done = run_script("train", args, cwd=tmp_path)  # a script run by its path, as users do
    assert done.returncode == 0, done.stderr[-2000:]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["algorithm"] == "my_algos:user_mean_q"  # what another process imports
    assert (tmp_path / "export" / "pendulum_v1" / "1" / "saved_model.pb").exists()
    # A new process: the run directory's config names the module, which is imported again.
    done = run_script("evaluate", ["--run_dir=run", "--episodes=1"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "return" in done.stdout + done.stderr


def test_a_run_of_a_users_algorithm_resumes(tmp_path, user_modules):
    config = tiny_config(
        tmp_path, "Pendulum-v1", algorithm="my_algos:user_mean_q", checkpoint_every=40
    )
    first = train(config, export=False, quiet=True)
    assert type(first.learner.sac.variant).__name__ == "MeanQ"
    sys.modules.pop("my_algos")  # as in a new process
    VARIANTS.pop("user_mean_q")
    resumed = train(
        tiny_config(tmp_path, "Pendulum-v1", algorithm="my_algos:user_mean_q", total_steps=80),
        resume=True,
        export=False,
        quiet=True,
    )
    assert resumed.summary["resumed_from"].endswith("ckpt-40")
    assert type(resumed.learner.sac.variant).__name__ == "MeanQ"


@pytest.mark.parametrize(
    "algorithm, message",
    [
        ("not_a_module_xyz:mean_q", "names module 'not_a_module_xyz', which is not found"),
        ("no_algos:mean_q", "module 'no_algos' registers no algorithm 'mean_q'"),
        ("bad_algos:mean_q", r"raised RuntimeError: not today \(.*bad_algos.py, line 3\)"),
        ("mean_q_nowhere", "or <module>:<name> of a variant your module registers"),
    ],
)
def test_a_bad_algorithm_module_is_one_line_and_nothing_is_written(
    tmp_path, user_modules, algorithm, message
):
    with pytest.raises(TfsacError, match=message) as raised:
        train(tiny_config(tmp_path, "Pendulum-v1", algorithm=algorithm), quiet=True)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "run").exists() and not (tmp_path / "export").exists()


def test_the_module_is_imported_once_and_its_variant_is_the_registered_class(user_modules):
    cls = variant_named("my_algos:user_mean_q")
    assert cls is VARIANTS["user_mean_q"] is variant_named("user_mean_q")
    assert variant_named("my_algos:user_mean_q") is cls  # not registered a second time
