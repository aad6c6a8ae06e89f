"""``ScriptedNameNode``: a test-only gRPC server on loopback answering NameNode methods from a
script, for the client's handling of answers a real NameNode gives only at moments a test cannot
have on demand (a file replaced exactly during a wait, an election ending and starting again
between two calls, a retried mkdir whose directory is gone since, an older NameNode's answer).
It serves no namespace: each scripted method's n-th call (0-based) is answered by
``answers[method](n, request)``: a reply message, or ELECTION (refused as a standby while an
election is on, proto/hedgefs.proto's contract). Every call advances ``now`` by a second: a
client given ``clock`` counts its deadlines in calls (virtual time), not in measured seconds."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import grpc

from hedgefs.client.config import FailoverConfig
from hedgefs.client.fs import FileSystem
from hedgefs.client.namenodes import ACTIVE_KEY
from hedgefs.proto import GRPC_OPTIONS
from hedgefs.proto import hedgefs_pb2 as pb

ELECTION = "election"


class ScriptedNameNode:
    def __init__(self, answers: dict[str, Callable]):
        self.answers = answers
        self.calls: list[tuple[str, object]] = []   # (method, request), in order
        self.now = 0.0
        self.lock = threading.Lock()
        self.server = grpc.server(ThreadPoolExecutor(4), options=GRPC_OPTIONS)
        methods = pb.DESCRIPTOR.services_by_name["NameNode"].methods_by_name
        handlers = {name: grpc.unary_unary_rpc_method_handler(
            self._handler(name), request_deserializer=getattr(pb, methods[name].input_type.name).FromString,
            response_serializer=lambda reply: reply.SerializeToString()) for name in answers}
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("hedgefs.NameNode", handlers)])
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def clock(self) -> float:
        with self.lock:
            return self.now

    def of(self, method: str) -> list:
        """The requests ``method`` was called with."""
        with self.lock:
            return [request for m, request in self.calls if m == method]

    def _handler(self, method: str):
        def handle(request, context):
            with self.lock:
                n = len([m for m, _ in self.calls if m == method])
                self.calls.append((method, request))
                self.now += 1.0
            answer = self.answers[method](n, request)
            if isinstance(answer, str) and answer == ELECTION:
                context.set_trailing_metadata(((ACTIVE_KEY, ""),))
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "not the active NameNode (an election is on)")
            return answer
        return handle

    def client(self, deadline_s: float = 10.0) -> FileSystem:
        """A FileSystem of this NameNode on its virtual clock (pauses between tries: 1 ms)."""
        fs = FileSystem(self.address, credentials=None,
                        failover=FailoverConfig(deadline_s=deadline_s, backoff_start_s=0.001, backoff_max_s=0.001))
        fs.namenodes.clock = self.clock
        return fs

    def stop(self) -> None:
        self.server.stop(0)
