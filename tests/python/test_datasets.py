# The digits data set: shapes, dtypes, value range, and agreement with scikit-learn's own loader.
import numpy as np
import pytest

from tensorscope import datasets


def test_digits_shapes_dtypes_range():
    X, Y = datasets.digits()
    assert X.shape == (1797, 64) and X.dtype == np.float32
    assert Y.shape == (1797,) and Y.dtype == np.int32
    assert X.min() == 0.0 and X.max() == 1.0
    # Pixel values are counts 0..16 scaled by 1/16.
    np.testing.assert_array_equal(X * 16, np.round(X * 16))
    assert set(np.unique(Y)) == set(range(10))
    counts = np.bincount(Y)
    assert counts.min() > 150 and counts.max() < 200  # roughly balanced classes


def test_digits_matches_sklearn():
    sk = pytest.importorskip("sklearn.datasets")
    ref = sk.load_digits()
    X, Y = datasets.digits()
    np.testing.assert_array_equal(X, (ref.data / 16.0).astype(np.float32))
    np.testing.assert_array_equal(Y, ref.target)


def test_digits_missing_file_names_the_package(monkeypatch):
    monkeypatch.setattr(datasets, "_digits_candidates", lambda: ["/nonexistent/digits.csv.gz"])
    with pytest.raises(FileNotFoundError, match="python3-sklearn") as e:
        datasets.digits()
    assert "/nonexistent/digits.csv.gz" in str(e.value)
