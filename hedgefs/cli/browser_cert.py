"""`hedgefs admin export-p12`: a credential as PKCS#12, for a browser (the secure status page)."""

import click

from hedgefs.cli.common import CONTEXT, client_credentials
from hedgefs.client.errors import UsageError


@click.command("export-p12", context_settings=CONTEXT)
@click.argument("credential", required=False, type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Where to write it (mode 0600).")
@click.option("--password", prompt="Password for the .p12", hide_input=True, confirmation_prompt=True,
              envvar="HEDGEFS_P12_PASSWORD", show_envvar=True,
              help="Encrypts the bundle (prompted for when not given; the browser asks for it on import).")
def admin_export_p12(credential: str | None, out: str, password: str) -> None:
    """Write a user's or an admin's credential (CREDENTIAL, default --credentials or
    $HEDGEFS_CREDENTIALS) as a PKCS#12 bundle, which browsers import: its key, its certificate
    and the cluster CA's. Import it into the browser's certificates ("Your certificates"), and the
    CA (ca.pem, or the one in the bundle) as an authority, to open the secure status page. A
    server's credential (it holds the cluster key) is refused (exit 2).

    \b
    Examples:
      hedgefs admin export-p12 --credentials admin.pem --out admin.p12
      HEDGEFS_P12_PASSWORD=... hedgefs admin export-p12 security/admin.pem --out admin.p12
    """
    from hedgefs.client.fs import credentials_from
    from hedgefs.security.identity import CredentialError
    from hedgefs.security.material import write_private
    from hedgefs.security.pkcs12 import pkcs12_bundle

    cred = credentials_from(credential) if credential else client_credentials()
    if cred is None:
        raise UsageError("no credential to export: give a credential file, --credentials or HEDGEFS_CREDENTIALS")
    try:
        data = pkcs12_bundle(cred, password.encode())
    except CredentialError as err:
        raise UsageError(str(err)) from None
    try:
        write_private(out, data)
    except OSError as err:
        raise UsageError(f"cannot write {out}: {err.strerror}") from None
    click.echo(f"wrote {out}: {cred.identity.name}'s key and certificate and the CA of cluster {cred.cluster_id} "
               f"(PKCS#12{', password-protected' if password else ', no password'})")
