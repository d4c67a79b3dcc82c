"""The CJK font the page falls back on: Noto Sans CJK SC, one face of the collection that
bertlab depends on (`inspection.packaged_cjk_font_file`), so that Chinese text on the page is
drawn where the browser's machine has no CJK font.

Chromium takes the whole collection (.ttc) in `@font-face`, but draws it with its first face,
Noto Sans CJK JP, whose forms of some shared characters are Japanese ones. The SC face is
copied out of the collection, its tables as they are (fontTools, a dependency of matplotlib),
once per process, on the first request for it; its size and cost: docs/serve.md#the-page.
"""

from __future__ import annotations

import functools
import io
from pathlib import Path

from fontTools.ttLib import TTCollection

from bertlab.use.inspection import PACKAGED_CJK_FONT, packaged_cjk_font_file

CJK_FONT_ROUTE = "/fonts/noto-sans-cjk-sc.otf"
CJK_FONT_MEDIA_TYPE = "font/otf"
# The page names the font in its CSS by this route; the file behind it changes only with the
# font package, so a browser keeps it (a year) instead of asking for 16 MB again.
CJK_FONT_CACHE_CONTROL = "public, max-age=31536000, immutable"
MISSING_CJK_FONT = (
    "the page has no CJK font to fall back on: the font package of bertlab's dependencies "
    "(noto-cjk-sans-otc) is not installed, so a browser without a CJK font of its own shows "
    "Chinese characters as boxes (pip install noto-cjk-sans-otc)"
)


def cjk_font_file() -> Path | None:
    """The collection the face is copied from, or None without the font package."""
    return packaged_cjk_font_file()


def cjk_font() -> bytes | None:
    """The Noto Sans CJK SC face as an OpenType (CFF) font file, or None without the package."""
    path = cjk_font_file()
    return None if path is None else _face(path, PACKAGED_CJK_FONT)


@functools.lru_cache(maxsize=1)
def _face(path: Path, family: str) -> bytes:
    """The face of the collection at `path` whose family name is `family`, as a font file."""
    collection = TTCollection(str(path), lazy=True)
    for font in collection.fonts:
        if font["name"].getDebugName(1) == family:
            written = io.BytesIO()
            font.save(written, reorderTables=False)  # tables copied as they are, not rebuilt
            return written.getvalue()
    raise ValueError(f"{path} has no face named {family!r}")
