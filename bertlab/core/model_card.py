"""Model cards: the README.md of a model folder, in the Hugging Face Hub's convention.

The Hub shows a model repository's README.md as its card: YAML metadata between `---` lines
(written here by `huggingface_hub.ModelCardData`: library, task, base model, language), then
prose. A bertlab card says what the model is, what it is for, what it was trained on, the recipe
and the numbers that run measured. `bertlab pretrain` writes one into OUT/final and
`bertlab finetune` into OUT/best; the folder can be uploaded to the Hub as it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCardData

from bertlab.core.atomic import write_text
from bertlab.core.hub import is_repo_id

CARD_NAME = "README.md"  # the Hub's model card file
LIBRARY_NAME = "bertlab"


@dataclass(frozen=True)
class ModelCard:
    """What a card says. Each section is plain data; `render` lays it out.

    Attributes:
        title: the card's heading, e.g. the run's name.
        summary: one paragraph: what the model is and how it was made.
        pipeline_tag: the Hub's task tag (`fill-mask`, `text-classification`, ...).
        intended_use: what the model is for, and what it is not for.
        data: lines describing the training (and evaluation) data.
        recipe: setting -> value, as trained.
        metrics: name -> value, as measured by this run.
        metrics_note: what the metrics were measured on.
        how_to_use: shell or Python lines that load the model.
        base_model: the model it started from (a Hub id or a folder); None: from scratch.
        language: ISO 639-1 codes of the training text, when known.
    """

    title: str
    summary: str
    pipeline_tag: str
    intended_use: str
    data: Sequence[str]
    recipe: Mapping[str, Any]
    metrics: Mapping[str, Any]
    metrics_note: str
    how_to_use: Sequence[str]
    base_model: str | None = None
    language: Sequence[str] = field(default_factory=tuple)

    def metadata(self) -> ModelCardData:
        """The YAML header. `base_model` is set only for a Hub id (a local folder means nothing
        on the Hub)."""
        is_hub_model = self.base_model is not None and is_repo_id(self.base_model)
        return ModelCardData(
            library_name=LIBRARY_NAME,
            pipeline_tag=self.pipeline_tag,
            base_model=self.base_model if is_hub_model else None,
            language=list(self.language) or None,
            tags=["bert", LIBRARY_NAME],
        )

    def render(self) -> str:
        """The README.md text: YAML header, then the sections."""
        lines = ["---", self.metadata().to_yaml(), "---", "", f"# {self.title}", "", self.summary]
        lines += ["", "## Intended use", "", self.intended_use]
        lines += ["", "## Training data", "", *(f"- {line}" for line in self.data)]
        lines += ["", "## Training procedure", "", *_table(self.recipe, "setting")]
        lines += ["", "## Results", "", self.metrics_note, ""]
        lines += _table(self.metrics, "metric") if self.metrics else ["No metrics were measured."]
        lines += ["", "## How to use", "", "```bash", *self.how_to_use, "```", ""]
        return "\n".join(lines)


def _table(values: Mapping[str, Any], name: str) -> list[str]:
    rows = [f"| {name} | value |", "|---|---|"]
    return rows + [f"| {key} | {format_value(value)} |" for key, value in values.items()]


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def card_setting(directory: str | os.PathLike, name: str) -> str | None:
    """The value of the row `name` in the tables of `directory`'s card as bertlab writes it
    (e.g. "objective" -> "mlm"); None without a card or such a row (a model made elsewhere)."""
    path = Path(directory) / CARD_NAME
    if not path.is_file():
        return None
    prefix = f"| {name} | "
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(prefix) and line.endswith(" |"):
            return line[len(prefix) : -2].strip()
    return None


def write_model_card(directory: str | os.PathLike, card: ModelCard) -> Path:
    """Write `card` as `directory/README.md`, atomically; return its path."""
    return write_text(Path(directory) / CARD_NAME, card.render())
