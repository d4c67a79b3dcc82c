"""`bertlab experiment`: transfer (what pre-training buys per minute), ablation (BERT's Table 5),
strategies (feature-based against fine-tuning) and lineage (the lectures' models from NNLM to
BERT on one corpus and budget), each a grid of cells run by `grid.run_grid`. Each experiment has
`<name>_options` (its defaults, torch-free, for `--help`), `<name>_config`, `<name>` (the run)
and `<name>_report`; transfer also has its rows, data and `compare`; lineage its models, heads,
fine-tuning ways and probes (and the probes' sentences in `senses/`).
"""
