"""An installed tfsac runs without the checkout: console scripts (tfsac-train, ...) and
`python -m tfsac <command>` run the scripts, installed as the package tfsac_scripts."""

import configparser
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from conftest import REPO_ROOT

COMMANDS = ("train", "evaluate", "sweep", "plot", "export", "collect")
SETUP = configparser.ConfigParser()
SETUP.read(os.path.join(REPO_ROOT, "setup.cfg"))


def _first_docstring_line(command: str) -> str:
    source = pathlib.Path(REPO_ROOT, "scripts", f"{command}.py").read_text()
    return source.split('"""')[1].strip().splitlines()[0]


def _run(args, cwd):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_every_package_folder_is_installed():
    listed = set(SETUP["options"]["packages"].split())
    folders = {
        ".".join(path.parent.relative_to(REPO_ROOT).parts)
        for path in pathlib.Path(REPO_ROOT, "tfsac").rglob("__init__.py")
    }
    assert listed == folders | {"tfsac_scripts"}
    assert SETUP["options"]["package_dir"].split() == ["tfsac_scripts", "=", "scripts"]


def test_each_console_script_names_its_script():
    entries = SETUP["options.entry_points"]["console_scripts"].split("\n")
    pairs = dict(line.replace(" ", "").split("=") for line in entries if line.strip())
    assert pairs == {f"tfsac-{c}": f"tfsac_scripts.{c}:run" for c in COMMANDS}


@pytest.mark.parametrize("command", COMMANDS)
def test_console_script_and_python_m_tfsac_run_the_script(command, tmp_path):
    installed = shutil.which(f"tfsac-{command}", path=os.path.dirname(sys.executable))
    assert installed, f"tfsac-{command} is not installed: pip install -e . installs it"
    for args in ([installed], [sys.executable, "-m", "tfsac", command]):
        proc = _run([*args, "--help"], tmp_path)  # outside the checkout
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.startswith(_first_docstring_line(command)), proc.stdout[:300]


def test_a_mistake_through_an_entry_point_is_one_line(tmp_path):
    proc = _run([sys.executable, "-m", "tfsac", "train", "--batch_size=0"], tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "error: batch_size must be a positive integer, got 0"
    ]
    proc = _run([sys.executable, "-m", "tfsac", "trian"], tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("error: unknown command 'trian'")
    assert not os.listdir(tmp_path)


def test_the_library_keeps_tensorflows_start_up_lines_to_itself(tmp_path):
    # A user's script: tfsac first, then TensorFlow through it and on its own (XLA too).
    # Thread pools can still be sized before the first op (sweep trials and runners do).
    code = (
        "import tfsac, tensorflow as tf\n"
        "tf.config.threading.set_intra_op_parallelism_threads(1)\n"
        "tfsac.SACLearner\n"
        "tf.function(lambda x: 2 * x, jit_compile=True)(tf.constant(1.0))\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_CPP", "TFSAC_TF"))}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert done.returncode == 0 and done.stdout == "ok\n"
    assert done.stderr == ""  # no CUDA probe, oneDNN, CPU or XLA notices


def test_a_ctrl_c_where_no_training_loop_catches_it_is_one_line(tmp_path):
    """A tester's: SIGINT during TensorFlow's import or Ray's start-up was a traceback."""
    code = (
        "import sys; sys.path.insert(0, 'scripts'); import _cli; sys.argv = ['x']\n"
        "def main(argv):\n    raise KeyboardInterrupt\n"
        "_cli.run_script(main)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130
    assert done.stderr.strip() == "stopped: SIGINT (any checkpoint saved stands)"
