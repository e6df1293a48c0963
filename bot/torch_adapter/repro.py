"""Repro files and repro-after capture (the minify stage's view of torch's repro machinery).

Everything here reaches into torch's private ``torch._dynamo.repro`` / ``debug_utils`` /
``_content_store`` modules, so it is feature-detected and version-gated: a torch without what a
stage needs raises :class:`bot.errors.InfraError` with the missing piece named.

Repro files are the ones torch writes (``minifier_launcher.py``, ``checkpoints/<N>.py``,
``repro.py``): plain Python defining ``mod`` (a ``Repro`` module) and ``load_args(reader)``, plus
env-var lines and config lines. :func:`load_repro_file` executes such a file *without* running its
``__main__`` block and without its ``os.environ`` lines, so that it can be minified in-process.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import os
import re
from dataclasses import dataclass, field
from typing import Any

from bot.errors import InfraError, UsageError
from bot.records import ConfigSetting
from bot.torch_adapter import config as tconfig
from bot.torch_adapter.fxutil import free_symbols_of, inline_subgraph_calls, subgraph_call, symbolic_placeholders
from bot.torch_adapter.prewarm import CPU_ISA_IMPORTS

# torch releases this adapter was verified against; newer ones are tried (feature-detected).
MIN_TORCH = (2, 5)

CONFIG_LINE = tconfig.CONFIG_LINE   # a config line of a repro file (the one table: bot.torch_adapter.config)
ENV_LINE = re.compile(r"^os\.environ\[(['\"])([^'\"]+)\1\] = .*$")
SAVE_DIR_ARG = re.compile(r"save_dir=(None|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
STORAGE_LINE = re.compile(r"reader\.storage\((['\"])([0-9a-f]+)\1")

# What a capture run turns off: the AOTAutograd cache, whose hit hands back the compiled graphs
# without calling the compiler that torch's repro-after wraps, so a warm machine would capture
# nothing. The FX graph cache stays on: it sits inside that wrapper (compile_fx_inner calls
# wrap_compiler_debug(_compile_fx_inner), and _compile_fx_inner looks the graph up), so its hit is
# still captured and judged at every repro level, and a rerun reuses what the check's first run
# compiled instead of compiling every graph again. As environment variables (they win over a
# program that turns the cache on in code) and as runtime config (a forked check).
CAPTURE_CACHE_ENV = {"TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
CAPTURE_CACHE_CONFIG = {"functorch.enable_autograd_cache": False}

# Keys the minify stage itself sets for capture (caches off); never part of a bug's config.
CAPTURE_KEYS = {"inductor.fx_graph_cache", "functorch.enable_autograd_cache", "inductor.autotune_local_cache",
                "dynamo.repro_after", "dynamo.repro_level", "dynamo.debug_dir_root"}


# Where a capture run of a check keeps every launcher torch writes (:func:`keep_launchers`), under
# the capture's ``dynamo.debug_dir_root`` beside torch's own ``run_*`` directories.
LAUNCHERS_DIR = "launchers"


def launchers_dir(debug_dir_root: str) -> str:
    return os.path.join(debug_dir_root, LAUNCHERS_DIR)


def keep_launchers(config: dict) -> bool:
    """In a capture run of a check (``config`` sets ``dynamo.repro_after`` to aot and a
    ``dynamo.debug_dir_root``): every launcher torch writes is also kept, numbered in the order
    written, in :func:`launchers_dir`. torch's own ``minifier_launcher.py`` holds only the last graph
    it dumped: in a training check at level 3, the backward graph's, with a bug in the forward graph
    lost. True when installed; False for any other run, or a torch without the API."""
    root = config.get("dynamo.debug_dir_root")
    if config.get("dynamo.repro_after") != "aot" or not root:
        return False
    try:
        import torch._dynamo.repro.after_aot as after_aot
    except ImportError:
        return False
    import itertools

    from bot.torch_adapter.hook import on_every_launcher

    outdir, numbers = launchers_dir(str(root)), itertools.count(1)

    def keep(contents: str) -> None:
        os.makedirs(outdir, exist_ok=True)
        with open(os.path.join(outdir, f"launcher_{next(numbers):03d}.py"), "w", encoding="utf-8") as fh:
            fh.write(contents)

    return on_every_launcher(after_aot, keep)

# What a packaged repro (torch's repro format) does first in a fresh process, the same way every
# time: the minify command's fork server (bot.minify.procs.Interpreters) does it once before it
# forks the verification runs and the minify workers (see bot.proc.ForkServer for the syntax).
# The imports; the CPU's vector ISAs, which inductor learns in every new process by compiling and
# loading a probe library per ISA in child processes (about 1 s; here in a thread, while the other
# imports load); and one throwaway compile of a function of its own (about 0.9 s of one-time
# costs that every first compile pays). Both in prewarm.py, loaded by path: minify-bot's modules
# stay out of the server, so a repro that needed them would fail its verification.
PREWARM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prewarm.py")
REPRO_PRELOAD = ("torch", *CPU_ISA_IMPORTS, f"{PREWARM}:learn_cpu_isa&", "torch.fx", "torch._dynamo",
                 "torch._dynamo.testing", tconfig.MODULES["inductor"], "torch._inductor.inductor_prims",
                 "torch._inductor.compile_fx", "torch._dynamo.repro.after_aot", f"{PREWARM}:compile_once")


def repro_preload() -> tuple[str, ...]:
    """:data:`REPRO_PRELOAD` for this machine. Its throwaway compile is skipped on a CUDA build of
    torch (a compile may initialize CUDA where a GPU is visible, and CUDA does not survive a fork),
    unless the machine has no NVIDIA driver at all: then it compiles on the CPU, as the check's
    parent does (:func:`bot.torch_adapter.runtime.warm_up`), and no forked run pays a first compile."""
    from bot.torch_adapter.device import no_nvidia_driver

    if not no_nvidia_driver():
        return REPRO_PRELOAD
    return (*REPRO_PRELOAD[:-1], f"{PREWARM}:compile_once_on_cpu")


def _torch():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover
        raise InfraError(f"torch is not importable: {exc}") from exc
    return torch


def version_tuple(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string such as ``2.13.0+cpu``; (0, 0) when unreadable."""
    parts = version.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


def require_repro_api() -> None:
    """Raise InfraError unless this torch has what capture/minify need (imports torch here)."""
    from bot.torch_adapter.facts import missing_repro_api

    check_repro_api(_torch().__version__, missing_repro_api())


def check_repro_api(version: str | None, missing: list[str]) -> None:
    """Raise InfraError for a torch too old for minify, or lacking a private API it uses
    (``missing``, as :func:`bot.torch_adapter.facts.missing_repro_api` found it)."""
    if version is None:
        raise InfraError("torch is not installed (minify needs it)")
    if version_tuple(version) < MIN_TORCH:
        raise InfraError(f"torch {version} is too old for minify (need >= {'.'.join(map(str, MIN_TORCH))})")
    if missing:
        raise InfraError(f"torch {version} lacks the repro API minify needs: {', '.join(missing)}")


# --------------------------------------------------------------------------------------------
# Reading repro files
# --------------------------------------------------------------------------------------------


@dataclass
class ReproFile:
    path: str
    source: str
    kind: str                      # "aot" (after_aot format) | "dynamo" (after_dynamo format)
    accuracy: str                  # "" | "accuracy" | "strict_accuracy"
    save_dir: str | None           # absolute, resolved; None = random inputs
    config: dict[str, Any] = field(default_factory=dict)   # "inductor.x" -> value, as written
    backend: str | None = None     # after_dynamo files: the compiler name
    storages: list[str] = field(default_factory=list)
    tracing_mode: str = "real"     # after_aot files: what run_repro is told ("symbolic": fake inputs)

    @property
    def dynamic(self) -> bool:
        """Captured with dynamic shapes: torch writes ``tracing_mode='symbolic'`` only for graphs
        dumped with fake inputs (compile errors, level 2); accuracy and runtime dumps (levels 3
        and 4) get real inputs and ``'real'``, but their graph still reads SymInt inputs
        (``reader.symint``) - the sizes the compiled graph took as symbols."""
        return self.kind == "aot" and (self.tracing_mode == "symbolic" or "reader.symint(" in self.source)


def parse_repro_file(path: str) -> ReproFile:
    """Parse a launcher/repro file without running it; UsageError if it is not one."""
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read repro file {path}: {exc.strerror or exc}") from exc
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise UsageError(f"{path} is not valid Python (line {exc.lineno}): corrupt or truncated repro file") from exc
    if "def load_args(reader)" not in source or "class Repro(" not in source or "run_repro(" not in source:
        raise UsageError(
            f"{path} is not a torch repro/minifier launcher (no Repro module, load_args or run_repro call)"
        )
    kind = "dynamo" if "torch._dynamo.repro.after_dynamo" in source else "aot"
    args = run_repro_arguments(tree)
    val = args.get("accuracy")
    accuracy = "accuracy" if val is True else (val if val in ("accuracy", "strict_accuracy") else "")
    backend = args.get("backend") if isinstance(args.get("backend"), str) else None
    save_dir = args.get("save_dir") if isinstance(args.get("save_dir"), str) else None
    here = os.path.dirname(os.path.abspath(path))
    if save_dir is not None and not os.path.isdir(save_dir):
        # moved or relative: look next to the file
        for cand in (os.path.join(here, save_dir), os.path.join(here, "checkpoints"), os.path.join(here, "inputs")):
            if os.path.isdir(cand):
                save_dir = cand
                break
    if save_dir is None and "_INPUTS = " in source:
        cand = os.path.join(here, "inputs")
        if os.path.isdir(cand):
            save_dir = cand
    config = {}
    for line in source.splitlines():
        found = tconfig.key_of_line(line)
        if not found:
            continue
        key, text = found
        try:
            config[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            config[key] = _Unparsed(text)
    storages = [m.group(2) for m in STORAGE_LINE.finditer(source)]
    tracing_mode = args.get("tracing_mode")
    if tracing_mode not in ("real", "fake", "symbolic"):
        tracing_mode = "real"
    return ReproFile(os.path.abspath(path), source, kind, accuracy, save_dir, config, backend, storages,
                     tracing_mode)


def run_repro_arguments(tree: ast.AST) -> dict[str, Any]:
    """The literal keyword arguments of a launcher's ``run_repro(...)`` call (its last one), read
    from the syntax tree: torch writes the call on one line (after_aot) or across several
    (after_dynamo). An argument that is not a literal is left out."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and (getattr(n.func, "id", None) or getattr(n.func, "attr", None)) == "run_repro"]
    out: dict[str, Any] = {}
    for kw in (max(calls, key=lambda c: c.lineno).keywords if calls else []):
        if kw.arg is None:
            continue
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, SyntaxError, TypeError):
            continue
    return out


class _Unparsed(str):
    """A config value written as an expression we do not evaluate (e.g. a callable); written back
    as it was."""

    def __repr__(self) -> str:
        return str(self)


def strip_env_lines(source: str) -> str:
    return "\n".join("" if ENV_LINE.match(line.strip()) else line for line in source.splitlines()) + "\n"


@dataclass
class LoadedRepro:
    file: ReproFile
    mod: Any
    load_args: Any
    traced: str | None = None      # the tracing mode :func:`trace_aot_graph` used
    contiguous: str | None = None  # why :func:`trace_aot_graph` made the inputs contiguous (the error)


def load_repro_file(rf: ReproFile) -> LoadedRepro:
    """Execute a repro file's definitions (not its __main__ block, not its env lines)."""
    require_repro_api()
    ns: dict[str, Any] = {"__name__": "minify_bot_repro", "__file__": rf.path}
    try:
        code = compile(strip_env_lines(rf.source), rf.path, "exec")
        exec(code, ns)  # noqa: S102 - a repro file is code by definition; we run it in a worker
    except Exception as exc:
        raise UsageError(f"{rf.path} failed to load: {type(exc).__name__}: {exc}") from exc
    if "mod" not in ns or "load_args" not in ns:
        raise UsageError(f"{rf.path} defines no `mod`/`load_args`")
    return LoadedRepro(rf, ns["mod"], ns["load_args"])


def read_inputs(loaded: LoadedRepro, save_dir: str | None) -> list:
    from torch._dynamo.debug_utils import InputReader

    with _quiet_logs():
        reader = InputReader(save_dir=save_dir)
        loaded.load_args(reader)
    return list(reader.args)


def trace_aot_graph(loaded: LoadedRepro, args: list, static: bool = False) -> tuple:
    """The after_aot way: make_fx the Repro module under no_grad, with the file's tracing mode:
    (graph, inputs). The inputs are the captured ones, or contiguous copies where the graph cannot
    be traced on the captured strides (``loaded.contiguous`` says why).

    A launcher captured with dynamic shapes (:attr:`ReproFile.dynamic`) is traced symbolically,
    as torch's own ``run_repro`` does with ``tracing_mode='symbolic'``, so the graph's
    placeholders keep symbolic sizes (and its SymInt inputs stay inputs) and every candidate is
    compiled with dynamic shapes. Real tracing would turn the sizes into constants and specialize
    a dynamic-shapes-only bug away; ``static``: traced with real tensors all the same, its sizes the
    captured values (the static graph the minify worker tries first)."""
    torch = _torch()
    params = sum(1 for _ in loaded.mod.named_parameters())
    if params:   # inductor's freezing keeps the weights in the graph; torch writes them as random values
        raise UsageError(f"{os.path.basename(loaded.file.path)}: the graph holds {params} parameter(s) whose "
                         f"values torch's after-AOT launcher does not save (frozen weights, inductor.freezing)")
    mode = "real" if static else "symbolic" if loaded.file.dynamic else \
        loaded.file.tracing_mode if loaded.file.tracing_mode == "fake" else "real"
    try:
        return _traced(loaded, mode, args), args
    except Exception as exc:  # noqa: BLE001 - the captured strides may be ones the graph cannot run on
        plain = [a.detach().contiguous().requires_grad_(a.requires_grad)   # an expanded input stays as it is
                 if isinstance(a, torch.Tensor) and not a.is_contiguous() and 0 not in a.stride() else a
                 for a in args]
        if all(p is a for p, a in zip(plain, args)):
            raise
        # a backward graph whose saved tensors inductor's compiled forward returned in another
        # layout (channels-last after a convolution): it was traced for the strides of the
        # forward's trace, and a view in it cannot run eagerly on the captured ones
        gm = _traced(loaded, mode, plain)
        loaded.contiguous = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        return gm, plain


def _traced(loaded: LoadedRepro, mode: str, args: list):
    torch = _torch()
    from torch.fx.experimental.proxy_tensor import make_fx

    loaded.traced = mode
    with torch.no_grad():
        try:
            return make_fx(loaded.mod, tracing_mode=mode)(*args)
        except Exception:  # noqa: BLE001 - a graph that raises on its own inputs is traced without running
            if mode != "real":
                raise
    # the graph raises when run on its real inputs (an index out of bounds that eager reports and
    # compiled code aborts on): the ops are recorded on fake tensors, which run no kernel
    loaded.traced = "fake"
    with torch.no_grad():
        return make_fx(loaded.mod, tracing_mode="fake")(*args)


def input_val(val, real, name: str):
    """The example value for a new input cut out of a symbolic graph (an intermediate made an
    input): a fake tensor of the same fake mode whose sizes are plain size symbols, duck-sized
    against the graph's (a batch size stays the batch size's symbol), as dynamo gives its inputs.
    The intermediate's own value can have sizes that are expressions (``s1*s2`` after a view),
    which inductor cannot bind from an input. ``val`` itself for static values."""
    torch = _torch()
    if not isinstance(val, torch.Tensor) or not isinstance(real, torch.Tensor) or not free_symbols_of(val):
        return val
    fake_mode = getattr(val, "fake_mode", None)
    if fake_mode is None or fake_mode.shape_env is None:
        return val
    try:
        from torch._dynamo.source import ConstantSource
    except ImportError:  # a torch without it: keep the value (inductor may then refuse the input)
        return val

    # the value a query feeds is a clone of ``real``: describe that layout
    return fake_mode.from_tensor(real.detach().clone(), static_shapes=False, source=ConstantSource(f"minify_{name}"))


def symint_placeholders(gm) -> bool:
    """True when ``gm`` has a SymInt input: what torch's ``run_repro`` looks for to compile a
    symbolically traced repro with dynamic shapes (``after_aot._get_compile_args``)."""
    torch = _torch()
    return any(isinstance(n.meta.get("val"), torch.SymInt) for n in gm.graph.nodes if n.op == "placeholder")


def trace_dynamo_graph(loaded: LoadedRepro):
    """The graph of an after-dynamo repro's module, by fx's symbolic tracer. A higher-order op the
    graph calls on a submodule (an activation-checkpointed region's ``tag_activation_checkpoint``,
    ``wrap``, ``cond``, a nested compile region) is recorded as the one call node it is in dynamo's
    graph, not run on the tracer's proxies (which it cannot be), and each such submodule becomes
    an fx graph of its own, so that its nodes can be inlined."""
    torch = _torch()
    with _higher_order_ops_as_calls():
        gm = torch.fx.symbolic_trace(loaded.mod)
        for n in gm.graph.nodes:
            if n.op == "get_attr" and any(_is_higher_order(u.target) for u in n.users):
                sub = getattr(gm, n.target)
                if isinstance(sub, torch.nn.Module) and not isinstance(sub, torch.fx.GraphModule):
                    setattr(gm, n.target, torch.fx.symbolic_trace(sub))
    return gm


def _is_higher_order(target) -> bool:
    torch = _torch()
    hop = getattr(getattr(torch, "_ops", None), "HigherOrderOperator", None)
    return hop is not None and isinstance(target, hop)


@contextlib.contextmanager
def _higher_order_ops_as_calls():
    """While fx traces: each higher-order op called with an fx proxy among its arguments records one
    call_function node with the op as its target (its submodule arguments become get_attr nodes)."""
    torch = _torch()
    ns = getattr(torch.ops, "higher_order", None)
    table = getattr(getattr(torch, "_ops", None), "_higher_order_ops", None)
    if ns is None or not isinstance(table, dict):
        yield
        return
    import torch.utils._pytree as pytree

    def recorded(op):
        def call(*args, **kwargs):
            proxy = next((a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.fx.Proxy)), None)
            if proxy is None:
                return op(*args, **kwargs)
            return proxy.tracer.create_proxy("call_function", op, args, kwargs)
        return call

    cached = dict(vars(ns))   # the namespace caches the ops it has looked up
    names = [name for name in list(table) if name.isidentifier()]
    try:
        for name in names:
            setattr(ns, name, recorded(table[name]))
        yield
    finally:
        for name in names:
            if name in cached:
                setattr(ns, name, cached[name])
            else:
                vars(ns).pop(name, None)


@contextlib.contextmanager
def _quiet_logs():
    import logging

    lg = logging.getLogger("torch._dynamo.debug_utils")
    old = lg.level
    lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        lg.setLevel(old)


# --------------------------------------------------------------------------------------------
# Writing repro files
# --------------------------------------------------------------------------------------------


def repro_source(gm, args, *, kind: str, accuracy: str, save_dir: str | None, command: str = "run",
                 backend: str | None = None, tracing_mode: str | None = None, state: dict | None = None) -> str:
    """A torch-format repro for ``gm``/``args``; tensors are written to ``save_dir/storages``.

    A graph with symbolic inputs gets ``tracing_mode='symbolic'``: torch's ``run_repro`` then
    traces it symbolically and compiles it with dynamic shapes, as the launcher it came from.
    ``state``: the process state it runs under (numerics flags, autocast: :mod:`bot.torch_adapter.numerics`),
    set by the repro's first lines."""
    torch = _torch()
    buf = io.StringIO()
    with _quiet_logs(), torch._dynamo.config.patch(repro_after=None):
        if kind == "dynamo":
            from torch._dynamo.repro import after_dynamo

            if not hasattr(after_dynamo, "generate_dynamo_fx_repro_string"):
                raise InfraError("this torch has no after_dynamo.generate_dynamo_fx_repro_string")
            buf.write(after_dynamo.generate_dynamo_fx_repro_string(
                gm, args, backend, bool(accuracy), save_dir=save_dir, command=command))
        else:
            import inspect

            from torch._dynamo.repro.after_aot import save_graph_repro

            params = inspect.signature(save_graph_repro).parameters
            kw: dict[str, Any] = {"stable_hash": True} if "stable_hash" in params else {}
            mode = "symbolic" if symbolic_placeholders(gm) else tracing_mode
            if mode in ("symbolic", "fake"):
                if "tracing_mode" not in params:
                    raise InfraError(f"this torch's save_graph_repro has no tracing_mode: cannot write a "
                                     f"repro traced with {mode} tensors")
                kw["tracing_mode"] = mode
            save_graph_repro(buf, gm, args, "inductor_accuracy" if accuracy else "inductor",
                             save_dir=save_dir, command=command, accuracy=accuracy or False, **kw)
    src = with_backend_registered(buf.getvalue(), backend)
    if kind == "dynamo":
        src = _with_attribute_values(src, gm, save_dir)
        # run_repro's autocast is for the device type of the first non-CPU tensor input
        device = next((a.device.type for a in args if isinstance(a, torch.Tensor) and a.device.type != "cpu"), "cpu")
        src = _dynamo_repro_fixed(src, autocast=f"autocast.{device}" in (state or {}))
    if state:
        from bot.torch_adapter import numerics

        src = numerics.with_lines(src, state)
    return checked_source(_with_load_args_body(src))


def _with_load_args_body(source: str) -> str:
    """torch's ``InputWriter`` writes no line for a graph without inputs (an ``arange`` times a
    constant): ``def load_args(reader):`` is then followed by nothing indented, which is no Python.
    Such a ``load_args`` gets ``pass`` as its body."""
    head = "def load_args(reader):\n"
    at = source.find(head)
    if at < 0:
        return source
    rest = source[at + len(head):]
    if rest.startswith((" ", "\t")):
        return source
    return source[:at + len(head)] + "    pass  # the graph reads no input\n" + rest


def checked_source(source: str, what: str = "the repro") -> str:
    """``source`` when it parses as Python; else an :class:`InfraError` that says where and why:
    a written repro is never used (run, verified, filed) unchecked."""
    try:
        ast.parse(source)
    except SyntaxError as exc:
        line = (source.splitlines()[exc.lineno - 1:exc.lineno] or [""])[0].strip() if exc.lineno else ""
        raise InfraError(f"{what} written for this graph is not valid Python (line {exc.lineno}: {exc.msg}"
                         + (f": {line[:120]!r}" if line else "") + ")") from exc
    return source


_ATTR_HELPER = '''
def _minify_bot_attr(reader, name, value):
    """A parameter or buffer of the graph, set on ``mod`` with the value it had in the program."""
    read = getattr(reader, "args", None)   # torch's run_repro first counts the storages with a reader of none
    if read and read[-1] is value:
        read.pop()   # not a graph input
    if not isinstance(value, torch.Tensor):
        return
    *path, leaf = name.split(".")
    owner = mod.get_submodule(".".join(path)) if path else mod
    if isinstance(getattr(owner, leaf, None), torch.nn.Parameter):
        value = torch.nn.Parameter(value.detach(), requires_grad=value.requires_grad)
    setattr(owner, leaf, value)
'''


def holds_tensors(gm) -> bool:
    """Whether a graph module reads parameters or buffers of its own (a dynamo graph under inductor
    freezing), whose values its dynamo-format repro saves beside its inputs."""
    return any(True for _ in gm.parameters()) or any(True for _ in gm.buffers())


# the weights a repro saves beside its inputs: past these, a weight stays random in the repro
# (the packaged run directory must stay within what the report side accepts: bot.rundir)
ATTR_TENSOR_BYTES = 16 << 20
ATTR_TOTAL_BYTES = 64 << 20


def _with_attribute_values(source: str, gm, save_dir: str | None) -> str:
    """A dynamo-format repro whose graph reads parameters or buffers as attributes (dynamo installs
    them so when inductor freezes weights: ``inductor.freezing`` in an inference program) with
    their real values. torch's ``Repro()`` makes each one ``torch.randn`` of its shape, so the
    graph would run on random weights (a BatchNorm's random running variance turns every output
    into NaN, and eager and compiled then agree). Their values are saved with the inputs (same
    content store, so a packaged repro copies them as it copies inputs) and ``load_args`` sets
    them on ``mod`` after reading the inputs; without saved inputs they stay random."""
    torch = _torch()
    from torch._dynamo.debug_utils import InputWriter

    attrs = [(n, t) for n, t in [*gm.named_parameters(remove_duplicate=False),
                                 *gm.named_buffers(remove_duplicate=False)] if isinstance(t, torch.Tensor)]
    anchor = "\nload_args._version = 0"
    if not attrs or save_dir is None or anchor not in source:
        return source
    try:
        writer = InputWriter(save_dir, stable_hash=True)
    except TypeError:   # a torch whose writer has no stable_hash
        writer = InputWriter(save_dir)
    lines = ["    # the graph's parameters and buffers, as they were in the program"]
    total = 0
    for name, t in attrs:
        try:
            size = t.untyped_storage().nbytes()
            if size > ATTR_TENSOR_BYTES or total + size > ATTR_TOTAL_BYTES:
                lines.append(f"    # {name}: {size} bytes, not saved (past the repro's budget): random")
                continue
            before = len(writer._lines)  # noqa: SLF001 - the writer's lines: a storage's, then the tensor's
            writer.tensor(name, t.detach().requires_grad_(t.requires_grad) if t.is_leaf else t.detach())
        except Exception as exc:  # noqa: BLE001 - a tensor the writer cannot save (a subclass, sparse, mkldnn)
            lines.append(f"    # {name}: not saved ({type(exc).__name__}): random")
            continue
        total += size
        for line in writer._lines[before:]:  # noqa: SLF001
            if line.startswith("reader.tensor("):
                call, _, _ = line.rpartition("  # ")
                line = f"_minify_bot_attr(reader, {name!r}, {call})"
            lines.append("    " + line)
    head, _, tail = source.partition(anchor)
    return head + "\n" + "\n".join(lines) + anchor + tail.replace("\n", "\n" + _ATTR_HELPER, 1)


def _dynamo_repro_fixed(source: str, *, autocast: bool) -> str:
    """torch's after-dynamo ``run_repro`` runs the graph inside ``torch.amp.autocast(device,
    enabled=autocast)``, which written ``False`` turns off the autocast the program ran under:
    ``True`` where it did (the dtype is the one the repro's first lines set).

    Left as torch writes it: ``mod = Repro()`` is no GraphModule, so for an accuracy failure torch's
    float64 reference fails ("Could not generate fp64 outputs") and its ``same`` passes a mismatch
    it cannot judge without one under ``repro_ignore_non_fp``; a traced ``mod`` instead loses its
    compilation when ``run_fwd_maybe_bwd`` deep-copies the optimized module (torch 2.13). Such a
    repro does not verify, and the plain repro (bot.minify.worker.plain) is the verified one."""
    call = source.rfind("run_repro(")
    flag = source.find("autocast=False", call) if autocast and call >= 0 else -1
    if flag >= 0:
        source = source[:flag] + "autocast=True" + source[flag + len("autocast=False"):]
    return source


def backend_lines(backend: str | None) -> list[str]:
    """The lines a repro needs to compile with ``backend``: none for a registered name; for a user's
    compiler given as ``module:function``, its import and its registration under that name
    (``torch._dynamo.register_backend``, the documented way to name a custom backend), so the
    repro's ``backend='module:function'`` resolves in a process of its own as in the check."""
    if not backend or ":" not in backend:
        return []
    module, _, fn = backend.partition(":")
    if not (all(p.isidentifier() for p in module.split(".")) and fn.isidentifier()):
        return []
    return [f"from {module} import {fn} as _backend_under_test   # the compiler under test: {backend}",
            f"if {backend!r} not in torch._dynamo.list_backends(exclude_tags=()):",
            f"    torch._dynamo.register_backend(_backend_under_test, {backend!r})"]


def with_backend_registered(source: str, backend: str | None) -> str:
    """``source`` (a repro) with :func:`backend_lines` before its main block."""
    lines = backend_lines(backend)
    marker = "\nif __name__ == '__main__':"
    if not lines or marker not in source:
        return source
    head, _, tail = source.rpartition(marker)
    return head + "\n" + "\n".join(lines) + "\n" + marker + tail


# --------------------------------------------------------------------------------------------
# Config lines
# --------------------------------------------------------------------------------------------


def config_default(key: str) -> Any:
    try:
        return tconfig.default_of(key)
    except UsageError:
        raise KeyError(key) from None


set_config = tconfig.set_config


def judge_config(tolerance: float, compare_non_fp: bool) -> list[ConfigSetting]:
    """The config lines that make torch's ``run_repro(..., accuracy=...)`` judge a repro the way
    the minify worker judged it: the check's tolerance (torch's default ``repro_tolerance`` is
    1e-3, looser than most checks) and whether integer outputs count. Keys this torch lacks are
    left out (its run_repro then judges with its own defaults)."""
    out = []
    wanted = (("dynamo.repro_tolerance", float(tolerance)), ("dynamo.repro_ignore_non_fp", not compare_non_fp))
    for key, value in wanted:
        try:
            config_default(key)
        except KeyError:
            continue
        out.append(ConfigSetting(key, value))
    return out


@contextlib.contextmanager
def config_snapshot():
    """Restore every torch config module after the block."""
    import warnings

    mods = [importlib.import_module(tconfig.MODULES[p]) for p in ("dynamo", "inductor", "functorch")]
    saved = [m.get_config_copy() if hasattr(m, "get_config_copy") else None for m in mods]
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # restoring deprecated keys warns
            for m, s in zip(mods, saved):
                if s is not None and hasattr(m, "load_config"):
                    m.load_config(s)


def disable_repro_after():
    return _torch()._dynamo.config.patch(repro_after=None)


# --------------------------------------------------------------------------------------------
# Capture environment and launcher discovery
# --------------------------------------------------------------------------------------------


def probe_dynamo_repro_after(backend: str) -> str | None:
    """Run a clean 2-op function under TORCHDYNAMO_REPRO_AFTER=dynamo (level 2) with ``backend``.

    Returns None when the machinery works, else a one-line reason (a clean graph must not fail).
    Must run in a process of its own (it changes dynamo config and writes a debug dir in CWD)."""
    torch = _torch()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, torch._dynamo.config.patch(
        repro_after="dynamo", repro_level=2, debug_dir_root=tmp
    ):
        torch._dynamo.reset()

        def clean(x):
            return torch.nn.functional.linear(x, x).cos()

        try:
            torch.compile(clean, backend=backend)(torch.randn(4, 4))
        except Exception as exc:  # noqa: BLE001 - the probe reports any failure (2.13: ValueError in WrapBackendDebug)
            inner = exc
            while inner.__cause__ is not None:
                inner = inner.__cause__
            lines = [line for line in str(inner).strip().splitlines() if line.strip()]
            msg = lines[-1] if lines else ""
            return f"{type(inner).__name__}: {msg[:200]}"
        finally:
            torch._dynamo.reset()
    return None


# --------------------------------------------------------------------------------------------
# Dynamo-level capture backend (used instead of TORCHDYNAMO_REPRO_AFTER=dynamo)
# --------------------------------------------------------------------------------------------

CAPTURE_DIR_ENV = "MINIFY_BOT_CAPTURE_DIR"
CAPTURE_INNER_ENV = "MINIFY_BOT_CAPTURE_BACKEND"


def capture_backend(gm, example_inputs, **kwargs):
    """A dynamo backend that saves every graph with its real inputs, then hands it to the real
    backend (``$MINIFY_BOT_CAPTURE_BACKEND``). Files: ``$MINIFY_BOT_CAPTURE_DIR/graph_<k>.py``
    (after_dynamo format, inputs in ``graph_<k>_inputs/``), written before the backend compiles
    the graph (dynamo hands a backend the real tensors the frame was called with), so a compile
    error in the backend (AOTAutograd, a decomposition, inductor) or a crash still leaves them."""
    torch = _torch()
    out_dir = os.environ.get(CAPTURE_DIR_ENV) or os.getcwd()
    inner_name = os.environ.get(CAPTURE_INNER_ENV, "inductor")
    os.makedirs(out_dir, exist_ok=True)
    k = len([f for f in os.listdir(out_dir) if f.startswith("graph_") and f.endswith(".py")])
    try:
        import copy

        real = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) and a.is_leaf
                else a.detach().clone() if isinstance(a, torch.Tensor) else a for a in example_inputs]
        save_dir = os.path.join(out_dir, f"graph_{k}_inputs")
        try:
            src = repro_source(copy.deepcopy(gm), real, kind="dynamo", accuracy="", save_dir=save_dir,
                               command="run", backend=inner_name)
        except Exception:  # noqa: BLE001 - a torch whose writer cannot write a subgraph module
            flat = _inlined_for_writing(gm)
            if flat is None:
                raise
            src = "# the graph's subgraph calls are inlined (this torch cannot write their modules)\n" + \
                repro_source(flat, real, kind="dynamo", accuracy="", save_dir=save_dir, command="run",
                             backend=inner_name)
        _write_graph_state(os.path.join(out_dir, f"graph_{k}.py"), gm, real)
        with open(os.path.join(out_dir, f"graph_{k}.py"), "w") as fh:
            fh.write(src)
    except Exception as exc:  # noqa: BLE001 - best-effort capture must never change the outcome
        with open(os.path.join(out_dir, f"graph_{k}.error"), "w") as fh:
            fh.write(f"{type(exc).__name__}: {exc}\n")
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend(inner_name)(gm, example_inputs, **kwargs) if kwargs else \
        lookup_backend(inner_name)(gm, example_inputs)


def _inlined_for_writing(gm):
    """``gm`` with the subgraph calls that always run their one subgraph inlined (a checkpointed
    region, ``wrap``, a nested compile region), or None when there are none or it cannot be."""

    calls = {n: c for n in gm.graph.nodes if (c := subgraph_call(n)) is not None and c.kind != "cond"}
    return inline_subgraph_calls(gm, calls) if calls else None


def _write_graph_state(graph_path: str, gm, inputs) -> None:
    """Beside a captured graph (``graph_<k>.state.json``), the process state it ran under that is
    not in the graph: autocast (:data:`bot.torch_adapter.numerics.AUTOCAST`) for its devices."""
    import json

    from bot.torch_adapter import numerics

    torch = _torch()
    tensors = [t for t in list(inputs) + list(gm.parameters()) + list(gm.buffers()) if isinstance(t, torch.Tensor)]
    state = numerics.read_autocast({t.device.type for t in tensors})
    with open(_state_path(graph_path), "w") as fh:
        json.dump({"autocast": state}, fh)


def captured_state(graph_path: str) -> dict[str, Any]:
    """The process state a graph the capture backend saved ran under, as numerics flags to set
    with it (empty for any other file, or a record that is not one: the capture ran model code)."""
    from bot import safejson
    from bot.torch_adapter import numerics

    try:
        with open(_state_path(graph_path), encoding="utf-8") as fh:
            doc = safejson.loads(fh.read(65536))
    except (OSError, ValueError):
        return {}
    state = numerics.validate(doc.get("autocast") if isinstance(doc, dict) else None, autocast=True)
    return {k: v for k, v in state.items() if k.startswith("autocast.")}


def _state_path(graph_path: str) -> str:
    return os.path.splitext(graph_path)[0] + ".state.json"
