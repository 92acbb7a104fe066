"""The table and figures of docs/benchmarks.md: tfsac runs (a sweep's trials) beside peer
runs (the JSON lines of ../shared/peers/learn.py) on the same envs and seeds.

    python scripts/benchmark_report.py --runs='sweeps/benchmark/*/*/seed*' \\
        --peer_results='sweeps/benchmark/sbx/*.json' --out_dir=docs/benchmarks

Prints a Markdown table (per env and library: seeds, the final evaluation return as mean ±
std over seeds, env steps/s) and writes it to <out_dir>/results.md, with one PNG of the
evaluation curves per env (mean ± std over seeds; one line per seed where its seeds
evaluated different env steps). Runs of another algorithm or network are
labelled with it ("tfsac tqc", "sbx crossq", "sbx simba"). With --reach=R (or per env,
--reach=Hopper-v5=1000,Ant-v5=2000) the table says how many env steps each library's seeds
took to a deterministic evaluation of at least R, and with --idle_rates=tfsac=130,sbx=125
(learning-phase env steps/s measured side by side on an idle machine,
`scripts/benchmark.py --peers`; per env: Ant-v5:tfsac=120, which wins over the label's
own rate) what that is in minutes at those rates.

--at_steps=5000,10000,25000 adds the return (mean ± std over seeds) at those evaluated env
steps, with the runs' mean wall-clock minutes to them where tfsac recorded them. Runs with
recorded data are labelled with its share of each minibatch ("tfsac data-0.5", RLPD's; "tfsac
data-size", pre-loaded), so the offline-to-online arms are rows of their own.

--curve_data=DIR also writes each finished run's curve as DIR/<env>-<library>-<algorithm>-
seed<k>.csv (`# key: value` lines, then env_step,return_mean[,wall_time_s]), small files to
commit as runs finish; --curves='DIR/*.csv' builds the table and figures from them alone.
"""

import contextlib
import glob
import json
import math
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _cli import fail, parse_flags_or_fail, quiet_logs  # noqa: E402
from absl import app, flags  # noqa: E402

from tfsac.algorithm.architectures import ARCHITECTURES  # noqa: E402 - TF-free
from tfsac.algorithm.resolve import resolve  # noqa: E402 - TF-free
from tfsac.config import SACConfig  # noqa: E402
from tfsac.errors import TfsacError  # noqa: E402
from tfsac.files import check_writable  # noqa: E402

flags.DEFINE_string("runs", "", "Glob of tfsac run directories.")
flags.DEFINE_string("peer_results", "", "Glob of learn.py JSON files (one run each).")
flags.DEFINE_string("curves", "", "Glob of curve files that --curve_data wrote.")
flags.DEFINE_string("curve_data", "", "Also write each run's curve file into this folder.")
flags.DEFINE_string(
    "out_dir",
    None,
    "Folder of results.md and the PNGs (required: docs/benchmarks/<table> for the "
    "repository's tables, which it replaces).",
)
flags.DEFINE_list(
    "reach", [], "Also tabulate the env steps to an evaluation of this return: R, or env=R,..."
)
flags.DEFINE_list("at_steps", [], "Also tabulate the return at these evaluated env steps.")
flags.DEFINE_list(
    "idle_rates", [], "[env:]label=env steps/s pairs turning --reach steps into minutes."
)
FLAGS = flags.FLAGS


@contextlib.contextmanager
def reading(path):
    """A file or run that does not read as the report expects is one error line."""
    try:
        yield
    except (OSError, ValueError, KeyError, TypeError, IndexError, TfsacError) as e:
        fail(f"cannot read {path}: {e}")


def tfsac_runs(pattern):
    """(env, label, run) of the finished runs that `pattern` matches; run = {seed, steps,
    returns, final, steps_per_s}."""
    from tfsac.run.plotting import read_run

    found = []
    for run_dir in sorted(glob.glob(pattern)):
        if not os.path.exists(os.path.join(run_dir, "summary.json")):
            started = os.path.exists(os.path.join(run_dir, "config.json"))
            why = "not finished" if started else "not a run directory"
            print(f"skipped ({why}): {run_dir}", file=sys.stderr)
            continue
        with reading(run_dir):
            run = read_run(run_dir)
            config, summary = run["config"], run["summary"]
            steps, returns = run["curves"]["eval_return"]
            # config.json holds offline_ratio=size as null (the union sampled by size).
            ratio = config.get("offline_ratio")
            data = config.get("offline_data") and f"data-{'size' if ratio is None else ratio}"
            kwargs = config.get("algorithm_kwargs")
            lib = label("tfsac", config.get("algorithm"), config.get("network"), data, kwargs)
            seed = dict(
                seed=summary["seed"],
                steps=steps,
                returns=returns,
                final=summary["eval_return_mean"],
                steps_per_s=summary["env_steps_per_s"],
                minutes=run["minutes"].get("eval_return"),
                config=config,
                dir=run_dir,
            )
        found.append((summary["env"], lib, seed))
    return found


def _default_network(algorithm) -> str:
    """The network an algorithm's `network=auto` resolves to (a saved config.json holds
    the resolved one); "mlp" for an algorithm not registered here."""
    try:
        return resolve(SACConfig(algorithm=algorithm or SACConfig().algorithm)).network
    except TfsacError:
        return "mlp"


def label(lib, algorithm=None, network=None, data=None, kwargs=None) -> str:
    """'tfsac', or with the algorithm and network where they are not the defaults, the
    algorithm's own hyperparameters (name=value), and the recorded data's share where
    there is any."""
    defaults = {"algorithm": SACConfig().algorithm, "network": _default_network(algorithm)}
    shown = [
        value
        for value, option in ((algorithm, "algorithm"), (network, "network"))
        if value not in (None, defaults[option])
    ]
    # One word each (a label's words make the curve file's name): no spaces in a value.
    hyper = [
        f"{k}={json.dumps(v, separators=(',', ':'))}".replace(" ", "_").replace('"', "")
        for k, v in sorted((kwargs or {}).items())
    ]
    return " ".join([lib, *shown, *hyper, *([data] if data else [])])


def at_step_cell(runs, step: int) -> str:
    """The return at env step `step` (mean ± std over the seeds evaluated there, and how
    many), with their mean wall-clock minutes to it where every one recorded them."""
    import numpy as np

    found = [(r, list(r["steps"]).index(step)) for r in runs if step in list(r["steps"])]
    if not found:
        return "-"
    returns = np.array([r["returns"][i] for r, i in found])
    cell = f"{returns.mean():,.0f} ± {returns.std():,.0f} ({len(found)}/{len(runs)})"
    minutes = [r["minutes"][i] for r, i in found if r.get("minutes") is not None]
    if len(minutes) != len(found):
        return cell
    mean = float(np.mean(minutes))  # seconds below a minute, where "0 min" says nothing
    return cell + (f", {mean:.0f} min" if mean >= 1 else f", {mean * 60:.0f} s")


def steps_to_reach(run, target):
    """The first evaluated env step with a return >= target, or None."""
    hits = [s for s, r in zip(run["steps"], run["returns"], strict=True) if r >= target]
    return int(hits[0]) if hits else None


def peer_runs(pattern):
    """(env, lib, run) of each learn.py JSON file that `pattern` matches."""
    import numpy as np

    found = []
    for path in sorted(glob.glob(pattern)) if pattern else []:
        with reading(path), open(path) as f:
            lines = f.read().strip().splitlines()
        try:
            line = json.loads(lines[-1]) if lines else None
        except ValueError:
            line = None
        # learn.py writes its line when it ends: none means a run still going (or one that died).
        if not isinstance(line, dict) or "curve" not in line or "eval_return_mean" not in line:
            ours = not lines or isinstance(line, dict) and "lib" in line
            why = "not finished" if ours else "not a learn.py result"
            print(f"skipped ({why}): {path}", file=sys.stderr)
            continue
        with reading(path):
            steps, returns = (np.array(v, float) for v in zip(*line["curve"], strict=True))
            run = dict(
                seed=int(line["seed"]),
                steps=steps,
                returns=returns,
                final=float(line["eval_return_mean"]),
                steps_per_s=float(line["env_steps_per_s"]),
                minutes=None,
            )
        # The peer's policy class names the architecture (MlpPolicy: mlp, SimbaPolicy: simba).
        policies = {a.peer_policy: a.name for a in ARCHITECTURES.values() if a.peer_policy}
        network = policies.get(line.get("policy"))
        found.append((line["env"], label(line["lib"], line.get("algo"), network), run))
    return found


CURVE_KEYS = ("env", "library", "seed", "final_return", "env_steps_per_s")


def env_file_stem(env: str) -> str:
    """The env id in a file name: lower case, every run of other characters than letters
    and digits one '_' ('Hopper-v5': hopper_v5; 'ALE/Pong-v5': ale_pong_v5), so that an id's
    '/' or '..' never names another folder."""
    return re.sub(r"[^0-9a-z]+", "_", env.lower())


def curve_file_name(env: str, lib: str, seed) -> str:
    """<env>-<library>-<algorithm>[-<network>]-seed<k>.csv, e.g. hopper_v5-sbx-crossq-seed0."""
    # An algorithm of a user's module, 'my_algos:mean_q', is my_algos_mean_q in a file name.
    words = [re.sub(r"[^A-Za-z0-9.=,+-]+", "_", word) for word in lib.split()]
    words += ["sac"] if len(words) == 1 else []
    return f"{env_file_stem(env)}-{'-'.join(words)}-seed{seed}.csv"


def curve_file(out_dir: str, env: str, lib: str, run):
    """One run's curve file (see the module docstring): (its path, its lines)."""
    path = os.path.join(out_dir, curve_file_name(env, lib, run["seed"]))
    values = (env, lib, run["seed"], run["final"], run["steps_per_s"])
    lines = [f"# {k}: {v}" for k, v in zip(CURVE_KEYS, values, strict=True)]
    if run.get("minutes") is None:
        lines.append("env_step,return_mean")
        points = zip(run["steps"], run["returns"], strict=True)
        lines += [f"{int(step)},{float(value):.2f}" for step, value in points]
    else:
        lines.append("env_step,return_mean,wall_time_s")
        points = zip(run["steps"], run["returns"], run["minutes"], strict=True)
        lines += [f"{int(s)},{float(v):.2f},{60 * float(m):.2f}" for s, v, m in points]
    return path, lines


def write_curves(out_dir: str, found) -> None:
    """Each run's curve file in `out_dir`, each written atomically, none of them before all
    are checked: a file of another run there (not the first points of this run's curve)
    is one error line with nothing written."""
    files = [curve_file(out_dir, env, lib, run) for env, lib, run in found]
    paths = [path for path, _ in files]
    for path in (p for i, p in enumerate(paths) if p in paths[:i]):  # labels alike as names
        fail(
            f"two runs' curves would both be {path}: their labels differ only in characters "
            "a file name drops"
        )
    for path, lines in files:
        if os.path.exists(path) and not _continues(path, lines):
            fail(
                f"{path} holds another run's curve (its points are not this run's first "
                "ones): name another --curve_data folder, or remove the file where this run "
                "replaces it"
            )
    os.makedirs(out_dir, exist_ok=True)
    for path, lines in files:
        with open(path + ".tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(path + ".tmp", path)


def _continues(path: str, lines) -> bool:
    """Whether the curve file at `path` is of the same run as `lines`: its points (env step
    and return) are the first of `lines`' (a run evaluated further since)."""
    with reading(path), open(path) as f:
        old = [line.split(",")[:2] for line in f.read().splitlines() if line[:1].isdigit()]
    new = [line.split(",")[:2] for line in lines if line[:1].isdigit()]
    return old == new[: len(old)]


def curve_runs(pattern):
    """(env, library, run) of each curve file that `pattern` matches."""
    import numpy as np

    found = []
    for path in sorted(glob.glob(pattern)) if pattern else []:
        with reading(path), open(path) as f:
            lines = f.read().splitlines()
        header = dict(line[2:].partition(": ")[::2] for line in lines if line.startswith("# "))
        rows = [line.split(",") for line in lines if line and line[0].isdigit()]
        if set(CURVE_KEYS) - set(header) or not rows:
            fail(f"{path} is not a curve file of --curve_data (its header or rows are missing)")
        with reading(path):
            columns = [np.array(v, float) for v in zip(*rows, strict=True)]
            run = dict(
                seed=int(header["seed"]),
                steps=columns[0],
                returns=columns[1],
                final=float(header["final_return"]),
                steps_per_s=float(header["env_steps_per_s"]),
                minutes=columns[2] / 60 if len(columns) > 2 else None,
            )
        found.append((header["env"], header["library"], run))
    return found


def parse_reach(items):
    """--reach's items as {env or None (every env): return}."""
    targets = {}
    for item in items:
        env, _, value = item.rpartition("=")
        try:
            targets[env or None] = float(value)
        except ValueError:
            fail(f"--reach takes R or env=R items, got {item!r}")
        if not math.isfinite(targets[env or None]):
            fail(f"--reach takes finite returns, got {item!r}")
    return targets


def parse_at_steps(items):
    """--at_steps's items as distinct positive whole env steps."""
    try:
        steps = [float(item) for item in items]
    except ValueError:
        fail(f"--at_steps takes env steps, got {','.join(items)}")
    if any(not (math.isfinite(n) and n > 0 and n == int(n)) for n in steps) or len(
        set(steps)
    ) < len(steps):
        fail(f"--at_steps takes distinct positive whole env steps, got {','.join(items)}")
    return [int(n) for n in steps]


def check_row(env: str, lib: str, runs) -> None:
    """A row averages seeds of one configuration: runs that differ in another setting, or
    the same seed twice, are refused (give --runs a glob of one configuration per row)."""
    from tfsac.run.run_groups import differing_fields

    configs = [r["config"] for r in runs if "config" in r]
    differ = differing_fields(configs) if len(configs) > 1 else []
    if differ:  # first: two configurations' seeds repeat one another
        fail(
            f"{lib} on {env}: the runs differ in {', '.join(differ)}; a row averages the seeds "
            "of one configuration (give --runs a glob of one per row)"
        )
    seeds = [r["seed"] for r in runs]
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        where = ", ".join(r.get("dir", "a curve file") for r in runs if r["seed"] == twice[0])
        fail(f"{lib} on {env}: seed {twice[0]} more than once ({where})")


def matched_rates(groups, raw_rates):
    """--idle_rates as {(env or None, label): rate}: each key a row's label (any env's), or
    env:label of a row of that env. One whose env has no runs here is said on stderr (one
    list of rates serves tables whose runs are still going); any other is a typo, refused
    (its cells would say '-' as if no rate had been given)."""
    labels = {lib for libs in groups.values() for lib in libs}
    rates, absent = {}, []
    for key, rate in raw_rates.items():
        if key in labels:
            rates[(None, key)] = rate
            continue
        splits = [(key[:i], key[i + 1 :]) for i, c in enumerate(key) if c == ":"]
        found = [(env, lib) for env, lib in splits if lib in groups.get(env, {})]
        if found:
            rates[found[0]] = rate
        elif splits and not any(env in groups or " " in env for env, _ in splits):
            absent.append(key)  # an env id (no spaces) of no run here
        else:
            known = ", ".join(sorted(labels))
            fail(f"--idle_rates names {key!r}, which is no row's label (labels: {known})")
    if absent:
        print(f"--idle_rates: no runs here for {', '.join(absent)}", file=sys.stderr)
    return rates


def check_reach(groups, reach) -> None:
    """An env of --reach without runs here is said on stderr (one list of targets serves
    tables whose runs are still going)."""
    absent = sorted(env for env in reach if env and env not in groups)
    if absent:
        envs = ", ".join(sorted(groups))
        print(f"--reach: no runs of {', '.join(absent)} here (envs: {envs})", file=sys.stderr)


def reach_cells(runs, target, rate):
    """The --reach columns of one library: mean env steps of the seeds that got there (and
    how many did), and those steps in minutes at `rate` env steps/s (or '-')."""
    reached = [n for n in (steps_to_reach(r, target) for r in runs) if n is not None]
    if not reached:
        return f"not reached (0/{len(runs)})", "-"
    mean = sum(reached) / len(reached)
    minutes = f"{mean / rate / 60:.1f}" if rate else "-"
    return f"{mean:,.0f} ({len(reached)}/{len(runs)})", minutes


def final_steps(runs) -> list:
    """The env steps of the seeds' final evaluations, each once, in order."""
    return sorted({int(r["steps"][-1]) for r in runs if len(r["steps"])})


def final_steps_note(runs) -> str:
    """' (at 800, 2,000 env steps)' where the seeds' final evaluations are at different env
    steps (a run stopped early, a curve file written before its run went on), else ''."""
    ends = final_steps(runs)
    return f" (at {', '.join(f'{e:,}' for e in ends)} env steps)" if len(ends) > 1 else ""


def draw_row(ax, env: str, lib: str, runs, color: str) -> None:
    """One row's curve as scripts/plot.py draws it: the mean ± std over its seeds where they
    evaluated the same env steps, else each seed's own evaluations (said on stderr)."""
    from tfsac.run.plotting import _draw_curves
    from tfsac.run.run_groups import RunGroup

    seeds = [dict(r, curves={"eval_return": (r["steps"], r["returns"])}) for r in runs]
    if not _draw_curves(ax, RunGroup(lib, seeds), "eval_return", color):
        ends = ", ".join(f"{e:,}" for e in final_steps(runs))
        print(
            f"{lib} on {env}: its seeds evaluated different env steps (ending at {ends}); "
            "one line each",
            file=sys.stderr,
        )


def write_report(groups, out_dir, reach=None, rates=None, at_steps=()):
    """results.md and one PNG per env; returns the table's lines. `reach`: {env or None
    (any env): the return whose env steps are tabulated}; `at_steps`: env steps whose
    returns are tabulated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    os.makedirs(out_dir, exist_ok=True)
    # With idle rates, beside each run's own rate (its wall time, on whatever machine load).
    rate_header = "env steps/s (runs / idle)" if rates else "env steps/s"
    lines = [
        f"| env | library | seeds | final return (mean ± std over seeds) | {rate_header} |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    if reach:
        lines[0] += " return reached | env steps to it | minutes to it at the idle rate |"
        lines[1] += " ---: | ---: | ---: |"
    for step in at_steps:
        lines[0] += f" return at {step:,} |"
        lines[1] += " ---: |"
    for env, libs in sorted(groups.items()):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for index, (lib, runs) in enumerate(sorted(libs.items())):
            finals = np.array([r["final"] for r in runs])
            seeds = ",".join(str(r["seed"]) for r in sorted(runs, key=lambda r: r["seed"]))
            rate = f"{np.mean([r['steps_per_s'] for r in runs]):.0f}"
            idle = (rates or {}).get((env, lib), (rates or {}).get((None, lib)))
            if rates:
                rate += f" / {idle:g}" if idle else " / -"
            final = f"{finals.mean():.0f} ± {finals.std():.0f}{final_steps_note(runs)}"
            lines.append(f"| {env} | {lib} | {seeds} | {final} | {rate} |")
            target = (reach or {}).get(env, (reach or {}).get(None))
            if reach and target is None:
                lines[-1] += " - | - | - |"
            elif reach:
                steps_cell, minutes = reach_cells(runs, target, idle)
                lines[-1] += f" {target:,.0f} | {steps_cell} | {minutes} |"
            lines[-1] += "".join(f" {at_step_cell(runs, step)} |" for step in at_steps)
            draw_row(ax, env, lib, runs, f"C{index % 10}")
        ax.set_title(f"{env}: deterministic evaluation return")
        ax.set_xlabel("env steps")
        ax.set_ylabel("return (mean ± std over seeds)")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, f"{env_file_stem(env)}.png"), dpi=100)
        plt.close(fig)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return lines


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    quiet_logs()  # TF-free: reading runs and drawing need no TensorFlow
    try:
        # Labels may hold '=' (algorithm_kwargs) and ':' (a module's algorithm), env ids ':'
        # too: the rate follows the last '=', the key is matched against the rows.
        raw_rates = {}
        for key, _, value in (pair.rpartition("=") for pair in FLAGS.idle_rates):
            raw_rates[key] = float(value)
        if not all(raw_rates):
            raise ValueError("no label")
    except ValueError:
        fail(f"--idle_rates takes [env:]label=env steps/s pairs, got {','.join(FLAGS.idle_rates)}")
    if any(not (math.isfinite(rate) and rate > 0) for rate in raw_rates.values()):
        fail(f"--idle_rates must be positive env steps/s, got {','.join(FLAGS.idle_rates)}")
    reach = parse_reach(FLAGS.reach)
    at_steps = parse_at_steps(FLAGS.at_steps)
    if not FLAGS.out_dir:  # no default: it replaces the results.md it finds there
        fail("--out_dir is required: the folder that results.md and the figures go to")
    try:  # before anything is read or written
        for folder in filter(None, (FLAGS.out_dir, FLAGS.curve_data)):
            check_writable(folder)
    except TfsacError as e:
        fail(str(e))
    groups = defaultdict(lambda: defaultdict(list))
    found = tfsac_runs(FLAGS.runs) if FLAGS.runs else []
    found += peer_runs(FLAGS.peer_results) + curve_runs(FLAGS.curves)
    for env, lib, run in found:
        groups[env][lib].append(run)
    for env, libs in groups.items():
        for lib, runs in libs.items():
            check_row(env, lib, runs)
    if not groups:
        fail(
            f"no finished runs match --runs={FLAGS.runs!r}, --peer_results="
            f"{FLAGS.peer_results!r} or --curves={FLAGS.curves!r}"
        )
    rates = matched_rates(groups, raw_rates)
    check_reach(groups, reach)
    if FLAGS.curve_data:
        write_curves(FLAGS.curve_data, found)
    print("\n".join(write_report(groups, FLAGS.out_dir, reach, rates, at_steps)))
    # What was written goes to stderr: stdout is the table alone.
    figures = ", ".join(f"{env_file_stem(env)}.png" for env in sorted(groups))
    print(f"wrote {os.path.join(FLAGS.out_dir, 'results.md')} and {figures} there", file=sys.stderr)
    if FLAGS.curve_data:
        print(f"wrote {len(found)} curve files in {FLAGS.curve_data}", file=sys.stderr)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags_or_fail)
