"""bot/commands/keygen.py: `minify-bot keygen` prints a working key pair, once, on standard output."""

from __future__ import annotations

import re

from bot import signing


def test_keygen_prints_a_pair_that_signs_and_verifies(bot):
    proc = bot("keygen", timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = dict(re.findall(r"^(MINIFY_BOT_\w+)=(\S+)$", proc.stdout, re.M))
    private, public = found[signing.SIGNING_KEY_ENV], found[signing.PUBLIC_KEY_ENV]
    assert signing.public_of(private) == public
    sig = signing.sign(private, b"known repro")
    assert signing.verify(public, b"known repro", sig) and not signing.verify(public, b"other", sig)
    # the private key goes to standard output only, and how to store it is said
    assert private not in proc.stderr and "stored" in proc.stderr
    assert "gh secret set MINIFY_BOT_SIGNING_KEY" in proc.stdout


def test_each_run_makes_a_new_pair(bot):
    keys = [re.search(r"^MINIFY_BOT_SIGNING_KEY=(\S+)$", bot("keygen", timeout=120).stdout, re.M).group(1)
            for _ in range(2)]
    assert keys[0] != keys[1]
