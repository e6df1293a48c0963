"""What minify-bot's environment hook (bot/suites/hook/sitecustomize.py) does inside a program
it reruns, once the program has imported torch._dynamo. Every touch of torch's private API is
here, feature-detected; a missing API only turns the matching feature off (and says so).

Environment (read in the program's process):
  MINIFY_BOT_HOOK_STATE      JSON-lines file this module appends events to (required)
  MINIFY_BOT_FORCE_BACKEND   replace every torch.compile / torch._dynamo.optimize backend with this
                             one: eager, aot_eager, aot_eager_decomp_partition, inductor,
                             module:function, or "none" (do not compile at all)
  MINIFY_BOT_LAUNCHER_DIR    keep a numbered copy of every minifier launcher torch writes here;
                             torch's copy of an accuracy failure's graph to ./repro.py goes here
                             too, not into the program's working directory
  MINIFY_BOT_CONFIG          the check's --config overrides (JSON), set on torch's config modules
                             as the program imports torch._dynamo (what the program sets itself
                             afterwards wins)

Events, one JSON line each in the state file, each a :class:`HookEvent` (written by
:func:`_emit`, read by :func:`read_events`):
        Started      {"event": "hook", "pid": ...}  the hook loaded in a Python process of the
                     program (written by bot/suites/hook/sitecustomize.py, which imports nothing),
        Compiling    {"event": "compile", "graph": k}  one per frame dynamo starts compiling
                     (1-based; a frame whose compile fails counts; torch._dynamo.reset() does not
                     stop the count),
        Exited       {"event": "exit", "graphs": n, "isa": ...}  graphs dynamo produced in a process
                     that exited normally (and the CPU vector ISA inductor picked there),
        LauncherKept {"event": "launcher", "graph": k, "path": ...}  a launcher written while
                     graph k was current,
        GraphFacts   {"event": "graph", "graph": k, "devices": [...], "dtypes": {...}, ...}  what
                     one graph dynamo hands its backend is made of: the devices and dtypes of its
                     tensors (elements per dtype), whether it was compiled for a backward (grad
                     enabled and a tensor that requires grad), the autocast dtype in force, and the
                     process's numerics flags that differ from torch's defaults
                     (bot.torch_adapter.numerics), and the registered backend that compiles it
                     (none when the hook forces one, or for a function of the program's own),
                     with the inductor settings torch.compile's ``mode=`` and ``options=`` gave it,
        BackwardRan  {"event": "backward"}  the program ran a backward (once per process),
        Forced       {"event": "forced", "backend": ...},
        ConfigSet    {"event": "config", "keys": [...]},
        Unsupported  {"event": "unsupported", "what": ...}.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import ClassVar

from bot import safejson
from bot.records import Event, Launcher, Record

CONFIG_ENV = "MINIFY_BOT_CONFIG"
_BACKEND_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")   # a registered backend's name, as a record may hold it
_OPTION_KEY = re.compile(r"inductor\.[A-Za-z_][\w.]{0,100}")   # a compile option, as a record may hold it
_LOCK = threading.Lock()
_STATE = {"graphs": 0, "launchers": 0, "done": set(), "dumping": 0, "at_dump": None, "extra": 0,
          "compiling": False, "produced": 0, "at_start": None, "own_count": False}


# ---------------------------------------------------------------- events (the state file's lines)


class HookEvent(Event):
    """One line of the state file. The file is written from inside the program (untrusted code):
    a value of the wrong type is refused (``STRICT``), and :func:`parse_event` skips that line."""

    STRICT: ClassVar[bool] = True


class Started(HookEvent, kind="hook"):
    pid: int | None = None


class Compiling(HookEvent, kind="compile"):
    graph: int


class Exited(HookEvent, kind="exit"):
    graphs: int | None = None    # None: dynamo's count was not available
    isa: str | None = None


class LauncherKept(HookEvent, kind="launcher"):
    graph: int | None
    path: str


class GraphFacts(HookEvent, kind="graph"):
    graph: int | None
    devices: list[str]
    dtypes: dict[str, int]
    grad: bool = False
    autocast: str | None = None
    numerics: dict[str, bool | str] = field(default_factory=dict)
    backend: str | None = None    # the registered backend the program compiled it with (not a forced one)
    options: dict[str, bool | int | float | str | None] = field(default_factory=dict)  # compile_options()


class BackwardRan(HookEvent, kind="backward"):
    pass


class Forced(HookEvent, kind="forced"):
    backend: str


class ConfigSet(HookEvent, kind="config"):
    keys: list[str]


class Unsupported(HookEvent, kind="unsupported"):
    what: str


def parse_event(line: str | bytes) -> HookEvent | None:
    """The event of one state-file line; None for a line that is not one (malformed, an unknown
    kind, a value of the wrong type): the program wrote it, so it is parsed bounded."""
    try:
        doc = safejson.loads(line)
    except ValueError:
        return None
    return HookEvent.parse(doc)


def read_events(path: str) -> list[HookEvent]:
    """The well-formed events of a state file (none when it is missing)."""
    try:
        with open(path, "rb") as fh:   # a line that is not UTF-8 is malformed (safejson)
            lines = fh.readlines()
    except OSError:
        return []
    return [ev for ev in map(parse_event, lines) if ev is not None]


def _emit(event: HookEvent) -> None:
    path = os.environ.get("MINIFY_BOT_HOOK_STATE")
    if not path:
        return
    with _LOCK, open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(event.to_json()) + "\n")


# ---------------------------------------------------------------- the hook


def on_import(name: str, module) -> None:
    if name in _STATE["done"]:
        return
    _STATE["done"].add(name)
    if name == "torch._dynamo":
        _apply_config()
        _count_graphs()
        _watch_graphs()
        _watch_backward()
        import atexit

        atexit.register(lambda: _emit(Exited(_graphs_now(), _cpu_isa())))
        forced = os.environ.get("MINIFY_BOT_FORCE_BACKEND")
        if forced:
            _force_backend(module, forced)
    elif name == "torch._dynamo.repro.after_aot" and os.environ.get("MINIFY_BOT_LAUNCHER_DIR"):
        _keep_launchers(module)


def config_env(overrides: dict) -> dict[str, str]:
    """The environment that hands the check's ``--config`` overrides to the hook in the program's
    process (:func:`_apply_config` reads it)."""
    return {CONFIG_ENV: json.dumps(overrides)}


def _apply_config() -> None:
    """The check's ``--config`` overrides, on the live config modules of the program's process:
    a program checked with ``--config inductor.x=y`` compiles with it, as a zoo model or the
    harness would, without reading ``MINIFY_BOT_CONFIG`` itself."""
    raw = os.environ.get(CONFIG_ENV)
    if not raw:
        return
    try:
        from bot.torch_adapter.config import apply_overrides, validate_overrides

        overrides = validate_overrides(safejson.loads(raw))
        apply_overrides(overrides)
    except Exception as exc:  # noqa: BLE001 - the program runs on; the check says what was not applied
        _emit(Unsupported(f"--config in the program: {type(exc).__name__}: {exc}"))
        return
    if overrides:
        _emit(ConfigSet(sorted(overrides)))


def _unique_graphs() -> int | None:
    """Graphs dynamo produced so far in this process (its own "unique_graphs" statistic)."""
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except Exception:  # noqa: BLE001 - feature-detected
        return None


def _graphs_now() -> int | None:
    """The program's own graphs so far. Counted per compile (dynamo's "unique_graphs" statistic
    before and after each frame it compiles, less the graphs torch's repro dump itself traced while
    writing a launcher), so a program that clears dynamo's counters or calls torch._dynamo.reset()
    between models keeps its count; without the compile callbacks, dynamo's own statistic."""
    if not _STATE["own_count"]:
        n = _unique_graphs()
        return None if n is None else n - _STATE["extra"]
    return _STATE["produced"] + _in_flight()


def _in_flight() -> int:
    """Graphs the frame being compiled has produced so far (0 between compiles)."""
    start = _STATE["at_start"]
    now = _unique_graphs()
    if start is None or now is None:
        return 0
    return max(0, (now - start[0]) - (_STATE["extra"] - start[1]))


def _count_graphs() -> None:
    """Count every frame dynamo starts compiling (a frame whose compile fails included) and the
    graphs each produced, through dynamo's compile callbacks. ``torch._dynamo.reset()`` clears
    those callbacks (the harness calls it before every model): the handler's ``clear`` is wrapped
    so that the hook's callbacks are registered again right after."""
    try:
        from torch._dynamo.callback import callback_handler

        register = callback_handler.register_start_callback
        clear = callback_handler.clear
    except (ImportError, AttributeError):
        _emit(Unsupported("graph counting (torch._dynamo.callback.callback_handler)"))
        return

    def on_start(*_args, **_kw):
        if _STATE["dumping"]:  # torch's repro dump tracing its own code (at run time, level 3)
            return
        with _LOCK:
            _STATE["graphs"] += 1
            _STATE["compiling"] = True
            u = _unique_graphs()
            _STATE["at_start"] = None if u is None else (u, _STATE["extra"])
            k = _STATE["graphs"]
        _emit(Compiling(k))

    def on_end(*_args, **_kw):
        if _STATE["dumping"]:
            return
        with _LOCK:
            _STATE["produced"] += _in_flight()
            _STATE["at_start"] = None
            _STATE["compiling"] = False

    register_end = getattr(callback_handler, "register_end_callback", None)

    def install():
        register(on_start)
        if register_end is not None:
            register_end(on_end)

    def clear_then_install(*args, **kwargs):
        try:
            return clear(*args, **kwargs)
        finally:
            install()

    install()
    _STATE["own_count"] = register_end is not None
    try:
        callback_handler.clear = clear_then_install
    except (AttributeError, TypeError):
        _emit(Unsupported("graph counting across torch._dynamo.reset()"))


def _watch_graphs() -> None:
    """A :class:`GraphFacts` event for every graph dynamo hands a backend (any backend: the point
    is dynamo's own call of the user compiler, with the graph's example inputs)."""
    try:
        from torch._dynamo.output_graph import OutputGraph

        original = OutputGraph.call_user_compiler
    except (ImportError, AttributeError):
        _emit(Unsupported("graph facts (torch._dynamo.output_graph.OutputGraph.call_user_compiler)"))
        return
    if getattr(original, "_minify_bot", False):
        return

    def call_user_compiler(self, gm, example_inputs, *args, **kwargs):
        if not _STATE["dumping"]:
            try:
                facts = graph_facts(gm, example_inputs, _STATE["graphs"] or None)
                if not os.environ.get("MINIFY_BOT_FORCE_BACKEND"):
                    try:
                        facts.backend = backend_name(getattr(self, "compiler_fn", None))
                    except Exception:  # noqa: BLE001 - an unnamed backend: the graph's other facts stand
                        facts.backend = None
                    try:
                        facts.options = compile_options(getattr(self, "compiler_fn", None))
                    except Exception:  # noqa: BLE001 - feature-detected: no options recorded
                        facts.options = {}
                _emit(facts)
            except Exception as exc:  # noqa: BLE001 - never break the program's compile
                _emit(Unsupported(f"graph facts: {type(exc).__name__}: {exc}"[:200]))
        return original(self, gm, example_inputs, *args, **kwargs)

    call_user_compiler._minify_bot = True
    OutputGraph.call_user_compiler = call_user_compiler


def _watch_backward() -> None:
    """One :class:`BackwardRan` event the first time the program runs a backward
    (``torch.autograd.backward``, which ``Tensor.backward`` calls, or ``torch.autograd.grad``): a
    graph compiled with grad enabled is a training graph only if the program differentiates it
    (a forward-only benchmark that forgot ``torch.no_grad()`` is still inference)."""
    import torch.autograd as autograd

    for name in ("backward", "grad"):
        original = getattr(autograd, name, None)
        if original is None or getattr(original, "_minify_bot", False):
            continue

        def wrapper(*args, _original=original, **kwargs):
            # AOTAutograd differentiates while it traces a joint graph: only the program's own count
            if not _STATE.get("backward") and not _STATE["compiling"] and not _STATE["dumping"]:
                _STATE["backward"] = True
                _emit(BackwardRan())
            return _original(*args, **kwargs)

        wrapper._minify_bot = True
        wrapper.__doc__, wrapper.__name__ = original.__doc__, original.__name__
        setattr(autograd, name, wrapper)


def backend_name(compiler_fn) -> str | None:
    """The name of the torch backend dynamo compiles with (``inductor``, ``aot_eager``):
    torch.compile's wrapper says it, under dynamo's debug wrappers. None for a compiler of the
    program's own (a function, or one it registered itself: the minify worker and the repros, in
    processes of their own, could not name it). Never imports torch's backends (that costs a
    program a third of a second): a name torch.compile looked up is registered already."""
    name, _ = _named_compiler(compiler_fn)
    return name if name is not None and (name == "inductor" or _torch_backend(name)) else None


def _named_compiler(compiler_fn) -> tuple[str | None, object]:
    """(name, object) of the compiler under dynamo's debug wrappers that says its name
    (torch.compile's wrapper); (None, None) for one that says none."""
    fn = compiler_fn
    for _ in range(8):
        if fn is None:
            break
        name = getattr(fn, "compiler_name", None) or getattr(fn, "_compiler_name", None)
        if isinstance(name, str):
            return name, fn
        fn = getattr(fn, "_torchdynamo_orig_backend", None)
    return None, None


def compile_options(compiler_fn) -> dict:
    """The inductor settings the program compiled a graph with through ``torch.compile(mode=...,
    options=...)`` (the value torch.compile's inductor wrapper keeps as ``config``), as
    ``inductor.<key>`` overrides: the keys this torch's config has, with a plain value. Inductor sets
    them only while it compiles, so neither torch's launchers (written when the graph runs) nor a
    graph captured after dynamo carry them; a run whose backend is forced drops them."""
    from bot.torch_adapter import config as tconfig

    name, fn = _named_compiler(compiler_fn)
    config = getattr(fn, "config", None) if name == "inductor" else None
    out: dict = {}
    for name, value in list(config.items())[:64] if isinstance(config, dict) else []:
        if not isinstance(name, str) or not (value is None or isinstance(value, (bool, int, float, str))):
            continue   # a callable (a custom pass) cannot be carried
        key = f"inductor.{name}"
        try:
            out[key] = tconfig.validate_overrides({key: value})[key]
        except Exception:  # noqa: BLE001 - a key this torch does not have, or a value of the wrong type
            continue
    return out


def _torch_backend(name: str) -> bool:
    try:
        from torch._dynamo.backends.registry import _COMPILER_FNS
    except ImportError:
        return False
    registered = _COMPILER_FNS.get(name)
    return str(getattr(registered, "__module__", "")).startswith("torch.")


def graph_facts(gm, example_inputs, graph: int | None) -> GraphFacts:
    """What one dynamo graph is made of: its example inputs (fake tensors: device, dtype and size
    are known without data) and the parameters and buffers it holds (a torch that does not lift
    them into inputs)."""
    import torch

    from bot.torch_adapter import numerics

    tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    try:
        tensors += list(gm.parameters()) + list(gm.buffers())
    except (AttributeError, RuntimeError):
        pass
    devices: dict[str, None] = {}
    dtypes: dict[str, int] = {}
    for t in tensors:
        devices[str(t.device)] = None
        name = str(t.dtype).removeprefix("torch.")
        try:
            n = int(t.numel())
        except (TypeError, ValueError, RuntimeError):  # a symbolic size (dynamic shapes)
            n = 1
        dtypes[name] = dtypes.get(name, 0) + max(n, 1)
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    # an accelerator's autocast over the CPU's (a GPU graph may hold CPU scalars)
    autocast = next(reversed(numerics.read_autocast({d.split(":")[0] for d in devices}).values()), None)
    return GraphFacts(graph, list(devices), dtypes, bool(grad), autocast, numerics.read())


def _cpu_isa() -> str | None:
    """The vector ISA inductor picked for this CPU, when the program compiled C++ kernels. Nothing
    is imported or probed here: the module is loaded by any ``torch.compile``, but inductor learns
    the valid ISAs (building and loading a probe library per candidate, seconds on a small machine)
    only when it generates C++; a program that did not (a CUDA-only program, another backend) gets
    None, and its exit costs nothing."""
    mod = sys.modules.get("torch._inductor.cpu_vec_isa")
    pick = getattr(mod, "pick_vec_isa", None)
    learned = getattr(getattr(mod, "valid_vec_isa_list", None), "cache_info", None)
    if pick is None or learned is None:
        return None
    try:
        if learned().currsize == 0:
            return None
    except Exception:  # noqa: BLE001 - feature-detected
        return None
    try:
        isa = pick()
    except Exception:  # noqa: BLE001 - feature-detected
        return None
    return str(isa) if isa else "none"


def _resolve(forced: str):
    if ":" in forced:
        import importlib

        modname, fn = forced.split(":", 1)
        return getattr(importlib.import_module(modname), fn)
    return forced


def _force_backend(dynamo, forced: str) -> None:
    original = getattr(dynamo, "optimize", None)
    if original is None or getattr(original, "_minify_bot_forced", False):
        _emit(Unsupported("torch._dynamo.optimize"))
        return

    def optimize(*args, **kwargs):
        if kwargs.get("disable"):
            return original(*args, **kwargs)
        if forced == "none":
            return lambda fn: fn
        args = args[1:] if args else args
        kwargs["backend"] = _resolve(forced)
        return original(*args, **kwargs)

    optimize._minify_bot_forced = True
    dynamo.optimize = optimize
    _emit(Forced(forced))


def on_every_launcher(after_aot, keep) -> bool:
    """Call ``keep(contents)`` with every minifier launcher torch writes, before torch writes it:
    torch has one ``minifier_launcher.py`` per process and overwrites it with each graph it dumps
    (the forward graph's with the backward's at level 3). A ``keep`` that raises never breaks
    torch's own dump. False when this torch lacks the API (``helper_for_dump_minify``)."""
    original = getattr(after_aot, "helper_for_dump_minify", None)
    if original is None:
        return False

    def helper_for_dump_minify(contents, *args, **kwargs):
        try:
            keep(contents)
        except Exception as exc:  # noqa: BLE001 - never break the program's own dump
            print(f"minify-bot: could not keep a launcher copy: {exc!r}", file=sys.stderr)
        return original(contents, *args, **kwargs)

    after_aot.helper_for_dump_minify = helper_for_dump_minify
    return True


def _keep_launchers(after_aot) -> None:
    outdir = os.environ["MINIFY_BOT_LAUNCHER_DIR"]

    def keep(contents: str) -> None:
        os.makedirs(outdir, exist_ok=True)
        k = _STATE["at_dump"] if _STATE["at_dump"] is not None else _graphs_now()
        with _LOCK:
            _STATE["launchers"] += 1
            n = _STATE["launchers"]
        path = os.path.join(outdir, f"launcher_{n:03d}_graph{k}.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(contents)
        _emit(LauncherKept(k, path))

    if not on_every_launcher(after_aot, keep):
        _emit(Unsupported("torch._dynamo.repro.after_aot.helper_for_dump_minify"))
        return
    # writing a repro traces a little code with dynamo itself: remember which graph was current
    # when a dump began, and do not count the dump's own graphs as the program's
    for name in ("dump_compiler_graph_state", "dump_to_minify"):
        fn = getattr(after_aot, name, None)
        if fn is not None:
            if name == "dump_compiler_graph_state":
                fn = _in_directory(fn, outdir)
            setattr(after_aot, name, _dumping(fn))


def _in_directory(fn, outdir: str):
    """torch copies an accuracy failure's graph to ``./repro.py`` of the program's working
    directory (a user's checkout, overwriting a repro.py of theirs): the copy goes to minify-bot's
    own directory instead, by running the dump there."""
    def wrapper(*args, **kwargs):
        here = os.getcwd()
        try:
            os.makedirs(outdir, exist_ok=True)
            os.chdir(outdir)
        except OSError:
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            os.chdir(here)

    wrapper.__name__ = fn.__name__
    return wrapper


def _dumping(fn):
    def wrapper(*args, **kwargs):
        outer = _STATE["dumping"] == 0
        before = _unique_graphs()
        if outer and _STATE["at_dump"] is None:
            now = _graphs_now()
            # dynamo counts a graph once its backend returned: a dump while compiling (a compile
            # error) belongs to the graph being compiled, the next one
            _STATE["at_dump"] = None if now is None else now + (1 if _STATE["compiling"] else 0)
        _STATE["dumping"] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _STATE["dumping"] -= 1
            after = _unique_graphs()
            if outer:
                if before is not None and after is not None:
                    _STATE["extra"] += after - before
                if fn.__name__ == "dump_to_minify":
                    _STATE["at_dump"] = None

    wrapper.__name__ = fn.__name__
    return wrapper


@dataclass
class HookState(Record):
    """What the hook saw in one run of a program, over all its Python processes (:func:`read_state`):
    the graphs dynamo produced and the frames it started compiling (None when no hook loaded or
    counting was unsupported), the launchers kept, the forced backend, what was unsupported, and
    the CPU vector ISA inductor picked."""

    graphs: int | None = None
    frames: int | None = None
    launchers: list[Launcher] = field(default_factory=list)
    forced: str | None = None
    unsupported: list[str] = field(default_factory=list)
    isa: str | None = None
    devices: list[str] = field(default_factory=list)     # of the compiled graphs' tensors ("cuda:0")
    dtypes: dict[str, int] = field(default_factory=dict)  # elements per dtype over those tensors
    training: bool | None = None     # a graph was compiled for a backward that ran (None: no graph seen)
    autocast: str | None = None      # the autocast dtype some graph was compiled under
    numerics: dict[str, bool | str] = field(default_factory=dict)  # the last graph's numerics flags
    backends: list[str] = field(default_factory=list)   # registered backends the program compiled with
    unnamed_backend: bool = False    # some graph was compiled by a function of the program's own
    options: dict[str, bool | int | float | str | None] = field(default_factory=dict)  # compile_options(), all graphs

    def counting_unsupported(self) -> bool:
        return any("graph counting" in w for w in self.unsupported)

    def configuration(self) -> dict[str, str]:
        """The device, dtype, mode and backend of what the program compiled, in the check's words
        (the settings' vocabulary): the device type of its graphs (an accelerator over the CPU: a
        GPU program's graphs may hold CPU scalars), ``amp`` under autocast, else the dtype of most
        of its tensors' elements, ``training`` when a graph was compiled for a backward, and the
        registered backend every graph was compiled with (``aot_eager`` in a program that compiles
        with it; none named when one graph's compiler is a function of the program's own). Empty
        when the program compiled no graph the hook saw."""
        if self.training is None:
            return {}
        kinds = list(dict.fromkeys(d.split(":")[0] for d in self.devices))
        out = {"mode": "training" if self.training else "inference"}
        device = next((k for k in kinds if k != "cpu"), kinds[0] if kinds else None)
        if device:
            out["device"] = device
        if len(self.backends) == 1 and not self.unnamed_backend:   # one for every graph (a mix keeps the settings')
            out["backend"] = self.backends[0]
        if self.autocast:
            out["dtype"] = "amp"
        elif self.dtypes:
            out["dtype"] = max(self.dtypes.items(), key=lambda kv: (kv[1], kv[0]))[0]
        return out


def read_state(path: str) -> HookState:
    """Summarize a state file (:func:`read_events`)."""
    out = HookState()
    backward = False
    starts = exits = 0
    exited = False
    counting = False  # unknown unless a hook loaded in some Python process of the program
    for ev in read_events(path):
        if isinstance(ev, Started):
            counting = counting or not out.counting_unsupported()
        elif isinstance(ev, Compiling):
            starts = max(starts, ev.graph)
        elif isinstance(ev, Exited) and ev.graphs is not None:
            exits += ev.graphs
            exited = True
            if ev.isa:
                out.isa = ev.isa[:40]
        elif isinstance(ev, LauncherKept):
            out.launchers.append(Launcher(ev.graph, ev.path))
        elif isinstance(ev, GraphFacts):
            _add_graph(out, ev)
        elif isinstance(ev, BackwardRan):
            backward = True
        elif isinstance(ev, Forced):
            out.forced = ev.backend
        elif isinstance(ev, Unsupported):
            out.unsupported.append(ev.what)
    if out.training is not None:
        out.training = out.training and backward
    if out.counting_unsupported():
        counting = False
    # graphs dynamo produced (summed over the program's processes that exited normally); else
    # the number of frames dynamo started compiling (an upper bound)
    graphs = exits if exited else starts
    # a graph that failed to compile is not in dynamo's count, but a launcher names it
    graphs = max([graphs] + [x.graph for x in out.launchers if x.graph is not None])
    out.graphs = graphs if counting else None
    # frames dynamo started compiling: > 0 even when the first graph failed to compile
    out.frames = max(starts, graphs) if counting else None
    return out


def valid_options(options) -> dict:
    """Compile options as a record holds them (:func:`compile_options`; the program wrote the record):
    at most 32 ``inductor.<key>`` keys with plain values, long text dropped. Torch's config
    validates them again where they are set."""
    out: dict = {}
    for key, value in list(options.items())[:64] if isinstance(options, dict) else []:
        plain = value is None or isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= 200)
        if len(out) < 32 and isinstance(key, str) and _OPTION_KEY.fullmatch(key) and plain:
            out[key] = value
    return out


def _add_graph(out: HookState, ev: GraphFacts) -> None:
    """One graph's facts into the program's (bounded: the program wrote them)."""
    for d in ev.devices[:16]:
        if d[:40] not in out.devices and len(out.devices) < 16:
            out.devices.append(d[:40])
    for name, n in list(ev.dtypes.items())[:32]:
        if len(out.dtypes) < 32 or name[:40] in out.dtypes:
            out.dtypes[name[:40]] = out.dtypes.get(name[:40], 0) + max(0, n)
    out.training = bool(out.training) or ev.grad
    out.autocast = out.autocast or (ev.autocast[:40] if ev.autocast else None)
    if not isinstance(ev.backend, str) or not _BACKEND_NAME.fullmatch(ev.backend):
        out.unnamed_backend = True   # (a forced run names none: its check's backend is the forced one)
    elif ev.backend not in out.backends and len(out.backends) < 8:
        out.backends.append(ev.backend)
    out.options = valid_options({**out.options, **ev.options})
    if ev.numerics:
        from bot.torch_adapter import numerics

        out.numerics = numerics.validate(ev.numerics)
