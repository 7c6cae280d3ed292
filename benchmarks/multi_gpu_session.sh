# Leases of a multi-GPU H200 host for issues 15 and 19, run from the repository root with OUT set.
# PHASES=S: weak scaling (COUNTS, default "1 2"), DDP against the flat all-reduce, and the two-GPU
# tests; PHASES=T: every other GPU test. The 4-GPU call (issue 19, kind nvidia-h200-x4):
#   PHASES=S COUNTS="1 2 4" bash benchmarks/multi_gpu_session.sh
# (REPEATS=N runs each case N times and reports the median: about 15 s a run.)
set -u
mkdir -p "$OUT"
# NVLink multicast off everywhere (the device notes: it can take a shared host out of service).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PHASES=${PHASES:-S}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [[ $PHASES == *S* ]]; then
  # Scaling first: it is what the 4-GPU call is for, and the later steps may run out of time.
  timeout 330 python benchmarks/multi_gpu_scaling.py "$OUT/scaling" ${COUNTS:-1 2} --repeats "${REPEATS:-1}" 2>&1 |
    grep -v -i warn | tail -30
  rm -rf "$OUT"/scaling/*/checkpoints "$OUT"/scaling/*/tensorboard "$OUT"/scaling/*/checkpoint.pt
  timeout 150 python -m pytest -q -m gpu tests/test_distributed_gpu.py -p no:cacheprovider 2>&1 | tail -15
  timeout 90 python -m torch.distributed.run --standalone --nproc-per-node "$(nvidia-smi -L | wc -l)" \
    benchmarks/gradient_sync.py "$OUT/sync" 2>&1 | grep -v -i warn | tail -20
fi
if [[ $PHASES == *T* ]]; then
  timeout "${TEST_LIMIT:-540}" python -m pytest -q -m gpu tests/ -p no:cacheprovider --durations 8 \
    --deselect tests/test_distributed_gpu.py 2>&1 | tail -25
fi
