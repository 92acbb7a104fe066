"""Golden fingerprints: a deterministic run computes exactly the numbers recorded for it.

The recorded digests (tests/data/golden_fingerprints.json, written by
`python tests/golden.py --record`) come from the code of the commit that added them; a
change meant to keep every number (a restructuring) must keep them. A change meant to
change numbers re-records them, and says so in its commit message.

Each configuration costs one XLA compilation of its update (about 15-25 s of CPU on 2
cores, whatever the number of steps), so the default suite checks `defaults` only;
`pytest -m golden` checks the five others, and `python tests/golden.py` all six in one
process.
"""

import golden
import pytest

RECORDED = golden.load().get(golden.cpu_class())


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=() if name == "defaults" else pytest.mark.golden)
        for name in golden.CONFIGS
    ],
)
def test_run_matches_recorded_fingerprint(name):
    if RECORDED is None:
        pytest.skip(
            f"no golden fingerprints recorded for CPU class {golden.cpu_class()!r} (XLA:CPU "
            f"results depend on it); record them with `python tests/golden.py --record`"
        )
    expected = RECORDED.get(name)
    if expected is None:  # a configuration added since this CPU class was recorded
        pytest.skip(
            f"no fingerprint of {name} for CPU class {golden.cpu_class()!r}: "
            "record them with `python tests/golden.py --record`"
        )
    actual = golden.fingerprint(golden.CONFIGS[name])
    differing = golden.differing_groups(expected, actual)
    assert not differing, (
        f"{name} ({golden.CONFIGS[name]}) computes other numbers than recorded in: "
        f"{', '.join(differing)} (another TensorFlow/XLA version than the recording's "
        f"also changes them)"
    )
