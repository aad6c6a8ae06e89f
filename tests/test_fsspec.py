"""hedgefs:// through fsspec (hedgefs/fsspec) against a real local cluster: fsspec's own abstract
test suite (copy, get, put, open, pipe: every test of the installed fsspec, none skipped), then
each method mapped onto the library, the URL forms, the storage options and the errors.

One insecure cluster for the module (and a secure one for the credentials option only).
"""

import os
import posixpath
import subprocess
import sys

import fsspec
import pytest
from fsspec.callbacks import Callback
from fsspec.tests import abstract

from conftest import CELL, GROUP, STRIPE, cli_env, pattern, start_cluster
from hedgefs.fsspec import HedgeFileSystem

ROOT = "/abstract"


@pytest.fixture(scope="module")
def hcluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("fsspec-cluster"))
    yield c
    c.down()


@pytest.fixture(scope="module")
def hfs(hcluster):
    fs = fsspec.filesystem("hedgefs", namenode=hcluster.namenode)
    yield fs
    fs.close()


# ---------------------------------------------------------------------------- fsspec's own suite

class HedgefsFixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self, hfs):
        return hfs

    @pytest.fixture
    def fs_join(self):
        return posixpath.join

    @pytest.fixture
    def fs_path(self, hfs):
        hfs.makedirs(ROOT, exist_ok=True)
        return ROOT


class TestHedgefsCopy(abstract.AbstractCopyTests, HedgefsFixtures):
    pass


class TestHedgefsGet(abstract.AbstractGetTests, HedgefsFixtures):
    pass


class TestHedgefsPut(abstract.AbstractPutTests, HedgefsFixtures):
    pass


class TestHedgefsOpen(abstract.AbstractOpenTests, HedgefsFixtures):
    pass


class TestHedgefsPipe(abstract.AbstractPipeTests, HedgefsFixtures):
    pass
