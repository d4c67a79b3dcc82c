"""The names in a run's folder (OUT), declared once and without torch: what pre-training and
fine-tuning write there, and what marks and locks the folder of any bertlab command. Pre-training
(`bertlab.training.pretraining`), fine-tuning (`bertlab.training.finetuning`), the hub's hint at
a run given where a model belongs (`bertlab.core.hub`), the demo and the experiments read them
here, so neither part of training imports the other for a name.

    OUT/ of bertlab pretrain            OUT/ of bertlab finetune
      final/         FINAL_DIR            best/          BEST_DIR
      checkpoints/   CHECKPOINTS_DIR      result.json    RESULT_FILE
      corpus/        CORPUS_CACHE_DIR     seeds.json     SEEDS_FILE (and seed-S/, one per seed)
      tokenizer/     TOKENIZER_DIR
      budget_plan.json  PLAN_FILE
    both: metrics.jsonl (METRICS_FILE), curves.png (CURVES_FILE), .bertlab-run (OWNER_FILE),
    .bertlab.lock (LOCK_FILE)
"""

# A pre-training run's folder.
FINAL_DIR = "final"  # the model fine-tuning uses, with its tokenizer
CHECKPOINTS_DIR = "checkpoints"  # step-N folders; --resume continues from the latest
CORPUS_CACHE_DIR = "corpus"  # the tokenized corpus, unless `corpus_cache` says
TOKENIZER_DIR = "tokenizer"  # a vocabulary trained on the corpus
PLAN_FILE = "budget_plan.json"  # a budget's plan for the machine, kept for --resume
PRETRAIN_OUTPUTS = (FINAL_DIR, CHECKPOINTS_DIR)  # what shows that OUT holds a pre-training run

# A fine-tuning run's folder.
BEST_DIR = "best"  # the best model, its tokenizer, its task and its model card
RESULT_FILE = "result.json"
SEEDS_FILE = "seeds.json"  # several seeds: each seed's run and which was best
# What shows that OUT holds a fine-tuning run: its model, results or seeds.
FINETUNE_OUTPUTS = (BEST_DIR, RESULT_FILE, SEEDS_FILE)

# Both, and the folder of any bertlab command.
METRICS_FILE = "metrics.jsonl"  # one JSON record per line (`bertlab.training.metrics_log`)
CURVES_FILE = "curves.png"
OWNER_FILE = ".bertlab-run"  # the run marker: the bertlab command whose outputs it holds
LOCK_FILE = ".bertlab.lock"  # while a process writes to it; holds its pid
