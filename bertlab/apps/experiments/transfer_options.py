"""What `bertlab experiment transfer` may choose and its defaults, declared without torch so that
its `--help` lists them fast; `bertlab.apps.experiments.transfer_config.TransferConfig` reads them.

The fine-tuning defaults are declared beside what they belong to, torch-free as well: the learning
rate in `transfer_rows`, the dropout in `bertlab.training.pretraining.budget`.
"""

from __future__ import annotations

DEFAULT_LANG = "en"
DEFAULT_BUDGET_MINUTES = 60.0
DEFAULT_POINTS = (10.0, 30.0)  # minutes, besides 0 and the whole budget
DEFAULT_SEEDS = (1, 2, 3)
DEFAULT_TASK_TEXT_REPEATS = 0  # the corpus only, no task text
PRETRAIN_OBJECTIVES = ("mlm", "mlm+nsp", "electra")  # what --pretrain-objective may choose
# The columns `arms` may choose, besides scratch (`transfer`'s docstring says each).
GENERAL, IN_DOMAIN, MIXED, CONTINUED, WORD_VECTORS = (
    "general",
    "in-domain",
    "mixed",
    "continued",
    "word-vectors",
)
ARMS = (GENERAL, IN_DOMAIN, MIXED, CONTINUED, WORD_VECTORS)
PRETRAINED_ARMS = (GENERAL, IN_DOMAIN, MIXED, CONTINUED)  # in the order they are pre-trained
POINTED_ARMS = (GENERAL, IN_DOMAIN, MIXED)  # runs of the whole budget, with --points
DEFAULT_ARMS = (GENERAL,)
