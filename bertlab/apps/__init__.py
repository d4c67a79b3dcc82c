"""Apps: compositions of library calls, one folder each, with the flows they share beside them:

- `demo/`: `bertlab demo`, pre-training a small BERT on built-in data in minutes and fine-tuning
  it against its from-scratch twin (`runner`; its recipe in `config`, its report in `report` and
  `rows`);
- `experiments/`: `bertlab experiment transfer | ablation | strategies | compare`, each a grid
  of cells run by one function (`grid.run_grid`), each with its config, its torch-free options
  (`*_options`), its run and its report;
- `serve/`: `bertlab serve`, a local web page and JSON API over any model;
- `flows`: what the demo and the experiments share: fine-tune and test over seeds, the
  from-scratch twin, the verdict, the run directory's settings.

An app pre-trains with `training.pretraining.runner.run_pretraining` and writes a report drawn
from its own `results.json`. Apps sit between the library (`training`, `use`) and the command
line (`cli`), which only parses flags into an app's config; nothing here reads argv.
"""
