"""The documentation as a user meets it: every flag a page names exists, every relative
link resolves, the README stays a first reader's page, and (marker `docs`) every bash and
Python block of the README and the guide runs as written, and the site builds strictly.

Fence languages say what a block is: `bash` and `python` blocks run; `console` blocks need
what a test machine lacks (Docker, a cluster, hours of training), so only their flags are
checked; `text`, `json` and the others are output or data.
"""

import functools
import glob
import os
import re
import subprocess
import sys
import time

import pytest
from conftest import REPO_ROOT

DOCS = os.path.join(REPO_ROOT, "docs")
README = os.path.join(REPO_ROOT, "README.md")
GUIDE_PAGES = sorted(glob.glob(os.path.join(DOCS, "guide", "*.md")))
RUN_PAGES = [README, *GUIDE_PAGES]
ALL_PAGES = [README, *sorted(glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True))]
SCRIPTS = ("train", "evaluate", "sweep", "plot", "export", "collect", "benchmark")
# A block after one of these markers is run by the test named, not here.
RUN_ELSEWHERE = {"grpc-client": "tests/test_serving_docs.py (against a fake server)"}
FENCE = re.compile(r"(?:<!-- (?P<marker>[^>]*?) -->\s*)?^(?P<indent> *)```(?P<lang>[\w-]*)\n"
                   r"(?P<code>.*?)^(?P=indent)```", re.S | re.M)


def blocks(path, languages):
    """(marker or None, language, code) of each fenced block of `languages` in order."""
    with open(path) as f:
        text = f.read()
    found = []
    for m in FENCE.finditer(text):
        if m["lang"] in languages:
            indent = len(m["indent"])
            code = "".join(line[indent:] for line in m["code"].splitlines(keepends=True))
            found.append((m["marker"], m["lang"], code))
    return found


def ci_test_command():
    """.ci/run's test command, which the README's quickstart shows verbatim."""
    with open(os.path.join(REPO_ROOT, ".ci", "run")) as f:
        (line,) = [line for line in f.read().splitlines() if line.startswith("python3 -m venv")]
    return line


# ------------------------------------------------------------------ flags and links


@functools.cache
def script_flags(script):
    """Every flag `scripts/<script>.py --helpfull` lists (absl's own included)."""
    out = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "scripts", f"{script}.py"), "--helpfull"],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=120,
        env={**os.environ, "PYTHONPATH": REPO_ROOT},
    )
    flags = set(re.findall(r"^\s+(?:-\S,)?--(?:\[no\])?([a-z][a-z0-9_]*)", out.stdout, re.M))
    assert len(flags) > 5, f"{script}.py --helpfull listed no flags:\n{out.stderr[-2000:]}"
    return frozenset(flags)


def commands(code):
    """(script, [flag names]) for each scripts/<x>.py or tfsac-<x> command in a shell block."""
    joined = re.sub(r"\\\n\s*", " ", code)
    found = []
    for part in re.split(r"\n|&&|\|\||;|\|", joined):
        m = re.search(r"(?:scripts/|tfsac-|tfsac )(" + "|".join(SCRIPTS) + r")(?:\.py)?\b", part)
        if m:
            names = re.findall(r"(?<![\w-])--([a-z][a-z0-9_]*)", part[m.end():])
            found.append((m[1], names))
    return found


def known(script, name):
    flags = script_flags(script)
    return name in flags or (name.startswith("no") and name[2:] in flags)


def test_every_flag_in_the_docs_commands_exists():
    wrong = []
    for page in ALL_PAGES:
        for _, _, code in blocks(page, ("bash", "console")):
            for script, names in commands(code):
                wrong += [f"{os.path.relpath(page, REPO_ROOT)}: {script}.py --{n}"
                          for n in names if not known(script, n)]
    assert not wrong, "flags the scripts do not have:\n" + "\n".join(wrong)


OTHER_TOOLS = r"(docker|ray|pip|curl|saved_model_cli|minari|tensorboard|python -m pytest)\b"


def test_every_flag_named_in_the_guide_and_readme_text_exists():
    """Flags in inline code (`--total_steps`) name a flag of one of the scripts."""
    every = set().union(*(script_flags(s) for s in SCRIPTS))
    wrong = []
    for page in RUN_PAGES:
        with open(page) as f:
            text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
        for span in re.findall(r"`([^`\n]+)`", text):
            if re.match(OTHER_TOOLS, span):
                continue
            for name in re.findall(r"(?<![\w-])--([a-z][a-z0-9_-]*)", span):
                if "-" in name:  # another tool's flag (Ray's --node-ip-address)
                    continue
                if name not in every and not (name.startswith("no") and name[2:] in every):
                    wrong.append(f"{os.path.relpath(page, REPO_ROOT)}: --{name} in `{span}`")
    assert not wrong, "flags no script has:\n" + "\n".join(wrong)


def github_anchor(heading):
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_resolves():
    wrong = []
    for page in ALL_PAGES:
        with open(page) as f:
            text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(file):
                wrong.append(f"{os.path.relpath(page, REPO_ROOT)}: {target}")
            elif anchor and file.endswith(".md"):
                with open(file) as f:
                    headings = re.findall(r"^#+ (.*)$", f.read(), re.M)
                if anchor not in {github_anchor(h) for h in headings}:
                    wrong.append(f"{os.path.relpath(page, REPO_ROOT)}: {target} (no such heading)")
    assert not wrong, "links that do not resolve:\n" + "\n".join(wrong)


def test_readme_is_a_first_readers_page():
    with open(README) as f:
        text = f.read()
    assert len(text.splitlines()) <= 250
    assert len(re.findall(r"epyc|zen ?[45]|xeon|avx-?512|avx2", text, re.I)) <= 1
    assert ci_test_command() in text.splitlines(), "README's test command is .ci/run's"


def test_no_page_tells_its_history():
    history = re.compile(r"a session later|earlier session|tester'?s|before the .* change", re.I)
    wrong = []
    for page in ALL_PAGES:
        with open(page) as f:
            wrong += [f"{os.path.relpath(page, REPO_ROOT)}: {line.strip()}"
                      for line in f if history.search(line)]
    assert not wrong, "\n".join(wrong)


# ------------------------------------------------------------------ the docs run


INSTALL_PREFIX = r"^python3 -m venv \.venv && \. \.venv/bin/activate && pip install -e \S+ && "


def shell_lines(code):
    """The block's commands, less the install steps (the test runs in the installed tfsac)
    and the quickstart's test command (which .ci/run runs)."""
    kept = []
    ci = ci_test_command()
    for line in code.splitlines():
        if line.strip() == ci:
            continue
        line = re.sub(INSTALL_PREFIX, "", line)
        if re.match(r"\s*pip install\b", line):
            continue
        kept.append(line)
    return "\n".join(kept)


def workspace(tmp_path):
    """A folder that looks like the repository's root to the commands (its scripts, docs,
    package and site config linked, read-only in spirit) and takes everything they write."""
    for name in ("scripts", "tfsac", "docs", "mkdocs.yml", "setup.cfg", "tests"):
        os.symlink(os.path.join(REPO_ROOT, name), tmp_path / name)
    return tmp_path


def repository_state():
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--ignored"],
        capture_output=True, text=True, cwd=REPO_ROOT,
    ).stdout
    return sorted(line for line in out.splitlines() if "__pycache__" not in line)


@pytest.mark.docs
@pytest.mark.parametrize("page", RUN_PAGES, ids=[os.path.basename(p) for p in RUN_PAGES])
def test_page_runs_as_written(page, tmp_path):
    work = workspace(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO_ROOT, str(work)]),
           "MPLBACKEND": "Agg", "TF_CPP_MIN_LOG_LEVEL": "2"}
    before = repository_state()
    times = []
    for i, (marker, lang, code) in enumerate(blocks(page, ("bash", "python"))):
        if marker in RUN_ELSEWHERE:
            continue
        if lang == "python" and marker and marker.endswith(".py"):
            (work / marker).write_text(code)  # a module the page's later commands import
            continue
        if lang == "python":
            script = work / f".block{i}.py"
            script.write_text(code)
            argv = [sys.executable, str(script)]
        else:
            argv = ["bash", "-euo", "pipefail", "-c", shell_lines(code)]
        start = time.monotonic()
        out = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True,
                             timeout=1200)
        times.append(f"block {i} ({lang}): {time.monotonic() - start:.0f} s")
        assert out.returncode == 0, (
            f"{os.path.relpath(page, REPO_ROOT)}, block {i} ({lang}) failed:\n{code}\n"
            f"--- stdout\n{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-5000:]}"
        )
    print(f"\n{os.path.basename(page)}: " + "; ".join(times))
    assert repository_state() == before, "the page's commands wrote into the repository"


@pytest.mark.docs
def test_site_builds_strictly(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert out.returncode == 0, out.stderr[-5000:]
    reference = (tmp_path / "site" / "reference" / "config" / "index.html").read_text()
    assert "SACConfig" in reference and "total_steps" in reference
    for page, name in [("training", "Trainer"), ("policy", "predict"),
                       ("callbacks", "SaveBestPolicy"), ("variants", "Variant"),
                       ("replay", "sample_packed")]:
        assert name in (tmp_path / "site" / "reference" / page / "index.html").read_text()
