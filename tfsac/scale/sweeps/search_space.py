"""What a sweep varies: --grid's values per training flag and --space's distributions
(ranges or choices), parsed and checked against the training flags' names. Needs neither
Ray nor TensorFlow (optuna only when a search samples)."""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Iterable, List

from tfsac.errors import TfsacError


def split_values(text: str) -> List[str]:
    """'a,b,c' -> ['a', 'b', 'c']; values that hold commas are separated by ';' instead
    (hidden_sizes=64,64;256,256)."""
    return [v.strip() for v in text.split(";" if ";" in text else ",")]


def parse_grid(entries: Iterable[str], configs) -> Dict[str, List[str]]:
    """--grid entries 'flag=v1,v2,...' -> {flag: [v1, v2, ...]}, in the order given; each
    name checked by `configs` (plan.ConfigSource)."""
    grid: Dict[str, List[str]] = {}
    for entry in entries:
        name, sep, text = entry.partition("=")
        name = name.strip()
        if not sep or not name:
            raise TfsacError(f"--grid={entry}: expected <training flag>=<value>,<value>,...")
        configs.check_name(name, "--grid")
        if name in grid:
            raise TfsacError(f"--grid: {name} is given twice")
        values = split_values(text)
        if not text.strip():
            raise TfsacError(f"--grid {name}: no values (e.g. --grid={name}=<value>,<value>)")
        if not all(values):
            raise TfsacError(f"--grid {name}: an empty value in {text!r}")
        if len(set(values)) < len(values):
            raise TfsacError(f"--grid {name}: a value is given twice in {text!r}")
        grid[name] = values
    return grid


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One searched flag: a range (uniform, loguniform, int, logint; bounds inclusive) or a
    choice between values."""

    name: str
    kind: str
    low: float = 0.0
    high: float = 0.0
    choices: tuple = ()

    KINDS = ("uniform", "loguniform", "int", "logint", "choice")

    def text(self, value) -> str:
        """The flag value for a sampled value (floats to 4 significant digits)."""
        if self.kind in ("uniform", "loguniform"):
            return f"{float(value):.4g}"
        if self.kind in ("int", "logint"):
            return str(int(value))
        return str(value)

    def probes(self) -> List[str]:
        """Values to check before a search: every choice, or the ends of the range and a
        point inside it (a fraction, for floats: an int flag refuses a float range)."""
        if self.kind == "choice":
            return list(self.choices)
        if self.kind.startswith("log"):
            inside = self.low * (self.high / self.low) ** 0.37
        else:
            inside = self.low + 0.37 * (self.high - self.low)
        return [self.text(self.low), self.text(inside), self.text(self.high)]

    def distribution(self):
        from optuna import distributions

        if self.kind == "choice":
            return distributions.CategoricalDistribution(list(self.choices))
        if self.kind in ("int", "logint"):
            return distributions.IntDistribution(
                int(self.low), int(self.high), log=self.kind == "logint"
            )
        return distributions.FloatDistribution(self.low, self.high, log=self.kind == "loguniform")


def parse_space(entries: Iterable[str], configs) -> Dict[str, Dimension]:
    """--space entries 'flag=kind:low:high' or 'flag=choice:v1,v2,...' -> Dimensions."""
    space: Dict[str, Dimension] = {}
    for entry in entries:
        name, sep, text = entry.partition("=")
        name = name.strip()
        kind, _, rest = text.partition(":")
        kind = kind.strip()
        if not sep or not name or not kind:
            raise TfsacError(
                f"--space={entry}: expected <training flag>=<{'|'.join(Dimension.KINDS[:4])}>"
                ":<low>:<high> or <training flag>=choice:<value>,<value>,..."
            )
        configs.check_name(name, "--space")
        if name in space:
            raise TfsacError(f"--space: {name} is given twice")
        if kind not in Dimension.KINDS:
            raise TfsacError(
                f"--space {name}: unknown distribution {kind!r} "
                f"(known: {', '.join(Dimension.KINDS)})"
            )
        if kind == "choice":
            choices = split_values(rest)
            if not all(choices) or len(set(choices)) < len(choices):
                raise TfsacError(f"--space {name}: choice needs distinct, non-empty values")
            space[name] = Dimension(name, kind, choices=tuple(choices))
            continue
        bounds = rest.split(":")
        try:
            low, high = (float(b) for b in bounds)
        except ValueError:
            raise TfsacError(
                f"--space {name}: {kind} needs <low>:<high> numbers, got {rest!r}"
            ) from None
        if not (math.isfinite(low) and math.isfinite(high)) or not low < high:
            raise TfsacError(f"--space {name}: need finite bounds with low < high, got {rest!r}")
        if kind.startswith("log") and low <= 0:
            raise TfsacError(f"--space {name}: {kind} needs a positive low bound, got {rest!r}")
        if kind in ("int", "logint") and not (low.is_integer() and high.is_integer()):
            raise TfsacError(f"--space {name}: {kind} needs integer bounds, got {rest!r}")
        space[name] = Dimension(name, kind, low, high)
    return space
