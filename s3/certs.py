"""The gateway's HTTPS certificate, signed by the cluster's own CA (a secure cluster).

S3 clients check the gateway against a CA they trust; in a secure cluster that is the cluster's CA
(``ca.pem``, which its clients hold already), so the gateway's certificate is issued with the CA
key that the NameNode's credential holds, locally, as ``material.add_datanode`` issues a
DataNode's. The certificate is a server certificate only: it names the gateway's host names and
addresses (DNS and IP SANs), has the serverAuth key usage alone and no hedgefs role, so it cannot
authenticate to the NameNode or a DataNode as anyone.

The file is what ``--tls-cert`` takes: the private key, the certificate and the CA's certificate
(the chain), mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from hedgefs.security import material

ROLE = "s3-gateway"        # the certificate's OU: no hedgefs role, so no hedgefs identity


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    if not host or len(host) > 253 or not all(
            0 < len(label) <= 63 and label.replace("-", "").replace("*", "").isalnum() and label.isascii()
            for label in labels):
        raise ValueError(f"bad host name {host!r}: a DNS name (letters, digits, '-', '.') or an IP address")
    return x509.DNSName(host)


def issue(namenode_credential: str, hosts: list[str], days: int = material.DAYS) -> bytes:
    """The credential-file text of a server certificate for ``hosts``, signed by the CA whose key
    the NameNode's credential file holds. ValueError (one line) if it cannot be made."""
    if not hosts:
        raise ValueError("give at least one --host (the names clients reach the gateway by)")
    names = [_san(h) for h in hosts]
    cred = material.load_credential(namenode_credential)
    if cred.ca_key_pem is None:
        raise ValueError(f"{namenode_credential} holds no CA key: the NameNode's credential does "
                         f"(DIR/security/namenode.pem)")
    ca_key = serialization.load_pem_private_key(cred.ca_key_pem, None)
    ca = x509.load_pem_x509_certificate(cred.ca_pem)
    key = material.new_private_key()
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, cred.cluster_id),
                                     x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ROLE),
                                     x509.NameAttribute(NameOID.COMMON_NAME, hosts[0][:64])]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(min(now + datetime.timedelta(days=days), ca.not_valid_after_utc))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return material.bundle(material.key_pem(key), material.cert_pem(cert), cred.ca_pem,
                           comment=f"the S3 gateway's HTTPS certificate ({', '.join(hosts)}) of cluster "
                                   f"{cred.cluster_id}")


def write(path: str, text: bytes) -> None:
    material.write_private(os.fspath(path), text)
