"""ACL bindings and filters as Kafka defines them (`AclBinding`, `AclBindingFilter`), their checks, the text form
tenure's flags, admin endpoint and pytest marker use, and the file that keeps them in a data dir.

Codes are Kafka's (protocol/acl.py; kafka-python's enums name them). A binding names one resource pattern (a
resource type, a name and LITERAL or PREFIXED; the literal name "*" is every resource of the type) and one
entry (a principal "Type:name" or "User:*", a host or "*", an operation or ALL, ALLOW or DENY). A filter may
leave each part open (ANY, or null for a name, principal or host); the pattern type MATCH finds the bindings
that would apply to one named resource (the literal name, the literal "*" and every prefix of it).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from kafka.protocol.admin.acl import ACLOperation, ACLPermissionType, ACLResourcePatternType, ACLResourceType

from tenure.protocol.acl import ALL, ANY, CLUSTER, CLUSTER_NAME, UNKNOWN, USER
from tenure.storage.files import fsync_dir

WILDCARD = "*"                           # every resource name, every host (Kafka's WILDCARD_RESOURCE / host)
WILDCARD_PRINCIPAL = "User:*"
ANY_PATTERN, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
DENY, ALLOW = 2, 3
ACLS_FILE = "acls.json"                  # in the data dir
MAX_ACLS = 100_000                       # bindings kept at most (CreateAcls past it: POLICY_VIOLATION)
MAX_TEXT = 1024                          # longest name, principal or host of a binding accepted

_RESOURCE_TYPES = {t.value for t in ACLResourceType} | {USER}   # kafka-python has no USER (7)
_OPERATIONS = {o.value for o in ACLOperation}
_PERMISSIONS = {p.value for p in ACLPermissionType}
_PATTERNS = {p.value for p in ACLResourcePatternType}
RESOURCE_NAMES = {**{t.value: t.name for t in ACLResourceType}, USER: "USER"}
OPERATION_NAMES = {o.value: o.name for o in ACLOperation}
PERMISSION_NAMES = {p.value: p.name for p in ACLPermissionType}
PATTERN_NAMES = {p.value: p.name for p in ACLResourcePatternType}


class AclError(ValueError):
    """A binding or filter Kafka refuses: INVALID_REQUEST with this message."""


class AclFileError(ValueError):
    """The data dir's acls.json cannot be read back: the server does not start."""


@dataclass(frozen=True, order=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def applies_to(self, resource_type: int, name: str) -> bool:
        """Whether this binding's pattern covers the resource (the literal name, the literal "*", a prefix)."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == LITERAL:
            return self.name == name or self.name == WILDCARD
        return self.pattern_type == PREFIXED and name.startswith(self.name)

    def text(self) -> str:
        """The text form `parse_acl` reads back."""
        resource = RESOURCE_NAMES[self.resource_type].lower() + ":"
        if self.pattern_type == PREFIXED:
            resource += "prefixed:"
        out = f"{PERMISSION_NAMES[self.permission].lower()} {self.principal} " \
              f"{OPERATION_NAMES[self.operation].lower()} {resource}{self.name}"
        return out if self.host == WILDCARD else f"{out} from {self.host}"


@dataclass(frozen=True)
class AclFilter:
    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def unknown(self) -> bool:
        """A code Kafka does not know (or UNKNOWN): Kafka refuses such a request as it parses it."""
        return (self.resource_type not in _RESOURCE_TYPES or self.resource_type == UNKNOWN
                or self.pattern_type not in _PATTERNS or self.pattern_type == UNKNOWN
                or self.operation not in _OPERATIONS or self.operation == UNKNOWN
                or self.permission not in _PERMISSIONS or self.permission == UNKNOWN)

    def matches(self, b: AclBinding) -> bool:
        """Kafka's AclBindingFilter.matches: the pattern filter, then the entry filter."""
        if self.resource_type != ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in (ANY_PATTERN, MATCH) and self.pattern_type != b.pattern_type:
            return False
        if self.name is not None:
            if self.pattern_type in (ANY_PATTERN, b.pattern_type):
                if self.name != b.name:
                    return False
            elif b.pattern_type == LITERAL:          # MATCH: what would apply to the resource named
                if b.name not in (self.name, WILDCARD):
                    return False
            elif not self.name.startswith(b.name):   # MATCH against a PREFIXED binding
                return False
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and (self.operation == ANY or self.operation == b.operation)
                and (self.permission == ANY or self.permission == b.permission))


MATCH_ALL = AclFilter(ANY, None, ANY_PATTERN, None, None, ANY, ANY)


def check_binding(b: AclBinding) -> None:
    """Kafka's checks of a binding to create (AclApis and the controller's validateNewAcl): AclError if it is
    refused."""
    if b.resource_type in (UNKNOWN, ANY) or b.resource_type not in _RESOURCE_TYPES:
        raise AclError(f"Invalid resourceType {RESOURCE_NAMES.get(b.resource_type, 'UNKNOWN')}")
    if b.pattern_type not in (LITERAL, PREFIXED):
        raise AclError(f"Invalid patternType {PATTERN_NAMES.get(b.pattern_type, 'UNKNOWN')}")
    if b.operation in (UNKNOWN, ANY) or b.operation not in _OPERATIONS:
        raise AclError(f"Invalid operation {OPERATION_NAMES.get(b.operation, 'UNKNOWN')}")
    if b.permission not in (ALLOW, DENY):
        raise AclError(f"Invalid permissionType {PERMISSION_NAMES.get(b.permission, 'UNKNOWN')}")
    if b.resource_type == CLUSTER and b.name != CLUSTER_NAME:
        raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not b.name:
        raise AclError("Invalid empty resource name")
    if ":" not in b.principal:
        raise AclError(f"Could not parse principal from `{b.principal}` (no colon is present separating the "
                       "principal type from the principal name)")
    if max(len(b.name), len(b.principal), len(b.host)) > MAX_TEXT:
        raise AclError(f"A resource name, principal or host longer than {MAX_TEXT} characters")


def _code(names: dict[int, str], word: str, what: str) -> int:
    for code, name in names.items():
        if name.lower() == word.lower().replace("-", "_"):
            return code
    raise AclError(f"unknown {what} {word!r} (one of {', '.join(n.lower() for n in names.values())})")


def parse_acl(spec: str) -> AclBinding:
    """A binding from its text form: `PERMISSION PRINCIPAL OPERATION TYPE:[prefixed:]NAME [from HOST]`, e.g.
    "allow User:alice read topic:orders", "deny User:* write topic:prefixed:logs-",
    "allow User:bob read group:g1 from 127.0.0.1". A bare principal name means User:NAME."""
    words = spec.split()
    if len(words) == 6 and words[4].lower() == "from":
        words = words[:4] + [words[5]]
    if len(words) not in (4, 5):
        raise AclError(f"an ACL is 'allow|deny PRINCIPAL OPERATION TYPE:[prefixed:]NAME [from HOST]', not {spec!r}")
    permission = _code({ALLOW: "ALLOW", DENY: "DENY"}, words[0], "permission")
    principal = words[1] if ":" in words[1] else f"User:{words[1]}"
    operation = _code({k: v for k, v in OPERATION_NAMES.items() if k not in (UNKNOWN, ANY)}, words[2], "operation")
    kind, sep, rest = words[3].partition(":")
    if not sep:
        raise AclError(f"a resource is TYPE:NAME or TYPE:prefixed:NAME, not {words[3]!r}")
    resource_type = _code({k: v for k, v in RESOURCE_NAMES.items() if k not in (UNKNOWN, ANY)}, kind, "resource type")
    pattern = LITERAL
    if rest.lower().startswith("prefixed:"):
        pattern, rest = PREFIXED, rest[len("prefixed:"):]
    elif rest.lower().startswith("literal:"):
        rest = rest[len("literal:"):]
    binding = AclBinding(resource_type, rest, pattern, principal, words[4] if len(words) == 5 else WILDCARD,
                         operation, permission)
    check_binding(binding)
    return binding


def load(path: Path) -> list[AclBinding]:
    """The bindings kept in a data dir's ACL file (none if there is none)."""
    file = path / ACLS_FILE
    if not file.exists():
        return []
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        out = []
        for item in data["acls"]:
            b = AclBinding(**item)
            check_binding(b)
            out.append(b)
    except (ValueError, KeyError, TypeError) as exc:     # refuse to start rather than drop ACLs silently
        raise AclFileError(f"{file}: not an ACL file tenure wrote ({exc}); fix or remove it") from None
    return out


def save(path: Path, bindings: list[AclBinding]) -> None:
    """Write the bindings to the data dir's ACL file, durably (a new file, fsynced, renamed over the old)."""
    file = path / ACLS_FILE
    tmp = file.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"version": 1, "acls": [asdict(b) for b in bindings]}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, file)
    fsync_dir(path)


__all__ = ["ALL", "ALLOW", "DENY", "AclBinding", "AclError", "AclFilter", "LITERAL", "MATCH", "PREFIXED",
           "WILDCARD", "check_binding", "load", "parse_acl", "save"]
