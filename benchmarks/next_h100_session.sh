# H100 checks for issues 12 and 18, from the repository root with OUT set, calls of under 10
# minutes each: PART=0 (the epoch shuffle's GPU test and phases, Tag continuous's parity and
# searches), PART=1 (loss heads: GPU test, sweep, phases against the compiled autograd loss),
# PART=2 (end to end at 2K and 1M, Tag gridworld end to end, time to solve), PART=3 (the learning
# tests on the GPU), PART=4 (issue 12's nearest-neighbour searches and Tag continuous end to end),
# PART=5 (the GPU tests not rerun after 2026-11-26's kernel change), PART=6 (a Tag continuous
# branch against the working tree). gymnasium and pettingzoo must be installed there first (wheels
# carried in .whl, as the device README says). PARTs 0-4 and the earlier PART 5 and 6 (three branches)
# ran on H100s on 2026-11-26 (BENCHMARKS.md).
set -u
mkdir -p "$OUT"
if [ "${PART:-1}" = 0 ]; then
# What runs on default paths but was built without a GPU: the one-kernel epoch shuffle (GPU test,
# then the phases at 2K and 65K, whose profile shows its kernel) and Tag continuous's thread-local
# k-nearest lists (parity against the CPU, grid = scan, env-only rates).
timeout 120 python -m pytest -q -m gpu tests/test_rollout_kernels.py -k row_shuffle -p no:cacheprovider 2>&1 | tail -2
for size in 2048 65536; do
  timeout 70 python benchmarks/cartpole_e2e_session.py "$OUT/phases-fused-$size" --parts phases \
    --modes fused --phase-sizes $size 2>&1 | grep -E "^phases|Error"
done
timeout 330 python benchmarks/tag_continuous_grid.py "$OUT/tcg" parity env 2>&1 | grep -E "^parity|^ *(grid|scan) |mismatched|rror" | head -24
fi
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
if [ "${PART:-1}" = 4 ]; then
# Issue 12: the k nearest in thread-local lists (grid) and in one pass (scan), built 2026-11-26 with
# no GPU: GPU grid = scan check and parity first, then env-only rates at 2,000 x 110 and
# 2,000 x 1,000 (rollout and every step observed) against the section of 2026-11-23 (fourth
# session): 110 scan 2.09M / grid 1.32M observed, 1,000 grid 154K observed.
timeout 300 python benchmarks/tag_continuous_grid.py "$OUT/tcg" parity env 2>&1 | grep -E "^parity|^ *(grid|scan) |mismatched|error" | head -20
# End to end at 2,000 x 110 with WarpDrive's network (408K compiled, 364K eager before; goal 0.5M).
timeout 240 python benchmarks/profile_iteration.py "$OUT/e2e" warpdrive compile 2>&1 | tail -4
fi
swap() {  # swap BRANCH|main: put that version's files in place
  for f in $(cd .ab/$2 && find . -type f -name "*.py"); do
    [ -f .ab/main/$f ] || { mkdir -p .ab/main/$(dirname $f); cp $f .ab/main/$f; }
  done
  if [ "$1" = main ]; then (cd .ab/main && find . -type f -name "*.py") | while read f; do cp .ab/main/$f $f; done
  else (cd .ab/$1 && find . -type f -name "*.py") | while read f; do cp .ab/$1/$f $f; done; fi
}
if [ "${PART:-1}" = 5 ]; then
# The fused kernels' GPU tests that the session of 2026-11-26 (third) did not rerun after the
# hardware tanh and bfloat16 products (float32 products at every width, the loss inside the
# kernels against autograd), then the optimizer, rollout-kernel, COVID-19 and run-safety GPU tests.
timeout 560 python -m pytest -q -m gpu -n 8 -p no:cacheprovider tests/test_fused_mlp.py tests/test_optimizers.py \
  tests/test_rollout_kernels.py tests/test_covid_economy_gpu.py tests/test_run_safety.py tests/test_networks.py 2>&1 | tail -2
fi
if [ "${PART:-1}" = 6 ]; then
# A Tag continuous branch (BRANCH, required) against the working tree. The device has no .git:
# copy the branch's changed files into .ab/BRANCH first and carry .ab:
#   b=BRANCH; git diff --name-only main...$b | while read f; do
#     mkdir -p .ab/$b/$(dirname $f); git show $b:$f > .ab/$b/$f; done
b=${BRANCH:?"PART=6 needs BRANCH=<a branch copied into .ab/BRANCH>"}
swap $b $b
timeout 300 python benchmarks/tag_continuous_grid.py "$OUT/tcg-$b" parity 2>&1 | grep -E "^parity|mismatched|rror" | head -8
for round in 1 2; do for version in $b main; do swap $version $b
  timeout 150 python benchmarks/tag_continuous_grid.py "$OUT/tcg-$version-$round" observed 2>&1 |
    grep -E "^ *(grid|scan) " | sed "s/^/$version /"
done; done
swap main $b
fi
