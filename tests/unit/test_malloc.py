import sys

import pytest

from hedgefs.malloc import tune_malloc


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_glibc_accepts_the_cell_friendly_malloc_settings():
    assert tune_malloc() is True
