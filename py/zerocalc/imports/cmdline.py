"""Pasted command lines -> a mapping a config importer reads: the launch commands of OpenRLHF
(``openrlhf.cli.train_dpo --beta 0.1 ...``), verl (``python3 -m verl.trainer.main_ppo a.b.c=value ...``, Hydra
overrides), ms-swift (``swift rlhf --rlhf_type dpo ...``) and TRL (``trl dpo --beta 0.1``,
``accelerate launch trl/scripts/grpo.py --num_generations 8``), as shell scripts people copy from the
trainers' ``examples/``.

What is read: backslash continuations joined, comment lines dropped, ``NAME=value`` shell assignments (and
``export``) kept to resolve ``$NAME`` / ``${NAME}`` / ``${NAME:-default}`` in values; the logical line with the
most options is the command. ``--key value``, ``--key=value`` and bare ``--flag`` (argparse ``store_true``: True),
several values after one key (argparse ``nargs``: a list); Hydra ``a.b=c`` / ``+a.b=c`` tokens as a nested
mapping. Values: true/false/True/False, null/None, integers and floats as such, the rest as text. A value whose
shell variables the text does not set (``$(expr 16 / $n)``, ``${NPROC_PER_NODE}`` unset) is never guessed:
it is listed in ``unresolved`` and the importer reports it. Launchers' GPU counts (``torchrun --nproc-per-node``,
``deepspeed --num_gpus``, ``accelerate launch --num_processes``, ``NPROC_PER_NODE=``, ``CUDA_VISIBLE_DEVICES=``)
come back as ``launcher_gpus``. Pure: text in, data out.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

# program markers -> the format whose importer reads the options
PROGRAMS = (
    ("verl", ("verl.trainer.main_ppo", "verl.trainer.main_", "recipe.", "verl/trainer/main_ppo")),
    ("openrlhf", ("openrlhf.cli.", "openrlhf/cli/", "train_ppo_ray", "train_dpo.py", "train_rm.py", "train_kto.py")),
    ("ms-swift", ("swift rlhf", "swift/cli/rlhf", "swift sft")),
    ("trl", ("trl dpo", "trl grpo", "trl kto", "trl reward", "trl rloo", "trl sft", "trl/scripts/", "trl.scripts.")),
)
_OPT = re.compile(r"^--[A-Za-z_][\w.\-]*(=.*)?$", re.S)
_HYDRA = re.compile(r"^\+{0,2}([A-Za-z_]\w*(?:\.[A-Za-z_0-9]\w*)+)=(.*)$", re.S)
_ENV = re.compile(r"^([A-Z_][A-Z0-9_]*)=(.*)$", re.S)
_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_]\w*)=(\S*)\s*$")
_VAR = re.compile(r"\$\{([A-Za-z_]\w*)(?::-([^}]*))?\}|\$([A-Za-z_]\w*)")
_YAML_LINE = re.compile(r"^\s*(-\s+)?[\w.\-]+:(\s|$)")
LAUNCH_GPUS = ("nproc-per-node", "nproc_per_node", "num_gpus", "num_processes")


@dataclass
class CommandLine:
    program: str | None                                  # the format the program names (PROGRAMS), or None
    options: dict = field(default_factory=dict)          # --key -> typed value (key without dashes)
    overrides: dict = field(default_factory=dict)        # Hydra a.b.c=value, nested
    unresolved: dict = field(default_factory=dict)       # key -> raw text with shell variables not set here
    launcher_gpus: int | None = None                     # GPUs per node the launcher starts
    launcher_key: str | None = None                      # which setting said so
    launcher: dict = field(default_factory=dict)         # options of the launcher before the script (text)


def _logical_lines(text: str) -> list:
    out, cur = [], ""
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.rstrip()
        if line.lstrip().startswith("#") and not cur:
            continue
        if line.lstrip().startswith("#"):          # a comment line inside a continued command ends nothing
            continue
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        if cur.strip():
            out.append(cur.strip())
        cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


def _tokens(line: str) -> list:
    try:
        return shlex.split(line, comments=True)
    except ValueError:                              # an unbalanced quote: split on blanks
        return line.split()


def looks_like_command(text) -> bool:
    """True for a pasted command line / shell script: two or more ``--options`` or Hydra ``a.b=c`` overrides
    on one logical line, and no JSON object."""
    if not isinstance(text, str) or text.lstrip().startswith("{"):
        return False
    for line in _logical_lines(text):
        if _YAML_LINE.match(line):                  # `extra_args: --a --b` is a YAML value, not a command
            continue
        toks = _tokens(line)
        n = sum(1 for t in toks if _OPT.match(t) or _HYDRA.match(t))
        if n >= 2:
            return True
    return False


def typed(v: str):
    """A command-line value as the trainer's parser would type it (booleans, null, numbers, text)."""
    s = v.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    low = s.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "~"):
        return None
    try:
        return int(s)
    except ValueError:
        pass
    try:
        f = float(s)
    except ValueError:
        return s
    return f if f == f and f not in (float("inf"), float("-inf")) else s


def _resolve(v: str, env: dict):
    """``$NAME`` / ``${NAME}`` / ``${NAME:-default}`` from ``env``; None when one is not set (or ``$(...)``)."""
    if "$(" in v or "`" in v:
        return None
    missing = []

    def sub(m):
        name = m.group(1) or m.group(3)
        if name in env:
            return env[name]
        if m.group(2) is not None:
            return m.group(2)
        missing.append(name)
        return ""
    out = _VAR.sub(sub, v)
    return None if missing else out


def _set_nested(d: dict, dotted: str, value) -> None:
    parts = dotted.split(".")
    for p in parts[:-1]:
        if not isinstance(d.get(p), dict):
            d[p] = {}
        d = d[p]
    d[parts[-1]] = value


def _program(text: str) -> str | None:
    low = " ".join(text.split())
    for fmt, marks in PROGRAMS:
        if any(m in low for m in marks):
            return fmt
    return None


def parse_command(text: str) -> CommandLine:
    """Text of a command line or shell script -> CommandLine (see the module docstring)."""
    lines = _logical_lines(text)
    env: dict = {}
    for line in lines:
        m = _ASSIGN.match(line)
        if m and "$(" not in m.group(2):
            val = _resolve(m.group(2), env)
            if val is not None:
                env[m.group(1)] = val.strip("'\"")
    best, best_n = [], -1
    for line in lines:
        toks = _tokens(line)
        n = sum(1 for t in toks if _OPT.match(t) or _HYDRA.match(t))
        if n > best_n:
            best, best_n = toks, n
    cmd = CommandLine(program=_program(text))
    # the GPUs a launcher starts (any line: torchrun / deepspeed / accelerate, or env prefixes)
    for line in lines:
        toks = _tokens(line)
        for i, t in enumerate(toks):
            m = _ENV.match(t)
            if m and m.group(1) in ("NPROC_PER_NODE", "CUDA_VISIBLE_DEVICES"):
                val = _resolve(m.group(2), env)
                env.setdefault(m.group(1), val if val is not None else "")
            if t.startswith("--") and t[2:].split("=")[0] in LAUNCH_GPUS:
                raw = t.split("=", 1)[1] if "=" in t else (toks[i + 1] if i + 1 < len(toks) else "")
                val = _resolve(raw, env)
                if val is not None and val.isdigit() and cmd.launcher_gpus is None:
                    cmd.launcher_gpus, cmd.launcher_key = int(val), "--" + t[2:].split("=")[0]
    if cmd.launcher_gpus is None and env.get("NPROC_PER_NODE", "").isdigit():
        cmd.launcher_gpus, cmd.launcher_key = int(env["NPROC_PER_NODE"]), "NPROC_PER_NODE"
    elif cmd.launcher_gpus is None and re.fullmatch(r"\d+(,\d+)*", env.get("CUDA_VISIBLE_DEVICES", "")):
        cmd.launcher_gpus = len(env["CUDA_VISIBLE_DEVICES"].split(","))
        cmd.launcher_key = "CUDA_VISIBLE_DEVICES"
    # a launcher's own options come before the script it runs (accelerate launch --config_file X train.py ...)
    start = next((j + 1 for j, t in enumerate(best) if t.endswith(".py") and not t.startswith("-")), 0)
    if start:
        j = 0
        while j < start - 1:
            t = best[j]
            j += 1
            if _OPT.match(t):
                key, eq, raw = t[2:].partition("=")
                if not eq and j < start - 1 and not best[j].startswith("-"):
                    raw = best[j]
                    j += 1
                cmd.launcher[key] = raw if (eq or raw) else True
    i = start
    while i < len(best):
        t = best[i]
        i += 1
        h = _HYDRA.match(t)
        if h and not t.startswith("--"):
            key, raw = h.group(1), h.group(2)
            val = _resolve(raw, env)
            if val is None:
                cmd.unresolved[key] = raw
            else:
                _set_nested(cmd.overrides, key, typed(val))
            continue
        if not _OPT.match(t):
            continue
        key, eq, raw = t[2:].partition("=")
        if key in LAUNCH_GPUS and cmd.program is None:
            continue
        vals = [raw] if eq else []
        while not eq and i < len(best) and not best[i].startswith("--") and not _HYDRA.match(best[i]):
            vals.append(best[i])
            i += 1
        if not vals:
            cmd.options[key] = True
            continue
        resolved = [_resolve(v, env) for v in vals]
        if any(r is None for r in resolved):
            cmd.unresolved[key] = " ".join(vals)
            continue
        if len(resolved) > 1:                       # nargs: "q_proj", "v_proj" as pasted from docs
            resolved = [r.rstrip(",") for r in resolved if r.rstrip(",")]
        out = [typed(r) for r in resolved]
        cmd.options[key] = out[0] if len(out) == 1 else out
    return cmd


__all__ = ["CommandLine", "looks_like_command", "parse_command", "typed"]
