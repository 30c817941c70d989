"""Small data sets for the samples and tests, loaded with NumPy only (no scikit-learn import)."""
from __future__ import annotations

import gzip
import os
import sys

import numpy as np

_DIGITS_RELPATH = os.path.join("sklearn", "datasets", "data", "digits.csv.gz")
_DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"


def _digits_candidates() -> list[str]:
    """Where digits.csv.gz may live: Debian's dist-packages first, then every sys.path entry."""
    dirs = [_DEBIAN_DIST_PACKAGES] + [p for p in sys.path if p and os.path.isdir(p)]
    seen, paths = set(), []
    for d in dirs:
        path = os.path.join(d, _DIGITS_RELPATH)
        if path not in seen:
            seen.add(path)
            paths.append(path)
    return paths


def digits() -> tuple[np.ndarray, np.ndarray]:
    """The UCI optical handwritten digits (optdigits) test set, as shipped by scikit-learn.

    1797 grayscale images of the digits 0-9, 8x8 pixels each, flattened row-major.

    Returns:
        X: float32 ndarray of shape (1797, 64), pixel intensities scaled from 0..16 to [0, 1].
        Y: int32 ndarray of shape (1797,), the digit shown (class label 0..9).

    The samples come in the file's order (not shuffled), so a fixed split such as "last 20% is
    the test set" is reproducible.

    Source: ``sklearn/datasets/data/digits.csv.gz`` (Debian package ``python3-sklearn``), a CSV
    of 65 integer columns per row: 64 pixels then the label. Read with gzip + NumPy.

    Raises:
        FileNotFoundError: the file is in none of the searched directories (install python3-sklearn).
    """
    candidates = _digits_candidates()
    for path in candidates:
        if os.path.isfile(path):
            with gzip.open(path, "rt") as f:
                data = np.loadtxt(f, delimiter=",", dtype=np.float32)
            X = (data[:, :64] / 16.0).astype(np.float32)
            Y = data[:, 64].astype(np.int32)
            return X, Y
    raise FileNotFoundError(
        "the digits data set (digits.csv.gz) was not found; install the Debian package python3-sklearn. "
        "Searched: " + ", ".join(candidates))
