# A2C Cartpole preset on the GPU, several seeds, with the fused MLP kernels and without.
for seed in 1 2 3; do
  for fused in "--fused-mlp" ""; do
    name=a2c_${seed}${fused}
    python -m warpsci.cli train CartPole-v1 --algo a2c --device cuda --seed $seed $fused \
      --run-dir /tmp/r_$name --no-progress > /tmp/log_$name 2>&1
    echo "seed $seed ${fused:-unfused}: $(grep -o '"eval_mean_return": [-0-9.]*' /tmp/r_$name/summary.json)"
  done
done
