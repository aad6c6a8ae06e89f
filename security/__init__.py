"""Security for a hedgefs cluster: who is calling, and what they may do.

    identity.py   who is who: roles, names, a loaded credential as data (no cryptography: every
                  client imports it)
    material.py   the cluster's keys and certificates: a small CA, a certificate per server and
                  per user, credential files, the cluster key (``cryptography``; no shell-outs)
    tokens.py     block access tokens: the NameNode signs, DataNodes check (HMAC-SHA256)
    tls.py        TLS on every channel: gRPC credentials, ``ssl`` contexts for the data port and
                  the web pages, and the diagnosis of a connection TLS refused
    rpc.py        the authorization of every RPC: one table per service, one interceptor

A cluster is *secure* when its servers are given credentials (``hedgefs cluster up --secure``,
or ``--credentials`` on ``hedgefs namenode`` / ``hedgefs datanode``); otherwise it is insecure
and behaves as before: everyone is the same user. Nothing here imports the rest of hedgefs.
"""
