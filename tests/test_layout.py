"""The limits docs/architecture.md promises: sizes a reader can hold in mind, and lower
layers that do not reach into upper ones."""

import ast
import pathlib

from conftest import REPO_ROOT

PACKAGE = pathlib.Path(REPO_ROOT) / "tfsac"
MAX_LINES = {"module": 400, "class": 250, "function": 60}
# What each lower layer may import from tfsac (the upper ones, run, scale and deploy, use
# one another: a run exports, a policy reads a run, a sweep runs a trainer).
ALLOWED = {
    "data": {"config", "options", "errors", "data"},
    "algorithm": {"config", "options", "errors", "data", "algorithm"},
}


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def _sizes(path: pathlib.Path):
    source = path.read_text()
    yield "module", str(path.relative_to(REPO_ROOT)), len(source.splitlines())
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            kind = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind = "function"
        else:
            continue
        yield kind, f"{path.relative_to(REPO_ROOT)}:{node.name}", node.end_lineno - node.lineno + 1


def test_no_module_class_or_function_outgrows_its_limit():
    too_long = [
        f"{name} is a {kind} of {lines} lines (limit {MAX_LINES[kind]})"
        for path in _modules()
        for kind, name, lines in _sizes(path)
        if lines > MAX_LINES[kind]
    ]
    assert not too_long, "\n".join(too_long)


def test_the_checks_see_every_module_and_count_what_they_should():
    names = {str(p.relative_to(PACKAGE)) for p in _modules()}
    assert {"run/trainer.py", "algorithm/sac.py", "data/replay.py"} <= names
    sizes = {name: lines for _, name, lines in _sizes(PACKAGE / "run" / "callbacks.py")}
    assert 1 < sizes["tfsac/run/callbacks.py:IntervalTrigger"] < sizes["tfsac/run/callbacks.py"]


def _tfsac_imports(path: pathlib.Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tfsac."):
            yield node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tfsac."):
                    yield alias.name.split(".")[1]


def test_lower_layers_do_not_import_upper_ones():
    wrong = [
        f"{path.relative_to(REPO_ROOT)} imports tfsac.{name}"
        for layer, allowed in ALLOWED.items()
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for name in _tfsac_imports(path)
        if name not in allowed
    ]
    assert not wrong, "\n".join(wrong)
