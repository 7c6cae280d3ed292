#!/usr/bin/env bash
# CovidEconomy-v0 on one GPU (issue 14): env-only steps/s at 1K-100K environments, then a PPO run of
# examples/configs/covid_economy_welfare.yaml (405-day episodes, both health weights 1) stopped by
# SIGTERM after TRAIN_SECONDS (it checkpoints and exits), then `warpsci eval` of the run, which plays
# it greedily beside the real-world policies and plots both.
# GAMMA and TOTAL override the preset's gamma and total steps; EXTRA adds any other `warpsci train`
# options (a whole-option override such as `--groups` must go there, not after the command).
#   OUT=dir [GAMMA=0.995] [TOTAL=45000000] [TRAIN_SECONDS=280] [NAME=run] [BENCH=0] \
#     [EXTRA="--seed 2"] bash benchmarks/covid_welfare_session.sh
set -u
OUT=${OUT:?give OUT}; TRAIN_SECONDS=${TRAIN_SECONDS:-280}
NAME=${NAME:-welfare}
OVERRIDES=()
[ -n "${GAMMA:-}" ] && OVERRIDES+=(--gamma "$GAMMA")
[ -n "${TOTAL:-}" ] && OVERRIDES+=(--total-steps "$TOTAL")
date -u
if [ "${BENCH:-1}" = 1 ]; then
python - <<'PY' 2>&1 | grep '^{'
import json
from warpsci.bench import bench_env
for n in (1000, 10000, 60000, 100000):
    r = bench_env("CovidEconomy-v0", n, "cuda", steps=200 if n <= 10000 else 100, capture=True)
    print(json.dumps({"mode": "env-only cuda graph", "envs": n, "steps_per_s": r.steps_per_second, "repeats": r.repeats}))
PY
fi
timeout -s TERM "$TRAIN_SECONDS" python -m warpsci train CovidEconomy-v0 \
  --config examples/configs/covid_economy_welfare.yaml --run-dir "$OUT/$NAME" --no-progress \
  --eval-episodes 0 "${OVERRIDES[@]}" ${EXTRA:-} > "$OUT/${NAME}_train.log" 2>&1
grep -E '"(global_step|train_wall|return_last100)' "$OUT/${NAME}_train.log"
python -m warpsci eval "$OUT/$NAME" --episodes 16 2>&1 | grep -E 'welfare|deaths|mean_return'
(cd "$OUT/$NAME" && tar czf "../$NAME.tgz" progress.csv config.yaml covid_episode.png covid_episode_trained.csv) && rm -rf "${OUT:?}/$NAME"
