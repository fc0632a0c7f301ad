"""The server shell: the listener, its connections, and the server's lifecycle (start, recover, drain, stop).

`Server` runs on an asyncio loop; `ServerThread` / `AsyncServerThread` run one in a thread for tests."""
from tenure.server.lifecycle import Server, StartupError, reopen
from tenure.server.listener import raise_fd_limit
from tenure.server.thread import AsyncServerThread, ServerThread

__all__ = ["AsyncServerThread", "Server", "ServerThread", "StartupError", "raise_fd_limit", "reopen"]
