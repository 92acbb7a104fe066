"""The limits docs/guide/adding-an-algorithm.md promises: sizes a reader can hold in mind, and lower
layers that do not reach into upper ones."""

import ast
import pathlib

from conftest import REPO_ROOT

PACKAGE = pathlib.Path(REPO_ROOT) / "tfsac"
MAX_LINES = {"module": 400, "class": 250, "function": 60}
# The one-way stack, top to bottom: each subpackage imports only itself and the layers
# below it, config (the options and SACConfig) the lowest. The foundation (errors, path
# names, the run directory's format in files.py, the console's lines in logs.py, modules
# named in a value in user_modules.py) is the modules outside the subpackages: they may
# read the config, nothing above it.
STACK = ("scale", "run", "deploy", ("algorithm", "data"), "config")
LOWER = {"algorithm": {"data"}, "data": set()}  # algorithm reads data's batches and envs


def _allowed(layer: str) -> set:
    below = set()
    for level in reversed(STACK):
        names = {level} if isinstance(level, str) else set(level)
        if layer in names:
            return below | {layer} | LOWER.get(layer, set())
        below |= names
    raise AssertionError(f"{layer} is not in the stack")


SUBPACKAGES = {"scale", "run", "deploy", "algorithm", "data", "config"}
FOUNDATION = ("errors.py", "paths.py", "files.py", "logs.py", "user_modules.py")


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
    assert 1 < sizes["tfsac/run/callbacks.py:FunctionCallback"] < sizes["tfsac/run/callbacks.py"]


def _imported_modules(path: pathlib.Path):
    """Every tfsac module `path` imports, at the top or inside a function."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tfsac."):
            yield node.module
            for alias in node.names:  # `from tfsac.run import evaluation`
                yield f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tfsac."):
                    yield alias.name


def _tfsac_imports(path: pathlib.Path):
    for module in _imported_modules(path):
        yield module.split(".")[1]


def test_absl_flags_live_only_in_the_scripts():
    """The library takes a dataclass config: no module of it reads or defines absl flags."""
    found = [
        str(path.relative_to(REPO_ROOT))
        for path in _modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "absl"
            and "flags" in {a.name for a in node.names}
        )
        or (
            isinstance(node, (ast.Import, ast.ImportFrom))
            and "absl.flags" in {getattr(node, "module", None), *(a.name for a in node.names)}
        )
    ]
    assert not found, found


def test_each_layer_imports_only_itself_and_the_layers_below():
    wrong = [
        f"{path.relative_to(REPO_ROOT)} imports tfsac.{name}"
        for layer in sorted(SUBPACKAGES)
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for name in _tfsac_imports(path)
        if name in SUBPACKAGES and name not in _allowed(layer)
    ]
    wrong += [
        f"tfsac/{name} imports tfsac.{layer}"
        for name in FOUNDATION
        for layer in _tfsac_imports(PACKAGE / name)
        if layer in SUBPACKAGES - {"config"}
    ]
    assert not wrong, "\n".join(wrong)


def test_the_stack_rule_says_what_the_layers_may_import():
    assert _allowed("run") == {"run", "deploy", "algorithm", "data", "config"}
    assert _allowed("deploy") == {"deploy", "algorithm", "data", "config"}
    assert _allowed("algorithm") == {"algorithm", "data", "config"}
    assert _allowed("data") == {"data", "config"} and _allowed("config") == {"config"}
    assert "run" in _allowed("scale")


def _import_graph():
    names = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in _modules()
    }
    return {
        name: {m for m in _imported_modules(path) if m in names and m != name}
        for name, path in names.items()
    }


def _circles(graph):
    """The strongly connected components of more than one module (Tarjan's)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_tfsac_modules_import_each_other_in_a_circle():
    circles = _circles(_import_graph())
    assert not circles, "\n".join(" <-> ".join(sorted(c)) for c in circles)


def test_the_circle_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [frozenset({"a", "b", "c"})]
