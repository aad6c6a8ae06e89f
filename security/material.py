"""The keys and certificates of a secure cluster, and the credential files that carry them.

A cluster has one small CA (an ECDSA P-256 key and a self-signed certificate). Every process
holds a *credential*: its own private key, its certificate signed by the CA, and the CA's
certificate (to check everyone else's). Servers hold more:

    credential of        its certificate says          it also holds
    the NameNode         OU=namenode, CN=namenode      the CA key (it issues credentials), the cluster key
    a DataNode           OU=datanode, CN=<its id>      the cluster key (it checks block tokens)
    an admin             OU=admin,    CN=<name>        -
    a user               OU=user,     CN=<name>        -

Every certificate's O is the cluster id; a user's groups are SAN URIs ``hedgefs:group:<name>``;
a server's certificate names it as a DNS SAN (``namenode.hedgefs``, ``dn3.datanode.hedgefs``),
which clients check: a client that wants dn3 accepts only dn3's certificate, whatever address the
NameNode gave for it. The cluster key is 32 random bytes that sign block tokens (tokens.py).

A credential file is PEM blocks in one file, mode 0600: the private key, the certificate, the
CA's certificate, and for servers ``HEDGEFS CLUSTER KEY`` and (NameNode) ``HEDGEFS CA KEY``.
``init_material`` writes a whole cluster's worth; ``issue`` one more (``hedgefs admin credential``
asks the NameNode, which holds the CA key, so the private key of a new credential never leaves
the machine that made it).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import os
import re
import secrets
import stat
import uuid
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from hedgefs.security.identity import (  # noqa: F401 (the vocabulary, for material's callers too)
    ADMIN,
    DATANODE,
    NAMENODE,
    NAMENODE_NAME,
    ROLES,
    SUPERUSER,
    USER,
    Credential,
    CredentialError,
    Identity,
    Refused,
    check_name,
    server_name,
)

CA_DAYS = 3650
DAYS = 825                                  # certificates of servers and users (browsers' longest)
CLUSTER_KEY_BYTES = 32

_GROUP_URI = "hedgefs:group:"
_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)\r?\n-----END \1-----", re.S)


def new_cluster_id() -> str:
    return f"CID-{uuid.uuid4()}"


def new_cluster_key() -> bytes:
    return secrets.token_bytes(CLUSTER_KEY_BYTES)


def new_private_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def public_key_pem(key) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def create_ca(cluster_id: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = new_private_key()
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, cluster_id),
                      x509.NameAttribute(NameOID.COMMON_NAME, f"hedgefs CA {cluster_id}")])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def cluster_id_of(ca: x509.Certificate) -> str:
    values = ca.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return values[0].value if values else ""


def issue_certificate(ca_key, ca: x509.Certificate, identity: Identity, public_key, days: int = DAYS) -> x509.Certificate:
    """A certificate for ``identity`` over ``public_key``, signed by the CA."""
    if identity.role not in ROLES:
        raise ValueError(f"unknown role {identity.role!r}")
    check_name(identity.name, identity.role)
    for g in identity.groups:
        check_name(g, "group")
    if not 1 <= days <= CA_DAYS:
        raise ValueError(f"a certificate is valid for 1 to {CA_DAYS} days, not {days}")
    server = identity.role in (NAMENODE, DATANODE)
    sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(_GROUP_URI + g) for g in identity.groups]
    if server:
        sans.append(x509.DNSName(server_name(identity.role, identity.name)))
    now = _now()
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, cluster_id_of(ca)),
                                        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, identity.role),
                                        x509.NameAttribute(NameOID.COMMON_NAME, identity.name)]))
               .issuer_name(ca.subject).public_key(public_key).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(min(now + datetime.timedelta(days=days), ca.not_valid_after_utc))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(
                   [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])),
                   critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def identity_of(cert: x509.Certificate) -> Identity:
    """The identity a (verified) certificate states."""
    def first(oid) -> str:
        values = cert.subject.get_attributes_for_oid(oid)
        return values[0].value if values else ""

    groups: list[str] = []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        groups = [u[len(_GROUP_URI):] for u in san.get_values_for_type(x509.UniformResourceIdentifier)
                  if u.startswith(_GROUP_URI)]
    except x509.ExtensionNotFound:
        pass
    return Identity(first(NameOID.COMMON_NAME), first(NameOID.ORGANIZATIONAL_UNIT_NAME), tuple(groups))


# ---------------------------------------------------------------------------- credential files

def bundle(key_pem_bytes: bytes, cert: bytes, ca: bytes, *, cluster_key: bytes | None = None,
           ca_key: bytes | None = None, comment: str = "") -> bytes:
    """The text of a credential file."""
    parts = [f"# hedgefs credential{': ' + comment if comment else ''}. Keep it secret (mode 0600).\n".encode(),
             key_pem_bytes, cert, ca]
    if cluster_key is not None:
        parts.append(_pem_block("HEDGEFS CLUSTER KEY", cluster_key))
    if ca_key is not None:
        der = serialization.load_pem_private_key(ca_key, None).private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        parts.append(_pem_block("HEDGEFS CA KEY", der))
    return b"".join(p if p.endswith(b"\n") else p + b"\n" for p in parts)


def _pem_block(label: str, der: bytes) -> bytes:
    body = base64.encodebytes(der).decode().strip()
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n".encode()


def write_private(path: str | os.PathLike, data: bytes) -> None:
    """Write a file only its owner can read, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load_credential(path: str | os.PathLike) -> Credential:
    """Read and check a credential file: CredentialError (one line) if it cannot be used."""
    path = str(path)
    try:
        mode = os.stat(path).st_mode
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise CredentialError(f"no such credential file: {path}") from None
    except OSError as err:
        raise CredentialError(f"cannot read credential file {path}: {err.strerror}") from None
    if b"PRIVATE KEY-----" not in raw:
        hint = " (it is the cluster's CA certificate: a credential is admin.pem or a user's .pem)" \
            if b"CERTIFICATE-----" in raw and os.path.basename(path) == "ca.pem" else ""
        raise CredentialError(f"bad credential file {path}: no private key in it{hint}")
    if mode & 0o077:
        raise CredentialError(f"credential file {path} holds a private key but others may read it "
                              f"(mode {stat.S_IMODE(mode):04o}): chmod 600 {path}")
    try:
        return _parse(path, raw)
    except (ValueError, TypeError) as err:
        raise CredentialError(f"bad credential file {path}: {err}") from None


def _parse(path: str, raw: bytes) -> Credential:
    blocks = [(m.group(1), base64.b64decode(m.group(2))) for m in _PEM.finditer(raw.decode("ascii", "replace"))]
    keys = [der for label, der in blocks if label == "PRIVATE KEY"]
    certs = [x509.load_der_x509_certificate(der) for label, der in blocks if label == "CERTIFICATE"]
    cluster_keys = [der for label, der in blocks if label == "HEDGEFS CLUSTER KEY"]
    ca_keys = [der for label, der in blocks if label == "HEDGEFS CA KEY"]
    if len(keys) != 1:
        raise ValueError(f"expected one PRIVATE KEY block, found {len(keys)}")
    cas = [c for c in certs if _is_ca(c)]
    own = [c for c in certs if not _is_ca(c)]
    if len(cas) != 1 or len(own) != 1:
        raise ValueError("expected its certificate and the cluster CA's certificate")
    key = serialization.load_der_private_key(keys[0], None)
    cert, ca = own[0], cas[0]
    if public_key_pem(key) != cert.public_key().public_bytes(serialization.Encoding.PEM,
                                                           serialization.PublicFormat.SubjectPublicKeyInfo):
        raise ValueError("the private key does not match the certificate")
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        raise ValueError("the certificate is not signed by the CA in the file") from None
    now = _now()
    if cert.not_valid_after_utc < now:
        raise ValueError(f"the certificate expired on {cert.not_valid_after_utc:%Y-%m-%d}")
    identity = identity_of(cert)
    if identity.role not in ROLES or not identity.name:
        raise ValueError(f"the certificate names no hedgefs identity ({cert.subject.rfc4514_string()})")
    if len(cluster_keys) > 1 or (cluster_keys and len(cluster_keys[0]) != CLUSTER_KEY_BYTES):
        raise ValueError("bad HEDGEFS CLUSTER KEY block")
    ca_key_pem = None
    if ca_keys:
        ca_key = serialization.load_der_private_key(ca_keys[0], None)
        if public_key_pem(ca_key) != ca.public_key().public_bytes(serialization.Encoding.PEM,
                                                                  serialization.PublicFormat.SubjectPublicKeyInfo):
            raise ValueError("the CA key does not match the CA certificate")
        ca_key_pem = key_pem(ca_key)
    return Credential(path, key_pem(key), cert_pem(cert), cert_pem(ca), identity, cluster_id_of(ca),
                      cert.not_valid_after_utc, cluster_keys[0] if cluster_keys else None, ca_key_pem)


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def issue(ca_key_pem_bytes: bytes, ca_pem_bytes: bytes, identity: Identity, public_key_pem_bytes: bytes,
          days: int = DAYS) -> bytes:
    """The PEM certificate for ``identity`` over a public key (PEM): what IssueCredential answers."""
    ca_key = serialization.load_pem_private_key(ca_key_pem_bytes, None)
    ca = x509.load_pem_x509_certificate(ca_pem_bytes)
    public_key = serialization.load_pem_public_key(public_key_pem_bytes)
    if not isinstance(public_key, ec.EllipticCurvePublicKey):
        raise ValueError("the public key must be an EC key")
    return cert_pem(issue_certificate(ca_key, ca, identity, public_key, days))


@dataclasses.dataclass(frozen=True)
class Material:
    """What ``init_material`` wrote."""

    directory: Path
    cluster_id: str
    namenode: Path
    datanodes: dict[str, Path]
    admin: Path
    ca: Path


def add_datanode(directory: str | os.PathLike, datanode_id: str, days: int = DAYS) -> Path:
    """One more DataNode's credential in a material directory, issued with the CA key that the
    NameNode's credential there holds (what ``hedgefs admin credential --datanode`` does remotely)."""
    directory = Path(directory)
    namenode = load_credential(directory / "namenode.pem")
    key = new_private_key()
    cert = issue(namenode.ca_key_pem, namenode.ca_pem, Identity(datanode_id, DATANODE), public_key_pem(key), days)
    path = directory / f"{datanode_id}.pem"
    write_private(path, bundle(key_pem(key), cert, namenode.ca_pem, cluster_key=namenode.cluster_key,
                               comment=f"datanode {datanode_id} of cluster {namenode.cluster_id}"))
    return path


def material_path(directory: str | os.PathLike, name: str, split: bool = False) -> Path:
    """Where ``init_material`` puts ``name``'s credential: DIR/<name>.pem, or DIR/<name>/<name>.pem
    when ``split`` (a directory per holder, so each can be a volume of its own)."""
    directory = Path(directory)
    return directory / name / f"{name}.pem" if split else directory / f"{name}.pem"


def init_material(directory: str | os.PathLike, datanodes: list[str], *, cluster_id: str | None = None,
                  admin: str = SUPERUSER, days: int = DAYS, split: bool = False,
                  etcd_hosts: list[str] | tuple[str, ...] = ()) -> Material:
    """A new cluster's CA, cluster key and credentials: namenode.pem, <id>.pem per DataNode,
    admin.pem (each in a directory of its own with ``split``), ca.pem (the CA's certificate
    alone: public, for anyone who must check the servers, e.g. Prometheus), and etcd/ (the etcd
    members' and the NameNodes' etcd certificates: ``write_etcd_material``). Refuses a directory
    that already holds a cluster's material."""
    directory = Path(directory)
    if (directory / "ca.pem").exists() or material_path(directory, NAMENODE, split).exists():
        raise FileExistsError(f"{directory} already holds a cluster's material")
    cluster_id = cluster_id or new_cluster_id()
    check_name(cluster_id, "cluster")
    for d in datanodes:
        check_name(d, DATANODE)
    ca_key, ca = create_ca(cluster_id)
    ca_key_bytes, ca_bytes = key_pem(ca_key), cert_pem(ca)
    cluster_key = new_cluster_key()

    def credential(identity: Identity, **extra) -> bytes:
        key = new_private_key()
        cert = issue_certificate(ca_key, ca, identity, key.public_key(), days)
        return bundle(key_pem(key), cert_pem(cert), ca_bytes, comment=f"{identity} of cluster {cluster_id}", **extra)

    directory.mkdir(parents=True, exist_ok=True)
    namenode = material_path(directory, NAMENODE, split)
    write_private(namenode, credential(Identity(NAMENODE, NAMENODE), cluster_key=cluster_key, ca_key=ca_key_bytes))
    paths = {}
    for d in datanodes:
        paths[d] = material_path(directory, d, split)
        write_private(paths[d], credential(Identity(d, DATANODE), cluster_key=cluster_key))
    admin_path = material_path(directory, "admin", split)
    write_private(admin_path, credential(Identity(admin, ADMIN)))
    (directory / "ca.pem").write_bytes(ca_bytes)
    write_etcd_material(directory, ca_key_bytes, ca_bytes, etcd_hosts, days)
    return Material(directory, cluster_id, namenode, paths, admin_path, directory / "ca.pem")


# ---------------------------------------------------------------------------- etcd's material

ETCD_DIR = "etcd"
ETCD_ROLE = "etcd"                               # the OU of etcd's certificates: no hedgefs role
ETCD_CLIENT_HOSTNAME = "etcd-client.hedgefs"     # what etcd's --client-cert-allowed-hostname asks for
ETCD_PEER_CN = "etcd-peer"                       # what etcd's --peer-cert-allowed-cn asks for
ETCD_DEFAULT_HOSTS = ("127.0.0.1", "localhost")


@dataclasses.dataclass(frozen=True)
class EtcdMaterial:
    """The files of DIR/etcd/: PEM, one thing per file, as etcd and etcdctl take them. ``ca`` is the
    cluster CA's certificate (a copy, so the directory alone can be the etcd members' volume)."""

    directory: Path

    def __getattr__(self, name: str) -> Path:
        files = {"ca": "ca.pem", "server_cert": "server.pem", "server_key": "server-key.pem",
                 "peer_cert": "peer.pem", "peer_key": "peer-key.pem",
                 "client_cert": "client.pem", "client_key": "client-key.pem"}
        if name not in files:
            raise AttributeError(name)
        return self.directory / files[name]

    def exists(self) -> bool:
        return all(getattr(self, f).exists() for f in ("ca", "client_cert", "client_key"))


def etcd_material(directory: str | os.PathLike) -> EtcdMaterial:
    """Where a material directory's etcd files are (DIR/etcd/), whether or not they exist."""
    return EtcdMaterial(Path(directory) / ETCD_DIR)


def _etcd_certificate(ca_key, ca: x509.Certificate, common_name: str, public_key, *, server: bool,
                      hosts: tuple[str, ...], days: int) -> x509.Certificate:
    import ipaddress

    sans: list[x509.GeneralName] = []
    if server:
        for h in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h.strip("[]"))))
            except ValueError:
                sans.append(x509.DNSName(h))
    else:
        sans.append(x509.DNSName(ETCD_CLIENT_HOSTNAME))
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
    now = _now()
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, cluster_id_of(ca)),
                                     x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ETCD_ROLE),
                                     x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca.subject).public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(min(now + datetime.timedelta(days=days), ca.not_valid_after_utc))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(ca_key, hashes.SHA256()))


def write_etcd_material(directory: str | os.PathLike, ca_key_pem_bytes: bytes, ca_pem_bytes: bytes,
                        hosts: list[str] | tuple[str, ...] = (), days: int = DAYS) -> EtcdMaterial:
    """DIR/etcd/: a server certificate for the etcd members (SANs 127.0.0.1, localhost and
    ``hosts``), a peer certificate (the same names, CN etcd-peer), and the NameNodes' client
    certificate (DNS SAN etcd-client.hedgefs), all from the cluster CA. One server and one peer
    certificate serve every member (name every member's host in ``hosts``)."""
    ca_key = serialization.load_pem_private_key(ca_key_pem_bytes, None)
    ca = x509.load_pem_x509_certificate(ca_pem_bytes)
    names = tuple(dict.fromkeys([*ETCD_DEFAULT_HOSTS, *(h.strip() for h in hosts if h.strip())]))
    out = etcd_material(directory)
    out.directory.mkdir(parents=True, exist_ok=True)
    for stem, cn, server in (("server", "etcd-server", True), ("peer", ETCD_PEER_CN, True),
                             ("client", "etcd-client", False)):
        key = new_private_key()
        cert = _etcd_certificate(ca_key, ca, cn, key.public_key(), server=server, hosts=names, days=days)
        write_private(out.directory / f"{stem}-key.pem", key_pem(key))
        (out.directory / f"{stem}.pem").write_bytes(cert_pem(cert))
    (out.directory / "ca.pem").write_bytes(ca_pem_bytes)
    return out


def add_etcd_material(directory: str | os.PathLike, hosts: list[str] | tuple[str, ...] = (), days: int = DAYS,
                      split: bool = False) -> EtcdMaterial:
    """DIR/etcd/ for a material directory made without it, with the CA key of its NameNode's credential."""
    namenode = load_credential(material_path(directory, NAMENODE, split))
    return write_etcd_material(directory, namenode.ca_key_pem, namenode.ca_pem, hosts, days)
