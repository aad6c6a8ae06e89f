"""`hedgefs s3` (the S3 gateway) and `hedgefs admin s3-key` (its access keys)."""

import logging
import os

import click

from hedgefs.cli.common import (
    CONTEXT,
    check_policy,
    client_credentials,
    hedge_config,
    hedge_options,
    metrics_port_option,
    namenode_option,
    open_fs,
    serving_client_metrics,
    setup_logging,
)
from hedgefs.client.errors import UsageError
from hedgefs.client.config import namenode_address


def keys_option(f):
    return click.option("--keys", "keys_dir", metavar="DIR", envvar="HEDGEFS_S3_KEYS",
                        help="The access keys' directory (`hedgefs admin s3-key` writes it; default: "
                             "$HEDGEFS_S3_KEYS).")(f)


@click.command(context_settings=CONTEXT)
@click.option("--port", type=int, default=9000, show_default=True, help="Port (0 picks a free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (0.0.0.0 in a container).")
@keys_option
@click.option("--allow-anonymous", is_flag=True, help="Serve unsigned requests too, where the modes let everyone "
              "(public-read ACLs; an insecure cluster only).")
@click.option("--tls-cert", metavar="PEM", type=click.Path(dir_okay=False),
              help="Serve HTTPS with this certificate (chain) for the gateway's host name: in a secure "
                   "cluster the one `hedgefs admin s3-cert` issues (it holds its key too) ...")
@click.option("--tls-key", metavar="PEM", type=click.Path(dir_okay=False),
              help="... and its private key, if not in the --tls-cert file.")
@click.option("--writers", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Large objects or parts written at once; more wait their turn (up to 30 s). Each "
                   "holds ~45 MB in flight: the gateway's memory is about 60 MB + this x 45 MB.")
@click.option("--meta-policy", metavar="NAME", help="Policy of the bucket settings and upload records "
                                                    "(default: the bucket's).")
@namenode_option
@hedge_options
@metrics_port_option
def s3(port, host, keys_dir, allow_anonymous, tls_cert, tls_key, writers, meta_policy, namenode, metrics_port,
       **hedge) -> None:
    """Serve the S3 API for the cluster: buckets are top-level directories, keys the paths below.

    Every GET is a hedged striped read; PUTs are streamed and committed atomically. Requests are
    signed with AWS Signature V4 by keys from `hedgefs admin s3-key`; in a secure cluster each
    key acts as its hedgefs user (its permissions apply). Stateless: run as many as you like on
    the same keys directory.

    \b
    Examples:
      hedgefs admin s3-key --user alice --keys /etc/hedgefs/s3
      hedgefs s3 --port 9000 --keys /etc/hedgefs/s3
      aws --endpoint-url http://127.0.0.1:9000 s3 cp big.bin s3://data/big.bin
      hedgefs s3 --keys /etc/hedgefs/s3 --tls-cert /etc/hedgefs/s3-gateway.pem   # a secure cluster
    """
    from hedgefs.s3.app import Gateway
    from hedgefs.s3.keys import KeyStore
    from hedgefs.s3.server import serve

    setup_logging(default_level=logging.WARNING)
    secure = client_credentials() is not None
    if allow_anonymous and secure:
        raise UsageError("--allow-anonymous is for an insecure cluster only: a secure one has no anonymous user")
    if not keys_dir and not allow_anonymous:
        raise UsageError("give --keys DIR (see `hedgefs admin s3-key`), or --allow-anonymous on an insecure cluster")
    if keys_dir and not os.path.isdir(keys_dir):
        raise UsageError(f"--keys {keys_dir}: no such directory")
    if meta_policy:
        check_policy(meta_policy)
    ssl_context = None
    if tls_cert or tls_key:
        import ssl

        if not tls_cert:
            raise UsageError("--tls-key goes with --tls-cert (the certificate it is the key of)")
        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            ssl_context.load_cert_chain(tls_cert, tls_key)
        except (OSError, ssl.SSLError) as err:
            detail = getattr(err, "strerror", None) or err
            if tls_key is None and isinstance(err, ssl.SSLError):
                detail = f"{detail} (no private key in {tls_cert}? give --tls-key)"
            raise UsageError(f"--tls-cert/--tls-key: {detail}") from None
    elif secure:
        logging.getLogger("hedgefs.s3").warning(
            "s3: a secure cluster served over plain HTTP: requests are signed, but objects cross the network "
            "in clear; serve HTTPS with `hedgefs admin s3-cert` and --tls-cert")
    config = hedge_config(hedge)
    # Reach the cluster before serving: a wrong address is an error now, not on the first request.
    with open_fs(namenode, config) as fs:
        fs.stat("/")
    gateway = Gateway(namenode_address(namenode), KeyStore(keys_dir), anonymous=allow_anonymous, secure=secure,
                      hedge=config, meta_policy=meta_policy, writers=writers)
    with serving_client_metrics(metrics_port):
        serve(gateway, host, port, ssl_context)


@click.command("s3-key", context_settings=CONTEXT)
@click.option("--user", "user", required=True, metavar="NAME", help="The hedgefs user the key acts as.")
@click.option("--groups", metavar="G1,G2", default="", help="The user's groups (a secure cluster).")
@click.option("--days", type=click.IntRange(1, 3650), default=825, show_default=True,
              help="How long the user's credential is valid (a secure cluster).")
@keys_option
@namenode_option
def s3_key(user, groups, days, keys_dir, namenode) -> None:
    """Issue an S3 access key for USER into the gateways' keys directory.

    In a secure cluster (an admin's credential) the key comes with a credential for the user,
    made as `admin credential` makes one, so the gateway acts as that user and the user's
    permissions apply. Prints the access key and the secret key (shown only here).

    \b
    Examples:
      hedgefs admin s3-key --user alice --keys /etc/hedgefs/s3
      export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...
    """
    from hedgefs.s3.keys import write_key
    from hedgefs.security import identity

    if not keys_dir:
        raise UsageError("give --keys DIR (or set HEDGEFS_S3_KEYS)")
    group_list = [g for g in groups.split(",") if g]
    try:
        identity.check_name(user, identity.USER)
        for g in group_list:
            identity.check_name(g, "group")
    except ValueError as err:
        raise UsageError(str(err)) from None
    bundle = None
    if client_credentials() is not None:
        from hedgefs.security import material

        private = material.new_private_key()
        with open_fs(namenode) as fs:
            answer = fs.admin.issue_credential(user, material.USER, material.public_key_pem(private), group_list,
                                               days)
        bundle = material.bundle(material.key_pem(private), answer.certificate_pem, answer.ca_pem,
                                 comment=f"user {user} of cluster {answer.cluster_id}, for the S3 gateway")
    elif group_list:
        raise UsageError("--groups needs a secure cluster (an admin's credential): an insecure one has no users")
    try:
        key = write_key(keys_dir, user, bundle)
    except OSError as err:
        raise UsageError(f"--keys {keys_dir}: {err.strerror or err}") from None
    click.echo(f"access key: {key.access_key}")
    click.echo(f"secret key: {key.secret_key}")
    click.echo(f"user: {user}" + (f" (credential {key.credential})" if key.credential else " (insecure cluster)"))


@click.command("s3-cert", context_settings=CONTEXT)
@click.option("--security", "security_dir", required=True, metavar="DIR", type=click.Path(file_okay=False),
              help="The cluster's security material (its namenode.pem holds the CA key).")
@click.option("--host", "hosts", multiple=True, required=True, metavar="NAME",
              help="A DNS name or IP address clients reach the gateway by (repeat for more).")
@click.option("--out", metavar="PEM", type=click.Path(dir_okay=False),
              help="Where to write it [DIR/s3-gateway.pem].")
@click.option("--days", type=click.IntRange(1, 3650), default=825, show_default=True, help="How long it is valid.")
def s3_cert(security_dir, hosts, out, days) -> None:
    """Issue the S3 gateway's HTTPS certificate, signed by the cluster's CA (a secure cluster).

    Signs locally with the CA key in DIR/namenode.pem (run it where the NameNode's material is).
    The file holds the key, the certificate and the CA's: give it to `hedgefs s3 --tls-cert`;
    clients check the gateway with the cluster's ca.pem. It is a server certificate only: it
    cannot act as any hedgefs user or server.

    \b
    Examples:
      hedgefs admin s3-cert --security ./cluster/security --host s3.example.com --host 10.0.0.5
      hedgefs s3 --keys ./s3-keys --tls-cert ./cluster/security/s3-gateway.pem
      aws --endpoint-url https://s3.example.com:9000 --ca-bundle ./cluster/security/ca.pem s3 ls
    """
    from hedgefs.s3 import certs
    from hedgefs.security.identity import CredentialError

    namenode_pem = os.path.join(security_dir, "namenode.pem")
    if not os.path.exists(namenode_pem):
        raise UsageError(f"--security {security_dir}: no namenode.pem there (the NameNode's credential, "
                         f"which holds the CA key)")
    try:
        text = certs.issue(namenode_pem, list(hosts), days)
    except (ValueError, CredentialError) as err:
        raise UsageError(str(err)) from None
    path = out or os.path.join(security_dir, "s3-gateway.pem")
    try:
        certs.write(path, text)
    except OSError as err:
        raise UsageError(f"--out {path}: {err.strerror or err}") from None
    click.echo(f"wrote {path}: HTTPS for {', '.join(hosts)}, signed by the cluster's CA "
               f"({os.path.join(security_dir, 'ca.pem')} checks it)")
