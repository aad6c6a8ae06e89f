"""The wire protocol: hedgefs.proto and the modules grpc_tools generates from it (committed).

Cells are up to a few MiB; gRPC's default 4 MiB message cap is raised deliberately, once, here,
for every channel of the project and the DataNode's server; the NameNode's server keeps 4 MiB.
"""

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# Data moves in messages of at most this many bytes (cells are split, never sent whole if larger).
CHUNK_BYTES = 1024 * 1024

# The NameNode handles metadata only: 4 MiB (gRPC's default) bounds what one call can make it
# parse or build. Listings are paged to stay far below it; a block report fits ~300,000 units.
NAMENODE_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

GRPC_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # A failed connection is retried quickly: DataNodes restart, and reads hedge around them anyway.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]
