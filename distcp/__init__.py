"""`hedgefs distcp`: parallel copies between clusters (and local disks) with hedged segment copies.

A product feature on top of the client, like chaos/ and bench/: ``plan.py`` (pure: names,
segments, the hedge delay), ``sides.py`` (a cluster or the local filesystem, one interface),
``stream.py`` (a segment as a cancellable stream), ``job.py`` (the listers, copiers, hedges and
commits of one job).
"""
