"""Execute the example notebooks with what `pip install -e ".[dev]"` installs (nbformat, nbclient, ipykernel;
no `jupyter nbconvert` needed): the same cells CI runs, as a user opening them in Jupyter sees them.

    python examples/run_notebooks.py                      # all of them, their own settings
    python examples/run_notebooks.py --small quickstart   # small settings, as the tests run them
    python examples/run_notebooks.py --out executed       # also save the executed copies (with outputs)

Exit status 0 when every notebook ran without an error cell, 1 otherwise (the failing cell is named).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTEBOOKS = ("quickstart", "paper_reproduction", "zone_partition_study", "federated_learning", "day_of_dispatch")


def execute(name: str, small: bool = False, timeout: int = 1800):
    """Run ``examples/NAME.ipynb`` top to bottom in a fresh python3 kernel; returns the executed notebook."""
    try:
        import nbclient
        import nbformat
    except ImportError as exc:
        raise SystemExit(f"run_notebooks.py needs nbclient and ipykernel ({exc.name} is missing): "
                         'pip install -e ".[dev]"') from None

    if small:
        os.environ["POWERDP_NOTEBOOK_SMALL"] = "1"
    nb = nbformat.read(HERE / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}})
    client.execute()
    return nb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"notebooks to run (default: {', '.join(NOTEBOOKS)})")
    ap.add_argument("--small", action="store_true", help="small settings (POWERDP_NOTEBOOK_SMALL=1), as CI runs them")
    ap.add_argument("--out", type=Path, help="directory for the executed copies (the notebooks themselves are not changed)")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in NOTEBOOKS]
    if unknown:
        ap.error(f"no notebook {unknown[0]!r}; choose from {', '.join(NOTEBOOKS)}")
    import nbclient.exceptions
    import nbformat

    failed = 0
    for name in args.names or NOTEBOOKS:
        try:
            nb = execute(name, small=args.small)
        except nbclient.exceptions.CellExecutionError as exc:
            first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            print(f"{name}: FAILED: {first}", file=sys.stderr)
            failed += 1
            continue
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, args.out / f"{name}.ipynb")
        print(f"{name}: ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
