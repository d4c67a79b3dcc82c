"""Data: from a tokenized corpus (`bertlab.corpus`) to a batch (pre-training instances, masking,
collation, the stream), and readers for the fine-tuning tasks (`tasks/`)."""
