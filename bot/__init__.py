"""minify-action: torch.compile accuracy sweeps, automatic minification and one good issue per bug."""

__version__ = "1.0.0"


def extra_hint(extra: str) -> str:
    """How to install one of minify-action's extras (pyproject.toml), in words a user can follow:
    the extra's packages by name, as the registry has them; minify-action itself is not on the
    registry, so the extra by name only works from a checkout of its repository."""
    from importlib import metadata

    try:
        reqs = [r.split(";")[0].strip() for r in metadata.requires("minify-action") or []
                if f'extra == "{extra}"' in r.replace("'", '"')]
    except metadata.PackageNotFoundError:
        reqs = []
    packages = " ".join(f"'{r}'" for r in reqs) if reqs else f"the packages of the {extra} extra (pyproject.toml)"
    return (f"pip install {packages} (minify-action's {extra} extra; minify-action is installed from its "
            f"repository, so in a checkout: pip install -e '.[{extra}]')")
