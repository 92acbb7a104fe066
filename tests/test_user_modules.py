"""An algorithm and networks in a user's own modules, named '<module>:<name>' as gymnasium
names env ids ('my_package.envs:MyEnv-v0'): the scripts train and evaluate them from the
folder that holds the modules, runs resume and load in a process that has not imported
them, and nothing under tfsac/ changes. The modules are the docs' own blocks. A missing
module, one that registers no such name and one that fails to import are one line each."""

import json
import os
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT, docs_example, run_script, tiny_config

from tfsac import Policy, TfsacError, train
from tfsac.algorithm.architectures import ARCHITECTURES, architecture_of
from tfsac.algorithm.variants import VARIANTS, variant_named

DOCS = os.path.join(REPO_ROOT, "docs")
GUIDE = os.path.join(DOCS, "guide")
MY_ALGOS = docs_example(os.path.join(GUIDE, "adding-an-algorithm.md"), "my_algos.py")  # mean_q
MY_NETS = docs_example(os.path.join(GUIDE, "custom-env-and-networks.md"), "my_nets.py")
MODULES = {
    "my_algos": MY_ALGOS,
    "my_nets": MY_NETS,
    "no_algos": "X = 1\n",
    "bad_algos": "import os\n\nraise RuntimeError('not today')\n",
    "needs_algos": "import not_installed_xyz\n",
    "clash_algos": MY_ALGOS.replace('name = "mean_q"', 'name = "sac"'),
}


def _write_modules(folder):
    for name, code in MODULES.items():
        (folder / f"{name}.py").write_text(code)


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    """The modules above in tmp_path, importable here; the registries and sys.modules as
    they were afterwards."""
    _write_modules(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    _forget_modules()


def _forget_modules():
    """As in a new process: the modules are imported again, and register again."""
    VARIANTS.pop("mean_q", None)
    ARCHITECTURES.pop("ln_actor", None)
    for name in MODULES:
        sys.modules.pop(name, None)


def test_the_scripts_train_and_evaluate_an_algorithm_and_networks_of_the_users(tmp_path):
    _write_modules(tmp_path)
    args = [
        "--env=Pendulum-v1",
        "--algorithm=my_algos:mean_q",
        '--algorithm_kwargs={"min_weight": 0.25}',
        "--network=my_nets:ln_actor",
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
    assert (config["algorithm"], config["network"]) == ("my_algos:mean_q", "my_nets:ln_actor")
    assert config["algorithm_kwargs"] == {"min_weight": 0.25}
    assert (tmp_path / "export" / "pendulum_v1" / "1" / "saved_model.pb").exists()
    metadata = json.loads(
        (tmp_path / "export" / "pendulum_v1" / "1" / "tfsac_metadata.json").read_text()
    )
    assert (metadata["algorithm"], metadata["algorithm_kwargs"]) == (
        "my_algos:mean_q",
        {"min_weight": 0.25},
    )
    # A new process: the run directory's config names the modules, which are imported again.
    done = run_script("evaluate", ["--run_dir=run", "--episodes=1"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "return" in done.stdout + done.stderr


@pytest.mark.slow
def test_a_run_of_the_users_modules_resumes_and_loads_where_they_were_not_imported(
    tmp_path, user_modules
):
    def config(**overrides):
        names = dict(algorithm="my_algos:mean_q", network="my_nets:ln_actor")
        return tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=40, **{**names, **overrides})

    first = train(config(), export=False, quiet=True)
    assert type(first.learner.sac.variant).__name__ == "MeanQ"
    assert type(first.learner.actor).__name__ == "LayerNormActor"
    _forget_modules()
    resumed = train(config(total_steps=80), resume=True, export=False, quiet=True)
    assert resumed.summary["resumed_from"].endswith("ckpt-40")
    assert type(resumed.learner.sac.variant).__name__ == "MeanQ"
    # The user's module renamed: naming it again resumes the run (the shapes decide).
    (tmp_path / "my_algos.py").rename(tmp_path / "algos_v2.py")
    _forget_modules()
    with pytest.raises(TfsacError, match="names module 'my_algos', which is not found"):
        train(config(total_steps=120), resume=True, export=False, quiet=True)
    moved = train(
        config(total_steps=120, algorithm="algos_v2:mean_q"), resume=True, export=False, quiet=True
    )
    assert moved.summary["resumed_from"].endswith("ckpt-80")
    config_file = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config_file["algorithm"] == "algos_v2:mean_q"
    _forget_modules()
    sys.modules.pop("algos_v2", None)
    policy = Policy.load(str(tmp_path / "run"))
    expected = moved.learner.act(np.zeros((1, 3), np.float32), deterministic=True)
    np.testing.assert_allclose(policy.predict(np.zeros(3, np.float32)), 2 * expected[0], 1e-5)


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("algorithm", "not_a_module_xyz:x", "names module 'not_a_module_xyz', which is not found"),
        ("algorithm", "no_algos:mean_q", "module 'no_algos' registers no algorithm 'mean_q'"),
        ("algorithm", "bad_algos:x", r"raised RuntimeError: not today \(.*bad_algos.py, line 3\)"),
        (
            "algorithm",
            "needs_algos:x",
            "'needs_algos' .* needs a missing module: not_installed_xyz",
        ),
        ("algorithm", "mean_q_nowhere", "or <module>:<name> of one your module registers"),
        ("algorithm", "clash_algos:sac", r"'sac' is registered already .*clash_algos.py, line"),
        ("network", "my_algos:ln_actor", "module 'my_algos' registers no network 'ln_actor'"),
        ("network", "resnet", "must be one of flashsac, mlp, simba, xqc, or <module>:<name>"),
        ("algorithm", "my_algos:tqc", "module 'my_algos' registers no algorithm 'tqc'"),
        ("algorithm", ":mean_q", "'' is not a module name"),
        ("algorithm", "../x/my_algos:mean_q", "'../x/my_algos' is not a module name"),
    ],
)
def test_a_bad_module_or_name_is_one_line_and_nothing_is_written(
    tmp_path, user_modules, option, value, message
):
    with pytest.raises(TfsacError, match=message) as raised:
        train(tiny_config(tmp_path, "Pendulum-v1", **{option: value}), quiet=True)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "run").exists() and not (tmp_path / "export").exists()


def test_a_value_names_the_class_its_module_registers_and_only_that(user_modules):
    cls = variant_named("my_algos:mean_q")
    assert cls is VARIANTS["mean_q"] is variant_named("mean_q")
    assert cls.__module__ == "my_algos"
    # mean_q is registered now, but not by no_algos: not taken for it.
    with pytest.raises(TfsacError, match="module 'no_algos' registers no algorithm 'mean_q'"):
        variant_named("no_algos:mean_q")
    assert variant_named("tfsac.algorithm.variants.tqc:tqc") is VARIANTS["tqc"]
    config = tiny_config(user_modules, "Pendulum-v1", network="my_nets:ln_actor")
    assert architecture_of(config) is ARCHITECTURES["ln_actor"]
    with pytest.raises(TfsacError, match="ln_actor has no observation normaliser"):
        train(
            tiny_config(
                user_modules, "Pendulum-v1", network="my_nets:ln_actor", normalize_observations=True
            ),
            quiet=True,
        )


def test_a_resume_takes_a_moved_module_but_no_other_class():
    from tfsac.config.resume import module_moved, renamed

    assert module_moved("my_algos:mean_q", "algos_v2:mean_q")
    assert module_moved("mean_q", "pkg.sub:mean_q")  # registered in Python, then by a module
    assert not module_moved("my_algos:mean_q", "my_algos:max_q")
    assert renamed("network", "a:ln_actor", "b:ln_actor") and not renamed("seed", "a:x", "b:x")
    assert not renamed("algorithm", "sac", "tqc")
