"""Learning curves by configuration: runs grouped by the config fields that differ, labels
made of those fields or given, one-point curves drawn as markers, a sweep's comparison
figure. Run directories are written by hand here (no training): fast. scripts/plot.py's
--labels: tests/test_bad_inputs.py."""

import json
import os

import matplotlib
import matplotlib.axes  # patched by the tests that spy on what is drawn
import pytest

from tfsac import SACConfig, TfsacError
from tfsac.algorithm.resolve import resolve
from tfsac.run import plotting
from tfsac.run.run_groups import differing_fields, group_runs

matplotlib.use("Agg")


def _run_dir(root, name, evaluations=((100, -900.0), (200, -500.0)), **overrides):
    """A run directory as training leaves it: config.json (resolved), progress.csv and
    summary.json with `evaluations` [(step, return)]."""
    folder = root / name
    folder.mkdir()
    # A user module's algorithm would read algorithm_kwargs: SAC's resolve refuses them.
    kwargs = overrides.pop("algorithm_kwargs", {})
    config = resolve(SACConfig(run_dir=str(folder), **overrides)).to_dict()
    config["algorithm_kwargs"] = kwargs
    (folder / "config.json").write_text(json.dumps(config))
    rows = ["step,episodes,episode_return,critic_loss"]
    rows += [f"{s},{s // 200},{r},{1.0 / s}" for s, r in evaluations]
    (folder / "progress.csv").write_text("\n".join(rows) + "\n")
    summary = {
        "total_steps": config["total_steps"],
        "wall_time_s": 10.0,
        "evaluations": [{"step": s, "return_mean": r} for s, r in evaluations],
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return str(folder)


def _labels(groups):
    return [(g.label, len(g.runs)) for g in groups]


def test_runs_are_grouped_by_every_differing_field_and_labelled_by_the_fewest(tmp_path):
    """The issue's cases: a sweep of two learning rates over two seeds is two groups, not
    one; SAC, SimBa and an env runner run are three, each labelled by what sets it apart."""
    sweep = [
        _run_dir(tmp_path, f"lr{lr}-s{seed}", seed=seed, learning_rate=lr)
        for lr in (1e-3, 3e-4)
        for seed in (0, 1)
    ]
    runs = [plotting.read_run(d) for d in sweep]
    assert differing_fields([r["config"] for r in runs]) == ["learning_rate"]
    assert _labels(group_runs(runs)) == [("learning_rate=0.001", 2), ("learning_rate=0.0003", 2)]
    kinds = [
        _run_dir(tmp_path, "sac"),
        # SimBa as config.json holds it: 'auto' options resolved (weight_decay,
        # normalize_observations), which follow from network=simba.
        _run_dir(
            tmp_path, "simba", network="simba", weight_decay=1e-4, normalize_observations=True
        ),
        _run_dir(tmp_path, "runners", num_actors=2),
    ]
    runs = [plotting.read_run(d) for d in kinds]
    fields = differing_fields([r["config"] for r in runs])
    assert fields == ["num_actors", "weight_decay", "network", "normalize_observations"]
    assert _labels(group_runs(runs)) == [
        ("num_actors=0, weight_decay=0", 1),
        ("num_actors=0, weight_decay=0.0001", 1),
        ("num_actors=2, weight_decay=0", 1),
    ]
    # Keyword-argument options are told apart by the keys that differ (a tester's: the
    # whole resolved object made a legend wider than the figure).
    kwargs = [
        _run_dir(tmp_path, f"w{w}", algorithm_kwargs={"min_weight": w, "n": 3}, env_kwargs={"g": 9})
        for w in (0.0, 0.5)
    ]
    runs = [plotting.read_run(d) for d in kwargs]
    assert differing_fields([r["config"] for r in runs]) == ["algorithm_kwargs.min_weight"]
    assert _labels(group_runs(runs)) == [("min_weight=0", 1), ("min_weight=0.5", 1)]
    # Same config, other seeds, run directories and outputs: one group, named by its env.
    same = [_run_dir(tmp_path, f"s{seed}", seed=seed, log_every=7 + seed) for seed in (0, 1)]
    groups = group_runs([plotting.read_run(d) for d in same])
    assert (
        _labels(groups) == [("Pendulum-v1", 2)]
        and groups[0].legend(groups[0].runs) == "Pendulum-v1 (2 seeds)"
    )
    # A config.json of an older tfsac, without a newer field, is that field's default.
    older = json.loads(open(os.path.join(same[1], "config.json")).read())
    del older["keep_best"], older["learning_rate"]
    assert differing_fields([plotting.read_run(same[0])["config"], older]) == []


def test_user_labels_name_groups_or_runs(tmp_path):
    runs = [
        plotting.read_run(_run_dir(tmp_path, f"r{i}", seed=i % 2, batch_size=64 * (1 + i // 2)))
        for i in range(4)
    ]
    assert _labels(group_runs(runs, ["small", "large"])) == [("small", 2), ("large", 2)]
    # One per run: the same label is one group (here all four runs).
    assert _labels(group_runs(runs, ["all"] * 4)) == [("all", 4)]
    with pytest.raises(TfsacError, match=r"labels: 3 given for 4 runs in 2 groups \(batch_size"):
        group_runs(runs, ["a", "b", "c"])
    with pytest.raises(TfsacError, match="an empty label"):
        group_runs(runs, ["a", ""])
    with pytest.raises(TfsacError, match=r"'a' given to more than one of the 2 groups"):
        group_runs(runs, ["a", "a"])  # one per group: two curves of one name


def test_the_figure_draws_a_one_point_run_as_a_marker(tmp_path, monkeypatch):
    drawn = {}
    real = plotting._draw_curves

    def spy(ax, group, name, color, x="env_steps"):
        result = real(ax, group, name, color, x)
        if name == "eval_return":
            drawn[group.label] = [(line.get_marker(), len(line.get_xdata())) for line in ax.lines]
        return result

    monkeypatch.setattr(plotting, "_draw_curves", spy)
    dirs = [
        _run_dir(tmp_path, "long", learning_rate=1e-3),
        _run_dir(tmp_path, "one", evaluations=[(200, -300.0)], learning_rate=3e-4),
    ]
    out = plotting.plot_runs(dirs, str(tmp_path / "curves.png"))
    assert os.path.getsize(out) > 20_000
    assert drawn["learning_rate=0.001"] == [("None", 2)]
    assert ("o", 1) in drawn["learning_rate=0.0003"]  # the one-point run: a marker


def test_runs_with_nothing_logged_yet_are_refused_and_no_figure_is_written(tmp_path):
    """A run that just started (config.json only, or an empty progress.csv) has nothing to
    draw: one clear error, not a figure of empty panels."""
    started = _run_dir(tmp_path, "started", evaluations=())
    os.remove(os.path.join(started, "summary.json"))
    empty = "nothing to plot yet: no progress rows and no evaluations in '.*started'"
    with pytest.raises(TfsacError, match=empty):
        plotting.plot_runs([started], str(tmp_path / "curves.png"))
    assert not os.path.exists(tmp_path / "curves.png")
    # Beside a run with curves, it is drawn with what there is.
    out = plotting.plot_runs([started, _run_dir(tmp_path, "r")], str(tmp_path / "two.png"))
    assert os.path.getsize(out) > 20_000


def test_sweep_results_by_final_return_with_a_comparison_figure(tmp_path):
    from tfsac.scale.sweeps.results import write_results

    trials = {}
    for tag, rate, finals in (("a", 1e-3, (-400.0, -600.0)), ("b", 3e-4, (-200.0, -300.0))):
        (tmp_path / tag).mkdir()
        for seed, final in enumerate(finals):
            run_dir = _run_dir(
                tmp_path / tag,
                f"seed{seed}",
                evaluations=[(100, -900.0), (200, final)],
                seed=seed,
                learning_rate=rate,
            )
            spec = {"tag": tag, "overrides": {"learning_rate": rate}, "seed": seed}
            trials[f"{tag}/seed{seed}"] = {
                "spec": {**spec, "run_dir": run_dir},
                "status": "finished",
            }
    trials["c/seed0"] = {  # not started: no return, last
        "spec": {"tag": "c", "overrides": {"gamma": 0.9}, "seed": 0, "run_dir": "c/seed0"},
        "status": "pending",
    }
    files = write_results(str(tmp_path), trials)
    assert str(tmp_path / "comparison.png") in files
    assert os.path.getsize(tmp_path / "comparison.png") > 20_000
    lines = (tmp_path / "results.md").read_text().splitlines()
    assert lines[0] == "All configs' curves: [comparison.png](comparison.png)"
    table = [line.split(" | ")[0] for line in lines[4:]]
    assert table == ["| --learning_rate=0.0003", "| --learning_rate=0.001", "| --gamma=0.9"]


def test_wall_clock_and_success_rate_axes(tmp_path, monkeypatch):
    """--x=wall_clock draws each group's mean return at its seeds' mean minutes (from the
    evaluations' wall_time_s); runs without those times are left out with a note; --y picks
    one evaluation curve."""
    dirs = [_run_dir(tmp_path, f"s{seed}", seed=seed) for seed in (0, 1)]
    for seed, folder in enumerate(dirs):  # seed 0 at 60 s and 120 s, seed 1 at 180 s and 240 s
        path = os.path.join(folder, "summary.json")
        summary = json.loads(open(path).read())
        for index, e in enumerate(summary["evaluations"]):
            e["wall_time_s"] = 60.0 * (2 * seed + index + 1)
            e["success_rate"] = 0.5 * index
        open(path, "w").write(json.dumps(summary))
    older = _run_dir(tmp_path, "older", learning_rate=1e-3)  # no wall_time_s
    drawn = {}
    real = plotting._draw_curves

    def spy(ax, group, name, color, x="env_steps"):
        result = real(ax, group, name, color, x)
        drawn[(ax.get_xlabel() or x, name)] = [list(line.get_xdata()) for line in ax.lines]
        return result

    monkeypatch.setattr(plotting, "_draw_curves", spy)
    notes = []
    plotting.plot_runs([*dirs, older], str(tmp_path / "time.png"), notes=notes, x="wall_clock")
    assert drawn[("wall_clock", "eval_return")] == [[2.0, 3.0]]  # minutes: (1+3)/2, (2+4)/2
    assert ("wall_clock", "critic_loss") not in drawn  # progress rows record no time
    assert len(notes) == 1 and "older" in notes[0] and "no wall-clock time" in notes[0]
    drawn.clear()
    out = plotting.plot_runs(dirs, str(tmp_path / "rate.png"), y="success_rate")
    assert os.path.getsize(out) > 10_000
    assert list(drawn) == [("env_steps", "eval_success_rate")]
    with pytest.raises(TfsacError, match="no run's evaluations record their wall-clock"):
        plotting.plot_runs([older], str(tmp_path / "x.png"), x="wall_clock")
    with pytest.raises(TfsacError, match="none of the runs has evaluations with a success"):
        plotting.plot_runs([older], str(tmp_path / "x.png"), y="success_rate")


def test_a_run_in_progress_and_damaged_files(tmp_path):
    """Before summary.json, the evaluations are the newest checkpoint's; a progress row cut
    off mid-line is left out (not read as a short number); damaged files are one line."""
    running = _run_dir(tmp_path, "running", evaluations=((100, -900.0), (200, -500.0)))
    summary = json.loads((tmp_path / "running" / "summary.json").read_text())
    os.remove(os.path.join(running, "summary.json"))
    for step, evaluations in ((100, summary["evaluations"][:1]), (200, summary["evaluations"])):
        extra = tmp_path / "running" / "checkpoints" / f"ckpt-{step}.extra"
        extra.mkdir(parents=True)
        (extra / "state.json").write_text(json.dumps({"evaluations": evaluations}))
        (extra.parent / f"ckpt-{step}.index").write_bytes(b"")
    with open(os.path.join(running, "progress.csv"), "a") as f:
        f.write("300,1,-400.0,0.")  # being written: the loss would read as 0.0
    run = plotting.read_run(running)
    assert run["curves"]["eval_return"][1].tolist() == [-900.0, -500.0]
    assert run["curves"]["critic_loss"][0].tolist() == [100, 200]
    # On the wall-clock axis a run without evaluations is left out, and alone refused.
    bare = _run_dir(tmp_path, "bare")
    (tmp_path / "bare" / "summary.json").write_text(json.dumps({"evaluations": []}))
    with pytest.raises(TfsacError, match="no run's evaluations record their wall-clock time"):
        plotting.plot_runs([bare], str(tmp_path / "w.png"), x="wall_clock")
    for damage, message in (
        ({"evaluations": None}, "its evaluations are not a list of them"),
        ({"evaluations": ["x"]}, "its evaluations are not a list of them"),
        ({"evaluations": [{"step": 1, "return_mean": "x"}]}, "an evaluation that is not numbers"),
    ):
        (tmp_path / "bare" / "summary.json").write_text(json.dumps(damage))
        with pytest.raises(TfsacError, match=message):
            plotting.read_run(bare)
    with open(os.path.join(bare, "progress.csv"), "a") as f:
        f.write("abc,1,2,3\n")
    with pytest.raises(TfsacError, match="progress.csv.*invalid literal for int"):
        plotting.read_run(bare)
    with pytest.raises(TfsacError, match="is a folder: name the image, e.g. .*curves.png"):
        plotting.plot_runs([running], str(tmp_path))
    # A run without progress rows beside one with: drawn, and said (a tester's).
    rowless = _run_dir(tmp_path, "rowless", evaluations=((100, -700.0),))
    os.remove(os.path.join(rowless, "progress.csv"))
    notes = []
    plotting.plot_runs([running, rowless], str(tmp_path / "rows.png"), notes=notes)
    assert f"{rowless}: no progress rows (progress.csv missing, empty or unread)" in notes
    with pytest.raises(TfsacError, match="run directories .* are one folder"):
        plotting.plot_runs([running, running + "/"], str(tmp_path / "twice.png"))
    notes = []  # a copy of a run is no second seed: said
    copy = _run_dir(tmp_path, "copy")
    plotting.plot_runs([running, copy], str(tmp_path / "twice.png"), notes=notes)
    assert notes == [
        "Pendulum-v1: seed 0 is in 2 of its runs",
        f"{running}: unfinished (no summary.json), drawn as it stands",
    ]


def test_runs_of_several_envs_are_rows_of_their_own_and_lines_of_one_group_differ(
    tmp_path, monkeypatch
):
    """Returns of other envs never share axes or labels; a group whose runs end at other
    steps draws one line per run, each styled apart, a running one said in its label."""
    runs = [
        _run_dir(tmp_path, "p0", seed=0),
        _run_dir(tmp_path, "p1", seed=1, evaluations=((100, -800.0),)),
        _run_dir(tmp_path, "m0", seed=0, env_id="MountainCarContinuous-v0"),
        _run_dir(tmp_path, "m1", seed=0, env_id="MountainCarContinuous-v0", learning_rate=1e-3),
    ]
    os.remove(os.path.join(runs[1], "summary.json"))  # in progress: its checkpoint's
    extra = tmp_path / "p1" / "checkpoints" / "ckpt-100.extra"
    extra.mkdir(parents=True)
    (extra / "state.json").write_text(
        json.dumps({"evaluations": [{"step": 100, "return_mean": -800.0}]})
    )
    (extra.parent / "ckpt-100.index").write_bytes(b"")
    lines = []
    real_plot = matplotlib.axes.Axes.plot

    def spy(ax, *args, **kwargs):
        lines.append((ax.get_title(), kwargs.get("label"), kwargs.get("linestyle")))
        return real_plot(ax, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    notes = []
    plotting.plot_runs(runs, str(tmp_path / "envs.png"), notes=notes, y="return")
    assert (tmp_path / "envs.png").stat().st_size > 0
    labels = [label for _, label, _ in lines]
    # Pendulum: one group (seeds 0, 1) of unlike runs; MountainCar: by learning rate alone.
    assert labels[:2] == ["Pendulum-v1 seed 0", "Pendulum-v1 seed 1 (unfinished)"]
    assert [style for _, _, style in lines[:2]] == ["-", "--"]
    assert labels[2:] == ["learning_rate=0.0003 (1 seed)", "learning_rate=0.001 (1 seed)"]
    assert notes[0] == f"{runs[1]}: unfinished (no summary.json), drawn as it stands"
    assert "Pendulum-v1: the runs cover different env steps" in notes[1]
    with pytest.raises(TfsacError, match="runs of 2 envs .* take one label per run"):
        plotting.plot_runs(runs, str(tmp_path / "envs.png"), labels=["a", "b", "c"])
    notes = []  # one label on runs of two settings: drawn as asked, and said
    plotting.plot_runs(runs[2:], str(tmp_path / "one.png"), labels=["x", "x"], notes=notes)
    assert notes == ["x: seed 0 is in 2 of its runs", "x: its runs differ in learning_rate"]


def test_a_v1_runs_value_loss_gets_a_panel_of_its_own(tmp_path):
    """A tester's: sac_v1's value_loss was in progress.csv but on no panel."""
    v1 = _run_dir(tmp_path, "v1", algorithm="sac_v1")
    rows = (tmp_path / "v1" / "progress.csv").read_text().splitlines()
    rows = [rows[0] + ",value_loss"] + [row + ",0.5" for row in rows[1:]]
    (tmp_path / "v1" / "progress.csv").write_text("\n".join(rows) + "\n")
    run = plotting.read_run(v1)
    assert run["curves"]["value_loss"][1].tolist() == [0.5, 0.5]
    titles = [title for _, title in plotting._panels([run], "env_steps", "all")]
    assert "value loss (V of sac_v1)" in titles
    sac = plotting.read_run(_run_dir(tmp_path, "sac"))
    assert "value loss (V of sac_v1)" not in [
        t for _, t in plotting._panels([sac], "env_steps", "all")
    ]
    plotting.plot_runs([v1], str(tmp_path / "v1.png"))


def _unfinish(run_dir, evaluations):
    """Takes a run's summary.json away, its checkpoint keeping `evaluations`."""
    os.remove(os.path.join(run_dir, "summary.json"))
    extra = os.path.join(run_dir, "checkpoints", "ckpt-200.extra")
    os.makedirs(extra)
    with open(os.path.join(extra, "state.json"), "w") as f:
        json.dump({"evaluations": [{"step": s, "return_mean": r} for s, r in evaluations]}, f)
    open(os.path.join(run_dir, "checkpoints", "ckpt-200.index"), "wb").close()


def test_a_mean_over_unfinished_runs_says_so(tmp_path, monkeypatch):
    """A tester's: two runs killed at the same checkpoint were averaged as 'Pendulum-v1
    (2 seeds)', nothing said; a mean's legend counts its unfinished seeds, and each is a note."""
    runs = [_run_dir(tmp_path, f"s{seed}", seed=seed) for seed in (0, 1, 2)]
    _unfinish(runs[1], ((100, -900.0), (200, -500.0)))
    _unfinish(runs[2], ())  # no evaluations yet: not in the mean, not counted (a reviewer's)
    labels = []
    real_plot = matplotlib.axes.Axes.plot

    def spy(ax, *args, **kwargs):
        labels.append(kwargs.get("label"))
        return real_plot(ax, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    notes = []
    plotting.plot_runs(runs, str(tmp_path / "mean.png"), notes=notes, y="return")
    assert labels == ["Pendulum-v1 (2 seeds, 1 unfinished)"]
    # Not the run without evaluations: it is in no panel of this figure (a reviewer's).
    assert notes == [f"{runs[1]}: unfinished (no summary.json), drawn as it stands"]


def test_a_table_beside_the_figure_says_every_setting_that_differs(tmp_path, monkeypatch):
    """Labels name the fewest fields (here total_steps alone); the table beneath the
    panels gives all five, a column per group headed by its label."""
    differ = [
        dict(total_steps=20000, learning_rate=1e-3, batch_size=64, gamma=0.9, tau=0.01),
        dict(total_steps=4000, learning_rate=3e-4, batch_size=256, gamma=0.99, tau=0.005),
    ]
    dirs = [_run_dir(tmp_path, f"r{i}", **options) for i, options in enumerate(differ)]
    tables = []
    real_table = matplotlib.axes.Axes.table

    def spy(ax, cellText, rowLabels, colLabels, **kwargs):
        tables.append((rowLabels, colLabels, cellText))
        return real_table(ax, cellText, rowLabels=rowLabels, colLabels=colLabels, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "table", spy)
    plotting.plot_runs(dirs, str(tmp_path / "five.png"), y="return")
    ((names, heads, cells),) = tables
    assert heads == ["total_steps=20000", "total_steps=4000"]
    assert names == ["total_steps", "batch_size", "learning_rate", "gamma", "tau"]
    values = [("20000", "4000"), ("64", "256"), ("0.001", "0.0003"), ("0.9", "0.99")]
    assert cells == [list(v) for v in [*values, ("0.01", "0.005")]]
    # Labels of the user's name none of the settings: the table gives them.
    tables.clear()
    plotting.plot_runs(dirs, str(tmp_path / "named.png"), labels=["long", "short"], y="return")
    assert tables[0][1] == ["long", "short"] and len(tables[0][0]) == 5
    # Labels that say every setting already: no table.
    tables.clear()
    rates = [_run_dir(tmp_path, f"lr{rate}", learning_rate=rate) for rate in (1e-3, 3e-4)]
    plotting.plot_runs(rates, str(tmp_path / "lr.png"))
    assert tables == []


def test_an_env_without_success_rates_draws_no_success_rate_panel(tmp_path, monkeypatch):
    goal = _run_dir(tmp_path, "goal", env_id="FetchReach-v4")
    path = os.path.join(goal, "summary.json")
    summary = json.loads(open(path).read())
    for e in summary["evaluations"]:
        e["success_rate"] = 0.5
    open(path, "w").write(json.dumps(summary))
    drawn = {}
    real = plotting._draw_panels

    def spy(cells, panels, groups, x, notes, env):
        drawn[env] = [name for name, _ in panels]
        visible = [ax for ax in cells if ax.get_visible()]
        result = real(cells, panels, groups, x, notes, env)
        drawn[env, "hidden"] = sum(not ax.get_visible() for ax in visible)
        return result

    monkeypatch.setattr(plotting, "_draw_panels", spy)
    plotting.plot_runs([_run_dir(tmp_path, "plain"), goal], str(tmp_path / "envs.png"))
    assert "eval_success_rate" in drawn["FetchReach-v4"]
    assert "eval_success_rate" not in drawn["Pendulum-v1"]
    assert drawn["Pendulum-v1", "hidden"] == 1  # its row's cell beneath FetchReach's panel
