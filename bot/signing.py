"""Ed25519 signatures of what the bot runs later (PyNaCl, installed with PyGithub).

The issue state's ``known`` block holds a repro that a later nightly runs (bot/known.py). The login
that wrote the issue proves nothing: on GitHub, ``github-actions[bot]`` is every workflow of the
repository. So the report side signs the block with the bot's own key and the minify side runs it
only when the signature verifies with the bot's public key:

- ``MINIFY_BOT_SIGNING_KEY``: the private key (the 32-byte Ed25519 seed, base64), a repository
  *secret* given only to the process that reports;
- ``MINIFY_BOT_PUBLIC_KEY``: the public key (32 bytes, base64), a repository *variable* (not secret),
  read by the process that decides what runs (a key given as ``--known-public-key`` comes first).

``minify-bot keygen`` makes a pair. A key that is given but malformed is a UsageError naming the
variable (never its text); an empty one is no key. Without PyNaCl there is no signing and no
verification: everything behaves as if no key were configured (nothing from an issue body runs).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

from bot.errors import UsageError

SIGNING_KEY_ENV = "MINIFY_BOT_SIGNING_KEY"
PUBLIC_KEY_ENV = "MINIFY_BOT_PUBLIC_KEY"
PUBLIC_KEY_OPTION = "--known-public-key"
KEY_BYTES = 32
SIGNATURE_BYTES = 64
MAX_SIGNATURE_CHARS = 100  # base64 of 64 bytes is 88 characters


def available() -> bool:
    """Whether PyNaCl is importable (signing and verification need it)."""
    try:
        import nacl.signing  # noqa: F401
    except ImportError:
        return False
    return True


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text, size: int) -> bytes | None:
    """``size`` bytes from strict base64 text (surrounding blanks allowed), or None."""
    if not isinstance(text, str) or len(text) > 4 * size:
        return None
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == size else None


def generate() -> tuple[str, str]:
    """A new key pair: (private key, public key), both base64."""
    import nacl.signing

    key = nacl.signing.SigningKey.generate()
    return _b64(bytes(key)), _b64(bytes(key.verify_key))


def public_of(private_b64: str) -> str:
    """The public key of a private key (base64 both)."""
    return _b64(bytes(_signing_key(private_b64, SIGNING_KEY_ENV).verify_key))


def _signing_key(private_b64: str, name: str):
    import nacl.signing

    seed = _unb64(private_b64, KEY_BYTES)
    if seed is None:
        raise UsageError(f"{name}: not a private key (expected the base64 text of a {KEY_BYTES}-byte Ed25519 "
                         "seed, as `minify-bot keygen` prints it); its value is not shown")
    return nacl.signing.SigningKey(seed)


def sign(private_b64: str, message: bytes) -> str:
    """The base64 Ed25519 signature of ``message``; UsageError for a malformed key."""
    return _b64(_signing_key(private_b64, SIGNING_KEY_ENV).sign(bytes(message)).signature)


def verify(public_b64, message: bytes, sig_b64) -> bool:
    """Whether ``sig_b64`` is the signature of ``message`` by the private key of ``public_b64``.
    False for anything malformed (the key, the signature, no PyNaCl); never raises."""
    try:
        import nacl.exceptions
        import nacl.signing
    except ImportError:
        return False
    key = _unb64(public_b64, KEY_BYTES)
    sig = _unb64(sig_b64, SIGNATURE_BYTES) if isinstance(sig_b64, str) and len(sig_b64) <= MAX_SIGNATURE_CHARS \
        else None
    if key is None or sig is None or not isinstance(message, (bytes, bytearray)):
        return False
    try:
        nacl.signing.VerifyKey(key).verify(bytes(message), sig)
    except (nacl.exceptions.CryptoError, ValueError, TypeError):
        return False
    return True


class Signer:
    """A private key, checked, for the report side: ``sign(message)`` -> base64 signature."""

    def __init__(self, private_b64: str, name: str = SIGNING_KEY_ENV):
        self._key = _signing_key(private_b64, name)
        self.public_key = _b64(bytes(self._key.verify_key))

    def sign(self, message: bytes) -> str:
        return _b64(self._key.sign(bytes(message)).signature)

    def __repr__(self) -> str:  # never the key
        return f"Signer(public_key={self.public_key!r})"


def signer_from_env(env: Mapping[str, str]) -> Signer | None:
    """The report side's signer from ``MINIFY_BOT_SIGNING_KEY``; None when it is not set (or empty),
    or PyNaCl is missing; UsageError naming the variable when it is set but malformed."""
    text = (env.get(SIGNING_KEY_ENV) or "").strip()
    if not text or not available():
        return None
    return Signer(text)


def public_key_from_env(env: Mapping[str, str], given: str | None = None) -> str | None:
    """The public key that decides what runs: ``given`` (``--known-public-key``), else
    ``MINIFY_BOT_PUBLIC_KEY``; None when neither is set (or empty) or PyNaCl is missing;
    UsageError naming the option or variable when it is malformed."""
    name, text = (PUBLIC_KEY_OPTION, given) if (given or "").strip() else (PUBLIC_KEY_ENV, env.get(PUBLIC_KEY_ENV))
    text = (text or "").strip()
    if not text or not available():
        return None
    if _unb64(text, KEY_BYTES) is None:
        raise UsageError(f"{name}: not a public key (expected the base64 text of a {KEY_BYTES}-byte Ed25519 "
                         "public key, as `minify-bot keygen` prints it)")
    return text
