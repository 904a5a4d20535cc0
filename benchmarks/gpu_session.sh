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
# Runs with the python that has torch (PYTHON, default python3), reading the package from src/; each
# part has its own time limit and a failing part does not stop the rest.
set -u
DATA=${1:?usage: gpu_session.sh DATA_DIR OUT_DIR}
OUT=${2:?usage: gpu_session.sh DATA_DIR OUT_DIR}
PY=${PYTHON:-python3}
[[ $PY == */* ]] && PY=$(realpath -s "$PY")  # a path stays right after the cd below (a venv link kept)
TRAIN_MINUTES=${TRAIN_MINUTES:-2}
DEVICE=${DEVICE:-cuda}  # cpu only to try the script
mkdir -p "$OUT"
OUT=$(realpath "$OUT") DATA=$(realpath "$DATA")
ROOT=$(realpath "$(dirname "$0")/..")
cd "$ROOT" || exit 1
export PYTHONPATH="$ROOT/src:$ROOT/tests${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

part() {  # part NAME SECONDS COMMAND...: run, log to OUT/NAME.log, print the log's end
    local name=$1 limit=$2 started=$SECONDS
    shift 2
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "== $name: rc $? in $((SECONDS - started)) s"
    grep -v -E '^\s*$|Warning|warn\(' "$OUT/$name.log" | tail -n "${TAIL:-14}"
}

e2e() {  # e2e PY DATA RUN DEVICE MINUTES EVAL_LIMIT: train, average, evaluate, the last metrics
    set -e
    "$1" -m aiayn train "$2" --out "$3" --preset base --minutes "$5" --device "$4" --no-progress
    "$1" -m aiayn average "$3" --last 2
    "$1" -m aiayn evaluate "$3/model" "$2" --split test --limit "$6" --device "$4" --no-progress --out "$3/eval"
    tail -n 3 "$3/metrics.jsonl"
}
export -f e2e

part env 60 bash -c 'nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; "$0" -m aiayn doctor' "$PY"
part tests 150 "$PY" -m pytest -q -p no:cacheprovider tests/test_gpu.py \
    tests/train/test_trainer.py::test_resume_on_a_gpu tests/runtime/test_quantize.py::test_a_model_on_the_gpu_is_refused
(cd benchmarks && TAIL=8 part train 200 "$PY" gpu_train.py --device "$DEVICE" ${GPU_TRAIN_ARGS:---preset base --compile} --json "$OUT/gpu_train.json")
part e2e 240 bash -c 'e2e "$@"' _ "$PY" "$DATA" "$(mktemp -d)/run" "$DEVICE" "$TRAIN_MINUTES" "${EVAL_LIMIT:-300}"
(cd benchmarks && part decode 150 "$PY" decode.py --device "$DEVICE" --base --no-int8 --sentences 64 --repeats 3)
