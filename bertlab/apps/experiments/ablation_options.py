"""What `bertlab experiment ablation` may choose and its defaults: its rows, its columns and their
training sizes, declared without torch so that its `--help` lists them fast;
`bertlab.apps.experiments.ablation_config.AblationConfig` reads them.
"""

from __future__ import annotations

from bertlab.apps.experiments.grid import GridTask

DEFAULT_BUDGET_MINUTES = 10.0  # per objective: three objectives pre-train for 30 minutes in all
DEFAULT_SEEDS = (1, 2, 3)
FEATURE_LEARNING_RATE = 1e-3  # only the BiLSTM and the task layer learn: Adam's usual rate

# The rows of Table 5, in the paper's order, and the two baselines without encoder pre-training.
MLM_NSP, MLM, LTR, LTR_BILSTM, WORD_VECTORS, SCRATCH = (
    "mlm+nsp",
    "mlm",
    "ltr",
    "ltr+bilstm",
    "word-vectors",
    "no-pretraining",
)
ROWS = (MLM_NSP, MLM, LTR, LTR_BILSTM, WORD_VECTORS, SCRATCH)


# The columns: Table 5's SST-2, MRPC and SQuAD and Table 7's CoNLL-2003 (MNLI and QNLI are not in
# the shared data). MRPC is reported as accuracy, as in Table 5. The training parts are capped so
# that the whole command with 3 seeds runs in under 2 hours on 2 CPU cores: SST-2 at 8,000 of its
# 48,511 carved sentences, CoNLL-2003 at 5,000 of 10,110 (Table 7's six BiLSTM rows train on it
# too), SQuAD at 2,000 questions; dev and test parts are whole but SQuAD's.
TASKS = (
    GridTask("sst2", "sst2", "accuracy", epochs=1, max_seq_length=64, max_train_examples=8000),
    GridTask("mrpc", "mrpc", "accuracy", epochs=3, max_seq_length=128),
    GridTask("conll2003", "conll2003", "f1", epochs=3, max_seq_length=128, max_train_examples=5000),
    GridTask(
        "squad",
        "squad",
        "f1",
        epochs=2,
        max_seq_length=256,
        max_train_examples=2000,
        max_dev_examples=300,
        max_test_examples=1000,
    ),
)
# `uncapped`: the training sizes of the experiment's first measured round, every carved part whole
# but SQuAD's (about 2 h 35 min on 2 cores with 3 seeds), where the BiLSTM rows had the data to
# learn from; SQuAD stays a sample of its 87,599 questions.
UNCAPPED_TRAIN_EXAMPLES = {"sst2": None, "mrpc": None, "conll2003": None, "squad": 3000}
