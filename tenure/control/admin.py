"""The old home of the admin endpoint, now three modules: the HTTP server (tenure/control/http_server.py),
its client (tenure/control/http_client.py) and the `tenure groups|fault|...` subcommands
(tenure/control/commands.py). Only re-exports, kept for tenure/server/lifecycle.py and tenure/tools/cli.py
until they import from those modules; nothing else should import it."""
from tenure.config import ADMIN_TOKEN_ENV as TOKEN_ENV
from tenure.config import DEFAULT_ADMIN_PORT as DEFAULT_PORT
from tenure.control.commands import add_parser, run
from tenure.control.http_server import bind_admin, is_loopback, serve_admin

__all__ = ["DEFAULT_PORT", "TOKEN_ENV", "add_parser", "bind_admin", "is_loopback", "run", "serve_admin"]
