"""What a search samples: a --space dimension (a range or a choice), its flag values and its
Optuna distribution."""

from __future__ import annotations

import dataclasses
from typing import List


def split_values(text: str) -> List[str]:
    """'a,b,c' -> ['a', 'b', 'c']; values that hold commas are separated by ';' instead
    (hidden_sizes=64,64;256,256)."""
    return [v.strip() for v in text.split(";" if ";" in text else ",")]


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
        """Values to check before a search: every choice, or the range's ends and a point
        inside (a fraction, so an int flag refuses a float range)."""
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
