# H100 checks for issues 18 and 12, from the repository root with OUT set, calls of under 10
# minutes each: PART=0 (what was built without a GPU: the epoch shuffle's GPU test and phases, Tag
# continuous's parity and searches), PART=1 (loss heads: GPU test, sweep, phases against the
# compiled autograd loss), PART=2 (end to end at 2K and 1M, Tag gridworld end to end, time to
# solve), PART=3 (the learning tests on the GPU), PART=4 (issue 12's nearest-neighbour searches and
# Tag continuous end to end), PART=5 and PART=6 (the two branches prepared on 2026-11-26 without a
# GPU, each against the working tree). gymnasium and pettingzoo must be installed there first (wheels carried
# in .whl, as the device README says). PARTs 0, 2, 3 and 4 ran on an H100 on 2026-11-26, PART=1 on
# an H200 that day (BENCHMARKS.md).
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
# Branches per-network-parameter-buffers (issue 18: a parameter buffer per network, for the 1M
# figure) and tag-continuous-grouped-reads (issue 12: grouped reads in the step kernel), against
# the working tree, each in its own call (PART=5, PART=6), alternating. The device has no .git: copy each branch's changed
# files into .ab/BRANCH first and carry .ab, e.g.
#   for b in per-network-parameter-buffers tag-continuous-grouped-reads; do
#     git diff --name-only main...$b | while read f; do mkdir -p .ab/$b/$(dirname $f)
#       git show $b:$f > .ab/$b/$f; done; done
b=per-network-parameter-buffers
swap $b $b
timeout 150 python -m pytest -q -m gpu tests/test_optimizers.py tests/test_graphs_gpu.py -n 4 -p no:cacheprovider 2>&1 | tail -1
for round in 1 2; do for version in $b main; do swap $version $b
  for size in 2048 1048576; do timeout 90 python -c "
from warpsci.bench import bench_train
r = bench_train('CartPole-v1', $size, 'cuda', iterations=5)
print('$version', $size, round(r.steps_per_second / 1e6, 2), 'M steps/s')" 2>&1 | tail -1; done
done; done
swap main $b
fi
if [ "${PART:-1}" = 6 ]; then
b=tag-continuous-grouped-reads
swap $b $b
timeout 300 python benchmarks/tag_continuous_grid.py "$OUT/tcg-$b" parity 2>&1 | grep -E "^parity|mismatched|rror" | head -8
for round in 1 2; do for version in $b main; do swap $version $b
  timeout 150 python benchmarks/tag_continuous_grid.py "$OUT/tcg-$version-$round" observed 2>&1 |
    grep -E "^ *(grid|scan) " | sed "s/^/$version /"
done; done
swap main $b
fi
