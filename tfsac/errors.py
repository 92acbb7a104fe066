"""tfsac's errors: refusals of what a user asked, and faults met while running."""


class TfsacError(Exception):
    """A user-facing error, printed as one line with a non-zero exit. Raised as such, it is
    a refusal of what a user asked, by the checking layer only; code below it raises `Fault`."""

    # Raised while TF traces: AutoGraph would prepend its frames of "user code" to it.
    ag_pass_through = True


class Fault(TfsacError):
    """What running met that no check at the start could have seen (a failed read or write,
    a non-finite value, a lost Ray node); one line too, and a non-zero exit."""


def first_line(error: Exception) -> str:
    """The first line of an exception's message (TF's are many lines), or its type's name."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
