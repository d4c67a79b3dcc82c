"""Readers and feature builders for the fine-tuning task families, one file per family."""
