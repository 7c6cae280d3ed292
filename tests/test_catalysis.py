"""Catalysis environments (HDRL-FP, shared/envs/catalysis.md): every scenario against a NumPy
reference of the spec's rules written here, the spec's invariants, a straight path that ends on the
exact step, clear errors for bad scenarios and grids, the CUDA kernels under the simulator against
the CPU on every scenario, and learning on diffusion2d_relaxed."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch
from fresh_interpreter import run_script

import warpsci
from warpsci.envs.catalysis import landscape, scenario_names

ONE, TWO = "CatalysisOneAtom-v0", "CatalysisTwoAtom-v0"
SCENARIOS = [(ONE, name) for name in scenario_names(1)] + [(TWO, name) for name in scenario_names(2)]


class Reference:
    """The spec's rules for one environment, in plain Python on the packaged numbers and grid."""

    def __init__(self, params) -> None:
        self.land = landscape(params)
        self.atoms = params.atoms
        self.three_d = self.atoms == 2 or self.land.three_d
        self.reset()

    def reset(self) -> None:
        self.position = list(self.land.initial_state)
        self.t = 0

    def in_slab(self, z: int) -> bool:
        return self.land.z_slab_lower <= z < self.land.z_slab_upper

    def step(self, action) -> tuple[float, bool, bool]:
        land = self.land
        atom, move = (0, int(action)) if self.atoms == 1 else (int(action[0]), int(action[1]))
        axis, sign = move // 2, 1 if move % 2 == 0 else -1
        size = (land.nx, land.ny, land.nz)[axis]
        moved = list(self.position)
        moved[3 * atom + axis] = (moved[3 * atom + axis] + sign) % size
        outside = any(not self.in_slab(moved[3 * a + 2]) for a in range(self.atoms))
        if outside and self.three_d:
            moved = list(self.position)  # the z move is cancelled
        self.position = moved
        if outside:
            raw = -1.0
        else:
            index = []
            for a in range(self.atoms):
                x, y, z = moved[3 * a : 3 * a + 3]
                index += [x, y, z - land.z_slab_lower]
            raw = (land.ienergy - float(land.grid[tuple(index)])) / land.max_denergy
        assert np.isfinite(raw)
        reward = min(max(raw, land.min_reward), 0.0)
        terminated = tuple(moved) == land.final_state
        if terminated:
            reward += land.terminate_reward
        self.t += 1
        truncated = self.t >= land.episode_length
        return reward, terminated, truncated


def random_actions(env, steps: int, seed: int) -> list:
    space = env.single_action_space
    space.seed(seed)
    return [np.array([space.sample() for _ in range(env.num_envs)]) for _ in range(steps)]


@pytest.mark.parametrize("env_id, scenario", SCENARIOS)
def test_every_scenario_follows_the_reference_and_the_invariants(env_id, scenario):
    params = {"scenario": scenario, "episode_length": 40}
    env = warpsci.make(env_id, num_envs=4, device="cpu", params=params)
    references = [Reference(env.params) for _ in range(env.num_envs)]
    land = references[0].land
    env.reset(seed=1)
    bonus_seen = 0
    for actions in random_actions(env, 120, seed=len(scenario)):
        _, rewards, terminated, truncated, _ = env.step(torch.as_tensor(actions))
        positions = env.state_tensors["position"][:, 0].numpy()
        for index, reference in enumerate(references):
            reward, done, cut = reference.step(actions[index])
            assert rewards[index].item() == pytest.approx(reward, abs=1e-5)
            assert bool(terminated[index]) == done and bool(truncated[index]) == (cut and not done)
            if done or cut:
                reference.reset()
                bonus_seen += done
            assert positions[index].tolist() == reference.position
            # Invariants: inside the periodic box; under the 3-D rules, inside the slab.
            for atom in range(reference.atoms):
                x, y, z = positions[index][3 * atom : 3 * atom + 3]
                assert 0 <= x < land.nx and 0 <= y < land.ny and 0 <= z < land.nz
                if reference.three_d:
                    assert land.z_slab_lower <= z < land.z_slab_upper
            assert land.min_reward <= reward - (land.terminate_reward if done else 0.0) <= 0.0


def test_a_straight_path_ends_on_the_step_that_lands_on_the_target():
    """diffusion2d_relaxed: from (5, 9, 60) to (10, 0, 60): five x+1 moves, then nine y-1 moves."""
    env = warpsci.make(ONE, num_envs=1, device="cpu", params={"scenario": "diffusion2d_relaxed"})
    land = landscape(env.params)
    env.reset(seed=0)
    path = [0] * 5 + [3] * 9
    for step, action in enumerate(path, start=1):
        obs, reward, terminated, truncated, info = env.step(torch.tensor([action]))
        if step < len(path):
            assert not terminated[0] and reward[0] <= 0.0
    assert terminated[0] and not truncated[0]
    assert reward[0].item() >= land.terminate_reward + land.min_reward
    # The final observation is the target's: distance 0; the new episode starts over.
    assert info["final_obs"][0, 3].item() == pytest.approx(0.0)
    assert obs[0].tolist() == pytest.approx([5 / 20, 9 / 18, 60 / 100, 1.0])


def test_observations_follow_the_spec():
    env = warpsci.make(TWO, num_envs=1, device="cpu")
    obs, _ = env.reset(seed=0)
    land = landscape(env.params)
    sizes = [land.nx, land.ny, land.nz] * 2
    assert obs[0, :6].tolist() == pytest.approx(
        [c / s for c, s in zip(land.initial_state, sizes, strict=True)]
    )
    assert obs[0, 6:].tolist() == pytest.approx([1.0, 1.0])


@pytest.mark.parametrize(
    "env_id, params, message",
    [
        (ONE, {"scenario": "surfase"}, "unknown 1-atom scenario 'surfase' (did you mean 'surface'?)"),
        (TWO, {"scenario": "surface"}, "unknown 2-atom scenario 'surface'"),
        (ONE, {"energy_grid": "/nonexistent/grid.npy"}, "does not exist"),
        (ONE, {"scenario": "gas1", "nx": 21}, "has shape (20, 18, 20); this scenario needs (21, 18, 20)"),
        (ONE, {"initial_state": (3, 6, 10)}, "initial_state (3, 6, 10) lies outside"),
        (ONE, {"max_denergy": 0.0}, "max_denergy must be a positive energy"),
    ],
)
def test_bad_scenarios_and_grids_are_refused_in_one_line(env_id, params, message):
    with pytest.raises(ValueError) as raised:
        warpsci.make(env_id, num_envs=1, device="cpu", params=params)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_grid_of_ones_own_is_used_and_checked(tmp_path):
    grid = np.full((20, 18, 1), -193.69 - 2.0)  # 2 eV below the reference everywhere: reward 0
    path = tmp_path / "flat.npy"
    np.save(path, grid)
    env = warpsci.make(
        ONE, num_envs=1, device="cpu", params={"scenario": "diffusion2d_relaxed", "energy_grid": str(path)}
    )
    env.reset(seed=0)
    _, reward, *_ = env.step(torch.tensor([0]))
    assert reward[0].item() == 0.0
    grid[3, 4, 0] = np.nan
    np.save(path := tmp_path / "holes.npy", grid)
    with pytest.raises(ValueError, match=r"non-finite energies \(first at index \(3, 4, 0\)\)"):
        warpsci.make(
            ONE,
            num_envs=1,
            device="cpu",
            params={"scenario": "diffusion2d_relaxed", "energy_grid": str(path)},
        )
    (broken := tmp_path / "broken.npy").write_text("not an array")
    with pytest.raises(ValueError, match="is not a readable .npy array"):
        warpsci.make(ONE, num_envs=1, device="cpu", params={"energy_grid": str(broken)})


def test_cuda_kernels_equal_the_cpu_on_every_scenario_under_the_simulator():
    script = textwrap.dedent(
        f"""
        from warpsci.testing import check_parity
        for env_id, scenario in {SCENARIOS!r}:
            report = check_parity(env_id, num_envs=2, steps=25, atol=1e-6,
                                  params={{"scenario": scenario, "episode_length": 10}})
            print("parity", env_id, scenario, report.ok, report.episodes_ended)
        """
    )
    completed = run_script(script, simulator=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]
    lines = [line.split() for line in completed.stdout.splitlines() if line.startswith("parity")]
    assert len(lines) == len(SCENARIOS)
    for _, env_id, scenario, ok, episodes in lines:
        assert ok == "True", (env_id, scenario)
        assert int(episodes) > 0


def test_a_trained_policy_reaches_the_final_state_on_diffusion2d_relaxed():
    """PPO, 64 environments, 1M steps (about 30 s on 2 cores), episodes of 100 steps: the greedy
    policy walks from (5, 9, 60) to (10, 0, 60) in fewer than 40 steps (the straight path: 14)."""
    from warpsci.algorithms import make_trainer
    from warpsci.config import TrainConfig

    env_params = {"scenario": "diffusion2d_relaxed", "episode_length": 100}
    config = TrainConfig(
        env_id=ONE, device="cpu", seed=1, num_envs=64, num_steps=64, total_timesteps=1_000_000,
        hidden_sizes=(50, 50), learning_rate=1e-3, ent_coef=0.01, env_params=env_params,
    )  # fmt: skip
    trainer = make_trainer(config)
    trainer.train()
    env = warpsci.make(ONE, num_envs=1, device="cpu", params=env_params)
    obs, _ = env.reset(seed=3)
    steps = 0
    while True:
        with torch.no_grad():
            obs, _, terminated, truncated, _ = env.step(trainer.single.policy.act_greedy(obs))
        steps += 1
        if terminated[0] or truncated[0]:
            break
    assert terminated[0], f"the greedy policy did not reach the final state in {steps} steps"
    assert steps < 40  # the straight path takes 14


def test_the_cli_takes_a_scenario_by_name(tmp_path, capsys):
    from warpsci.cli import main

    run_dir = tmp_path / "run"
    argv = ["train", ONE, "--scenario", "gas1", "--device", "cpu", "--num-envs", "8", "--total-steps", "1024"]
    assert main([*argv, "--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "1"]) == 0
    assert "scenario: gas1" in (run_dir / "config.yaml").read_text()
    capsys.readouterr()
    assert (
        main(["train", ONE, "--scenario", "surfase", "--device", "cpu", "--run-dir", str(tmp_path / "r")])
        == 2
    )
    assert "unknown 1-atom scenario 'surfase' (did you mean 'surface'?)" in capsys.readouterr().err


def test_the_reaction_path_of_a_policy_is_written_with_its_barrier(tmp_path):
    """The straight path on diffusion2d_relaxed, played as a policy: CSV rows, the barrier from the
    grid, and the two pictures."""
    from warpsci.reaction_path import greedy_path, write_reaction_path

    class StraightPath:
        moves = [0] * 5 + [3] * 9

        def __init__(self) -> None:
            self.step = 0

        def act_greedy(self, obs: torch.Tensor) -> torch.Tensor:
            self.step += 1
            return torch.tensor([self.moves[self.step - 1]])

    params = {"scenario": "diffusion2d_relaxed"}
    rows = greedy_path(StraightPath(), ONE, params)
    land = landscape(warpsci.make(ONE, num_envs=1, params=params).params)
    assert [row["position"] for row in rows][:2] == [[5, 9, 60], [6, 9, 60]] and rows[-1]["position"] == [
        10,
        0,
        60,
    ]
    energies = [land.grid[x, y, 0] for x, y, _ in (row["position"] for row in rows)]
    summary = write_reaction_path(rows, land, tmp_path)
    assert summary["path_steps"] == 14 and summary["reached_final_state"]
    assert summary["barrier_eV"] == pytest.approx(max(energies) - energies[0])
    assert 0.0 <= summary["lowest_barrier_eV"] <= summary["barrier_eV"] and not summary["left_slab"]
    lines = (tmp_path / "reaction_path.csv").read_text().splitlines()
    assert lines[0] == "step,x,y,z,energy_eV,reward" and len(lines) == 16
    assert lines[-1].startswith("14,10,0,60,")
    pytest.importorskip("matplotlib")
    assert (tmp_path / "reaction_profile.png").stat().st_size > 0
    assert (tmp_path / "reaction_path_on_surface.png").stat().st_size > 0


def test_the_lowest_barrier_is_the_least_highest_energy_of_any_path_in_the_slab():
    """An 8 x 3 periodic layer with walls at x = 3 (lowest cell 0.4 eV above the start) and x = 7
    (9 eV), and a layer above it at 5 eV but for a corridor at y = 2 whose highest cell is 0.25 eV:
    the lowest barrier from x = 1 to x = 5 climbs into the corridor. With the slab one layer thick
    the corridor is out of reach and the wall's lowest cell is the barrier."""
    from warpsci.envs.catalysis import Landscape
    from warpsci.reaction_path import energy_at, lowest_barrier

    grid = np.zeros((8, 3, 2))
    grid[3, :, 0] = [2.0, 0.4, 1.0]
    grid[:, :, 1] = 5.0
    grid[1:6, 2, 1] = [0.1, 0.1, 0.25, 0.1, 0.1]
    grid[7, :, :] = 9.0
    base = dict(
        ienergy=0.0,
        max_denergy=20.0,
        nx=8,
        ny=3,
        nz=10,
        z_slab_lower=4,
        terminate_reward=10.0,
        episode_length=50,
        min_reward=-1.0,
        initial_state=(1, 2, 4),
        final_state=(5, 2, 4),
    )
    two_layers = Landscape(**base, z_slab_upper=6, grid=grid)
    height, path = lowest_barrier(two_layers)
    assert height == pytest.approx(0.25)
    assert path[0] == (1, 2, 4) and path[-1] == (5, 2, 4)
    for here, there in zip(path, path[1:], strict=False):
        moved = [min(abs(a - b), n - abs(a - b)) for a, b, n in zip(here, there, (8, 3, 10), strict=True)]
        assert sum(moved) == 1, "every step is one move"
    assert max(energy_at(two_layers, list(cell)) for cell in path) == pytest.approx(0.25)
    one_layer = Landscape(**base, z_slab_upper=5, grid=grid[:, :, :1])
    assert lowest_barrier(one_layer)[0] == pytest.approx(0.4)
