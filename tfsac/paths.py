"""The rule for a name that becomes a folder inside one the user chose: one plain component."""

from __future__ import annotations

import ntpath
import unicodedata
from typing import Optional

PLAIN_NAME = (
    "a folder name: one plain path component (no path separators or drive, not '.' or '..', "
    "not hidden, not empty, no control characters or line breaks, no spaces at either end)"
)


def name_problem(name) -> Optional[str]:
    """Why `name` is not one plain path component, or None where it is."""
    if not isinstance(name, str):
        return f"it is a {type(name).__name__}, not a string"
    if not name:
        return "it is empty"
    if name.startswith("."):  # '.', '..' and hidden names ('.export-*' temp folders)
        return "it starts with '.' (hidden, '.' or '..')"
    if any(sep in name for sep in ("/", "\\", "\0")):
        return "it holds a path separator"
    if ntpath.splitdrive(name)[0]:  # 'C:x' is relative to a drive's current folder
        return "it names a drive"
    # Line breaks split the lines that name the folder; shells trim spaces at its ends.
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in name):
        return "it holds a control character or a line break"
    if name != name.strip():
        return "it starts or ends with a space"
    return None


def is_plain_name(name) -> bool:
    return name_problem(name) is None
