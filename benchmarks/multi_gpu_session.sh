# Leases of a 2-GPU H200 host (kind nvidia-h200-x2) for issue 15, run from the repository root
# with OUT set. PHASES=S: weak scaling (1 and 2 GPUs), DDP against the flat all-reduce, and the
# two-GPU tests; PHASES=T: every other GPU test.
set -u
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
PHASES=${PHASES:-S}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [[ $PHASES == *S* ]]; then
  timeout 150 python -m torch.distributed.run --standalone --nproc-per-node 2 \
    benchmarks/gradient_sync.py "$OUT/sync" 2>&1 | grep -v -i warn | tail -20
  timeout 200 python -m pytest -q -m gpu tests/test_distributed_gpu.py -p no:cacheprovider 2>&1 | tail -15
  timeout 420 python benchmarks/multi_gpu_scaling.py "$OUT/scaling" 1 2 2>&1 | grep -v -i warn | tail -30
  rm -rf "$OUT"/scaling/*/checkpoints "$OUT"/scaling/*/tensorboard "$OUT"/scaling/*/checkpoint.pt
fi
if [[ $PHASES == *T* ]]; then
  timeout "${TEST_LIMIT:-540}" python -m pytest -q -m gpu tests/ -p no:cacheprovider --durations 8 \
    --deselect tests/test_distributed_gpu.py 2>&1 | tail -25
fi
