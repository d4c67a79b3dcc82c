"""Store BERT's character classes for this Python's Unicode version in the package
(bertlab/tokenizer/character_classes/unicode-VERSION.json), so that loading a tokenizer does not
compute them (about 0.6 s). Run it with the Python that CI runs after a change to
`bertlab.tokenizer.basic.compute_character_classes`; the tokenizer tests check the file.

    python tools/store_character_classes.py
"""

from __future__ import annotations

import dataclasses

from bertlab.core.atomic import write_json
from bertlab.tokenizer.basic import compute_character_classes, stored_classes_path


def main() -> None:
    path = stored_classes_path()
    path.parent.mkdir(exist_ok=True)
    write_json(path, dataclasses.asdict(compute_character_classes()), sort_keys=True)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
