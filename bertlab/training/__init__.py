"""Training, by what it trains:

- pre-training: the run (`pretrain_run.PretrainRun`, what `bertlab pretrain` may choose in
  `pretrain_options`), its entry `pretraining.run_pretraining`, the loop (`pretrain_loop`), its
  data (`pretrain_data`), schedules (`pretrain_schedules`), statistics (`pretrain_stats`),
  objectives (`objectives`), model card (`pretrain_card`) and memory checks (`pretrain_memory`),
  the budget recipe and its plan for the machine (`budget`, `budget_plan`);
- fine-tuning: `finetune`, its loop (`finetune_loop`), the check for a run that learned one
  class (`one_class`);
- word2vec vectors: `word_vectors` (`word_vector_options`);
- shared: the optimizer and fine-tuning's schedules (`optim`), checkpoints (`checkpointing`), the
  metrics log (`metrics_log`).
"""
