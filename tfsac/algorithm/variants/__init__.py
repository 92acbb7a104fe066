"""The algorithm variants, one module each, and the registry `--algorithm` selects from
(see base.py for what a variant declares; docs/guide/adding-an-algorithm.md, "Adding an algorithm").
Every module of this package is imported here, so a built-in variant is its file alone."""

import importlib
import pkgutil

from tfsac.algorithm.variants.base import (
    VARIANTS,
    Variant,
    lazy_module,
    register,
    variant_named,
    variant_of,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")  # each registers its variant

__all__ = ["VARIANTS", "Variant", "lazy_module", "register", "variant_named", "variant_of"]
