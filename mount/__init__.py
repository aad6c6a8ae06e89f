"""`hedgefs mount`: the filesystem as a POSIX mount through FUSE 3 (pyfuse3).

inodes.py  inode numbers <-> paths, and the kernel's references to them
attrs.py   stat fields, owners by name, errnos
files.py   open files: hedged reads with read-ahead; sequential writes committed on close
ops.py     the FUSE operations over one FileSystem
calls.py   how an operation calls the cluster (a worker thread, or a future awaited), errors as errnos
run.py     mount, serve until unmounted or signalled, the background mode
"""
