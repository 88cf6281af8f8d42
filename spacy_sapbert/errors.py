"""Error types. Every error names the file, line or config key it is about and what to change."""
from __future__ import annotations

from typing import Optional


class SapbertError(ValueError):
    """Base class of the errors this package raises on bad input or configuration."""


class VocabularyFormatError(SapbertError):
    """A vocabulary or corpus file has a line that does not match its format."""

    def __init__(self, path: str, line_no: Optional[int], message: str):
        self.path = str(path)
        self.line_no = line_no
        where = f"{self.path}, line {line_no}" if line_no is not None else self.path
        super().__init__(f"{where}: {message}")


class EncoderLoadError(SapbertError):
    """The encoder could not be loaded from the given name or folder."""


class IndexFormatError(SapbertError):
    """A saved concept index is missing, corrupt, or does not fit the encoder."""


class NotInitializedError(SapbertError):
    """The linker was used before it had an encoder and an index."""


class ConfigWarning(UserWarning):
    """A config that works but is most likely not what was meant (it names the key and the likely value)."""
