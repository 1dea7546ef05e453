"""Each federation peer stored before URLs had one spelling, in it (VX-DISC-5, decision 296).

`virgo peers remove` and the own-origin rule compare a peer's URL in one spelling (scheme and
host in lower case, no default port), so a row stored as `HTTPS://Peer.Example:443/api/ard/`
is found by neither. Each is rewritten to that spelling, its credential sealed again for the
new URL it is bound to (cards.ard.peers.normalise_stored_peers). A row that cannot be rewritten
without losing a peer or a credential keeps its URL and is reported (decision 298).
"""

from typing import Any

from django.db import migrations


def normalise_peer_urls(apps: Any, schema_editor: Any) -> None:
    from cards.ard import peers

    done = peers.normalise_stored_peers(
        apps.get_model("cards", "FederationPeer"), schema_editor.connection.alias
    )
    for url, why in done.disabled:
        print(f"\n  federation peer {url} disabled: {why}; `virgo peers remove` it as listed")
    for url, why in done.left:
        print(f"\n  federation peer {url} left as stored: {why}")


class Migration(migrations.Migration):
    dependencies = [
        ("cards", "0010_federation_peer"),
    ]

    operations = [
        migrations.RunPython(normalise_peer_urls, migrations.RunPython.noop, elidable=True),
    ]
