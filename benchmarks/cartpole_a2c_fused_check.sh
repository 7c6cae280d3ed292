# A2C Cartpole preset on the GPU, with the fused MLP kernels and without, SEEDS seeds each
# (default 12), five runs at a time. Prints one line per run and the count that reached 475.
SEEDS=${SEEDS:-12}
run_one() {
  seed=$1; fused=$2
  name=a2c_${seed}${fused}
  python -m warpsci.cli train CartPole-v1 --algo a2c --device cuda --seed "$seed" $fused \
    --run-dir /tmp/r_$name --no-progress > /tmp/log_$name 2>&1
  ret=$(grep -o '"eval_mean_return": [-0-9.]*' /tmp/r_$name/summary.json | grep -o '[-0-9.]*$')
  echo "$fused seed $seed eval_mean_return ${ret:-FAILED}"
}
export -f run_one
for seed in $(seq 1 "$SEEDS"); do echo "$seed --fused-mlp"; echo "$seed --no-fused-mlp"; done \
  | xargs -P 5 -L 1 bash -c 'run_one $0 $1' | sort | tee /tmp/fused_check.txt
for kind in --fused-mlp --no-fused-mlp; do
  n=$(grep -c "^$kind " /tmp/fused_check.txt)
  ok=$(grep "^$kind " /tmp/fused_check.txt | awk '$5 >= 475' | wc -l)
  echo "$kind: $ok of $n runs reached 475"
done
