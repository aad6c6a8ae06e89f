"""The wire protocols: hedgefs.proto (gRPC: every control call) with the modules grpc_tools
generates from it (committed), and datatransfer.py (plain TCP: unit reads and writes).

gRPC carries no cell bytes any more; its 4 MiB default message cap is raised deliberately, once,
here, for the clients' channels and the DataNode's server (a large file's FileInfo, a block
report); the NameNode's server keeps 4 MiB.
"""

MAX_MESSAGE_BYTES = 64 * 1024 * 1024

# The NameNode handles metadata only: 4 MiB (gRPC's default) bounds what one call can make it
# parse or build. Listings are paged to stay far below it; a block report fits ~300,000 units.
NAMENODE_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

# One extended attribute's name and value, at most (HDFS's dfs.namenode.fs-limits.max-xattr-size):
# the NameNode refuses more; the S3 gateway keeps an object's metadata within it.
MAX_XATTR_SIZE = 16384

GRPC_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # A failed connection is retried quickly: DataNodes restart, and reads hedge around them anyway.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
