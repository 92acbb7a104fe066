"""Golden references: a deterministic run computes the numbers recorded for it, within
rounding, on any x86-64 CPU.

The references (tests/data/golden_references.json) come from the code of the commit that
recorded them; a change meant to keep the algorithm (a restructuring) must stay within
golden.TOLERANCE of them. A change meant to change numbers records them again, and says so
in its commit message:

    python tests/golden.py --record

(`python tests/golden.py` compares every configuration without writing anything and prints
each one's largest difference.)

How golden.TOLERANCE (1e-3 of each array's root mean square) was set, on an Intel Xeon with
AVX-512 and AMX: XLA compiled for SSE4.2 alone (XLA_FLAGS=--xla_cpu_max_isa=SSE4_2: 128-bit
vectors, no FMA) moves the configurations by at most 3e-5; XLA's 128-bit vectors alone
(--xla_cpu_prefer_vector_width=128) moved a 300-update run by 2e-6; AVX2 alone, one TF
thread or single-threaded Eigen gave AVX-512's bits. gamma
0.98 for 0.99 moves `defaults` by 0.12 (its critic's optimizer), a target entropy of -1.1 for
-1 by 0.12 (the temperature's optimizer). (jit_compile=False is no rounding check: its first
policy action already differs by 7e-2.)

Each configuration costs one XLA compilation of its update (about 15-25 s of CPU on 2
cores, whatever the number of steps), so the default suite checks `defaults` only;
`pytest -m golden` checks the others, and that a changed discount is caught.
"""

import golden
import pytest

RECORDED = golden.load()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=() if name == "defaults" else pytest.mark.golden)
        for name in golden.CONFIGS
    ],
)
def test_run_matches_its_reference(name):
    assert name in RECORDED, f"no reference of {name}: `python tests/golden.py --record`"
    beyond = golden.beyond_tolerance(RECORDED[name], golden.sketch(golden.CONFIGS[name]))
    assert not beyond, (
        f"{name} ({golden.CONFIGS[name]}) computes other numbers than recorded, beyond "
        f"{golden.TOLERANCE:g} of their size, in: {', '.join(beyond)} (another "
        "TensorFlow/XLA version than the recording's may also change them)"
    )


@pytest.mark.golden
def test_a_changed_discount_is_far_outside_the_tolerance():
    changed = golden.sketch({"gamma": 0.98})
    difference = max(golden.differences(RECORDED["defaults"], changed).values())
    assert difference > 10 * golden.TOLERANCE, difference
