"""The algorithm variants, one module each, and the registry `--algorithm` selects from
(see base.py for what a variant declares; docs/architecture.md, "Adding an algorithm")."""

from tfsac.algorithm.variants import crossq, sac, sac_v1, tqc  # noqa: F401 - registers them
from tfsac.algorithm.variants.base import VARIANTS, Variant, lazy_module, register, variant_of

__all__ = ["VARIANTS", "Variant", "lazy_module", "register", "variant_of"]
