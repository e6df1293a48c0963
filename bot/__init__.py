"""minify-action: torch.compile accuracy sweeps, automatic minification and one good issue per bug."""

__version__ = "1.0.0"
