#!/usr/bin/env bash
# What a lent GPU is used for (BENCHMARKS.md, "GPU"), in parts of a few minutes each:
#   env      nvidia-smi and `aiayn doctor`
#   train    benchmarks/gpu_train.py: bf16 training at the paper's batch size (~25k target tokens),
#            aiayn vs HF Marian, eager and compiled, MFU, and a profile of where the GPU's time goes
#   tests    the GPU tests (tests/scenarios/test_gpu.py: fp16, the compiled trainer, nccl; the trainer's GPU
#            resume, int8's GPU refusal)
#   decode   benchmarks/decode.py --device cuda --base: beam 4 and greedy against HF generate,
#            batches of 32 and 256 sentences
#   suite    the whole test suite (the slow tests left out, on 12 workers)
#   teacher  the real trainer: `aiayn train --preset base` on DATA_DIR in bf16 for TEACHER_MINUTES
#            (dropout 0.3: 0.9M tokens of verses), the last checkpoints averaged, its matrices
#            rounded to int8 values (gpu_pack.py round: what comes back is what was measured),
#            test BLEU (beam 4); then `aiayn distill` on the GPU (the teacher translates the
#            training sources, a 3 + 1 student trains for STUDENT_MINUTES), rounded the same way
#            and scored; both packed into OUT/teacher.part*, OUT/student.part* (gpu_pack.py pack)
#
#   benchmarks/gpu_session.sh DATA_DIR OUT_DIR [PART ...]    (default: every part, in that order;
#   DATA_DIR: `aiayn prepare --corpus bible-es-en`)
#
# One call of at most 10 minutes does the most (a lent H200's whole budget is 15): carry `.gpu/data`
# (`aiayn prepare --corpus bible-es-en --out .gpu/data`) and `.whl` (wheels of what that machine lacks:
# fastapi 0.165 and its needs with opentelemetry-api, uvicorn, pysword, sentence-splitter), then
#   TEACHER_MINUTES=2.5 STUDENT_MINUTES=1: env; suite in the background (SUITE_WORKERS=8); teacher;
#   train with TRAIN_LIMIT the seconds left; bring back OUT/*.part* and the logs in one archive.
# Runs with the python that has torch (PYTHON, default python3), reading the package from src/; each
# part has its own time limit (TRAIN_LIMIT, SUITE_LIMIT: seconds; SUITE_WORKERS: pytest's workers) and
# a failing part does not stop the rest. OUT_DIR gets a log per part
# (and gpu_train.json, teacher_metrics.jsonl): few files, as a lent machine sends back. DEVICE=cpu only
# tries the script (the tiny preset, a few steps).
set -u
DATA=${1:?usage: gpu_session.sh DATA_DIR OUT_DIR [PART ...]}
OUT=${2:?usage: gpu_session.sh DATA_DIR OUT_DIR [PART ...]}
shift 2
PARTS=${*:-env train tests decode suite teacher}
PY=${PYTHON:-python3}
[[ $PY == */* ]] && PY=$(realpath -s "$PY")  # a path stays right after the cd below (a venv link kept)
DEVICE=${DEVICE:-cuda}
TEACHER_MINUTES=${TEACHER_MINUTES:-3}
STUDENT_MINUTES=${STUDENT_MINUTES:-1.5}
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
    TEACHER_SETTINGS=(--preset tiny --max-steps 4 --set max_tokens=2000 --set update_tokens=2000)
    STUDENT_SETTINGS=(--steps 3 --set max_tokens=2000 --set update_tokens=2000)
    EVAL_LIMIT=20
else
    TRAIN_ARGS="--device $DEVICE --preset base --compile --cudagraphs --profile 3"
    DECODE_ARGS="--device $DEVICE --base --no-int8 --repeats 3"
    # 12k target tokens an update: more updates than the paper's 25k in minutes on 0.9M tokens
    TEACHER_SETTINGS=(--preset base --minutes "$TEACHER_MINUTES" --set max_tokens=12000
        --set update_tokens=12000 --set dropout=0.3 --set clip_norm=1.0)
    STUDENT_SETTINGS=(--set minutes="$STUDENT_MINUTES")
    EVAL_LIMIT=${EVAL_LIMIT:-0}
fi
# The paper's recipe but a 1,000-update warm-up to its peak rate (~7e-4 at 4,000), for a run of minutes
TEACHER_SETTINGS+=(--set warmup_steps=1000 --set lr_peak=7e-4 --set save_minutes=0.25 --set eval_every=100000)

teacher() {  # teacher PY DATA RUN DEVICE EVAL_LIMIT SETTINGS... -- STUDENT SETTINGS...
    set -e
    local py=$1 data=$2 run=$3 device=$4 limit=$5 settings=() student=()
    shift 5
    while [[ $1 != -- ]]; do settings+=("$1"); shift; done
    shift
    student=("$@")
    local scoring=(--split test ${limit:+--limit $limit} --device "$device" --no-progress)
    "$py" -m aiayn train "$data" --out "$run/teacher" "${settings[@]}" --device "$device" --no-progress
    "$py" -m aiayn average "$run/teacher" --last 5
    "$py" benchmarks/gpu_pack.py round "$run/teacher/model"
    "$py" -m aiayn evaluate "$run/teacher/model" "$data" "${scoring[@]}" --out "$run/teacher/eval"
    grep '"kind": "train"' "$run/teacher/metrics.jsonl" | tail -n 2
    cp "$run/teacher/metrics.jsonl" "$OUT/teacher_metrics.jsonl"
    "$py" -m aiayn distill "$run/teacher/model" "$data" --out "$run/student" "${student[@]}" \
        --device "$device" --batch-tokens 16000 --no-progress
    "$py" benchmarks/gpu_pack.py round "$run/student/model"
    "$py" -m aiayn evaluate "$run/student/model" "$data" "${scoring[@]}" --out "$run/student/eval"
    "$py" benchmarks/gpu_pack.py pack "$run/teacher/model" "$OUT/teacher"
    "$py" benchmarks/gpu_pack.py pack "$run/student/model" "$OUT/student"
}
export -f teacher

for name in $PARTS; do
    case $name in
    env) part env 60 bash -c 'nvidia-smi --format=csv \
        --query-gpu=name,memory.total,driver_version,clocks.max.sm; "$0" -m aiayn doctor' "$PY" ;;
    train) (cd benchmarks &&
        TAIL=80 part train "${TRAIN_LIMIT:-420}" "$PY" gpu_train.py $TRAIN_ARGS --json "$OUT/gpu_train.json") ;;
    tests) part tests 240 "$PY" -m pytest -q -p no:cacheprovider tests/scenarios/test_gpu.py tests/train/test_loss.py \
        tests/train/test_chunked_loss.py tests/train/test_trainer.py::test_resume_on_a_gpu \
        tests/runtime/test_quantize.py::test_a_model_on_the_gpu_is_refused ;;
    decode) for n in 32 256; do
        (cd benchmarks && TAIL=10 part "decode$n" 150 "$PY" decode.py $DECODE_ARGS --sentences $n)
    done ;;
    suite) part suite "${SUITE_LIMIT:-200}" "$PY" -m pytest -q -p no:cacheprovider -n "${SUITE_WORKERS:-12}" \
        -m "not slow" --maxfail 30 tests ;;
    teacher) TAIL=30 part teacher $(((${TEACHER_MINUTES%.*} + ${STUDENT_MINUTES%.*}) * 60 + 300)) \
        bash -c 'teacher "$@"' _ "$PY" "$DATA" "$(mktemp -d)/run" "$DEVICE" "${EVAL_LIMIT#0}" \
        "${TEACHER_SETTINGS[@]}" -- "${STUDENT_SETTINGS[@]}" ;;
    *) echo "gpu_session.sh: no part '$name' (env train tests decode suite teacher)" ;;
    esac
done
