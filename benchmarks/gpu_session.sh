#!/usr/bin/env bash
# What a lent GPU is used for (BENCHMARKS.md, "GPU"), in one run of under ten minutes:
#   env.log     nvidia-smi and `aiayn doctor`
#   tests.log   the GPU tests (tests/test_gpu.py, the trainer's GPU resume, int8's GPU refusal)
#   train.log   benchmarks/gpu_train.py: bf16 training tok/s and MFU, aiayn vs HF Marian, eager and compiled
#   e2e.log     the real trainer: `aiayn train --preset base` for TRAIN_MINUTES, average, evaluate on the GPU
#   decode.log  benchmarks/decode.py --device cuda: beam 4 and greedy against HF generate
#
#   benchmarks/gpu_session.sh DATA_DIR OUT_DIR    (DATA_DIR: `aiayn prepare --corpus bible-es-en`)
#
# Runs from the repository root with the python that has torch (PYTHON, default python3), reading
# the package from src/; each part has its own time limit and a failing part does not stop the rest.
set -u
DATA=${1:?usage: gpu_session.sh DATA_DIR OUT_DIR}
OUT=${2:?usage: gpu_session.sh DATA_DIR OUT_DIR}
PY=${PYTHON:-python3}
TRAIN_MINUTES=${TRAIN_MINUTES:-2}
DEVICE=${DEVICE:-cuda}  # cpu only to try the script
ROOT=$(pwd)
mkdir -p "$OUT"
OUT=$(realpath "$OUT") DATA=$(realpath "$DATA")
export PYTHONPATH="$ROOT/src:$ROOT/tests${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

part() {  # part NAME SECONDS COMMAND...: run, log to OUT/NAME.log, print the log's end
    local name=$1 limit=$2 started=$SECONDS
    shift 2
    timeout "$limit" "$@" >>"$OUT/$name.log" 2>&1
    echo "== $name: rc $? in $((SECONDS - started)) s"
    grep -v -E '^\s*$|Warning|warn\(' "$OUT/$name.log" | tail -n "${TAIL:-14}"
}

part env 60 bash -c "nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; $PY -m aiayn doctor"
part tests 150 "$PY" -m pytest -q -p no:cacheprovider tests/test_gpu.py \
    tests/train/test_trainer.py::test_resume_on_a_gpu tests/model/test_quantize.py::test_a_model_on_the_gpu_is_refused
(cd benchmarks && TAIL=8 part train 200 "$PY" gpu_train.py --device "$DEVICE" ${GPU_TRAIN_ARGS:---preset base --compile} --json "$OUT/gpu_train.json")
RUN=$(mktemp -d)/run
part e2e 240 bash -c "set -e
  $PY -m aiayn train '$DATA' --out '$RUN' --preset base --minutes $TRAIN_MINUTES --device $DEVICE --no-progress
  $PY -m aiayn average '$RUN' --last 2
  $PY -m aiayn evaluate '$RUN/model' '$DATA' --split test --limit ${EVAL_LIMIT:-300} --device $DEVICE --no-progress --out '$RUN/eval'
  tail -n 3 '$RUN/metrics.jsonl'"
(cd benchmarks && part decode 150 "$PY" decode.py --device "$DEVICE" --base --no-int8 --sentences 64 --repeats 3)
