"""Data: pre-training instances from raw text and readers for the fine-tuning tasks."""
