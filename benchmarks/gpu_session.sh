# One H100 lease for the checks of 2026-11-23 (third session): run from the repository root with
# OUT set.  Phase A shares the GPU (learning results and memory only); phase B times on an idle GPU.
set -u
mkdir -p "$OUT"
PHASES=${PHASES:-AB}
if [[ $PHASES == *A* ]]; then
# --- phase A: the fused kernels' GPU tests, the A2C Cartpole seeds, the soak run, together
(python -m pytest -q -m gpu tests/test_fused_mlp.py -p no:cacheprovider 2>&1 | tail -3 > "$OUT/fused_gpu_tests.txt") &
(SEEDS=${SEEDS:-8} bash benchmarks/cartpole_a2c_fused_check.sh > "$OUT/fused_check.txt" 2>&1) &
(python benchmarks/soak.py "$OUT/soak" "${SOAK_STEPS:-1e9}" > "$OUT/soak.txt" 2>&1) &
wait
cat "$OUT/fused_gpu_tests.txt"; tail -3 "$OUT/fused_check.txt"; cat "$OUT/soak.txt" | cut -c1-600
fi
if [[ $PHASES == *B* ]]; then
# --- phase B: timings on an idle GPU
if [ -f benchmarks/tag_continuous_grid.py ]; then
  timeout "${GRID_LIMIT:-200}" python benchmarks/tag_continuous_grid.py "$OUT/grid" 2>&1 | grep -v -i warn | tail -25
fi
python - > "$OUT/tag_gridworld_e2e.txt" 2>&1 <<'PY'
import json, sys
sys.path.insert(0, "benchmarks")
import tag_speed_session as t
for fused in (True, False):
    r = t.end_to_end(2000, 999, False, fused)
    print(json.dumps({k: r.get(k) for k in ("envs", "agents", "fused", "num_steps", "env_steps_per_s")}), flush=True)
PY
tail -2 "$OUT/tag_gridworld_e2e.txt"
fi
