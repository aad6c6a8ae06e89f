"""hedgefs: a small distributed filesystem with hedged reads of erasure-coded data."""

__version__ = "0.1.0"
