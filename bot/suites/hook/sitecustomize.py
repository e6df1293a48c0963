"""minify-bot's environment hook, loaded by Python at start-up in every program the bot reruns
(this directory is prepended to PYTHONPATH). It does nothing unless MINIFY_BOT_HOOK_STATE is set.

1. Chains to the sitecustomize this one shadows (the next one on sys.path), so a user's or a
   distribution's site customization still runs.
2. Waits for torch._dynamo to be imported by the program (or, in a warm run, finds it imported:
   :func:`activate`), then lets
   bot.torch_adapter.hook patch it: replace the compile backend (MINIFY_BOT_FORCE_BACKEND),
   count the graphs compiled and keep a copy of every minifier launcher torch writes.
Nothing here imports torch itself.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain() -> None:
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.origin is None or os.path.dirname(os.path.abspath(spec.origin)) == _HERE:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the site's own hook failing must not stop the program
        print(f"minify-bot hook: the chained sitecustomize {spec.origin} failed: {exc!r}", file=sys.stderr)


WATCH = ("torch._dynamo", "torch._dynamo.repro.after_aot")


class _Finder(importlib.abc.MetaPathFinder):
    """Runs bot.torch_adapter.hook.on_import(name, module) right after a watched module loads."""

    def find_spec(self, name, path=None, target=None):
        if name not in WATCH:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        class _Loader(importlib.abc.Loader):
            def create_module(self, s):
                return loader.create_module(s) if hasattr(loader, "create_module") else None

            def exec_module(self, module):
                original(module)
                _notify(name, module)

        spec.loader = _Loader()
        return spec


def _notify(name, module) -> None:
    try:
        from bot.torch_adapter import hook

        hook.on_import(name, module)
    except Exception as exc:  # noqa: BLE001
        print(f"minify-bot hook: could not patch {name}: {type(exc).__name__}: {exc}", file=sys.stderr)


def activate() -> None:
    """Start watching, when this run asks for the hook (MINIFY_BOT_HOOK_STATE). At start-up that is
    all; in a program run warm (forked from an interpreter that imported torch with the hook idle,
    :mod:`bot.suites.warm`) the watched modules are already loaded, and are patched now, as their
    import would have been."""
    if not os.environ.get("MINIFY_BOT_HOOK_STATE"):
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    try:
        with open(os.environ["MINIFY_BOT_HOOK_STATE"], "a", encoding="utf-8") as fh:
            fh.write('{"event": "hook", "pid": %d}\n' % os.getpid())
    except OSError:
        pass
    for name in WATCH:
        if name in sys.modules:
            _notify(name, sys.modules[name])


_chain()
activate()
