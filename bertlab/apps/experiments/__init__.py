"""`bertlab experiment`: transfer (what pre-training buys per minute), ablation (BERT's Table 5)
and strategies (feature-based against fine-tuning), each a grid of cells run by `grid.run_grid`.
Each experiment has `<name>_options` (its defaults, torch-free, for `--help`), `<name>_config`,
`<name>` (the run) and `<name>_report`; transfer also has its rows, data and `compare`.
"""
