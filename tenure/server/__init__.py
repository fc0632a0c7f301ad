"""The server shell: the listener, its connections, and the server's lifecycle (start, recover, drain, stop).

`Server` runs on an asyncio loop; `ServerThread` / `AsyncServerThread` run one in a thread for tests."""
from tenure.server.listener import AsyncServerThread, Server, ServerThread, raise_fd_limit, reopen

__all__ = ["AsyncServerThread", "Server", "ServerThread", "raise_fd_limit", "reopen"]
