"""FetchReach-v4 success rates of tfsac runs and SB3 runs side by side: a Markdown table
(2,000, 5,000 and 10,000 env steps) and a figure, one line per seed.

    python docs/benchmarks/her/compare.py --tfsac runs/fetchreach-her-s* --sb3 sb3-s*.json \
        --out docs/benchmarks/her/fetchreach_v4.png

`--tfsac`: run directories (their summary.json); `--sb3`: the JSON line that
../shared/peers/learn.py --her --eval-every printed (its `success_curve`)."""

import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def tfsac_curve(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    return summary["seed"], {e["step"]: e["success_rate"] for e in summary["evaluations"]}


def sb3_curve(path):
    with open(path) as f:
        line = json.loads(f.read().strip().splitlines()[-1])
    return line["seed"], {int(n): float(r) for n, r in line["success_curve"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tfsac", nargs="*", default=[])
    parser.add_argument("--sb3", nargs="*", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    curves = {"tfsac": dict(map(tfsac_curve, args.tfsac)), "SB3": dict(map(sb3_curve, args.sb3))}
    print("| seed | library | 2,000 | 5,000 | 10,000 | first evaluation at >= 0.9 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for seed in sorted(set(curves["tfsac"]) | set(curves["SB3"])):
        for lib, runs in curves.items():
            if seed in runs:
                c = runs[seed]
                # SB3 reports float32 rates (9 of 10 is 0.8999999761581421).
                first = next((n for n in sorted(c) if round(c[n], 2) >= 0.9), "-")
                cells = " | ".join(f"{c.get(n, float('nan')):.1f}" for n in (2000, 5000, 10000))
                print(f"| {seed} | {lib} | {cells} | {first} |")
    fig, ax = plt.subplots(figsize=(7, 4))
    for (lib, runs), style in zip(curves.items(), ("o-", "s--"), strict=True):
        for i, (_seed, c) in enumerate(sorted(runs.items())):
            steps = sorted(c)
            color = "C0" if lib == "tfsac" else "C1"
            label = f"{lib} (seeds {', '.join(map(str, sorted(runs)))})" if i == 0 else None
            ax.plot(steps, [c[n] for n in steps], style, color=color, alpha=0.7, label=label)
    ax.set_xlabel("env steps")
    ax.set_ylabel("evaluation success rate (10 episodes)")
    ax.set_title("FetchReach-v4, SAC + HER (future, 4 goals), one line per seed")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)


if __name__ == "__main__":
    main()
