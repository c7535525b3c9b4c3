"""Everything powerdp prints reaches the terminal, whatever its encoding.

powerdp's messages use mathematical signs (Σ, ε, ‖w − Bz‖₂, ρ...). A standard stream that cannot encode
one (``PYTHONIOENCODING=ascii``, ``latin-1``, a C locale without UTF-8) would raise ``UnicodeEncodeError``
in the middle of a run. :func:`protect_streams`, called once when the command line starts, sets the error
handler of standard output and standard error to :func:`ascii_spelling`: a character the stream cannot
encode is written in an ASCII spelling (Σ → sum, ² → ^2, − → -, … → ..., → → ->, × → x, ε → eps, ...).
Every writer goes through those two streams (print, logging, warnings, tqdm), so nothing slips past.
"""

from __future__ import annotations

import codecs
import sys
import unicodedata

__all__ = ["ASCII_SPELLINGS", "ERROR_HANDLER", "ascii_spelling", "is_terminal", "open_closed_stderr", "protect_streams", "spell_ascii"]

ERROR_HANDLER = "powerdp-ascii"

#: characters powerdp prints and their ASCII spellings (any other falls back to its decomposition, then "?")
ASCII_SPELLINGS = {
    "Σ": "sum", "∑": "sum", "Π": "prod", "√": "sqrt", "∞": "inf", "∂": "d", "∇": "grad",
    "²": "^2", "³": "^3", "¹": "^1", "⁰": "^0", "⁻": "^-", "ᵀ": "^T",
    "₀": "_0", "₁": "_1", "₂": "_2", "₃": "_3", "₄": "_4",
    "−": "-", "–": "-", "—": "--", "‐": "-", "‑": "-", "±": "+/-", "∓": "-/+",
    "…": "...", "→": "->", "←": "<-", "↔": "<->", "⇒": "=>", "×": "x", "·": "*", "∘": "o", "÷": "/",
    "≤": "<=", "≥": ">=", "≠": "!=", "≈": "~", "∼": "~", "≡": "==", "∈": " in ", "∉": " not in ", "⊆": " subset of ",
    "‖": "||", "∣": "|", "⟨": "<", "⟩": ">", "°": " deg",
    "‘": "'", "’": "'", "“": '"', "”": '"', "«": '"', "»": '"', "\u00a0": " ", "\u2009": " ", "\u202f": " ",
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "Δ": "Delta", "ε": "eps", "ϵ": "eps", "ζ": "zeta",
    "η": "eta", "θ": "theta", "ϑ": "theta", "κ": "kappa", "λ": "lambda", "Λ": "Lambda", "μ": "mu", "ν": "nu",
    "ξ": "xi", "π": "pi", "ρ": "rho", "σ": "sigma", "τ": "tau", "φ": "phi", "ϕ": "phi", "χ": "chi", "ψ": "psi",
    "ω": "omega", "Ω": "Omega", "𝔏": "L", "ℓ": "l", "\u0304": "_bar",
    "─": "-", "━": "-", "│": "|", "┃": "|", "█": "#", "▏": "|", "▎": "|", "▍": "|", "▌": "|", "▋": "|", "▊": "|", "▉": "|",
    "✓": "ok", "✗": "x", "§": "section ", "′": "'", "″": "''", "€": "EUR", "µ": "u", "⌊": "floor(", "⌋": ")",
    "⌈": "ceil(", "⌉": ")", "∪": " union ", "∩": " intersect ", "⊗": " (x) ", "∝": " ~ ", "⟺": "<=>", "⇔": "<=>",
    "⪰": ">=", "≽": ">=", "≼": "<=", "₋": "_-", "\u0303": "~", "\u0302": "^",
}


def spell_ascii(text: str) -> str:
    """``text`` in ASCII: known signs spelled out, accented letters without their accents, anything else ``?``."""
    out = []
    for ch in text:
        if ord(ch) < 128:
            out.append(ch)
        elif ch in ASCII_SPELLINGS:
            out.append(ASCII_SPELLINGS[ch])
        else:
            plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode("ascii")
            out.append(plain or "?")
    return "".join(out)


def ascii_spelling(exc: UnicodeError) -> tuple[str, int]:
    """A codecs error handler: the characters the stream's encoding refused, spelled in ASCII."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return spell_ascii(exc.object[exc.start:exc.end]), exc.end


codecs.register_error(ERROR_HANDLER, ascii_spelling)


def protect_streams(*streams) -> None:
    """Give standard output and standard error (or ``streams``) the ASCII-spelling error handler, once.

    A stream that is closed (None, as with ``>&-``), not a text file, or already encoding everything (UTF-8)
    is left as it is; its other settings (encoding, buffering, newlines) never change."""
    for stream in streams or (sys.stdout, sys.stderr):
        inner = getattr(stream, "stream", stream)  # powerdp.cli.output.NamedStdout wraps the real stream
        reconfigure = getattr(inner, "reconfigure", None)
        encoding = (getattr(inner, "encoding", None) or "").lower().replace("_", "-")
        if reconfigure is None or encoding in ("utf-8", "utf8", "utf-16", "utf-32"):
            continue
        try:
            reconfigure(errors=ERROR_HANDLER)
        except (ValueError, OSError):  # a closed stream: nothing will be written to it
            continue


def is_terminal(stream) -> bool:
    """Whether ``stream`` is an open terminal (a progress bar goes there). A closed stream (None, as Python gives a
    process started with ``2>&-``) or one without ``isatty`` is not one, never an error."""
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def open_closed_stderr() -> None:
    """A process started with standard error closed (``2>&-``) gets Python's ``sys.stderr = None``, on which every
    message, warning and progress line would fail: it writes to the null device instead (the user closed it; the
    exit status still tells how the command ended), and the command runs as it would with ``2>/dev/null``."""
    import os

    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - the process's standard error until it exits
