"""Learning checks (minutes each): `pytest -m learning`."""

import pytest

from tfsac import SACConfig, train


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pendulum_default_flags_reach_minus_200(tmp_path, seed):
    config = SACConfig(
        env_id="Pendulum-v1",
        seed=seed,
        total_steps=20_000,
        run_dir=str(tmp_path / "run"),
        export_dir=str(tmp_path / "export"),
    )
    result = train(config)
    print(
        f"seed {seed}: eval return {result.summary['eval_return_mean']:.1f} "
        f"+- {result.summary['eval_return_std']:.1f}, "
        f"{result.summary['env_steps_per_s']:.0f} env steps/s"
    )
    assert result.summary["eval_episodes"] == 10
    assert result.summary["eval_return_mean"] >= -200
