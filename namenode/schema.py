"""The NameNode's tables (db.py opens them; on etcd, etcd_view.py turns their rows into keys).

Tables
  meta             schema_version; cluster_id (made when the namespace is first formatted, or
                   given); generation_first/_next: the generations this namespace has issued
                   (a random start, so another namespace's are not these)
  inodes           directories and files, each with an owner, a group and mode bits (HDFS's). A
                   file being written ('writing') is invisible: the unique (parent, name) index
                   covers only 'complete' rows, so the old file at the same path stays readable
                   until the new one is completed. Its owner is its writer: only they (or an
                   admin) may add to, complete or abandon the write.
  groups           block groups of a file, ``seq`` = order in the file. IDs are AUTOINCREMENT:
                   never reused, because a DataNode may still hold units of a deleted group.
                   ``generation``: issued with the group; its units carry it, and a unit of
                   another generation is not this group's.
  units            the block map: (group, unit index) -> the DataNode holding it. ``reported`` = 0:
                   a writer's target whose DataNode has not yet said it stored the unit (only
                   files being written have such rows: Complete drops them). ``corrupt`` = 1:
                   reported bad; kept (and read if nothing better is left) until a repaired copy
                   replaces it.
  datanodes        every DataNode that ever registered (id, gRPC and data addresses). Liveness is in memory.
  pending_deletes  DeleteUnitCommands not yet confirmed by a block report; survive restarts.
                   ``stale`` = 1: an extra copy of a unit the map puts on another DataNode; 2: a
                   corrupt copy that a repaired one replaced. Both are deleted only once their
                   group is back at full redundancy (see ``BlockMap.deletes_due``).
  retry_cache      the first answer of each retried non-idempotent call, for 10 minutes (retry_cache.py)
"""

SCHEMA_VERSION = 5  # the first released one (the versions before it were never released)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS inodes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    parent     INTEGER REFERENCES inodes(id),
    name       TEXT NOT NULL,
    is_dir     INTEGER NOT NULL,
    policy     TEXT,                -- dirs: explicit policy or NULL; files: the policy written with
    length     INTEGER NOT NULL DEFAULT 0,
    block_size INTEGER NOT NULL DEFAULT 0,
    state      TEXT NOT NULL DEFAULT 'complete' CHECK (state IN ('writing', 'complete')),
    overwrite  INTEGER NOT NULL DEFAULT 0,
    mtime_ms   INTEGER NOT NULL,
    lease_ms   INTEGER,             -- writing files: wall time of Create / the last AddBlockGroup
    owner      TEXT NOT NULL DEFAULT 'hedgefs',
    grp        TEXT NOT NULL DEFAULT 'supergroup',
    mode       INTEGER NOT NULL DEFAULT 493     -- 0755
);
CREATE UNIQUE INDEX IF NOT EXISTS inodes_visible ON inodes(parent, name) WHERE state = 'complete';
CREATE INDEX IF NOT EXISTS inodes_parent ON inodes(parent);
CREATE INDEX IF NOT EXISTS inodes_writing ON inodes(parent, name) WHERE state = 'writing';
CREATE TABLE IF NOT EXISTS groups (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    file_id INTEGER NOT NULL REFERENCES inodes(id),
    seq     INTEGER NOT NULL,
    length  INTEGER NOT NULL DEFAULT 0,
    generation INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS groups_file ON groups(file_id, seq);
CREATE TABLE IF NOT EXISTS units (
    group_id    INTEGER NOT NULL REFERENCES groups(id),
    idx         INTEGER NOT NULL,
    datanode_id TEXT NOT NULL,
    added_ms    INTEGER NOT NULL,
    reported    INTEGER NOT NULL DEFAULT 1,
    corrupt     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (group_id, idx)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS units_datanode ON units(datanode_id);
CREATE TABLE IF NOT EXISTS datanodes (id TEXT PRIMARY KEY, address TEXT NOT NULL, data_address TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS pending_deletes (
    datanode_id TEXT NOT NULL,
    group_id    INTEGER NOT NULL,
    idx         INTEGER NOT NULL,
    queued_ms   INTEGER NOT NULL,
    stale       INTEGER NOT NULL DEFAULT 0,
    generation  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (datanode_id, group_id, idx)
) WITHOUT ROWID;
-- A group's deletes (a file's delete marks its groups'), a DataNode's oldest first (a heartbeat
-- sends a page), the expired (the monitor): each a scan of all pending deletes without these.
CREATE INDEX IF NOT EXISTS pending_deletes_group ON pending_deletes(group_id);
CREATE INDEX IF NOT EXISTS pending_deletes_queue ON pending_deletes(datanode_id, queued_ms);
CREATE INDEX IF NOT EXISTS pending_deletes_age ON pending_deletes(queued_ms);
CREATE TABLE IF NOT EXISTS retry_cache (
    client_id  TEXT NOT NULL,
    call_id    TEXT NOT NULL,
    method     TEXT NOT NULL,
    result     TEXT NOT NULL,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (client_id, call_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS retry_cache_expiry ON retry_cache(expires_ms);
"""
