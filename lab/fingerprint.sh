#!/usr/bin/env bash
# A deterministic fingerprint of a source tree, to compare a refactor with the commit before it:
#   git worktree add /tmp/before HEAD~5
#   bash lab/fingerprint.sh /tmp/before /tmp/fp-before > before.txt
#   bash lab/fingerprint.sh .           /tmp/fp-after  > after.txt
#   diff before.txt after.txt && echo identical
# Fixed steps and a fixed vocabulary (the shipped English model's): pre-training with masked LM
# and with MLM + NSP, fine-tuning on 300 SST-2 sentences, evaluation and prediction on 100. It
# prints the weights' SHA-256, the last held-out evaluation of each pre-training and the test
# score. About 1 minute on 2 cores; the project's environment runs the TREE's code.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
TREE=$(cd "$1" && pwd); OUT=$2
PY=${PYTHON:-$REPO/.venv/bin/python}
VOCAB=$REPO/bertlab/models/mini-reviews-en/vocab.txt
rm -rf "$OUT"; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
cd "$TREE"
python3 -c "import gzip,sys; sys.stdout.write(gzip.open('bertlab/demo_data/imdb_reviews_slice.txt.gz','rt').read()[:200000])" > "$OUT/corpus.txt"
head -301 bertlab/demo_data/sst2_train.tsv > "$OUT/train.tsv"
head -101 bertlab/demo_data/sst2_test.tsv > "$OUT/test.tsv"
for objective in mlm mlm+nsp; do
  "$PY" -m bertlab pretrain --corpus "$OUT/corpus.txt" --tokenizer "$VOCAB" --model-size tiny \
    --max-steps 12 --batch-size 8 --max-seq-length 64 --seed 0 --objective "$objective" \
    --eval-every 6 --out "$OUT/pt-$objective" --no-progress > "$OUT/pt-$objective.log" 2>&1
done
"$PY" -m bertlab finetune --task sst2 --train "$OUT/train.tsv" --dev-fraction 0.2 \
  --model "$OUT/pt-mlm/final" --epochs 2 --seeds 1 --learning-rate 1e-3 --out "$OUT/ft" \
  --no-progress > "$OUT/ft.log" 2>&1
"$PY" -m bertlab evaluate --task sst2 --model "$OUT/ft/best" --data "$OUT/test.tsv" > "$OUT/eval.txt" 2>&1
"$PY" -m bertlab predict --task sst2 --model "$OUT/ft/best" --data "$OUT/test.tsv" \
  --output "$OUT/predictions.jsonl" > /dev/null 2>&1
cd "$OUT"
sha256sum pt-mlm/final/model.safetensors pt-mlm+nsp/final/model.safetensors ft/best/model.safetensors predictions.jsonl
tail -1 eval.txt
python3 - <<'PY'
import glob, json
for path in sorted(glob.glob("pt-*/metrics.jsonl")):
    evals = [json.loads(line) for line in open(path) if '"eval"' in line]
    print(path, {k: v for k, v in evals[-1].items() if "time" not in k and "second" not in k})
PY
