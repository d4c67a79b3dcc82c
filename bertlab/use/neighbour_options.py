"""The defaults of `bertlab neighbours`, declared without torch so that its `--help` shows them
fast; `bertlab.use.neighbours` finds the neighbours.
"""

DEFAULT_TOP_K = 10
DEFAULT_LAYER = -1  # the last layer's hidden states
MAX_OCCURRENCES = 2000  # reference uses of a word read at most
