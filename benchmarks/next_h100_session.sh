# The next H100 lease for issues 12 and 18, from the repository root with OUT set, in two calls of
# under 10 minutes each: PART=1 (1-3's checks and phases), then PART=2 (the rest). gymnasium and
# pettingzoo must be installed there first (wheels carried in .whl, as the device README says). What the lease of 2026-11-25 (evening) left unmeasured:
# (1) the fused kernels' GPU tests at both launch-setting classes (32 and 128 wide), and which launch
#     settings load for 128-wide networks with wide inputs and outputs (the probe's fallbacks);
# (2) Tag gridworld end to end with 32-wide networks back on the NARROW settings (648K expected at
#     2,000 x 1,000, A2C; 570K was measured with the interim settings);
# (3) PPO Cartpole end to end with the fused kernels inside the compiled loss up to 1M environments
#     (the best batch: 153.9M at 262K), and the one-launch rollout step against three launches;
# (4) Tag continuous end to end with the compiled update (issue 12);
# (5) where a fresh process's seconds go before training (torch._dynamo should stay unimported),
#     and the time to solve against a bare torch start.
set -u
mkdir -p "$OUT"
if [ "${PART:-1}" = 1 ]; then
timeout 90 python benchmarks/fused_mlp_tuning.py --compare --rows 16384 2097152 --shapes 70x128x5 128x128x128 6x128x5 2>&1 | grep -v -i warn
python -m pytest -q -m gpu tests/test_fused_mlp.py tests/test_graphs_gpu.py -p no:cacheprovider -n 3 --dist loadfile 2>&1 | tail -2
timeout 150 python benchmarks/tag_speed_session.py "$OUT/tag" training fused-only 2>&1 | grep -E "^e2e"
for rollout in "" --three-launch-rollout; do  # the one-launch rollout step against three launches
  timeout 100 python benchmarks/cartpole_e2e_session.py "$OUT/phases$rollout" --parts phases --modes fused-compiled \
    --phase-sizes 2048 65536 $rollout 2>&1 | grep -E "^phases|Error"
done
fi
if [ "${PART:-1}" = 2 ]; then
timeout 200 python benchmarks/cartpole_e2e_session.py "$OUT/e2e" --parts train --modes fused-compiled \
  --sizes 2048 262144 524288 1048576 2>&1 | grep -E "^train|Error"
# Issue 12: Tag continuous 2,000 x 110 with WarpDrive's network, the update's loss compiled (364K eager).
timeout 150 python benchmarks/profile_iteration.py "$OUT" warpdrive compile 2>&1 | grep -E '"(rollout_ms|update_ms|env_steps_per_s)"'
python benchmarks/startup_probe.py 2>&1 | grep -E "^  [a-zA-Z]" | tail -14
timeout 120 python benchmarks/cartpole_e2e_session.py "$OUT/solve" --parts solve 2>&1 | grep -E "^solve"
fi
