"""hedgefs for the Python data stack: ``hedgefs://`` URLs through fsspec (filesystem.py).

Registered with fsspec through the ``fsspec.specs`` entry point (pyproject.toml), so
``fsspec.filesystem("hedgefs")``, ``pd.read_parquet("hedgefs://nn:8020/t.parquet")`` and
``dd.read_parquet("hedgefs:///data/")`` work once hedgefs is installed.
"""

from hedgefs.fsspec.filesystem import HedgeFileSystem

__all__ = ["HedgeFileSystem"]
