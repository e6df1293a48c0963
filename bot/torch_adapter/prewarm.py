"""Inductor's one-time costs, paid once in a process that will fork others that compile.

Three costs every new process pays at its first compile: learning the CPU's vector ISAs
(:func:`learn_cpu_isa`), the rest of a first compile (:func:`compile_once`), and the hash of torch's
sources that keys inductor's caches (:func:`code_cache_key`).

Inductor's first compile in a process costs about 0.9 s that no later compile pays again: lazy
imports, pattern-matcher registration, code-cache set-up. A process that forks many compiling
children (the check parent, the minify command's fork server) pays it once here instead of once
per child. The compile is of a tiny function of its own, under the default configuration; it
starts no thread pools (one thread, no compile workers), and leaves nothing compiled behind
(dynamo is reset).

This file imports nothing of minify-bot: the fork server loads it by path into a fresh interpreter
whose scripts must not find minify-bot's modules (see :class:`bot.proc.ForkServer`).
"""

from __future__ import annotations

# the modules the ISA detection imports as it runs: a thread that runs it needs them imported
# first (two threads that import the same modules at once can deadlock)
CPU_ISA_IMPORTS = ("torch._inductor.codecache", "torch._inductor.cpp_builder", "torch.utils.cpp_extension")


def learn_cpu_isa() -> None:
    """Learn which vector ISAs inductor may use on this CPU: torch's own ``valid_vec_isa_list``
    (private: feature-detected), cached in this process and in the children forked from it.

    torch probes each candidate ISA in turn, by compiling a small library and loading it in a child
    process (about 0.2 s each, six on a recent x86 CPU). The candidates it would probe are started
    side by side here first (each answer is cached per ISA), so that torch's own pass then only
    reads them; its answer is the one used either way."""
    import platform
    import threading

    from torch._inductor import cpu_vec_isa

    valid = getattr(cpu_vec_isa, "valid_vec_isa_list", None)
    if not callable(valid):
        return
    checker = getattr(cpu_vec_isa, "x86_isa_checker", None)
    isas = getattr(cpu_vec_isa, "supported_vec_isa_list", None)
    if platform.machine() in ("x86_64", "AMD64") and callable(checker) and isinstance(isas, (list, tuple)):
        try:
            flags = checker()
            todo = [isa for isa in isas if all(f in flags for f in str(isa).split())]
        except Exception:  # noqa: BLE001 - torch's own pass below probes them in turn
            todo = []
        threads = [threading.Thread(target=_probe, args=(isa,), daemon=True) for isa in todo]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    valid()


def _probe(isa) -> None:
    try:
        bool(isa)
    except Exception:  # noqa: BLE001 - torch's own pass asks again and decides
        pass


def forget_compile_pools() -> None:
    """Forget compile thread/process pools inherited from a parent: their threads did not survive
    the fork, and waiting on them deadlocks. Called in every forked child that compiles."""
    try:
        from torch._inductor import async_compile
    except ImportError:  # pragma: no cover
        return
    reset_fn = getattr(async_compile, "after_fork", None)
    if callable(reset_fn):
        reset_fn()
    ac = getattr(async_compile, "AsyncCompile", None)
    for name in ("pool", "process_pool"):
        fn = getattr(ac, name, None)
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()


def compile_once() -> None:
    """Compile and run a tiny function with inductor on the CPU, without starting thread pools.

    Not on a CUDA build of torch: a compile there may initialize CUDA (dynamo saves the CUDA RNG
    state around a compile when a GPU is visible), and CUDA does not survive a fork. Callers that
    can tell whether a GPU is visible decide for themselves (:func:`bot.torch_adapter.runtime.warm_up`)."""
    import torch

    if torch.backends.cuda.is_built():
        code_cache_key()   # reads files only: safe before a fork on any build
        return
    compile_once_on_cpu()


def _no_graph_cache(inductor_config) -> dict:
    return {"fx_graph_cache": False} if hasattr(inductor_config, "fx_graph_cache") else {}


def _no_autograd_cache():
    import contextlib

    try:
        from torch._functorch import config as functorch_config
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    if not hasattr(functorch_config, "enable_autograd_cache"):
        return contextlib.nullcontext()
    return functorch_config.patch(enable_autograd_cache=False)


def compile_once_on_cpu() -> None:
    import torch
    from torch._inductor import config as inductor_config

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        def f(x):
            return (x.sin() + 1).sum(0)

        # no compile worker pools in a process that forks; and no compiled-graph cache: a cache hit
        # skips inductor's graph passes, whose pattern tables (built once per process on the first
        # pass, about 2 s) are the largest part of what a first compile costs
        with inductor_config.patch(compile_threads=1, **_no_graph_cache(inductor_config)), _no_autograd_cache():
            torch.compile(f, backend="inductor")(torch.randn(4, 4))
        torch._dynamo.reset()
        code_cache_key()
    finally:
        torch.set_num_threads(threads)
        forget_compile_pools()


def code_cache_key() -> None:
    """Compute inductor's hash of torch's own source files (``codecache.torch_key``, private:
    feature-detected), part of every compiled-graph cache key. torch computes it once per process, at
    the first cache lookup, by reading and hashing every file of the torch package: about 1 s, paid
    again by every forked child whose parent never needed it (the warm-up compile above runs without
    the cache). Computed here, the children inherit it."""
    try:
        from torch._inductor import codecache
    except ImportError:  # pragma: no cover
        return
    key = getattr(codecache, "torch_key", None)
    if callable(key):
        try:
            key()
        except Exception:  # noqa: BLE001 - a child that needs it computes it as before
            pass
