"""Training, one folder for what each part trains, with what they share beside them:

- `pretraining/`: a pre-training run (`run.PretrainRun`, resolved once into `run.ResolvedRun`;
  what `bertlab pretrain` may choose in `options`), its entry `runner.run_pretraining`, the loop
  (`loop`), schedules (`schedules`), statistics (`stats`), objectives (`objectives`),
  checkpoints (`checkpointing`), model card (`card`) and memory checks (`memory`), the budget
  recipe and its plan for the machine (`budget`, `budget_plan`); its corpus comes from
  `bertlab.corpus`, its batches from `bertlab.data.stream`;
- `finetuning/`: `finetune`, its loop (`loop`), the check for a run that learned one class
  (`one_class`);
- `word2vec/`: static word vectors (`vectors`; `options`, what `bertlab neighbours word2vec` may
  choose);
- shared: the optimizer, fine-tuning's schedules and the divergence guard's error (`optim`), the
  metrics log (`metrics_log`). The run folder's names are `bertlab.core.run_folder`'s.
"""
