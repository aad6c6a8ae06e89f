"""Erasure coding, pure: policies (policy.py), striping math (layout.py), the RS codec (codec.py).

No I/O, no gRPC. Import the submodules; this package imports nothing so that
``hedgefs.ec.policy`` stays cheap for the NameNode and the CLI.
"""
