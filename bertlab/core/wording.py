"""Messages that name a setting say it as the caller gives it: the Python API's keyword
(`resume=True`) in the library, the command line's flag (`--resume`) in `bertlab.cli`.

The library words a message with `Worded`: its text is in the API's words, and it keeps the
template, so that the command line can word it again with its own flags (`Worded.worded`).
"""

from __future__ import annotations

from collections.abc import Mapping

# How the API names each setting or step a message may ask for.
API_WORDS = {
    "out": "out",
    "resume": "resume=True",
    "overwrite": "overwrite=True",
    "again": "run it again",
    "again_with_resume": "run it again with resume=True",
    "again_without_resume": "run it again with resume=False",
    # the paths a run reads and writes (`bertlab.core.outputs`): PretrainRun's fields, run_demo's
    "corpus": "corpus",
    "corpus_cache": "corpus_cache",
    "tokenizer": "tokenizer",
    "init_from": "init_from",
    "model_config": "model_config",
    "model": "model",
    # the columns a task file is read from: `ColumnSpec`'s fields
    "text_a": "text_a",
    "text_b": "text_b",
    "label": "label",
    "set_text_a": "ColumnSpec(text_a=",
    "set_text_b": "ColumnSpec(text_b=",
    "set_label": "ColumnSpec(label=",
    "end_set": ")",
    # how a corpus is read: `CorpusReading`'s fields (a JSON field is a column here)
    "set_corpus_format": "corpus_format=",
    "text_column": "text_column",
    "set_text_column": "text_column=",
    "text_field": "text_column",
    "set_text_field": "text_column=",
}


class Worded(str):
    """A message in the API's words that keeps its template for other words.

    Example:
        >>> message = Worded("{out} {path} already holds a run; add {resume}", path="runs/x")
        >>> str(message)
        'out runs/x already holds a run; add resume=True'
        >>> message.worded({"out": "--out", "resume": "--resume"})
        '--out runs/x already holds a run; add --resume'
    """

    template: str
    values: dict[str, object]

    def __new__(cls, template: str, **values: object) -> Worded:
        text = super().__new__(cls, template.format_map({**API_WORDS, **values}))
        text.template, text.values = template, values
        return text

    def __getnewargs_ex__(self) -> tuple[tuple[str], dict[str, object]]:
        """Pickled as its template and values (a refusal sent to the other processes of a
        torchrun job keeps its words for the command line)."""
        return (self.template,), dict(self.values)

    def worded(self, words: Mapping[str, str]) -> str:
        """The message with `words` for the settings (the API's for any `words` lacks)."""
        return self.template.format_map({**API_WORDS, **words, **self.values})


def quoted(text: str, width: int = 40) -> str:
    """`text` quoted, its first `width` characters only: a text named in a message."""
    return repr(text if len(text) <= width else text[:width] + "…")
