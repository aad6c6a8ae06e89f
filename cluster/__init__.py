"""A local cluster of real NameNode and DataNode processes (`hedgefs cluster`, and the tests)."""
