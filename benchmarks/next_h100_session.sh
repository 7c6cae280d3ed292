# The next H100 lease for issue 18 (and 12), from the repository root with OUT set, in two calls of
# under 10 minutes each: PART=1, then PART=2 (PART=3: the learning tests on the GPU). gymnasium and pettingzoo must be installed there first
# (wheels carried in .whl, as the device README says). What the lease of 2026-11-25 (night) left
# unmeasured, all built after its device time ran out:
# (1) the loss heads of the actor and the critic in one launch (mlp_kernels.actor_critic_backward;
#     the figures of that lease are two launches, one per network): GPU tests at three widths and
#     20,011 rows, the launch settings' sweep, phases and end to end against the autograd loss
#     compiled (the baseline rerun in the same call);
# (2) A2C's loss and row weights inside the kernels: Tag gridworld end to end at 2,000 x 1,000 (A2C,
#     619K with the autograd loss), the A2C and PPO presets' learning on the GPU;
# (3) the time to solve Cartpole with the loss inside the kernels.
set -u
mkdir -p "$OUT"
if [ "${PART:-1}" = 1 ]; then
timeout 240 python -m pytest -q -m gpu tests/test_fused_mlp.py -k loss_inside -p no:cacheprovider 2>&1 |
  grep -E "passed|failed|Error" | tail -3
timeout 150 python benchmarks/fused_ppo_tuning.py 2>&1 | grep -E "^rows|^best" | grep -v "warps 8"
for build in "fused" "fused-compiled --autograd-loss"; do
  set -- $build
  for size in 2048 65536; do
    timeout 60 python benchmarks/cartpole_e2e_session.py "$OUT/phases-$1${2:+-autograd}-$size" --parts phases \
      --modes "$1" ${2:-} --phase-sizes $size 2>&1 | grep -E "^phases|Error"
  done
done
fi
if [ "${PART:-1}" = 2 ]; then
for size in 2048 1048576; do
  timeout 60 python benchmarks/cartpole_e2e_session.py "$OUT/e2e-$size" --parts train --modes fused \
    --sizes $size 2>&1 | grep -E "^train|Error"
done
timeout 150 python benchmarks/tag_speed_session.py "$OUT/tag" training fused-only 2>&1 | grep -E "^e2e"
timeout 120 python benchmarks/cartpole_e2e_session.py "$OUT/solve" --parts solve 2>&1 | grep -E "^solve"
fi
if [ "${PART:-1}" = 3 ]; then
timeout 200 python -m pytest -q -m gpu tests/test_learning.py -k "CartPole or Acrobot" -p no:cacheprovider 2>&1 | tail -1
fi
