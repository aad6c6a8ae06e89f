"""TLS on every channel of a secure cluster, verified against the cluster CA, both ways.

gRPC (client-NameNode, DataNode-NameNode, the fault RPCs) uses gRPC's own SSL credentials; the
data port (unit reads and writes, repairs) and the web pages use Python's ``ssl``. Every channel
is mutual TLS: the server presents its certificate and checks the client's, and a client checks
that the server is the one it meant (``server_name``: the NameNode, or dn3 and no other), so an
address given by anyone leads nowhere else.

gRPC says little when TLS refuses a connection ("Socket closed"), so a failed call is followed
by ``diagnose``: a TLS handshake of our own with ``ssl``, which tells a server that refused our
certificate from one with another CA, a plaintext server from a TLS one, and both from one that
is simply down.
"""

from __future__ import annotations

import socket
import ssl

import grpc

from hedgefs.security.identity import Credential

# gRPC checks the server's certificate against this name, not the address dialled.
_NAME_OVERRIDE = "grpc.ssl_target_name_override"


def grpc_server_credentials(cred: Credential) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials([(cred.key_pem, cred.cert_pem)], root_certificates=cred.ca_pem,
                                       require_client_auth=True)


def grpc_channel_credentials(cred: Credential) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(root_certificates=cred.ca_pem, private_key=cred.key_pem,
                                        certificate_chain=cred.cert_pem)


def channel_options(options: list, server_name: str) -> list:
    return [*options, (_NAME_OVERRIDE, server_name)]


def channel(target: str, cred: Credential | None, server_name: str, options: list, *, aio: bool = False):
    """A gRPC channel to ``target``: TLS checked against ``server_name`` with a credential,
    plaintext without one."""
    module = grpc.aio if aio else grpc
    if cred is None:
        return module.insecure_channel(target, options=options)
    return module.secure_channel(target, grpc_channel_credentials(cred), options=channel_options(options, server_name))


def _context(cred: Credential, purpose: ssl.Purpose) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if purpose is ssl.Purpose.CLIENT_AUTH else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_verify_locations(cadata=cred.ca_pem.decode())
    _load_chain(ctx, cred)
    if purpose is ssl.Purpose.CLIENT_AUTH:
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _load_chain(ctx: ssl.SSLContext, cred: Credential) -> None:
    # ssl loads a key and certificate only from files: the credential file holds both (and more
    # PEM blocks, which load_cert_chain skips).
    ctx.load_cert_chain(cred.path)


def server_context(cred: Credential, *, client_cert: str = "required") -> ssl.SSLContext:
    """For a server socket (the data port: ``required``; web pages: ``optional``)."""
    ctx = _context(cred, ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = ssl.CERT_REQUIRED if client_cert == "required" else ssl.CERT_OPTIONAL
    return ctx


def client_context(cred: Credential) -> ssl.SSLContext:
    """For a client socket; ``wrap_socket(..., server_hostname=server_name(...))`` checks who answers."""
    return _context(cred, ssl.Purpose.SERVER_AUTH)


def diagnose(address: str, cred: Credential | None, server_name: str, what: str,
             timeout: float = 3.0) -> str | None:
    """Why a connection to ``address`` failed, if TLS is why: one line, else None (down, or
    unreachable: the caller's own message stands)."""
    host, _, port = address.rpartition(":")
    try:
        raw = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    except (OSError, ValueError):
        return None
    with raw:
        if cred is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            try:
                with ctx.wrap_socket(raw, server_hostname=None) as s:
                    s.version()
            except ssl.SSLError as err:
                if _plaintext(err):
                    return None
            except OSError:
                return None
            return (f"{what} at {address} requires TLS (a secure cluster): give a credential with "
                    f"--credentials or HEDGEFS_CREDENTIALS")
        ctx = client_context(cred)
        try:
            with ctx.wrap_socket(raw, server_hostname=server_name) as s:
                # TLS 1.3: the server judges our certificate after the handshake; a byte sent
                # brings its verdict (an alert) back.
                s.settimeout(timeout)
                s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                try:
                    s.recv(1)
                except (TimeoutError, socket.timeout):
                    return None
        except ssl.SSLCertVerificationError as err:
            return (f"{what} at {address} is not the one this credential trusts: "
                    f"{err.verify_message} (a credential of another cluster?)")
        except ssl.SSLError as err:
            if _plaintext(err):
                return (f"{what} at {address} does not speak TLS (an insecure cluster?): "
                        f"this client sends no credential in plaintext")
            return (f"{what} at {address} refused this credential ({cred.identity}): "
                    f"{err.reason or err} (not signed by this cluster's CA?)")
        except OSError:
            return None
    return None


def _plaintext(err: ssl.SSLError) -> bool:
    """Did the server answer a ClientHello with something that is not TLS?"""
    return err.reason in ("WRONG_VERSION_NUMBER", "UNEXPECTED_EOF_WHILE_READING", "RECORD_LAYER_FAILURE",
                          "HTTP_REQUEST", "PACKET_LENGTH_TOO_LONG", "UNKNOWN_PROTOCOL") \
        or isinstance(err, ssl.SSLEOFError)
