"""Pre-training: `run.PretrainRun` describes a run and resolves it once; `runner.run_pretraining`
trains it (tokenizer, the corpus prepared by `bertlab.corpus.prepare`, plan, model, `loop`, model
card). Read in that order: `run`, `runner`, `loop`, then what they use (`objectives`,
`schedules`, `stats`, `checkpointing`, `budget`, `budget_plan`, `memory`, `card`); the batches
come from `bertlab.data.stream`.
"""
