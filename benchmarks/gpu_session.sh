#!/usr/bin/env bash
# What a lent GPU is used for (BENCHMARKS.md, "GPU"), in parts of a few minutes each:
#   env      nvidia-smi and `aiayn doctor`
#   train    benchmarks/gpu_train.py: bf16 training at the paper's batch size (~25k target tokens),
#            aiayn vs HF Marian, eager and compiled, MFU, and a profile of where the GPU's time goes
#   tests    the GPU tests (tests/test_gpu.py: fp16, the compiled trainer, nccl; the trainer's GPU
#            resume, int8's GPU refusal)
#   decode   benchmarks/decode.py --device cuda --base: beam 4 and greedy against HF generate,
#            batches of 32 and 256 sentences
#   suite    the whole test suite (the slow tests left out, on 12 workers)
#   e2e      the real trainer: `aiayn train --preset base` on DATA_DIR in bf16 for E2E_MINUTES,
#            the last checkpoints averaged, test BLEU (beam 4) on the GPU
#
#   benchmarks/gpu_session.sh DATA_DIR OUT_DIR [PART ...]    (default: every part, in that order;
#   DATA_DIR: `aiayn prepare --corpus bible-es-en`)
#
# Runs with the python that has torch (PYTHON, default python3), reading the package from src/; each
# part has its own time limit and a failing part does not stop the rest. OUT_DIR gets a log per part
# (and gpu_train.json, e2e_metrics.jsonl): few files, as a lent machine sends back. DEVICE=cpu only tries the
# script (the tiny preset, a few steps).
set -u
DATA=${1:?usage: gpu_session.sh DATA_DIR OUT_DIR [PART ...]}
OUT=${2:?usage: gpu_session.sh DATA_DIR OUT_DIR [PART ...]}
shift 2
PARTS=${*:-env train tests decode suite e2e}
PY=${PYTHON:-python3}
[[ $PY == */* ]] && PY=$(realpath -s "$PY")  # a path stays right after the cd below (a venv link kept)
DEVICE=${DEVICE:-cuda}
E2E_MINUTES=${E2E_MINUTES:-2.5}
mkdir -p "$OUT"
OUT=$(realpath "$OUT") DATA=$(realpath "$DATA")
ROOT=$(realpath "$(dirname "$0")/..")
cd "$ROOT" || exit 1
export PYTHONPATH="$ROOT/src:$ROOT/tests${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 OUT

part() {  # part NAME SECONDS COMMAND...: run, log to OUT/NAME.log, print the log's end
    local name=$1 limit=$2 started=$SECONDS
    shift 2
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "== $name: rc $? in $((SECONDS - started)) s"
    grep -v -E '^\s*$|Warning|warn\(|USDT' "$OUT/$name.log" | tail -n "${TAIL:-14}"
}

if [[ $DEVICE == cpu ]]; then  # a try of the script: small and short
    TRAIN_ARGS="--device cpu --preset tiny --batch 8 --len 16 --warmup 1 --steps 2 --compile --profile 2"
    DECODE_ARGS="--device cpu --sentences 4 --new-tokens 5 --repeats 1 --no-int8"
    E2E_SETTINGS=(--preset tiny --max-steps 4 --set max_tokens=2000)
    EVAL_LIMIT=20
else
    TRAIN_ARGS="--device $DEVICE --preset base --compile --profile 5"
    DECODE_ARGS="--device $DEVICE --base --no-int8 --repeats 3"
    E2E_SETTINGS=(--preset base --minutes "$E2E_MINUTES" --set max_tokens=25000)
    EVAL_LIMIT=${EVAL_LIMIT:-0}
fi
# The paper's recipe but a 800-update warm-up to its peak rate (~7e-4 at 4,000), for a run of minutes
E2E_SETTINGS+=(--set warmup_steps=800 --set lr_peak=7e-4 --set save_minutes=0.5 --set eval_every=100000)

e2e() {  # e2e PY DATA RUN DEVICE EVAL_LIMIT SETTINGS...: train, average, evaluate, the last metrics
    set -e
    local py=$1 data=$2 run=$3 device=$4 limit=$5
    shift 5
    "$py" -m aiayn train "$data" --out "$run" "$@" --device "$device" --no-progress
    "$py" -m aiayn average "$run" --last 5
    "$py" -m aiayn evaluate "$run/model" "$data" --split test ${limit:+--limit $limit} --device "$device" \
        --no-progress --out "$run/eval"
    grep '"kind": "train"' "$run/metrics.jsonl" | tail -n 3
    cp "$run/metrics.jsonl" "$OUT/e2e_metrics.jsonl"
}
export -f e2e

for name in $PARTS; do
    case $name in
    env) part env 60 bash -c 'nvidia-smi --format=csv \
        --query-gpu=name,memory.total,driver_version,clocks.max.sm; "$0" -m aiayn doctor' "$PY" ;;
    train) (cd benchmarks &&
        TAIL=80 part train 420 "$PY" gpu_train.py $TRAIN_ARGS --json "$OUT/gpu_train.json") ;;
    tests) part tests 240 "$PY" -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/train/test_loss.py \
        tests/train/test_chunked_loss.py tests/train/test_trainer.py::test_resume_on_a_gpu \
        tests/runtime/test_quantize.py::test_a_model_on_the_gpu_is_refused ;;
    decode) for n in 32 256; do
        (cd benchmarks && TAIL=10 part "decode$n" 150 "$PY" decode.py $DECODE_ARGS --sentences $n)
    done ;;
    suite) part suite 200 "$PY" -m pytest -q -p no:cacheprovider -n 12 -m "not slow" --maxfail 30 tests ;;
    e2e) part e2e $((${E2E_MINUTES%.*} * 60 + 200)) bash -c 'e2e "$@"' _ "$PY" "$DATA" "$(mktemp -d)/run" \
        "$DEVICE" "${EVAL_LIMIT#0}" "${E2E_SETTINGS[@]}" ;;
    *) echo "gpu_session.sh: no part '$name' (env train tests decode suite e2e)" ;;
    esac
done
