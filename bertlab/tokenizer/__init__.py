"""The tokenizer, on the `tokenizers` library and without torch: bulk encoding through a chunk
cache (`fast`), BERT's normalization and pre-tokenization (`basic`), WordPiece and the
`Tokenizer` class (`wordpiece`), and training a vocabulary on a corpus (`training`)."""
