"""The one request context: who sent a request, on which broker and listener, as whom, and when.

The server's dispatcher builds one per request (tenure/server/dispatch.py) and hands it to the request's
handler, whoever owns the API (the broker, the group coordinator, the transaction coordinator); tests and
tools that call a handler directly build their own. The coordinator runtime gives each input to a shard a
copy with its own `token` (how it answers a parked request) and the coordinator's clock at that moment.
"""
from __future__ import annotations

from dataclasses import dataclass

from .acl import CLUSTER, CLUSTER_NAME, Authorization

ANONYMOUS = "User:ANONYMOUS"          # Kafka's principal of an unauthenticated connection
PLAINTEXT = "PLAINTEXT"               # the listener name (and security protocol) of today's listeners
_new, _set = object.__new__, object.__setattr__


@dataclass(frozen=True)
class RequestContext:
    """What a request's handler may know of it beyond its body (see the module's docstring)."""

    token: int                        # set by the coordinator runtime per input (0 until then)
    api_version: int
    client_id: str
    client_host: str                  # as the coordinator records it for members ("/127.0.0.1")
    now_ms: int                       # the server's clock (advance_clock included) when the request was read
    api_key: int = -1
    connection_id: int = 0
    peer: str = ""                    # "host:port" of the client's socket
    broker_id: int | None = None      # the broker whose listener took the request; None: no broker checks
    listener: str = PLAINTEXT
    principal: str = ANONYMOUS
    authorizer: Authorization | None = None     # the server's (--authorizer); None: every request is allowed

    def for_request(self, api_key: int, api_version: int, client_id: str, now_ms: int,
                    authorizer: Authorization | None) -> RequestContext:
        """A request's context from this one of its connection (who, where: built once per connection), made
        without the per-field work of a frozen dataclass's constructor (the dispatcher makes one per request)."""
        d = self.__dict__.copy()                  # (a copy of a dict, then its __dict__: dearer filled in place)
        d["api_key"], d["api_version"], d["client_id"], d["now_ms"] = api_key, api_version, client_id, now_ms
        d["authorizer"] = authorizer
        new = _new(RequestContext)
        _set(new, "__dict__", d)
        return new

    def for_input(self, token: int, now_ms: int) -> RequestContext:
        """This context with a coordinator runtime's `token` for one input and its clock's `now_ms`: a copy
        made without the per-field work of `dataclasses.replace` (the coordinator makes one per request)."""
        d = self.__dict__.copy()
        d["token"], d["now_ms"] = token, now_ms
        new = _new(RequestContext)
        _set(new, "__dict__", d)
        return new

    @property
    def host(self) -> str:
        """The client's address as an ACL names hosts ("127.0.0.1")."""
        return self.client_host.removeprefix("/")

    def allows(self, operation: int, resource_type: int, name: str) -> bool:
        """Whether this request's principal, from its host, may perform `operation` on the resource
        (protocol/acl.py codes); always with no authorizer."""
        return self.authorizer is None or self.authorizer.authorize(self.principal, self.host, operation,
                                                                    resource_type, name)

    def allows_cluster(self, operation: int) -> bool:
        return self.allows(operation, CLUSTER, CLUSTER_NAME)

    def allows_any(self, operation: int, resource_type: int) -> bool:
        """Whether some resource of the type would allow `operation` (Kafka's authorizeByResourceType: an
        idempotent producer may write to some topic)."""
        return self.authorizer is None or self.authorizer.authorize_any(self.principal, self.host, operation,
                                                                        resource_type)
