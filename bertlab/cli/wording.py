"""The command line's words for the settings that library messages name (`bertlab.core.wording`):
the library says `resume=True`, the command line `--resume`."""

from __future__ import annotations

import sys
import traceback

from bertlab.core.wording import Worded

CLI_WORDS = {
    "out": "--out",
    "resume": "--resume",
    "overwrite": "--overwrite",
    "again": "run the same command again",
    "again_with_resume": "run the same command with --resume",
    "again_without_resume": "run the same command without --resume",
    "corpus": "--corpus",
    "corpus_cache": "--corpus-cache",
    "tokenizer": "--tokenizer",
    "init_from": "--init-from",
    "model_config": "--config",
    "model": "--model",
    "text_a": "--text-column",
    "text_b": "--text-pair-column",
    "label": "--label-column",
    "set_text_a": "--text-column ",
    "set_text_b": "--text-pair-column ",
    "set_label": "--label-column ",
    "end_set": "",
    "set_corpus_format": "--corpus-format ",
    "text_column": "--text-column",
    "set_text_column": "--text-column ",
    "text_field": "--text-field",
    "set_text_field": "--text-field ",
}


def in_flag_words(text: str) -> str:
    """`text` in the flags' words where it is `Worded`, else as it is."""
    return text.worded(CLI_WORDS) if isinstance(text, Worded) else text


def error_in_flag_words(error: BaseException) -> str:
    """`str(error)`, with each `Worded` part (an argument, the `hint`) in the flags' words."""
    text = str(error)
    for part in (*error.args, getattr(error, "hint", None)):
        if isinstance(part, Worded):
            text = text.replace(part, in_flag_words(part))
    return text


def say_error(error: BaseException, verbose: int) -> None:
    """`bertlab: error: ...` on stderr, in the flags' words; the traceback first with `-v`."""
    if verbose:
        traceback.print_exception(error)
    print(f"bertlab: error: {error_in_flag_words(error)}", file=sys.stderr)
