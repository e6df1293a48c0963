"""One module per `minify-bot` command (see bot/cli.py for the protocol)."""
