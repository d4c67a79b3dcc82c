"""What `bertlab pretrain` may choose, declared without torch so that its `--help` shows it
fast; `bertlab.training.pretraining.run` reads it. The folders a run writes are named in
`bertlab.core.run_folder`, the languages of a corpus (`LANGS`) in `bertlab.corpus.sources`.
"""

from bertlab.core.lstm_config import BERT, LM_ARCHITECTURE_NAMES

DEFAULT_MODEL_SIZE = "mini"
# What `--architecture` takes: BERT (the default) and the LSTM era's networks.
ARCHITECTURES = (BERT, *LM_ARCHITECTURE_NAMES)
