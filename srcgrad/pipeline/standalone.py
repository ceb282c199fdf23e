"""`srcgrad emit` and sg.emit_standalone: a transform's module written to run with its
array library alone, without srcgrad (imported by those only: nothing of a transform's
call runs it).
"""

from __future__ import annotations

import inspect

from srcgrad import backend
from srcgrad.pipeline.keys import VERSION
from srcgrad.pipeline.modules import _programs, parse_function, short_path


def standalone_module(func, wrt: tuple, single: bool, mode: str, optimize: bool = True,
                      namespace: str = "numpy") -> str:
    """A module that runs with NumPy alone: `grad_<func>` (mode "reverse"), `<func>_jvp`
    ("forward") or both (`srcgrad emit`)."""
    from srcgrad.codegen import emit

    fs = parse_function(func)
    if mode not in ("reverse", "forward", "both"):
        raise ValueError(f"mode={mode!r}: choose 'reverse', 'forward' or 'both'")
    target = backend.STANDALONE[namespace]  # `emit --backend`: Note [Array namespaces]
    params = list(inspect.signature(func).parameters)
    command = " ".join([f"srcgrad emit {short_path(fs.filename)}:{fs.name}"]
                       + ([f"--wrt {','.join(params[i] for i in wrt)}"]
                          if tuple(wrt) != tuple(range(len(params))) else [])
                       + ([f"--mode {mode}"] if mode != "reverse" else [])
                       + (["--no-optimize"] if not optimize else [])
                       + ([f"--backend {namespace}"] if namespace != "numpy" else []))
    with emit.namespace(target.spelling, target.mutable, target.describe(), backend.reference(target)):
        return _standalone(fs, wrt, single, mode, optimize, namespace, command)


def _standalone(fs, wrt, single, mode, optimize, namespace, command) -> str:
    from srcgrad.codegen import emit

    sources, constants = [], {}
    if mode in ("reverse", "both"):
        source, pool = _programs().gradient_program(fs, wrt, single=single, optimized=optimize)
        sources.append(source)
        constants.update(pool.values)
    if mode in ("forward", "both"):
        program = _programs().jvp_program(fs, optimized=optimize, wrt=wrt)
        sources.extend(program.sources)
        constants.update(program.constants)
    if constants:
        raise ValueError(f"{fs.name} uses constants that have no literal form "
                         f"({', '.join(constants)}); emit cannot write them into a module")
    return emit.render_module(sources, version=VERSION, origin=f"{short_path(fs.filename)}:{fs.name}",
                              key="standalone", helpers=emit.helpers_used(sources), standalone=True,
                              backend=namespace, command=command)
