"""What the command line logs: quiet by default, more with `-v` and `-vv`.

Without -v: bertlab's own progress (epochs, the server's address) as plain lines, without a
level or a logger's name, and every library's warnings (`WARNING name: ...`); no INFO log records:
not the libraries' (gensim's per-epoch progress, uvicorn's startup lines) nor the detail of which
weights a load left new (a task head is new in every fine-tuning). `-v` shows INFO: every record
as `INFO name: ...`, the libraries' too, and that detail, each repeated load's once; `-vv` adds
debug messages.
"""

from __future__ import annotations

import logging

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
# bertlab's loggers whose INFO is detail for -v: which weights each load found or left new.
DETAIL_LOGGERS = ("bertlab.network.checkpoint",)
# Loggers whose repeated messages are shown once: each seed and each evaluation loads the model
# and encodes the same data again, with the same words ("N of M examples were ... cut").
ONCE_PER_RUN_LOGGERS = ("bertlab.network.checkpoint", "bertlab.data.tasks.encoding")
# The demo fine-tunes some twenty runs and prints a line for each: their own progress (the
# examples read, each epoch's loss) is detail for -v there (`hide_run_progress`).
RUN_PROGRESS_LOGGERS = ("bertlab.training.finetuning.finetune", "bertlab.training.finetuning.loop")
# gensim's records of each step of a training, as dictionaries: only with -vv.
DEBUG_ONLY_LOGGERS = ("gensim.utils",)


class QuietFormatter(logging.Formatter):
    """LOG_FORMAT, except that bertlab's own INFO records read as plain progress lines."""

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno == logging.INFO and record.name.startswith("bertlab"):
            return record.getMessage()
        return super().format(record)


class OncePerRun(logging.Filter):
    """Lets the first of identical messages from `names` through, and none of its repeats."""

    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__()
        self.names = names
        self.seen: set[tuple[str, int, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.names):
            return True
        key = (record.name, record.levelno, record.getMessage())
        is_new = key not in self.seen
        self.seen.add(key)
        return is_new


def configure_logging(verbosity: int) -> None:
    """Log to stderr: 0 quiet (see the module's docstring), 1 (`-v`) INFO, 2 (`-vv`) DEBUG."""
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = logging.StreamHandler()
    formatter = QuietFormatter if verbosity == 0 else logging.Formatter
    handler.setFormatter(formatter(LOG_FORMAT))
    handler.addFilter(OncePerRun(ONCE_PER_RUN_LOGGERS))
    logging.basicConfig(level=level, handlers=[handler])
    logging.getLogger("bertlab").setLevel(min(level, logging.INFO))
    for name in DETAIL_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING if verbosity == 0 else level)
    for name in DEBUG_ONLY_LOGGERS:
        logging.getLogger(name).setLevel(level if verbosity >= 2 else logging.WARNING)
    for name in RUN_PROGRESS_LOGGERS:  # shown again after a demo in the same process
        logging.getLogger(name).setLevel(logging.NOTSET)


def hide_run_progress(verbosity: int) -> None:
    """Without -v, the INFO of each fine-tuning run (`RUN_PROGRESS_LOGGERS`) is not shown: for
    commands that run many and say what each gave themselves."""
    if verbosity == 0:
        for name in RUN_PROGRESS_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
