"""The minify predicate's view of "fails the same way": defined in bot/signature.py (one definition
for check, minify, verify and the fingerprint); re-exported here for the minify modules."""

from bot.signature import (  # noqa: F401
    ABORT_TYPE, ERROR_CLASSES, MINIFIABLE_CLASSES, UNCAUGHT_CPP, WRAPPERS, Signature, consistent,
    exception_chain, message_keys, normalize_line, short_type, signature_of_abort,
    signature_of_error_record, signature_of_exception, stderr_matches,
)
