"""The ceiling: nginx serving the same card bytes as a static file, with the same headers."""

from pathlib import Path

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "strict-origin-when-cross-origin",
    "Cache-Control": "public, max-age=300",
}


def config(*, root: Path, port: int, workers: int, run_dir: Path) -> str:
    """A complete nginx.conf: loopback only, no access log, everything under `run_dir`."""
    headers = "\n".join(
        f'            add_header {name} "{value}" always;'
        for name, value in SECURITY_HEADERS.items()
    )
    return f"""\
worker_processes {workers};
daemon off;
pid {run_dir}/nginx.pid;
error_log {run_dir}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {run_dir}/client_body;
    proxy_temp_path {run_dir}/proxy;
    fastcgi_temp_path {run_dir}/fastcgi;
    uwsgi_temp_path {run_dir}/uwsgi;
    scgi_temp_path {run_dir}/scgi;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location / {{
            default_type application/json;
            types {{ }}
{headers}
        }}
    }}
}}
"""


def write_site(*, root: Path, card_path: str, body: bytes) -> Path:
    """Place the card at the URL path it is served from, below `root`."""
    target = root / card_path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(body)
    return target
