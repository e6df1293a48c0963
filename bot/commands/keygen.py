"""`minify-bot keygen`: a new key pair for signing the known repros the bot writes into its issues
(bot/signing.py); the work is in bot.signing."""

from __future__ import annotations

import sys

from bot.errors import EXIT_OK, InfraError

HELP = "make the key pair that signs the known repros in the bot's issues (only signed ones are ever run)"
DESCRIPTION = HELP + """.

Prints a new Ed25519 key pair (base64) and how to store it: the private key as the repository
secret MINIFY_BOT_SIGNING_KEY (given only to the job that reports), the public key as the
repository variable MINIFY_BOT_PUBLIC_KEY (read by the job that minifies). The private key is
printed once, to standard output only: store it and clear the terminal. See docs/reporting.md."""


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    from bot import signing

    if not signing.available():
        raise InfraError("PyNaCl is not installed (it comes with PyGithub): no key can be made")
    private, public = signing.generate()
    print(f"""# minify-bot signing keys (Ed25519). Only known repros signed with the private key are run.
# WARNING: the private key below is shown once and only here. Anyone who holds it can make the bot
# run their code: store it as a repository secret now, keep no other copy, and clear this terminal.

{signing.SIGNING_KEY_ENV}={private}
{signing.PUBLIC_KEY_ENV}={public}

# store them (GitHub CLI; paste the value when asked, so it stays out of the shell history):
#   gh secret set {signing.SIGNING_KEY_ENV}     # a secret: give it only to the job that reports
#   gh variable set {signing.PUBLIC_KEY_ENV}    # not secret: the job that minifies reads it
# then pass them to the action (docs/reporting.md, "Known bugs are not minified again").""")
    sys.stdout.flush()
    print("minify-bot keygen: the private key was printed to standard output only; it is not stored anywhere",
          file=sys.stderr)
    return EXIT_OK
