"""Pre-training: `run.PretrainRun` describes a run and resolves it once; `runner.run_pretraining`
trains it (tokenizer, tokenized corpus, plan, model, `loop`, model card). Read in that order:
`run`, `runner`, `loop`, then what they use (`data`, `objectives`, `schedules`, `stats`,
`checkpointing`, `budget`, `budget_plan`, `memory`, `card`).
"""
