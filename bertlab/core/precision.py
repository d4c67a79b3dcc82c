"""The precisions a run may choose, declared without torch so that `--help` lists them fast.

`bertlab.core.runtime` turns the choice into an autocast context for the device.
"""

PRECISIONS = ("auto", "fp32", "bf16")  # "auto": bf16 autocast where the device supports it
