"""The defaults of `bertlab generate`, declared without torch so that its `--help` shows them
fast; `bertlab.use.language_model` samples.
"""

DEFAULT_TOP_K = 50  # sampling: only the 50 most probable next pieces (Fan et al. 2018)
DEFAULT_MAX_NEW_TOKENS = 40
