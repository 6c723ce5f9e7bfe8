"""pipette: the training parallelism of an LLM job, from Python.

The functions run the planner of the ``pipette`` command (libpipette) in
this process and return the JSON documents ``pipette CMD --format json``
prints, as dicts; they add no modelling of their own:

    >>> import pipette
    >>> p = pipette.plan(model="llama3-8b", nodes=2, gpu="h100", global_batch=64)
    >>> p["config"]["tp"], p["predicted"]["iteration_s"]

Keyword options are the command's options with ``_`` for ``-``
(``seq_len=4096`` is ``--seq-len 4096``; ``pipette plan --help`` and
pipette(1) list them): ``True`` gives the flag (``sequence_parallel=True``
is ``--sequence-parallel``), ``False`` its ``--no-`` form, a list or tuple
one comma-separated value (``schedule=["1f1b", "interleaved"]``), a dict
``K=V`` pairs (``stack_option={"tp_overlap": "off"}``), ``None`` nothing.

Errors raise :class:`pipette.Error` with the command's exit status in
``.code`` (1: no configuration fits, 2: bad input) and its message in
``.message`` (the line ``pipette`` prints, naming the input and the field).
Warnings the command prints come as :class:`PipetteWarning` through the
:mod:`warnings` module.

:func:`apply_torchtitan` and :func:`apply_megatron_bridge` (module
:mod:`pipette.adapters`) set a plan's parallelism on a torchtitan job
config or a Megatron-Bridge ConfigContainer.
"""

import json
import os
import warnings

from . import _pipette

__all__ = ["Error", "PipetteWarning", "plan", "estimate", "models", "stacks", "gpus",
           "load_plan", "apply_torchtitan", "apply_megatron_bridge", "__version__"]

__version__ = _pipette.version


class Error(Exception):
    """A request pipette refused or could not answer.

    ``code`` is the exit status of the ``pipette`` command for the same
    request (1: no configuration fits, 2: bad arguments or input) and
    ``message`` its error text, without the ``pipette:`` prefix.
    """

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self):
        return self.message


class PipetteWarning(UserWarning):
    """A warning the command printed (e.g. a stale bandwidth figure)."""


def _option_args(options):
    """The command-line arguments of keyword options (module docstring)."""
    args = []
    for key, value in options.items():
        if value is None:
            continue
        name = "--" + key.replace("_", "-")
        if key in ("format", "help"):
            raise Error(2, "%s: the Python API returns the JSON document; the pipette "
                           "command renders the other formats" % key)
        if value is True:
            args.append(name)
        elif value is False:
            args.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, (list, tuple)):
            args += [name, ",".join(str(v) for v in value)]
        elif isinstance(value, dict):
            args += [name, ",".join("%s=%s" % kv for kv in value.items())]
        elif isinstance(value, (str, int, float)):
            args += [name, str(value)]
        elif isinstance(value, os.PathLike):
            args += [name, os.fspath(value)]
        else:
            raise Error(2, "%s: %s is not an option value (str, int, float, bool, list, "
                           "dict or path)" % (key, type(value).__name__))
    return args


def _run(command, options):
    """The JSON document of ``pipette COMMAND ... --format json``."""
    code, out, err = _pipette.call(command, _option_args(options))
    messages, warned = [], []
    for line in err.splitlines():
        if line.startswith("pipette: warning: "):
            warned.append(line[len("pipette: warning: "):])
        elif line.strip():
            messages.append(line[len("pipette: "):] if line.startswith("pipette: ") else line)
    # estimate answers "does not fit" (1) with its document: an answer
    if code == 0 or (code == 1 and command == "estimate" and out.strip()):
        try:
            doc = json.loads(out)
        except ValueError as e:
            raise Error(2, "pipette %s: its output is not JSON (%s)" % (command, e)) from None
        for w in warned:
            warnings.warn(w, PipetteWarning, stacklevel=3)
        return doc
    raise Error(code, "\n".join(messages) or "pipette %s: exit status %d" % (command, code))


def plan(model=None, nodes=None, gpu=None, global_batch=None, **options):
    """Plan a job, as ``pipette plan ... --format json`` (schema pipette-plan/1).

    ``model`` is a preset (:func:`models`) or a Hugging Face config.json,
    ``nodes`` a count (node1..nodeN) or a Slurm hostlist, ``gpu`` a GPU
    type (:func:`gpus`; case does not matter), ``global_batch`` the
    sequences per iteration.  Further options: ``seq_len``, ``stack``,
    ``bandwidth`` (a cache file), ``calibration``, ``precision``, the pins
    ``tp``, ``pp``, ``dp``, ``cp``, ``ep``, ``vpp``, ``micro_batch``,
    ``schedule``, ``recompute`` ... (``pipette plan --help``).

    The dict is the command's document plus ``chosen``: the row of
    ``ranked`` that is the plan's configuration (its ``config``, iteration
    time, tokens/s, MFU and peak memory).  Raises :class:`Error` (code 1
    when no configuration fits, 2 for bad input).
    """
    doc = _run("plan", dict(model=model, nodes=nodes, gpu=gpu, global_batch=global_batch,
                            **options))
    doc["chosen"] = next((r for r in doc.get("ranked", []) if r.get("config") == doc["config"]),
                         None)
    return doc


def estimate(model=None, gpu=None, **options):
    """Memory and time of one configuration, as ``pipette estimate ... --format json``.

    Options: ``tp``, ``pp``, ``dp``, ``cp``, ``ep``, ``vpp``,
    ``micro_batch``, ``global_batch``, ``seq_len``, ``stack``, ``schedule``,
    ``recompute``, ``precision``, ... (``pipette estimate --help``).  A
    configuration that does not fit is an answer: its document says
    ``"fits": false``.  Raises :class:`Error` for bad input (code 2).
    """
    return _run("estimate", dict(model=model, gpu=gpu, **options))


def models():
    """The built-in model presets (``pipette models --format json``): a list of dicts."""
    return _run("models", {})


def stacks():
    """The training stacks and what each assumes (``pipette stacks --format json``)."""
    return _run("stacks", {})


def gpus():
    """The GPU types and their specifications (``pipette gpus --format json``)."""
    return _run("gpus", {})


def load_plan(plan=None):
    """A plan document: ``plan`` itself when a dict, else the JSON file it
    names, else the file named by the environment variable
    ``PIPETTE_PLAN_FILE`` (which the Slurm plugin sets with ``plan_dir=``).
    Raises :class:`Error` (code 2) naming the file and the field."""
    if isinstance(plan, dict):
        doc, where = plan, "plan"
    else:
        if plan is None:
            plan = os.environ.get("PIPETTE_PLAN_FILE")
            if not plan:
                raise Error(2, "PIPETTE_PLAN_FILE: not set (no plan given, and the job's "
                               "plugin wrote none: plan_dir= in plugstack.conf)")
        where = os.fspath(plan)
        try:
            with open(where, encoding="utf-8") as f:
                doc = json.load(f)
        except OSError as e:
            raise Error(2, "%s: %s" % (where, e.strerror or e)) from None
        except ValueError as e:
            raise Error(2, "%s: not JSON: %s" % (where, e)) from None
    if not isinstance(doc, dict) or doc.get("schema") != "pipette-plan/1":
        raise Error(2, '%s: schema: expected "pipette-plan/1" (pipette plan --format json)'
                    % where)
    return doc


from .adapters import apply_torchtitan, apply_megatron_bridge  # noqa: E402
