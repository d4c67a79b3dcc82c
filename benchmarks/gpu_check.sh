#!/usr/bin/env bash
# The device check of the GPU recipe (docs/budget.md#on-a-gpu), in two steps, and a short demo:
#   bash benchmarks/gpu_check.sh prepare   # here: copies <= 20 MB of reviews and SST-2 into .gpu_data/
#   bash benchmarks/gpu_check.sh run       # on the GPU machine, from the repository root (about 7 min,
#                                          # then the demo below)
#   bash benchmarks/gpu_check.sh demo      # the demo alone: needs neither prepare nor ../shared
#   bash benchmarks/gpu_check.sh speed     # on the GPU machine, after prepare (about 5 min): the
#                                          # step table of benchmarks/gpu_speed.py (base and large,
#                                          # bertlab against transformers, MFU), `bertlab pretrain`
#                                          # tokens/s at mini and base, and one SST-2 epoch of
#                                          # `bertlab finetune` against the Trainer; its log and
#                                          # gpu_speed.json in $OUT
# `run` uses the machine's own torch and transformers (nothing is installed there) and runs
# bertlab from the repository root; it writes its logs and gpu_check.json to $OUT (default
# runs/gpu-check). Extra arguments go to benchmarks/gpu_check.py (e.g. --budget 20s for a smoke test),
# with `demo` to `bertlab demo` (e.g. --minutes 0.05 --seeds 1), with `speed` to
# benchmarks/gpu_speed.py (e.g. --compile, or --tiny for a CPU smoke test).
# The demo step is a short `bertlab demo` on its shipped data (bertlab/demo_data, bertlab/models)
# into $OUT/demo, its output in $OUT/demo.log; it ends with the device that live pre-training used
# and the report's table. The machine's image has no gensim: the demo then skips its word-vector
# row and says so in one line.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=.gpu_data
SHARED=${SHARED_DATA:-../shared/data}
REVIEW_DOCUMENTS=36000  # the first 36,000 IMDB reviews: 18 MB gzipped, about 11M pieces
DEMO_MINUTES=0.5  # of the demo's live pre-training (its default is 1)
DEMO_SEEDS=1,2,3  # of the demo's fine-tuning (its default is 1-5)

demo() {
    python3 -m bertlab demo --minutes "$DEMO_MINUTES" --seeds "$DEMO_SEEDS" --no-progress \
        --out "$OUT/demo" "$@" 2>&1 | tee "$OUT/demo.log"
    python3 - "$OUT/demo/results.json" <<'PY'
import json, sys
from bertlab.apps.demo.report import results_table
results = json.load(open(sys.argv[1], encoding="utf-8"))
pretrain = results["pretrain"]
print(f"\ndemo: live pre-training on the {pretrain['device']}: {pretrain['steps']} steps, "
      f"{pretrain['tokens']:,} tokens in {pretrain['seconds']:.0f} s")
if "skipped" in results["word_vectors"]:
    print(f"demo: word vectors skipped: {results['word_vectors']['skipped']}")
print("\n".join(results_table(results)))
PY
}

case "${1:-}" in
prepare)
    grep -qx "/$DATA/" .git/info/exclude 2>/dev/null || echo "/$DATA/" >> .git/info/exclude
    mkdir -p "$DATA/corpus_reviews_en" "$DATA/glue/SST-2"
    cp "$SHARED/glue/SST-2/train.tsv" "$DATA/glue/SST-2/train.tsv"
    python3 - "$SHARED/corpus_reviews_en/imdb_reviews.txt.gz" "$DATA/corpus_reviews_en/imdb_reviews.txt.gz" "$REVIEW_DOCUMENTS" <<'PY'
import gzip, sys
source, target, wanted = sys.argv[1], sys.argv[2], int(sys.argv[3])
documents = 0
with gzip.open(source, "rt", encoding="utf-8") as lines, gzip.open(target, "wt", 9, encoding="utf-8") as out:
    for line in lines:
        out.write(line)
        documents += not line.strip()
        if documents >= wanted:
            break
print(f"{target}: {documents:,} reviews")
PY
    du -sh "$DATA"
    ;;
run | demo | speed)
    mode=$1
    shift
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
    OUT=${OUT:-runs/gpu-check}
    mkdir -p "$OUT"
    command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
    if [ "$mode" = demo ]; then
        demo "$@"
    elif [ "$mode" = speed ]; then
        python3 benchmarks/gpu_speed.py --finetune --corpus "$DATA/corpus_reviews_en/imdb_reviews.txt.gz" \
            --sst2 "$DATA/glue/SST-2/train.tsv" --work "${SPEED_WORK:-/tmp/gpu-speed}" \
            --out "$OUT/gpu_speed.json" "$@" 2>&1 | tee "$OUT/gpu_speed.log"
    else
        python3 -m bertlab --help > /dev/null && echo "bertlab --help: ok"
        python3 benchmarks/gpu_check.py --data "$DATA" --out "$OUT" "$@"
        demo
    fi
    ;;
*)
    echo "usage: bash benchmarks/gpu_check.sh prepare|run [gpu_check.py arguments]|demo [bertlab demo arguments]|speed [gpu_speed.py arguments]" >&2
    exit 2
    ;;
esac
