"""The lowest layers: files written whole (`atomic`), corpus files (`text_files`), a corpus in
every format (`corpus_readers`, `corpus_sources`), optional extras (`optional`), words for
messages (`wording`); then the dataclass configs (`config`), the
official metrics (`metrics`), devices, precision and seeds (`runtime`), CPU threads (`threads`),
Hub ids and shipped names (`hub`) and model cards (`model_card`). No torch model code."""
