"""Learning checks (minutes each): `pytest -m learning`."""

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO_ROOT, docs_example

from tfsac import SACConfig, train


def _pendulum(tmp_path, seed=0, **options):
    """The learning checks' run: Pendulum-v1, 20,000 env steps, defaults but `options`."""
    return SACConfig(
        env_id="Pendulum-v1",
        seed=seed,
        total_steps=20_000,
        run_dir=str(tmp_path / "run"),
        export_dir=str(tmp_path / "export"),
        **options,
    )


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pendulum_default_flags_reach_minus_200(tmp_path, seed):
    result = train(_pendulum(tmp_path, seed))
    print(
        f"seed {seed}: eval return {result.summary['eval_return_mean']:.1f} "
        f"+- {result.summary['eval_return_std']:.1f}, "
        f"{result.summary['env_steps_per_s']:.0f} env steps/s"
    )
    assert result.summary["eval_episodes"] == 10
    assert result.summary["eval_return_mean"] >= -200


OPTIONS = {
    "num_critics=3": dict(num_critics=3),
    "policy_delay=2": dict(policy_delay=2),
    "target_update_interval=2": dict(target_update_interval=2, tau=0.01),
    "droq": dict(critic_layer_norm=True, critic_dropout=0.01, gradient_steps=2),
    "lr_schedule=linear": dict(learning_rate=1e-3, lr_schedule="linear"),
    "alpha=auto_0.1": dict(initial_alpha=0.1),
    "max_grad_norm=1": dict(max_grad_norm=1.0),
    "num_envs=4": dict(num_envs=4),
    "variant=v1": dict(variant="v1"),
    "algorithm=tqc": dict(algorithm="tqc"),
    "n_steps=3": dict(n_steps=3),
    # CrossQ at its paper's learning rate, with critics of 256 (2048 by default) to save time.
    "algorithm=crossq": dict(algorithm="crossq", learning_rate=1e-3, critic_hidden_sizes="256,256"),
    # SimBa with the paper's one actor block and two critic blocks, 128 wide to save time.
    "network=simba": dict(network="simba", hidden_sizes=(128,), critic_hidden_sizes="128,128"),
    "network=simba,algorithm=tqc": dict(
        network="simba", algorithm="tqc", hidden_sizes=(128,), critic_hidden_sizes="128,128"
    ),
    "algorithm=tqc,num_critics=5,top_quantiles_to_drop_per_net=0": dict(
        algorithm="tqc", num_critics=5, top_quantiles_to_drop_per_net=0
    ),
    "normalize_observations": dict(normalize_observations=True),
    "normalize_rewards": dict(normalize_rewards=True),
    "normalize_observations,normalize_rewards": dict(
        normalize_observations=True, normalize_rewards=True
    ),
    "use_sde": dict(use_sde=True),
    "use_sde_at_warmup,sde_sample_freq=8": dict(
        use_sde=True, use_sde_at_warmup=True, sde_sample_freq=8
    ),
    "episodes_per_rollout=1": dict(episodes_per_rollout=1, gradient_steps=-1),
    "alpha=0.05 (fixed)": dict(alpha=0.05),
    "target_entropy=-2": dict(target_entropy=-2.0),
    "use_log_alpha=False": dict(use_log_alpha=False),
    "reward_scale=2": dict(reward_scale=2.0),
    "per-part learning rates": dict(
        actor_learning_rate=5e-4, critic_learning_rate=1e-3, alpha_learning_rate=1e-3
    ),
    "lr_schedule=piecewise": dict(learning_rate=1e-3, lr_schedule="piecewise:10000:0.3"),
    "update_every=50 (train_freq=gradient_steps=50)": dict(train_freq=50, gradient_steps=50),
    # Env runners on a local Ray (tfsac.scale.runners), both modes.
    "num_actors=2,runner_mode=sync": dict(num_actors=2, runner_mode="sync"),
    "num_actors=2,runner_mode=async": dict(num_actors=2, runner_mode="async"),
}


@pytest.mark.learning
@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_pendulum_with_option_reaches_minus_200(tmp_path, name):
    result = train(_pendulum(tmp_path, **OPTIONS[name]), export=False)
    print(
        f"{name}: eval return {result.summary['eval_return_mean']:.1f} "
        f"+- {result.summary['eval_return_std']:.1f}"
    )
    assert result.summary["eval_return_mean"] >= -200


@pytest.mark.learning
def test_pendulum_with_the_docs_custom_networks_reaches_minus_200(tmp_path):
    """The models of docs/guide/custom-env-and-networks.md (its definitions, not its short run)."""
    namespace = {}
    exec(docs_example().split("\nconfig = ")[0], namespace)  # the imports and the two models
    result = train(
        _pendulum(tmp_path),
        export=False,
        actor_fn=namespace["make_actor"],
        critic_fn=lambda obs_dim, action_dim: namespace["TwinCritic"](),
    )
    assert result.learner.critic.q1.trainable_variables  # the docs' model was used
    print(f"docs custom networks: eval return {result.summary['eval_return_mean']:.1f}")
    assert result.summary["eval_return_mean"] >= -200


@pytest.mark.learning
def test_mountaincar_gsde_preset_solves_it(tmp_path):
    """gSDE's showcase: the rl-zoo preset (use_sde, log_std_init -3.67) reaches the goal
    in 50k steps; without gSDE the same flags never find it (return -0.0)."""
    preset = os.path.join(REPO_ROOT, "scripts", "presets", "mountaincarcontinuous_v0.flags")
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO_ROOT, "scripts", "train.py"),
            f"--flagfile={preset}",
            f"--run_dir={tmp_path / 'run'}",
            f"--export_dir={tmp_path / 'export'}",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    print(f"MountainCarContinuous gSDE preset: eval return {summary['eval_return_mean']:.1f}")
    assert summary["eval_return_mean"] >= 90  # the env's "solved" threshold


@pytest.mark.learning
def test_rlpd_preset_learns_pendulum_from_random_data_in_3000_steps(tmp_path):
    """RLPD's settings (scripts/presets/pendulum_v1_rlpd.flags: 10 LayerNorm critics, the
    target over a random 2, UTD 20) with 10 episodes of random actions that collect.py
    records (return about -1,200): a good policy after 3,000 env steps."""
    scripts = os.path.join(REPO_ROOT, "scripts")
    data = tmp_path / "random"
    collect = [os.path.join(scripts, "collect.py"), "--env=Pendulum-v1", "--episodes=10"]
    proc = subprocess.run(
        [sys.executable, *collect, "--format=npz", f"--output={data}"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    preset = os.path.join(scripts, "presets", "pendulum_v1_rlpd.flags")
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(scripts, "train.py"),
            f"--flagfile={preset}",
            f"--offline_data={data}",
            f"--run_dir={tmp_path / 'run'}",
            "--export=false",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    returns = [round(e["return_mean"]) for e in summary["evaluations"]]
    print(f"RLPD preset on Pendulum from random data: eval returns {returns}")
    assert summary["eval_return_mean"] >= -250


@pytest.mark.learning
def test_pendulum_with_flashsac_reaches_minus_200(tmp_path):
    """FlashSAC (its categorical critics, unit-norm blocks, bounded reward normaliser, target
    std and held noise) with its authors' initial temperature, blocks 64 wide to save time."""
    options = dict(
        algorithm="flashsac", hidden_sizes=(64,), critic_hidden_sizes=(64,), initial_alpha=0.01
    )
    result = train(_pendulum(tmp_path, **options), export=False)
    print(f"flashsac: eval return {result.summary['eval_return_mean']:.1f}")
    assert result.summary["eval_return_mean"] >= -200
