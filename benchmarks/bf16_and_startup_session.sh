# One H100 lease for what 2026-11-25's CPU-only session built: run from the repository root with OUT
# set. (1) the GPU tests, which now cover warpsci's own Adam/RMSprop on CUDA (fused Adam kernel,
# foreach RMSprop, both captured), neg_pos_env_ratio and bf16 inside captured graphs; (2) issue 12's
# end-to-end profile at 2,000 x 110 Tag continuous with WarpDrive's network, float32 (TF32) against
# bfloat16 products, on an idle GPU; (3) issue 18's start-up probe (does anything still import
# torch._dynamo?).
set -u
mkdir -p "$OUT"
python -m pytest -q -m gpu tests/ -p no:cacheprovider 2>&1 | tail -15 > "$OUT/gpu_tests.txt"
cat "$OUT/gpu_tests.txt"
for flags in "warpdrive" "warpdrive bf16"; do
  python benchmarks/profile_iteration.py "$OUT" $flags 2>&1 | grep -E '"(case|rollout_ms|update_ms|env_steps_per_s)"'
done
python benchmarks/startup_probe.py 2>&1 | grep -E "^  [a-zA-Z]" | tail -14
