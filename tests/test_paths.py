"""No name that becomes a path (a model name, a sweep's run names) ever writes outside the
folder the user named: every option that ends up in a path (run_dir, export_dir,
model_name, sweep_dir, video_dir, the run names a sweep derives from its grid, collect.py's
dataset_id) is walked with hostile names through the real code paths, and the files
created anywhere under the test's root are compared with the folders named."""

import concurrent.futures
import os
import pathlib
import re

import pytest
from conftest import run_script, tiny_config

from tfsac import EnvSpec, SACConfig, SACLearner, TfsacError, export_policy, train
from tfsac.files import check_plain_name
from tfsac.paths import is_plain_name
from tfsac.scale.sweeps.plan import plan_sweep
from tfsac.scale.sweeps.trial import TrialFactory, config_tag

# "<outside>" stands for an absolute path beside the named folders.
HOSTILE = [
    "../evil",
    "..",
    ".",
    ".hidden",
    "a/b",
    "a\\b",
    "",
    "C:evil",
    "x/../../evil",
    "<outside>",
]
PLAIN = ["m", "pendulum_v1", "policy-2", "a.b", "A b", "x.."]


def _hostile(root):
    return [str(root / "outside" / "evil") if h == "<outside>" else h for h in HOSTILE]


def _tree(root):
    """Every file and folder under `root`, relative to it."""
    return {
        os.path.relpath(os.path.join(d, n), root) for d, ds, fs in os.walk(root) for n in ds + fs
    }


def _outside(new, named):
    """The paths in `new` that lie in none of the `named` folders (or above them)."""
    inside = tuple(n + os.sep for n in named)
    return sorted(p for p in new if not (p + os.sep).startswith(inside) and p not in named)


def test_the_rule():
    for name in PLAIN:
        assert is_plain_name(name) and check_plain_name("x", name) == name
    for name in [*_hostile(pathlib.Path("/tmp")), None, 3]:
        assert not is_plain_name(name), name
        with pytest.raises(TfsacError, match="^model_name must be a folder name"):
            check_plain_name("model_name", name)
    # A tester's: a newline split the lines naming the folder; spaces at the ends.
    odd = ["a\nb", "a\tb", "a\x85b", "a\x9b[2Jb", "a\u2028b"]  # C0, C1, Unicode line breaks
    for name, problem in [*((n, "control") for n in odd), (" m", "end"), ("m ", "end")]:
        with pytest.raises(TfsacError, match=re.escape(f"got {name!r}: it ") + f".*{problem}"):
            check_plain_name("model_name", name)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny run (with its end checkpoint) in <root>/named/run, exported to named/export."""
    root = tmp_path_factory.mktemp("paths")
    result = train(tiny_config(root / "named", "Pendulum-v1", model_name="m"), quiet=True)
    return root, result


def test_hostile_names_write_nothing_outside_the_named_folders(trained, monkeypatch):
    root, result = trained
    cwd = root / "named"  # relative names resolve here, so '../evil' would land in root
    monkeypatch.chdir(cwd)
    before = _tree(root)
    hostile = _hostile(root)
    # tfsac.train and the exporter refuse every hostile model name.
    learner = SACLearner(3, 1, SACConfig(hidden_sizes=(8,)))
    spec = EnvSpec("Test-v0", 3, 1, (-2.0,), (2.0,), "Box(3)", "Box(1)", "none")
    for name in hostile:
        config = tiny_config(cwd, "Pendulum-v1", name="run_x", model_name=name)
        with pytest.raises(TfsacError, match="model_name must be a folder name"):
            train(config, quiet=True)
        with pytest.raises(TfsacError, match="model_name must be a folder name"):
            export_policy(learner.actor, spec, str(cwd / "export"), name, {})

    # The scripts: each hostile name is one error line; the plain names write, but only
    # into the folders named on their command lines.
    def script(name, *args):
        return (name, args, run_script(name, args, cwd))

    refused = []
    # The scripts share the rule checked above with every name: a few names each here.
    for name in [h for h in hostile if h in ("../evil", ".hidden", "x/../../e")] + hostile[-1:]:
        refused.append(("export", f"--run_dir={result.run_dir}", f"--model_name={name}"))
        refused.append(("train", "--total_steps=40", f"--model_name={name}", "--run_dir=run2"))
        refused.append(("sweep", "--sweep_dir=sweep", f"--grid=model_name=m2,{name}"))
    accepted = [
        ("export", f"--run_dir={result.run_dir}", "--formats=saved_model", "--export_dir=export"),
        ("evaluate", f"--run_dir={result.run_dir}", "--episodes=1", "--video_dir=videos"),
    ]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        done = list(pool.map(lambda case: script(*case), accepted + refused))  # longest first
    for name, args, proc in done[len(accepted) :]:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode != 0 and len(lines) == 1, (name, args, proc.stderr[-2000:])
        assert "must be a folder name" in lines[0], (name, args, lines)
    for name, args, proc in done[: len(accepted)]:
        assert proc.returncode == 0, (name, args, proc.stderr[-2000:])

    new = _tree(root) - before
    named = ["named/export", "named/videos"]
    assert _outside(new, named) == [], "written outside the named folders"
    assert not (root / "outside").exists() and not (root / "evil").exists()
    # --run_dir's export takes the run's own model_name: its version 1 holds the run's last
    # checkpoint already, so the same weights are not published again.
    assert os.listdir(root / "named/export/m") == ["1"]
    assert done[0][2].stdout.startswith(f"{root / 'named/export/m/1'} holds ")
    assert any(p.endswith(".mp4") for p in new)


class _Configs:
    """A stand-in for the sweep script's FlagConfigs: any SACConfig field, from its text."""

    names = frozenset(f for f in SACConfig.__dataclass_fields__)

    def __call__(self, overrides):
        kinds = {"learning_rate": float, "seed": int}
        return SACConfig(**{k: kinds.get(k, str)(v) for k, v in overrides.items()}).validate()


def test_a_sweeps_run_names_stay_inside_its_folder(tmp_path):
    sweep_dir = tmp_path / "sweep"
    for value in [*_hostile(tmp_path), "a" * 300]:
        assert is_plain_name(config_tag({"model_name": value})), value
    factory = TrialFactory(_Configs(), str(sweep_dir), 1)
    for tag in _hostile(tmp_path):
        with pytest.raises(TfsacError, match="run name must be a folder name"):
            factory(tag, {}, 0)
    grid = ["learning_rate=1e-3,3e-4", "model_name=a,b"]
    plan = plan_sweep(_Configs(), str(sweep_dir), [0, 1], grid=grid)
    assert len(plan.trials) == 8
    for trial in plan.trials:
        for path in (trial["run_dir"], trial["config"]["export_dir"]):
            assert os.path.commonpath([os.path.realpath(path), str(sweep_dir)]) == str(sweep_dir)
        assert os.path.dirname(os.path.dirname(trial["run_dir"])) == str(sweep_dir)
    assert _tree(tmp_path) == set()  # planning writes nothing
    for model_name in filter(None, _hostile(tmp_path)):
        with pytest.raises(TfsacError, match="model_name must be a folder name"):
            plan_sweep(_Configs(), str(sweep_dir), [0], grid=[f"model_name=a,{model_name}"])


def test_a_mujoco_env_writes_no_log_file_where_the_user_stands(tmp_path, monkeypatch, capfd):
    """MuJoCo's own warning handler prints and appends to MUJOCO_LOG.TXT in the current
    directory; make_env routes MuJoCo's warnings to logging first, unless the user set a
    handler."""
    import mujoco

    from tfsac.data.envs import make_env

    monkeypatch.chdir(tmp_path)
    before = mujoco.get_mju_user_warning()
    try:
        mujoco.set_mju_user_warning(None)  # MuJoCo's own, as in a fresh process
        make_env("HalfCheetah-v5").close()  # its XML has an attribute MuJoCo deprecates
        assert mujoco.get_mju_user_warning().__module__ == "tfsac.logs"
        seen = []
        mujoco.set_mju_user_warning(seen.append)
        make_env("HalfCheetah-v5").close()
        assert mujoco.get_mju_user_warning() == seen.append and "settotalmass" in seen[0]
    finally:
        mujoco.set_mju_user_warning(before)
    assert _tree(tmp_path) == set()
    assert "settotalmass" not in "".join(capfd.readouterr())


def test_a_datasets_id_keeps_it_inside_the_output_folder(tmp_path):
    from tfsac.data.recording import check_output

    out = tmp_path / "out"
    hostile = ["../x-v0", "ab/../../x-v0", "/abs/x-v0", f"{tmp_path}/x-v0", "..-v0"]
    odd = [".hidden/x-v0", "ab\\..\\x-v0", "C:x-v0", "x-v0/", "medium", "ab//cd/x-v0"]
    for dataset_id in [*hostile, *odd]:
        with pytest.raises(TfsacError, match="dataset_id must be Minari's"):
            check_output(str(out), "minari", dataset_id)
    for dataset_id in ("medium-v0", "halfcheetah/medium-v0", "mujoco/halfcheetah/expert-v2"):
        target = check_output(str(out), "minari", dataset_id)
        assert os.path.commonpath([os.path.realpath(target), str(out)]) == str(out)
    assert _tree(tmp_path) == set()
    # Not inside another dataset's folder ('ab/x-v0' is one: 'ab/x-v0/y-v1' would nest).
    (out / "ab" / "x-v0" / "data").mkdir(parents=True)
    (out / "ab" / "x-v0" / "data" / "metadata.json").write_text("{}")
    with pytest.raises(TfsacError, match=r"x-v0' is a Minari dataset: a dataset id cannot go"):
        check_output(str(out), "minari", "ab/x-v0/y-v1")


def test_a_resumed_run_writes_through_no_link_planted_in_its_folder(tmp_path):
    """A run directory from elsewhere (a shared tarball) with links where tfsac writes: the
    files they point to outside are never written. Temporary files' links are replaced;
    a link where tfsac writes in place (the lock, progress.csv) is one line."""
    outside = tmp_path / "outside"
    outside.mkdir()

    def config(total_steps):
        return tiny_config(tmp_path, "Pendulum-v1", total_steps=total_steps, checkpoint_every=40)

    train(config(40), export=False, quiet=True)
    run = tmp_path / "run"
    temporaries = ["summary.json.tmp", "config.json.tmp"]
    for i, name in enumerate(temporaries):
        (outside / f"victim{i}").write_text("keep")
        os.symlink(outside / f"victim{i}", run / name)
    train(config(80), resume=True, export=False, quiet=True)
    assert [(outside / f"victim{i}").read_text() for i in range(2)] == ["keep"] * 2
    assert not os.path.lexists(run / "summary.json.tmp")  # written: its own file, renamed
    for i, name in enumerate(["run.lock", "progress.csv"], start=3):
        kept = (run / name).read_bytes()
        (run / name).unlink()
        (outside / f"victim{i}").write_text("keep")
        os.symlink(outside / f"victim{i}", run / name)
        with pytest.raises(TfsacError, match=f"{name} is a symbolic link: tfsac writes only"):
            train(config(120), resume=True, export=False, quiet=True)
        assert (outside / f"victim{i}").read_text() == "keep"
        (run / name).unlink()
        (run / name).write_bytes(kept)
    assert train(config(120), resume=True, export=False, quiet=True).summary["total_steps"] == 120
