"""TagContinuous-v0's block observations under Numba's CUDA simulator, their warp intrinsics
emulated by :mod:`warpsci.simulated_warps`, against the CPU backend: after every step of small games
(a thread per observer, a warp per observer, the neighbour grid), launched apart from the step as
in a CUDA graph, and on a lattice with hints of any kind. Slow (minutes): a file of its own, so that
the test runners can take it apart from ``tests/test_tag_continuous.py``."""

from __future__ import annotations

import textwrap

from fresh_interpreter import run_script
from test_tag_continuous import TEST5


def test_the_warp_observation_equals_the_cpu_under_the_simulator():
    """With ``warpsci.simulated_warps`` the simulator runs the block observations (its shuffles
    and ballots emulated): after every step equal to the CPU backend's ``observe_agent``, on
    test5's game (a thread per observer), on a crowded one with k = 11 (above THREAD_SLOTS: a warp
    per observer) and on a crowded one of 140 agents (wider than the block: the grid's block
    observation, a thread per observer for k = 4). Each game is one block (``check_parity``'s
    default of 8 threads would split the wider ones over blocks, which observe by
    ``observe_agent``), and every launch is the one-block kernels'. The grid's warps (k above
    THREAD_SLOTS in a wide game) took 12 minutes a step here: the GPU tests run them
    (``tests/test_tag_continuous_gpu.py``), and a crowded game with tags and resets runs below
    (``test_the_observation_launched_apart_equals_the_cpu_under_the_simulator``)."""
    from warpsci.envs.tag_continuous_threads import THREAD_SLOTS

    crowded_by_warps = {**TEST5, "num_taggers": 3, "num_runners": 9, "grid_length": 1.0,
                        "num_other_agents_observed": THREAD_SLOTS + 1, "tagging_distance": 0.1,
                        "episode_length": 3}  # fmt: skip
    assert TEST5["num_other_agents_observed"] <= THREAD_SLOTS
    # Wider than a block: the grid's block observation, and observe_agent for the observers it leaves.
    wide = {"num_taggers": 4, "num_runners": 136, "grid_length": 1.0, "use_full_observation": False,
            "num_other_agents_observed": 4, "tagging_distance": 0.03, "episode_length": 4,
            "neighbour_search": "grid", "seed": 5}  # fmt: skip
    games = ((1, 4, 8, dict(TEST5, episode_length=3)), (1, 2, 128, crowded_by_warps), (1, 1, 256, wide))
    script = textwrap.dedent(
        f"""
        from warpsci import simulated_warps
        import warpsci.backends.cuda as backend
        from warpsci.envs.tag_continuous import TAG_CONTINUOUS
        from warpsci.testing import check_parity
        print("block before", backend.CudaKernels(TAG_CONTINUOUS, 2, 5).observes_by_block)
        simulated_warps.enable()
        print("block after", backend.CudaKernels(TAG_CONTINUOUS, 2, 5).observes_by_block)
        launches = []
        launch = backend.CudaKernels._launch_one_block
        def counted(kernels, *arguments):
            launches.append(kernels.observes_by_block)
            launch(kernels, *arguments)
        backend.CudaKernels._launch_one_block = counted
        for envs, steps, threads, params in {games!r}:
            launches.clear()
            report = check_parity("TagContinuous-v0", num_envs=envs, steps=steps, atol=1e-5, params=params,
                                  threads_per_block=threads)
            print("warps", report.ok, report.episodes_ended, len(launches) == steps + 1 and all(launches))
        """
    )
    completed = run_script(script, simulator=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "block before False" in completed.stdout and "block after True" in completed.stdout
    lines = [line.split() for line in completed.stdout.splitlines() if line.startswith("warps")]
    assert len(lines) == 3
    for (_, ok, episodes, by_block), least in zip(lines, (1, 0, 0), strict=True):
        assert ok == "True" and by_block == "True"
        assert int(episodes) >= least


def test_the_observation_launched_apart_equals_the_cpu_under_the_simulator():
    """Captured in a CUDA graph, the CUDA backend leaves the block observation to a launch of its
    own (``CudaKernels.observes_apart``; a GPU test replays such graphs), after the step's kernel,
    which runs its stages on the scalar arrays staged in shared memory
    (:mod:`warpsci.backends.shared_staging`), the environments in sub-batches
    (``SUB_BATCHES_APART``; on streams of their own on a GPU). Under the simulator, with that choice
    forced for every launch, two crowded games through a reset (a thread per observer; one
    environment a sub-batch, the second launched from environment 1; its staged views lie over the
    same shared rows as the first's) still equal the CPU backend after every step."""
    crowded = {**TEST5, "num_taggers": 3, "num_runners": 9, "grid_length": 1.0,
               "num_other_agents_observed": 4, "tagging_distance": 0.1, "episode_length": 3}  # fmt: skip
    script = textwrap.dedent(
        f"""
        from warpsci import simulated_warps
        import warpsci.backends.cuda as backend
        from warpsci.envs.tag_continuous import TAG_CONTINUOUS
        from warpsci.testing import check_parity
        simulated_warps.enable()
        backend._capturing = lambda: True
        launches = []
        launch = backend.CudaKernels._launch_one_block
        def counted(kernels, *arguments):
            launches.append(kernels.observes_apart() and kernels.staged_width == 128)
            launch(kernels, *arguments)
        backend.CudaKernels._launch_one_block = counted
        batches = []
        split = backend.sub_batches
        backend.sub_batches = lambda num_envs, parts: batches.append(split(num_envs, parts)) or batches[-1]
        # Blocks of 128: check_parity's default of 8 threads would split the 12 agents over two
        # blocks, which observe by observe_agent.
        report = check_parity("TagContinuous-v0", num_envs=2, steps=4, atol=1e-5, params={crowded!r},
                              threads_per_block=128)
        print("parity", report.ok, report.episodes_ended)
        print("apart and staged", len(launches), all(launches))
        print("sub-batches", len(batches), set(map(tuple, batches)))
        """
    )
    completed = run_script(script, simulator=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "apart and staged 5 True" in completed.stdout  # the reset and four steps
    assert "sub-batches 5 {((0, 1), (1, 1))}" in completed.stdout
    parity = [line.split() for line in completed.stdout.splitlines() if line.startswith("parity")]
    assert parity and parity[0][1] == "True" and int(parity[0][2]) >= 2


def test_lattice_positions_and_any_hints_give_what_the_cpu_gives_under_the_simulator():
    """The GPU test's lattice (``tests/test_tag_continuous_gpu.py``) on the CPU: agents on a
    lattice (many exactly equal distances, several agents at one point, coordinates multiples of
    1/16 so that every square is exact) and hints of any kind among the first k (out of range,
    negative, repeated, the observer itself, NO_AGENT, SEARCH_AGAIN; the others near the observer,
    so that the simulator walks a few cells rather than the whole grid). After a step in which
    nobody moves, the block observations under the simulator write what the CPU backend's
    ``observe_agent`` writes, bit for bit, observations and hints: 12 agents with k = 4, 120 agents
    with k = 4 whose ids are shuffled over the lattice, four in five hinted their nearest (so that an
    observer's few marked agents lie in any of its four words of bits, often with empty words
    between them) and 140 agents in the grid with k = 4, all a thread per observer (the GPU test
    also runs the warps)."""
    base = {"num_taggers": 3, "num_runners": 9, "grid_length": 1.0, "use_full_observation": False,
            "num_other_agents_observed": 4, "episode_length": 10, "seed": 5}  # fmt: skip
    shuffled = {**base, "num_taggers": 6, "num_runners": 114}
    wide = {**base, "num_taggers": 4, "num_runners": 136, "neighbour_search": "grid"}
    games = ((base, False), (shuffled, True), (wide, False))
    script = textwrap.dedent(
        f"""
        import numpy as np
        from warpsci import simulated_warps
        simulated_warps.enable()
        from warpsci.envs.tag_continuous import TAG_CONTINUOUS, TagContinuousParams
        from warpsci.testing.kernel_runner import HostKernelRunner
        rng = np.random.default_rng(7)
        for fields, shuffle in {games!r}:
            params = TagContinuousParams(**fields)
            runners = [HostKernelRunner(TAG_CONTINUOUS, 1, name, params=params) for name in ("cpu", "cuda")]
            for runner in runners:
                runner.reset(3)
            agents = runners[0].state.x.shape[1]
            ids = np.arange(agents)
            shift = int(rng.integers(0, 16))
            x = ((ids + shift) % 12).astype(np.float32) / np.float32(16)
            y = (((ids + shift) // 12) % 9).astype(np.float32) / np.float32(16)
            if shuffle:
                order = rng.permutation(agents)
                x, y = x[order], y[order]
            # Hints near the observer in id order (a few lattice rows away; some negative or past
            # the agents at the ends), repeated, the observer itself, SEARCH_AGAIN, NO_AGENT.
            shape = runners[0].state.nearest_hint.shape
            hints = (ids[None, :, None] + rng.integers(-20, 21, shape)).astype(np.int32)
            hints[..., 1] = hints[..., 0]
            hints[:, ::2, 2] = ids[::2]
            hints[:, 1::4, 2] = 2**31 - 2
            hints[:, ::3, 3] = 2**31 - 1
            if shuffle:
                # The k nearest (squares exact) as the hints of four observers in five.
                squares = (x[:, None] - x[None]) ** 2 + (y[:, None] - y[None]) ** 2
                squares[ids, ids] = np.inf
                nearest = np.argsort(squares, axis=1, kind="stable")[:, :4]
                hinted = ids % 5 != 0
                hints[:, hinted, :4] = nearest[hinted]
            for runner in runners:
                runner.state.x[...] = x
                runner.state.y[...] = y
                runner.state.v[...] = 0
                runner.state.accel[...] = 0
                runner.state.nearest_hint[...] = hints
                runner.step(np.zeros_like(runner.buffers.actions), 3)
            cpu, gpu = runners
            print("lattice", agents, params.num_other_agents_observed, gpu._kernels.observes_by_block,
                  np.array_equal(gpu.state.x[0], x),
                  np.array_equal(cpu.buffers.obs, gpu.buffers.obs),
                  np.array_equal(cpu.state.nearest_hint, gpu.state.nearest_hint))
        """
    )
    completed = run_script(script, simulator=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]
    lines = [line.split() for line in completed.stdout.splitlines() if line.startswith("lattice")]
    assert [(int(line[1]), int(line[2])) for line in lines] == [(12, 4), (120, 4), (140, 4)]
    for line in lines:
        assert line[3:] == ["True", "True", "True", "True"], line


def test_starts_off_the_square_give_what_the_cpu_gives_under_the_simulator():
    """Explicit start positions may lie anywhere: off the square on the negative side, so far out
    that squares of coordinates overflow, or within a few thousandths of a unit. With 50 agents (a
    word and a half of the narrow path's marks), the block observation after the reset writes what
    the CPU backend writes, bit for bit, observations and hints, and so after the step that brings
    everyone onto the square."""
    script = textwrap.dedent(
        """
        import numpy as np
        from warpsci import simulated_warps
        simulated_warps.enable()
        from warpsci.envs.tag_continuous import TagContinuousParams, TAG_CONTINUOUS
        from warpsci.testing.kernel_runner import HostKernelRunner
        rng = np.random.default_rng(11)
        for offset, spread in ((-40.0, 30.0), (2.0**63, 2.0**62), (0.0, 2.0**-12)):
            agents = 50
            x = (offset + spread * rng.uniform(-1, 1, agents)).astype(np.float32)
            y = (offset + spread * rng.uniform(-1, 1, agents)).astype(np.float32)
            params = TagContinuousParams(num_taggers=3, num_runners=agents - 3, use_full_observation=False,
                                         num_other_agents_observed=4, seed=5,
                                         starting_location_x=tuple(map(float, x)),
                                         starting_location_y=tuple(map(float, y)))
            runners = [HostKernelRunner(TAG_CONTINUOUS, 1, name, params=params) for name in ("cpu", "cuda")]
            same = []
            for runner in runners:
                runner.reset(3)
            cpu, gpu = runners
            same.append(np.array_equal(cpu.buffers.obs, gpu.buffers.obs))
            same.append(np.array_equal(cpu.state.nearest_hint, gpu.state.nearest_hint))
            for runner in runners:
                runner.step(np.ones_like(runner.buffers.actions), 3)
            same.append(np.array_equal(cpu.buffers.obs, gpu.buffers.obs))
            same.append(np.array_equal(cpu.state.nearest_hint, gpu.state.nearest_hint))
            print("offset", offset, gpu._kernels.observes_by_block, *same)
        """
    )
    completed = run_script(script, simulator=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]
    lines = [line.split() for line in completed.stdout.splitlines() if line.startswith("offset")]
    assert len(lines) == 3
    for line in lines:
        assert line[2:] == ["True"] * 5, line


def test_squares_with_one_root_are_ordered_by_id_under_the_simulator():
    """The observation orders an observer's nearest by distance (the float32 root), then id. Two
    different squares can have one root: then the lower id goes first, even where its square is the
    larger (a thread that sorts by squares must not keep their order). Here observer 0 sees such a pair
    within its k = 4 nearest, or across its 4th and 5th (the lower id, with the larger square, is
    the 4th), or none, or across its 10th and 11th with k = 10 (the thread keeps 10: the 11th by
    square falls off its list), or, with k = 10, a 10th whose square is one unit above that of the
    11th and 12th (equal squares: the 10th by square and the agent that falls off share a square,
    and the one with the lowest id and the larger square falls off after them); each pair's larger
    square has the lower id. The block observation under the simulator writes what the CPU backend
    writes, bit for bit, observations and hints, after a step in which nobody moves, and observer
    0's nearest are ids 1 to k in order."""
    script = textwrap.dedent(
        """
        import numpy as np
        from warpsci import simulated_warps
        simulated_warps.enable()
        from warpsci.envs.tag_continuous import TAG_CONTINUOUS, TagContinuousParams
        from warpsci.testing.kernel_runner import HostKernelRunner
        rng = np.random.default_rng(13)
        ox, oy = np.float32(0.5), np.float32(0.5)

        def squares(x, y):
            dx, dy = ox - x, oy - y
            return dx * dx + dy * dy

        def one_root_pair(radius):
            # Two points about `radius` from the observer whose squares differ and roots agree.
            while True:
                angles = rng.uniform(0.0, 2.0 * np.pi, 20000)
                x = (ox + radius * np.cos(angles)).astype(np.float32)
                y = (oy + radius * np.sin(angles)).astype(np.float32)
                s = squares(x, y)
                order = np.argsort(s, kind="stable")
                s, roots = s[order], np.sqrt(s[order])
                hits = np.flatnonzero((s[:-1] < s[1:]) & (roots[:-1] == roots[1:]))
                if hits.size:
                    i = order[hits[0]]
                    j = order[hits[0] + 1]
                    return (x[i], y[i]), (x[j], y[j])  # the smaller square first

        def at(radius):
            angle = rng.uniform(0.0, 2.0 * np.pi)
            return np.float32(ox + radius * np.cos(angle)), np.float32(oy + radius * np.sin(angle))

        layouts = (("within", 4, 12), ("straddling", 4, 12), ("none", 4, 12), ("falling", 10, 12),
                   ("run", 10, 13))
        for layout, k, agents in layouts:
            params = TagContinuousParams(num_taggers=3, num_runners=agents - 3, grid_length=1.0, seed=5,
                                         episode_length=10, use_full_observation=False,
                                         num_other_agents_observed=k)
            points = [(ox, oy), at(0.05)]
            if layout == "run":
                # Squares (0.5, 0.5) to them: 0.02250000834465027 for id 10, one unit less for 11 and
                # 12; all three roots 0.15000002086162567.
                points += [at(r) for r in np.linspace(0.06, 0.13, 8)]
                points += [(np.float32(0.644557535648346), np.float32(0.5400390625)),
                           (np.float32(0.5990536212921143), np.float32(0.38735726475715637)),
                           (np.float32(0.6499795317649841), np.float32(0.5024793148040771))]
            elif layout == "falling":
                smaller, larger = one_root_pair(0.15)
                points += [at(r) for r in np.linspace(0.06, 0.13, 8)] + [larger, smaller]
            elif layout == "within":
                smaller, larger = one_root_pair(0.1)
                points += [larger, smaller, at(0.15), at(0.16)]
            elif layout == "straddling":
                smaller, larger = one_root_pair(0.15)
                points += [at(0.1), at(0.11), larger, smaller]
            else:
                points += [at(0.1), at(0.11), at(0.15), at(0.16)]
            points += [at(r) for r in np.linspace(0.3, 0.45, agents - len(points))]
            x = np.array([p[0] for p in points], np.float32)
            y = np.array([p[1] for p in points], np.float32)
            runners = [HostKernelRunner(TAG_CONTINUOUS, 1, name, params=params) for name in ("cpu", "cuda")]
            for runner in runners:
                runner.reset(3)
                runner.state.x[...] = x
                runner.state.y[...] = y
                runner.state.v[...] = 0
                runner.state.accel[...] = 0
            # Hints: each observer's k nearest by root, then id (the walk's limit takes in the pair).
            dx, dy = x[:, None] - x[None], y[:, None] - y[None]
            roots = np.sqrt(dx * dx + dy * dy)
            np.fill_diagonal(roots, np.inf)
            ids = np.broadcast_to(np.arange(agents), (agents, agents))
            nearest = np.lexsort((ids, roots), axis=1)[:, :k]
            for runner in runners:
                runner.state.nearest_hint[0, :, :k] = nearest
                runner.step(np.zeros_like(runner.buffers.actions), 3)
            cpu, gpu = runners
            first = map(int, cpu.state.nearest_hint[0, 0, :k])
            print("layout", layout, gpu._kernels.observes_by_block, *first,
                  np.array_equal(cpu.buffers.obs, gpu.buffers.obs),
                  np.array_equal(cpu.state.nearest_hint, gpu.state.nearest_hint))
        """
    )
    completed = run_script(script, simulator=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-4000:]
    lines = {line.split()[1]: line for line in completed.stdout.splitlines() if line.startswith("layout")}
    assert set(lines) == {"within", "straddling", "none", "falling", "run"}, completed.stdout
    for layout, line in lines.items():
        words = line.split()
        k = 10 if layout in ("falling", "run") else 4
        assert words[2] == "True" and words[-2:] == ["True", "True"], line
        assert words[3:-2] == [str(agent) for agent in range(1, k + 1)], line
