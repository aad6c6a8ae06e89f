"""A container's health check: one real RPC to the server in this container (the Dockerfile's
HEALTHCHECK runs ``python -m hedgefs.cli.healthcheck``).

``HEDGEFS_HEALTH_PORT`` and ``HEDGEFS_HEALTH_RPC`` say which server and which method; in a secure
cluster (``HEDGEFS_SERVER_CREDENTIALS`` set, as the server itself is started) the call is TLS with
the server's own credential, and the server must show the certificate of that same server.
Healthy (exit 0) only if the server's handler answered: OK, or a refusal that only a running
handler gives (PERMISSION_DENIED: the server's own identity may not call it; FAILED_PRECONDITION:
fault injection disabled). Nothing listening, a frozen or wedged process (no answer in 3 s), the
wrong server on the port (UNIMPLEMENTED, or a TLS name that does not match) are all unhealthy.
"""

import os
import sys

import grpc

HEALTHY = (grpc.StatusCode.OK, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.FAILED_PRECONDITION)


def main() -> int:
    rpc = os.environ["HEDGEFS_HEALTH_RPC"]
    target = "127.0.0.1:" + os.environ["HEDGEFS_HEALTH_PORT"]
    path = os.environ.get("HEDGEFS_SERVER_CREDENTIALS")
    if path:
        from hedgefs.security import tls
        from hedgefs.security.material import load_credential

        cred = load_credential(path)
        channel = tls.channel(target, cred, cred.server_name, [])
    else:
        channel = grpc.insecure_channel(target)
    with channel:
        code = channel.unary_unary(rpc).future(b"", timeout=3).code()
    print(rpc, code.name)
    return 0 if code in HEALTHY else 1


if __name__ == "__main__":
    sys.exit(main())
