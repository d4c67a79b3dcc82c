"""Library constants that `--help` shows, as literals, so that building the parser imports no torch.

The modules that declare them (the experiments' `bertlab.apps`) import torch, which takes
seconds on a busy machine; `bertlab --help` and `bertlab COMMAND --help` must not wait for that.
Each literal names its declaration in DECLARED_IN, and tests/unit/test_cli_light_help.py checks
that the two agree, so they cannot drift apart.
"""

from __future__ import annotations

# bertlab.apps.transfer_config: TransferConfig's defaults, PRETRAIN_OBJECTIVES, ARMS
TRANSFER_LANG = "en"
TRANSFER_BUDGET_MINUTES = 60.0
TRANSFER_POINTS = (10.0, 30.0)
TRANSFER_SEEDS = (1, 2, 3)
TRANSFER_TASK_TEXT_REPEATS = 0
TRANSFER_LEARNING_RATE = 5e-4
TRANSFER_FINETUNE_DROPOUT = 0.1
TRANSFER_DEFAULT_ARMS = ("general",)
TRANSFER_ARMS = ("general", "in-domain", "mixed", "continued", "word-vectors")
PRETRAIN_OBJECTIVES = ("mlm", "mlm+nsp", "electra")
# bertlab.apps.ablation_config: DEFAULT_BUDGET_MINUTES, ROWS, AblationConfig.seeds, the learning
# rates, TASKS' names and max_train_examples, UNCAPPED_TRAIN_EXAMPLES
ABLATION_BUDGET_MINUTES = 10.0
ABLATION_ROWS = ("mlm+nsp", "mlm", "ltr", "ltr+bilstm", "word-vectors", "no-pretraining")
ABLATION_SEEDS = (1, 2, 3)
ABLATION_LEARNING_RATE = 5e-4
ABLATION_FEATURE_LEARNING_RATE = 1e-3
ABLATION_TRAIN_CAPS = {"sst2": 8000, "mrpc": None, "conll2003": 5000, "squad": 2000}
ABLATION_UNCAPPED_TRAIN_EXAMPLES = {"sst2": None, "mrpc": None, "conll2003": None, "squad": 3000}

# (literal here, module, name there[, view]): what tests/unit/test_cli_light_help.py compares. A
# dotted name is an attribute: "TransferConfig.seeds" is that dataclass field's default. A view
# says what the literal copies of a table, as the test's VIEWS reads it: "keys" of a mapping,
# "names" of rows, "names per key" of a mapping of rows, "max_train_examples by name" of rows.
DECLARED_IN = (
    ("TRANSFER_LANG", "bertlab.apps.transfer_config", "TransferConfig.lang"),
    ("TRANSFER_BUDGET_MINUTES", "bertlab.apps.transfer_config", "TransferConfig.budget_minutes"),
    ("TRANSFER_POINTS", "bertlab.apps.transfer_config", "TransferConfig.points"),
    ("TRANSFER_SEEDS", "bertlab.apps.transfer_config", "TransferConfig.seeds"),
    (
        "TRANSFER_TASK_TEXT_REPEATS",
        "bertlab.apps.transfer_config",
        "TransferConfig.task_text_repeats",
    ),
    ("TRANSFER_LEARNING_RATE", "bertlab.apps.transfer_config", "TransferConfig.learning_rate"),
    (
        "TRANSFER_FINETUNE_DROPOUT",
        "bertlab.apps.transfer_config",
        "TransferConfig.finetune_dropout",
    ),
    ("TRANSFER_DEFAULT_ARMS", "bertlab.apps.transfer_config", "TransferConfig.arms"),
    ("TRANSFER_ARMS", "bertlab.apps.transfer_config", "ARMS"),
    ("PRETRAIN_OBJECTIVES", "bertlab.apps.transfer_config", "PRETRAIN_OBJECTIVES"),
    ("ABLATION_BUDGET_MINUTES", "bertlab.apps.ablation_config", "DEFAULT_BUDGET_MINUTES"),
    ("ABLATION_ROWS", "bertlab.apps.ablation_config", "ROWS"),
    ("ABLATION_SEEDS", "bertlab.apps.ablation_config", "AblationConfig.seeds"),
    ("ABLATION_LEARNING_RATE", "bertlab.apps.ablation_config", "FINETUNE_LEARNING_RATE"),
    ("ABLATION_FEATURE_LEARNING_RATE", "bertlab.apps.ablation_config", "FEATURE_LEARNING_RATE"),
    ("ABLATION_TRAIN_CAPS", "bertlab.apps.ablation_config", "TASKS", "max_train_examples by name"),
    (
        "ABLATION_UNCAPPED_TRAIN_EXAMPLES",
        "bertlab.apps.ablation_config",
        "UNCAPPED_TRAIN_EXAMPLES",
    ),
)
