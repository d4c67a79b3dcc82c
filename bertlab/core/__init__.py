"""The lowest layers: the run folder's names (`run_folder`), files written whole (`atomic`), an
earlier run replaced only once a new one has succeeded (`replacing`), where outputs may land
(`outputs`), optional extras (`optional`), words for messages (`wording`); then the precisions
a run may choose (`precision`), the dataclass configs (`config`, `lstm_config`,
`finetune_config`), the official metrics (`metrics`), devices, precision and seeds (`runtime`),
CPU threads (`threads`), Hub ids and shipped names (`hub`), model cards (`model_card`) and the
shipped models' table (`shipped`). No torch model code. A corpus is read in `bertlab.corpus`."""
