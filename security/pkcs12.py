"""A credential as PKCS#12 (``hedgefs admin export-p12``): what a browser imports to open the
secure status page, which asks for a client certificate (an admin's)."""

from __future__ import annotations

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from hedgefs.security.identity import Credential, CredentialError


def pkcs12_bundle(credential: Credential, password: bytes) -> bytes:
    """A user's or an admin's credential as PKCS#12 (key, certificate and the cluster CA), what a
    browser imports to open the secure status page; encrypted with ``password`` (b"": not
    encrypted). A server's credential (a DataNode's, the NameNode's) is refused: it holds the
    cluster key, which no browser should."""
    if credential.cluster_key is not None or credential.ca_key_pem is not None:
        raise CredentialError(f"{credential.path} is a server's credential ({credential.identity}): only a user's "
                              f"or an admin's is exported for a browser")
    key = serialization.load_pem_private_key(credential.key_pem, None)
    cert = x509.load_pem_x509_certificate(credential.cert_pem)
    ca = x509.load_pem_x509_certificate(credential.ca_pem)
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    name = f"hedgefs {credential.identity.name} ({credential.cluster_id})".encode()
    return pkcs12.serialize_key_and_certificates(name, key, cert, [ca], encryption)
