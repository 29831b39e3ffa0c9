"""Write the small bundled data sets from scikit-learn's own copies (no download).

    python data/make_bundled.py

breast_cancer.train / .test: Wisconsin diagnostic breast cancer (569 rows,
30 features), scaled to [-1, 1] per feature like LIBSVM's svm-scale, labels
+1 (benign) / -1 (malignant), shuffled with a fixed seed and split 400 / 169.
"""

from pathlib import Path

import numpy as np
from sklearn.datasets import dump_svmlight_file, load_breast_cancer
from sklearn.preprocessing import MinMaxScaler

HERE = Path(__file__).parent


def main() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X = MinMaxScaler((-1, 1)).fit_transform(X).round(6)
    y = np.where(y == 1, 1, -1)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    for name, rows in (("train", slice(0, 400)), ("test", slice(400, None))):
        dump_svmlight_file(X[rows], y[rows], str(HERE / f"breast_cancer.{name}"), zero_based=False)


if __name__ == "__main__":
    main()
