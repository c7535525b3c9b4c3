"""Reading MATPOWER ``.m`` case files (format version 2).

The parser reads the numeric matrices ``mpc.bus``, ``mpc.gen``, ``mpc.branch``
and ``mpc.gencost`` plus the scalars ``mpc.baseMVA`` and ``mpc.version``.
Other matrices are kept in :attr:`MatpowerData.extra`; cell arrays (``{...}``)
and strings other than the version are skipped. It does not evaluate MATLAB:
a case file that computes its data with code is rejected with a clear error.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import CaseDataError

__all__ = ["MatpowerData", "read_matpower", "parse_matpower"]

# Minimum column counts of MATPOWER's case format, version 2 (caseformat.m).
MIN_COLUMNS = {"bus": 13, "gen": 10, "branch": 11}
#: the largest case file read (bytes): 50 times the largest public OPF case (case_ACTIVSg70k, about 25 MB)
MAX_CASE_BYTES = 1 << 30
#: the fields a case must assign, looked for before any matrix is parsed (a file without one fails at once)
_REQUIRED = ("baseMVA", *MIN_COLUMNS)

_ASSIGN = re.compile(r"^\s*mpc\.(\w+)\s*=\s*(.*)$", re.DOTALL)
_FUNCTION = re.compile(r"^\s*function\s+(?:\w+\s*=\s*)?(\w+)")


# statements that carry no data: the end of the function, an empty statement
_IGNORED = re.compile(r"^\s*(end|endfunction|return)?\s*[;,]?\s*$")
_QUOTED = re.compile(r"""^('[^']*'|"[^"]*")$""")
_ROW = re.compile(r"[^\n;]+")  # a matrix's rows end at ';' or at a line break
_SIGN = re.compile(r"\S")


def _code_error(source: str, line_no: int, line: str) -> CaseDataError:
    """A statement the parser does not evaluate: refusing it is safer than computing on the data without it."""
    return CaseDataError(  # the statement is not echoed: an error never prints a file's content
        f"{source}, line {line_no}: a MATLAB statement (not 'mpc.NAME = [...]', a number or a string), which powerdp does not evaluate; "
        "write the data it computes into the matrices (or save the case from MATPOWER with savecase)"
    )


@dataclass
class MatpowerData:
    """Raw tables of a MATPOWER case, in MATPOWER's own units (MW, MVAr, degrees)."""

    name: str
    base_mva: float
    bus: np.ndarray
    gen: np.ndarray
    branch: np.ndarray
    gencost: np.ndarray | None = None
    version: str = "2"
    source: str = "<string>"
    extra: dict[str, np.ndarray] = field(default_factory=dict)


def _strip_comment(line: str) -> str:
    """Drop a ``%`` comment, ignoring ``%`` inside single-quoted strings."""
    if "%" not in line:
        return line
    if "'" not in line:
        return line[: line.index("%")]
    in_str = False
    for k, ch in enumerate(line):
        if ch == "'":
            in_str = not in_str
        elif ch == "%" and not in_str:
            return line[:k]
    return line


def _parse_matrix(body: str, name: str, source: str, first_line: int) -> np.ndarray:
    """The numbers of ``mpc.NAME = [ body ]``: rows end at ';' or at a line break, entries are separated by spaces or
    commas. Parsed by numpy's C reader straight into the array, so what the parser holds stays a few times the text
    (a Python float and list per entry took 20 times it: 1.4 GB for a 68 MB case); a malformed matrix is then
    located by :func:`_matrix_error`."""
    rows = (m.group().replace(",", " ") for m in _ROW.finditer(body))  # one row at a time, never a list of them
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": an empty matrix
            arr = np.loadtxt(rows, dtype=float, ndmin=2, comments=None)
    except ValueError:
        raise _matrix_error(body, name, source, first_line) from None
    return arr if arr.size else np.zeros((0, 0))


def _matrix_error(body: str, name: str, source: str, first_line: int) -> CaseDataError:
    """Where a matrix numpy refused is malformed: the first non-numeric entry (its line and column), or the first row
    whose width differs from row 1's; one line of the text is held at a time."""
    width = None
    row = 0
    for k, raw_line in enumerate(body.split("\n")):
        for chunk in raw_line.split(";"):
            tokens = chunk.replace(",", " ").split()
            if not tokens:
                continue
            row += 1
            bad = next((j for j, t in enumerate(tokens) if not _is_float(t)), None)
            if bad is not None:
                return CaseDataError(  # the entry is not echoed: an error never prints a file's content
                    f"{source}, line {first_line + k}: mpc.{name} has a non-numeric entry in column {bad + 1}"
                )
            if width is None:
                width = len(tokens)
            elif len(tokens) != width:
                return CaseDataError(
                    f"{source}: mpc.{name} row {row} has {len(tokens)} columns, "
                    f"row 1 has {width}; every row must have the same number of columns"
                )
    return CaseDataError(f"{source}: mpc.{name} is not a matrix of numbers")


def _is_float(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False


def parse_matpower(text: str, source: str = "<string>") -> MatpowerData:
    """Parse the text of a MATPOWER case file. See :func:`read_matpower`."""
    for required in _REQUIRED:  # before any matrix is parsed: a file without one fails at once, whatever its size
        if not re.search(rf"mpc\.{required}\s*=", text):
            raise CaseDataError(f"{source}: missing field mpc.{required}")
    lines = [_strip_comment(line) for line in text.splitlines()]
    name = Path(source).stem if source != "<string>" else "case"
    scalars: dict[str, str] = {}
    matrices: dict[str, np.ndarray] = {}
    k = 0
    while k < len(lines):
        line = lines[k]
        fm = _FUNCTION.match(line)
        if fm:
            name = fm.group(1)
            k += 1
            continue
        m = _ASSIGN.match(line)
        if not m:
            if line.strip() and not _IGNORED.match(line):
                raise _code_error(source, k + 1, text.splitlines()[k])
            k += 1
            continue
        field_name = m.group(1)
        sign = _SIGN.search(line, m.start(2))  # the right-hand side's first sign (no copy of a long line)
        start = k + 1
        if sign is not None and sign.group() == "[":
            first = k  # the matrix's lines, joined once (a 13659-bus case has 42 k of them; a one-line case one)
            while "]" not in lines[k]:
                k += 1
                if k >= len(lines) or _ASSIGN.match(lines[k]) or _FUNCTION.match(lines[k]):
                    raise CaseDataError(
                        f"{source}, line {start}: mpc.{field_name} opens '[' but never closes it"
                    )
            body = lines[first] if k == first else "\n".join(lines[first:k + 1])
            opening, closing = sign.start(), body.index("]", sign.start())
            if body[closing + 1:].strip().rstrip(";").strip():  # `] * 2;`, `]';`: computed, not data
                raise _code_error(source, k + 1, "")
            matrices[field_name] = _parse_matrix(body[opening + 1:closing], field_name, source, start)
            del body
            k += 1
            continue
        rhs = m.group(2).strip()
        if rhs.startswith("{"):
            body = rhs
            while "}" not in body:
                k += 1
                if k >= len(lines):
                    raise CaseDataError(
                        f"{source}, line {start}: mpc.{field_name} opens '{{' but never closes it"
                    )
                body += lines[k]
        else:
            value = rhs.rstrip(";").strip()
            if not (_is_float(value) or _QUOTED.match(value)):
                raise _code_error(source, k + 1, text.splitlines()[k])
            scalars[field_name] = value.strip("'\"")
        k += 1

    version = scalars.get("version", "2")
    if version != "2":
        raise CaseDataError(f"{source}: mpc.version is {version!r}; only MATPOWER format version 2 is supported")
    if "baseMVA" not in scalars:
        raise CaseDataError(f"{source}: missing field mpc.baseMVA")
    try:
        base_mva = float(scalars["baseMVA"])
    except ValueError:
        raise CaseDataError(f"{source}: mpc.baseMVA is {scalars['baseMVA']!r}, not a number") from None
    if not np.isfinite(base_mva) or base_mva <= 0:
        raise CaseDataError(f"{source}: mpc.baseMVA must be a positive number, got {base_mva}")

    tables = {}
    for table, ncol in MIN_COLUMNS.items():
        if table not in matrices:
            raise CaseDataError(f"{source}: missing field mpc.{table}")
        arr = matrices.pop(table)
        if arr.size == 0:
            if table == "gen":
                arr = np.zeros((0, ncol))
            else:
                raise CaseDataError(f"{source}: mpc.{table} is empty")
        if arr.shape[1] < ncol:
            raise CaseDataError(
                f"{source}: mpc.{table} has {arr.shape[1]} columns; MATPOWER format version 2 needs at least {ncol}"
            )
        tables[table] = arr
    gencost = matrices.pop("gencost", None)
    if gencost is not None and gencost.size == 0:
        gencost = None
    return MatpowerData(
        name=name,
        base_mva=base_mva,
        bus=tables["bus"],
        gen=tables["gen"],
        branch=tables["branch"],
        gencost=gencost,
        version=version,
        source=source,
        extra=matrices,
    )


def read_matpower(path: str | Path) -> MatpowerData:
    """Read a MATPOWER ``.m`` case file (format version 2) into raw numpy tables.

    Raises :class:`~powerdp.errors.CaseDataError` naming the file, the field and
    the line when the file is malformed.
    """
    from ..files.text import NotUTF8, read_utf8

    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise CaseDataError(f"case file not found: {path}") from None
    except OSError:
        size = 0  # unreadable: read_utf8 says why
    if size > MAX_CASE_BYTES:
        raise CaseDataError(f"{path}: {size / 1e6:.0f} MB, larger than any power-flow case ({MAX_CASE_BYTES / 1e6:.0f} MB at "
                            "most; the largest public OPF cases are about 25 MB): not a MATPOWER case file?")
    try:
        text = read_utf8(path)
    except FileNotFoundError:
        raise CaseDataError(f"case file not found: {path}") from None
    except NotUTF8 as exc:
        raise CaseDataError(f"{path}: {exc}") from None
    if text.lstrip().startswith(("{", "[")):
        raise CaseDataError(
            f"{path}: a JSON file (a pandapower network?), not a MATPOWER .m case file; powerdp does not execute "
            "pandapower's JSON, read it in Python and pass the net: load_case(pandapower.from_json(FILE))"
        )
    return parse_matpower(text, source=str(path))
