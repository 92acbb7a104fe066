"""Golden references: a deterministic run computes the numbers recorded for it, within
rounding, on any x86-64 CPU.

The references (tests/data/golden_references.json) come from the code of the commit that
recorded them; a change meant to keep the algorithm (a restructuring) must stay within
golden.TOLERANCE of them. A change meant to change numbers records them again, and says so
in its commit message:

    python tests/golden.py --record

(`python tests/golden.py` compares every configuration without writing anything and prints
each one's largest difference.)

How golden.TOLERANCE (5e-3 of each array's root mean square, or of golden.GROUP_FLOOR of its
group's largest array's: XQC's biases before batch norm carry no signal and sit at rounding noise,
about 1e-5, where an AMD EPYC moved them 4x from the Intel recording) was set: an AMD EPYC with
AVX-512 moved SimBa's actor optimizer by 1.4e-3 from the Intel recording. On an Intel Xeon with
AVX-512 and AMX: XLA and oneDNN limited to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 XLA_FLAGS=
"--xla_cpu_max_isa=AVX2 --xla_cpu_prefer_vector_width=256") gave AVX-512's bits for
`defaults` and moved SimBa by 2e-6; one TF thread or single-threaded Eigen gave the same
bits. XLA without AVX and FMA (--xla_cpu_max_isa=SSE4_2) moves eight configurations by at
most 3e-5 but SimBa by 9e-3: the tolerance is for CPUs with AVX2 and FMA, every x86-64 CI
class. gamma 0.98 for 0.99 moves `defaults` by 0.12 (its critic's optimizer), a target
entropy of -1.1 for -1 by 0.12 (the temperature's optimizer). (jit_compile=False is no
rounding check: its first policy action already differs by 7e-2.)

Each configuration costs one XLA compilation of its update (about 15-25 s of CPU on 2
cores, whatever the number of steps), so the default suite checks `defaults` only;
`pytest -m golden` checks the others, and that a changed discount is caught.
"""

import math

import golden
import numpy as np
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


def test_the_comparison_allows_rounding_and_refuses_a_change():
    x = np.random.default_rng(0).normal(size=(64, 32))
    recorded = {"actor": [golden._sketch(x)], "evaluations": [golden._sketch([[-1500.0, 0.2]])]}

    def beyond(actor, evaluation):
        run = {"actor": [golden._sketch(actor)], "evaluations": [golden._sketch([evaluation])]}
        return [text.split(" ")[0] for text in golden.beyond_tolerance(recorded, run)]

    rounded = x * (1 + 1e-6 * np.random.default_rng(1).normal(size=x.shape))
    assert beyond(rounded, [-1500.001, 0.2001]) == []
    one_weight = x.copy()
    one_weight[3, 5] += 1.0  # one of 2048 weights moved by its own size
    assert beyond(one_weight, [-1500.0, 0.2]) == ["actor"]
    assert beyond(x, [-1510.0, 0.2]) == ["evaluations"]
    # A bias at rounding noise beside the weights: its noise is no change, a real move is.
    bias = np.full(32, 1e-6)
    recorded["actor"].append(golden._sketch(bias))
    with_bias = {"actor": [golden._sketch(x), golden._sketch(bias * 3)]}
    assert golden.differences(recorded, with_bias)["actor"] <= golden.TOLERANCE
    with_bias["actor"][1] = golden._sketch(bias + 0.05)
    assert golden.differences(recorded, with_bias)["actor"] > golden.TOLERANCE
    assert golden.differences(recorded, {"actor": []}) == {
        "actor": math.inf,
        "evaluations": math.inf,
    }
