"""Apps: the demo and the experiments, each a composition of library calls.

An app pre-trains with `training.pretraining.runner.run_pretraining`, fine-tunes and tests with
the shared flows of `flows` (fine-tune and test over seeds, the from-scratch twin, the verdict,
the run directory's settings), and writes a report drawn from its own `results.json`. Apps sit
between the library (`training`, `features`) and the command line (`cli`), which only parses
flags into an app's config; nothing here reads argv.
"""
