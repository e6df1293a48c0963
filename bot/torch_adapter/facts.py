"""What this torch offers minify, learned in a process that has imported torch.

minify's own process does not import torch when it need not (its fork server imports it once, and
a second import beside it would cost a core for 3 s): it runs this file as a script in a fork of
that server (:meth:`bot.minify.procs.Interpreters.facts`), or, without a server, imports it.
So it imports nothing of minify-bot. Printed as one JSON line:

- ``missing``: the private torch APIs the minifier uses that this torch lacks (feature detection);
- ``cxx``: the C++ compiler inductor would use on the CPU;
- ``hip``: ROCm's version on a ROCm build; ``triton``: triton's version where it is installed.
"""

from __future__ import annotations

import importlib
import json

# the private torch APIs capture and minify use (module, names)
REPRO_API = (
    ("torch._dynamo.repro.after_aot", ("save_graph_repro", "run_repro")),
    ("torch._dynamo.debug_utils", ("InputReader", "NopInputReader", "same_two_models", "cast_to_fp64")),
    ("torch._functorch.fx_minifier", ("minifier",)),
    ("torch._inductor.compile_fx", ("compile_fx_inner",)),
    ("torch._dynamo.utils", ("same",)),
    ("torch.fx.experimental.proxy_tensor", ("make_fx",)),
)


def missing_repro_api() -> list[str]:
    missing = []
    for modname, names in REPRO_API:
        try:
            mod = importlib.import_module(modname)
        except Exception:  # noqa: BLE001 - feature detection: a private module failing to import is missing
            missing.append(modname)
            continue
        missing += [f"{modname}.{n}" for n in names if not hasattr(mod, n)]
    return missing


def cxx_compiler_name() -> str | None:
    try:
        from torch._inductor import cpp_builder

        get = getattr(cpp_builder, "get_cpp_compiler", None)
        return str(get()) if callable(get) else None
    except Exception:  # noqa: BLE001
        return None


def gather() -> dict:
    import torch

    facts = {"torch": str(getattr(torch, "__version__", "")) or None, "missing": missing_repro_api(),
             "cxx": cxx_compiler_name(), "hip": getattr(getattr(torch, "version", None), "hip", None),
             "triton": None}
    try:
        import triton

        facts["triton"] = getattr(triton, "__version__", None)
    except Exception:  # noqa: BLE001
        pass
    return facts


if __name__ == "__main__":
    print(json.dumps(gather()))
