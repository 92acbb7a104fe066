"""The error type for user mistakes (bad config, unknown env, unwritable paths)."""


class TfsacError(Exception):
    """A user-facing error: scripts print its message as one line and exit non-zero."""

    # Raised while TF traces a function (a variant's check inside the update): AutoGraph
    # would re-raise it with its frames of "user code" prepended, not one line.
    ag_pass_through = True


def first_line(error: Exception) -> str:
    """The first line of an exception's message (TF's are many lines), or its type's name."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
