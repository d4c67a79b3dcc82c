"""Using a trained model: features and `embed` (`features`), fill-mask, attention maps and next
sentence (`inspection`), `bertlab.load` and `PretrainedBert` (`pretrained`), sentence scores
and sampling (`language_model`), word neighbours, static and contextual (`neighbours`)."""
