"""The corpus, from a path to a tokenized corpus: paths -> sources in any format -> documents ->
a tokenized, memory-mapped corpus and its pre-flight report.

The raw layer, below the tokenizer (tokenizer training, word2vec and `neighbours` read text
through it):

- `text_files`: corpus files read line by line, plain or gzipped, checked alike (binary,
  broken gzip, mostly not UTF-8);
- `readers`: each format read as Google's layout, a record one document (`READERS`: plain
  text, JSON Lines, CSV, TSV, Parquet, saved datasets);
- `sources`: which files the paths name and how each is read (`open_corpus`,
  `CorpusReading`), and the languages of a corpus (`LANGS`).

The tokenized layer, above the tokenizer and below `bertlab.data` (which runs from it to a
batch):

- `text_units`: sentences and whole words (English and Chinese rules);
- `format`: a corpus directory's files and fingerprints, `TokenizedCorpus` (the reader);
- `encode`: chunks of lines split and tokenized in worker processes, appended to the files;
- `build`: `build_corpus`, the entry point: a corpus tokenized once, or reused;
- `preflight`: `preflight_report` (what the corpus holds, what will train badly) and
  `check_objective`;
- `prepare`: a pre-training run's corpus in one call (`prepare_corpus`: built by the main
  process, opened by the others, reported and checked), and the documents it holds out for
  evaluation (`held_out_split`).
"""
