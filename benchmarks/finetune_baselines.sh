#!/usr/bin/env bash
# From-scratch baselines (no pre-training) at mini size (L4/H256) on the shared task data: SST-2,
# CoNLL-2003, the SQuAD v1.1 part, ChnSentiCorp and Resume NER. They show that fine-tuning runs to
# completion on each task family and give the floor a pre-trained model must beat.
#
# Dev data: CoNLL-2003 has valid.txt (eng.testa); the other shared folders hold a train file only,
# so a fixed part of it is held out (--dev-fraction; SQuAD by article). The official dev sets are
# held back elsewhere, so these figures are NOT comparable with published dev results.
#
# Short runs by default (EPOCHS=1; training sets capped at MAX_TRAIN examples, and the long-input
# tasks SQuAD (384 tokens) and ChnSentiCorp (128, reviews fill it) at LONG_MAX_TRAIN) so that the
# whole script takes about half an hour on 2 busy CPU cores; raise them for real baselines. A
# random encoder needs a larger learning rate than BERT's fine-tuning 2e-5: LEARNING_RATE=1e-4.
#
#   EPOCHS=1 MAX_TRAIN=4000 LONG_MAX_TRAIN=2000 benchmarks/finetune_baselines.sh [OUT_ROOT]
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DATA="${SHARED_DATA:-$ROOT/../shared/data}"
OUT="${1:-/tmp/bertlab-baselines}"
EPOCHS="${EPOCHS:-1}"
MAX_TRAIN="${MAX_TRAIN:-4000}"
LONG_MAX_TRAIN="${LONG_MAX_TRAIN:-2000}"
LEARNING_RATE="${LEARNING_RATE:-1e-4}"
THREADS="${THREADS:-1}"  # torch threads; on a shared 2-core machine one thread is much faster
BERTLAB="${BERTLAB:-$ROOT/.venv/bin/bertlab}"
UNCASED="$DATA/vocab/bert-base-uncased-vocab.txt"
CASED="$DATA/vocab/bert-base-cased-vocab.txt"
CHINESE="$DATA/vocab/bert-base-chinese-vocab.txt"

run() {  # name task tokenizer max-train-examples train-and-dev-flags...
    local name="$1" task="$2" tokenizer="$3" max_train="$4"
    shift 4
    echo "== $name" >&2
    local started=$SECONDS
    "$BERTLAB" finetune --task "$task" --from-scratch --model-size mini --tokenizer "$tokenizer" \
        --epochs "$EPOCHS" --learning-rate "$LEARNING_RATE" --max-train-examples "$max_train" \
        --threads "$THREADS" --out "$OUT/$name" --no-progress "$@" | tail -n 1 > "$OUT/$name.json"
    echo "$name $(( SECONDS - started )) s: $(cat "$OUT/$name.json")"
}

mkdir -p "$OUT"
run sst2 sst2 "$UNCASED" "$MAX_TRAIN" --train "$DATA/glue/SST-2/train.tsv" --dev-fraction 0.05
run conll2003 conll2003 "$CASED" "$MAX_TRAIN" --train "$DATA/conll2003/train.txt" \
    --dev "$DATA/conll2003/valid.txt"
run squad squad "$UNCASED" "$LONG_MAX_TRAIN" --train "$DATA/squad_v1.1/train-part.json" \
    --dev-fraction 0.2
run chnsenticorp chnsenticorp "$CHINESE" "$LONG_MAX_TRAIN" \
    --train "$DATA/chnsenticorp/train.tsv" --dev-fraction 0.1
run resume_ner tagging "$CHINESE" "$MAX_TRAIN" --train "$DATA/resume_ner/train.char.bmes" \
    --dev-fraction 0.1
