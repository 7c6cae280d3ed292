# Issue 18 on one H100: PPO's loss inside the fused backward kernels (warpsci.fused_loss), from the
# repository root with OUT set (gymnasium and pettingzoo installed first, as the device README says).
# The GPU test of the loss heads, the iteration's phases and end-to-end steps/s (default build: eager,
# no --compile; one process per size), and the PPO presets' learning on the GPU. The autograd loss
# for comparison: add --autograd-loss --modes fused-compiled to the cartpole_e2e_session.py lines.
set -u
mkdir -p "$OUT"
python -m pytest -q -m gpu tests/test_fused_mlp.py -k loss_inside -p no:cacheprovider 2>&1 | tail -1
for size in 2048 65536; do
  timeout 60 python benchmarks/cartpole_e2e_session.py "$OUT/phases-$size" --parts phases --modes fused \
    --phase-sizes $size 2>&1 | grep -E "^phases|Error"
done
for size in 2048 1048576; do
  timeout 60 python benchmarks/cartpole_e2e_session.py "$OUT/e2e-$size" --parts train --modes fused \
    --sizes $size 2>&1 | grep -E "^train|Error"
done
timeout 100 python -m pytest -q -m gpu tests/test_learning.py -k "CartPole and ppo or Acrobot" -p no:cacheprovider 2>&1 | tail -1
