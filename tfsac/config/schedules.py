"""Learning-rate schedules over env steps: a factor that multiplies each base rate."""

from __future__ import annotations

import math
from typing import Callable

from tfsac.errors import TfsacError

Schedule = Callable[[int, int], float]  # (env step, total env steps) -> factor


def parse_schedule(spec: str) -> Schedule:
    """'constant'; 'linear' (1 down to 0 at the last step); 'linear:<end>[:<steps>]' and
    'cosine:<end>[:<steps>]' (1 down to <end>, straight or along half a cosine, over <steps>,
    default total_steps, then <end>); 'piecewise:<step>:<factor>,...' (the factor from each
    step on, 1 before the first)."""
    text = spec.strip().lower()
    if text == "constant":
        return lambda step, total: 1.0
    if text == "linear":
        return lambda step, total: max(0.0, 1.0 - step / total)
    if text.startswith(("linear:", "cosine:")):
        end, horizon = _end_points(text[7:])
        if 0 < end < math.inf and (horizon is None or horizon > 0):

            def decayed(step, total):
                progress = min(1.0, step / (horizon or total))
                if text.startswith("linear"):
                    return 1.0 - (1.0 - end) * progress
                return end + (1.0 - end) * 0.5 * (1.0 + math.cos(math.pi * progress))

            return decayed
    if text.startswith("piecewise:"):
        points = _piecewise_points(text)
        if points and all(0 < f < math.inf for _, f in points):

            def piecewise(step, total):
                factor = 1.0
                for boundary, value in points:
                    if step >= boundary:
                        factor = value
                return factor

            return piecewise
    raise TfsacError(
        f"lr_schedule must be 'constant', 'linear[:<factor>[:<steps>]]', "
        f"'cosine:<factor>[:<steps>]' or "
        f"'piecewise:<step>:<factor>,...' with positive finite factors, got {spec!r}"
    )


def duplicate_steps(spec: str) -> list:
    """The steps a piecewise schedule gives more than one factor from (a new run refuses them)."""
    steps = schedule_steps(spec)
    return sorted({s for s in steps if steps.count(s) > 1})


def schedule_steps(spec: str) -> list:
    """The steps a piecewise schedule changes its factor at, sorted; [] for other schedules."""
    text = spec.strip().lower()
    return [step for step, _ in _piecewise_points(text)] if text.startswith("piecewise:") else []


def _piecewise_points(text: str) -> list:
    """(step, factor) pairs of 'piecewise:<step>:<factor>,...', sorted; [] where unparsed."""
    try:
        return sorted((int(s), float(f)) for s, f in (p.split(":") for p in text[10:].split(",")))
    except ValueError:
        return []


def _end_points(text: str) -> tuple:
    """(end factor, steps or None) of '<end>[:<steps>]'; (0, None) where unparsed."""
    parts = text.split(":")
    try:
        if len(parts) == 1:
            return float(parts[0]), None
        if len(parts) == 2:
            return float(parts[0]), int(parts[1])
    except ValueError:
        pass
    return 0.0, None
