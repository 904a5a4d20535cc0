"""`aiayn serve --api-keys FILE`: the keys the LibreTranslate-compatible endpoints accept in
`api_key` (one a line; blank lines and lines starting with # are skipped). Without a key file the
server is open, as LibreTranslate is without --api-keys. Keys are kept as SHA-256 digests and a
given key is compared digest to digest, so the time an answer takes says nothing of how much of
a key was right."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from aiayn.errors import AiaynError

MAX_KEY_CHARS = 256


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class ApiKeys:
    """The accepted keys' digests; `check(key)` is None for an accepted key, else the refusal."""

    digests: frozenset[bytes]

    @classmethod
    def read(cls, path: str | Path) -> ApiKeys:
        """The keys of a key file; one-line errors for a missing, unreadable or empty file and a key
        with spaces (file and line named)."""
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as err:
            reason = err.strerror if isinstance(err, OSError) and err.strerror else "not UTF-8 text"
            raise AiaynError(f"--api-keys {path}: cannot read it: {reason}") from None
        keys = []
        for number, line in enumerate(lines, start=1):
            key = line.strip()
            if not key or key.startswith("#"):
                continue
            if len(key.split()) > 1 or len(key) > MAX_KEY_CHARS:
                raise AiaynError(f"{path}:{number}: a key is one word of at most {MAX_KEY_CHARS} characters")
            keys.append(key)
        if not keys:
            raise AiaynError(f"--api-keys {path}: no keys in it (one a line; # starts a comment)")
        return cls(frozenset(map(_digest, keys)))

    def check(self, key: object) -> tuple[int, str] | None:
        """None when `key` is accepted; else LibreTranslate's answer: (400, ...) without a key,
        (403, "Invalid API key") for a wrong one."""
        if key is None or key == "":
            return 400, "Please contact the server operator to get an API key"
        if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
            return 403, "Invalid API key"
        given = _digest(key)
        accepted = False
        for digest in self.digests:  # every digest compared: no early exit
            accepted |= hmac.compare_digest(given, digest)
        return None if accepted else (403, "Invalid API key")
