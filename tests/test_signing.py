"""bot/signing.py: Ed25519 with the real PyNaCl. A signature verifies only for its own message and
key; anything malformed is "does not verify", never an exception; a malformed key in the
environment is a usage error that names the variable and never shows the key."""

from __future__ import annotations

import base64

import pytest

from bot import signing
from bot.errors import EXIT_USAGE, UsageError

MESSAGE = b'{"domain":"minify-action/known/v1","repro_sha256":"ab"}'


@pytest.fixture(scope="module")
def keys() -> tuple[str, str]:
    return signing.generate()


def test_a_signature_round_trips(keys):
    private, public = keys
    assert len(base64.b64decode(private)) == 32 and len(base64.b64decode(public)) == 32
    assert signing.public_of(private) == public
    sig = signing.sign(private, MESSAGE)
    assert len(base64.b64decode(sig)) == 64 and len(sig) <= signing.MAX_SIGNATURE_CHARS
    assert signing.verify(public, MESSAGE, sig)
    assert signing.verify(public, bytearray(MESSAGE), sig)
    signer = signing.signer_from_env({signing.SIGNING_KEY_ENV: private + "\n"})  # as a pasted secret may end
    assert signer.public_key == public and signing.verify(public, MESSAGE, signer.sign(MESSAGE))
    assert private not in repr(signer)


def test_a_modified_message_does_not_verify(keys):
    private, public = keys
    sig = signing.sign(private, MESSAGE)
    assert not signing.verify(public, MESSAGE + b" ", sig)
    assert not signing.verify(public, MESSAGE.replace(b"ab", b"ac"), sig)
    assert not signing.verify(public, b"", sig)


def test_a_signature_by_another_key_does_not_verify(keys):
    _, public = keys
    other_private, other_public = signing.generate()
    sig = signing.sign(other_private, MESSAGE)
    assert signing.verify(other_public, MESSAGE, sig) and not signing.verify(public, MESSAGE, sig)


@pytest.mark.parametrize("bad", [
    "", "x", "not base64 !!", base64.b64encode(b"\0" * 64).decode(),                 # zeros: not a signature
    "TRUNCATED", base64.b64encode(b"\1" * 63).decode(), base64.b64encode(b"\1" * 65).decode(),
    "A" * 10_000, None, 17, b"bytes", ["list"],
])
def test_a_truncated_or_garbage_signature_does_not_verify(keys, bad):
    private, public = keys
    if bad == "TRUNCATED":
        bad = signing.sign(private, MESSAGE)[:-4]
    assert signing.verify(public, MESSAGE, bad) is False


@pytest.mark.parametrize("bad_key", [
    "", "short", base64.b64encode(b"\0" * 31).decode(), base64.b64encode(b"\0" * 33).decode(),
    "not base64 at all, but long enough to be 32 bytes...", None, 5, "A" * 100_000,
    base64.b64encode(b"\0" * 32).decode(),                     # 32 bytes, but a small-order point
])
def test_a_malformed_public_key_does_not_verify(keys, bad_key):
    private, _ = keys
    assert signing.verify(bad_key, MESSAGE, signing.sign(private, MESSAGE)) is False


def test_a_message_that_is_not_bytes_does_not_verify(keys):
    private, public = keys
    assert signing.verify(public, MESSAGE.decode(), signing.sign(private, MESSAGE)) is False


@pytest.mark.parametrize("bad", ["secret-value-123", base64.b64encode(b"k" * 31).decode(),
                                 base64.b64encode(b"k" * 64).decode(), "s3cr3t " * 10])
def test_a_malformed_private_key_in_the_env_names_the_variable_not_the_key(bad):
    with pytest.raises(UsageError) as err:
        signing.signer_from_env({signing.SIGNING_KEY_ENV: bad})
    text = str(err.value)
    assert signing.SIGNING_KEY_ENV in text and bad.strip() not in text and err.value.exit_code == EXIT_USAGE
    with pytest.raises(UsageError) as err:
        signing.sign(bad, MESSAGE)
    assert bad.strip() not in str(err.value)


def test_a_malformed_public_key_in_the_env_or_option_is_a_usage_error_naming_it():
    with pytest.raises(UsageError, match=signing.PUBLIC_KEY_ENV):
        signing.public_key_from_env({signing.PUBLIC_KEY_ENV: "nope"})
    with pytest.raises(UsageError, match=signing.PUBLIC_KEY_OPTION):
        signing.public_key_from_env({}, "nope")


def test_no_key_or_an_empty_one_is_no_key(keys):
    """An unset repository secret or variable reaches a workflow as an empty string."""
    private, public = keys
    assert signing.signer_from_env({}) is None and signing.signer_from_env({signing.SIGNING_KEY_ENV: ""}) is None
    assert signing.public_key_from_env({}) is None
    assert signing.public_key_from_env({signing.PUBLIC_KEY_ENV: "  "}) is None
    assert signing.public_key_from_env({signing.PUBLIC_KEY_ENV: public}) == public
    other = signing.generate()[1]
    assert signing.public_key_from_env({signing.PUBLIC_KEY_ENV: public}, other) == other  # the option first
    assert signing.public_key_from_env({signing.PUBLIC_KEY_ENV: public}, "") == public


def test_without_pynacl_nothing_signs_or_verifies(keys, monkeypatch):
    import sys

    private, public = keys
    sig = signing.sign(private, MESSAGE)
    monkeypatch.setitem(sys.modules, "nacl", None)   # as if PyNaCl were not installed
    monkeypatch.setitem(sys.modules, "nacl.signing", None)
    assert not signing.available()
    assert signing.verify(public, MESSAGE, sig) is False
    assert signing.signer_from_env({signing.SIGNING_KEY_ENV: private}) is None
    assert signing.public_key_from_env({signing.PUBLIC_KEY_ENV: public}) is None


def test_keygen_prints_the_pair_and_how_to_store_it(capsys):
    from bot.cli import main

    assert main(["keygen"]) == 0
    out, err = capsys.readouterr()
    pairs = dict(line.split("=", 1) for line in out.splitlines() if line.startswith("MINIFY_BOT_"))
    private, public = pairs[signing.SIGNING_KEY_ENV], pairs[signing.PUBLIC_KEY_ENV]
    assert signing.public_of(private) == public
    assert out.count(private) == 1 and private not in err            # once, on stdout only
    assert "gh secret set MINIFY_BOT_SIGNING_KEY" in out and "gh variable set MINIFY_BOT_PUBLIC_KEY" in out
    assert "WARNING" in out
