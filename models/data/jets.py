"""SYNTHETIC stand-in for the hls4ml jet-tagging benchmark (16 features, 5 classes).

THIS IS NOT PHYSICS DATA.  The public hls4ml jet-substructure data set (OpenML
``hls4ml_lhc_jets_hlf``: 16 high-level features, classes g / q / W / Z / t) cannot be
downloaded from the machines this project runs on, so the ``jet_mlp_*`` zoo models are
trained on a seeded Gaussian-mixture problem of the same shape instead:

* 5 classes, balanced; each class is a mixture of 2 Gaussian components in 16-D;
* component means and (full, anisotropic) covariances are class dependent and drawn
  once from a fixed generator (:data:`TASK_SEED`), so the *task* is the same for every
  call while ``seed`` only changes which samples are drawn and how they are split;
* a few features are passed through ``exp`` / ``tanh`` to give skewed and saturated
  marginals (like momenta and substructure ratios) and the classes overlap, so the
  Bayes-optimal boundary is non-linear and no classifier reaches 100%: measured with
  the default seed, a float 16-64-32-32-5 MLP gets ~78% test accuracy, a linear model
  ~54%, and the Bayes-optimal classifier (known densities) ~89%;
* features are standardized (zero mean, unit variance) with statistics of the training
  split only, as the hls4ml example does with ``StandardScaler``.

The data is useful to exercise quantization, export and compilation of an MLP with the
jet-tagging topology; accuracies on it say nothing about jet tagging.
"""

from __future__ import annotations

import numpy as np

__all__ = ["JET_CLASSES", "N_FEATURES", "TASK_SEED", "load_jets", "make_jets"]

N_FEATURES = 16
#: Labels of the 5 classes of the real benchmark, kept for display only.
JET_CLASSES = ("g", "q", "W", "Z", "t")
#: Seed of the fixed task geometry (means, covariances); never change it casually,
#: trained zoo models and their recorded accuracies depend on it.
TASK_SEED = 20240611

_COMPONENTS = 2
_MEAN_SPREAD = 0.5
_EXP_FEATURES = (0, 3, 7)
_TANH_FEATURES = (10, 13)


def _task(n_classes: int = len(JET_CLASSES)):
    """Fixed class-conditional mixture parameters: means and Cholesky factors."""
    rng = np.random.default_rng(TASK_SEED)
    means = rng.normal(0.0, _MEAN_SPREAD, size=(n_classes, _COMPONENTS, N_FEATURES))
    chols = np.empty((n_classes, _COMPONENTS, N_FEATURES, N_FEATURES))
    for c in range(n_classes):
        for k in range(_COMPONENTS):
            # Random rotation times a class-specific anisotropic spectrum.
            q, _ = np.linalg.qr(rng.normal(size=(N_FEATURES, N_FEATURES)))
            spectrum = rng.uniform(0.35, 1.6, size=N_FEATURES)
            cov = (q * spectrum**2) @ q.T
            chols[c, k] = np.linalg.cholesky(cov)
    return means, chols


def make_jets(n_samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n_samples`` raw (unstandardized) synthetic jets: ``(x float64, y int64)``."""
    means, chols = _task()
    n_classes = means.shape[0]
    rng = np.random.default_rng(seed)
    y = np.arange(n_samples, dtype=np.int64) % n_classes
    y = rng.permutation(y)
    comp = rng.integers(0, _COMPONENTS, size=n_samples)
    z = rng.normal(size=(n_samples, N_FEATURES))
    x = means[y, comp] + np.einsum("nij,nj->ni", chols[y, comp], z)
    x[:, list(_EXP_FEATURES)] = np.exp(0.8 * x[:, list(_EXP_FEATURES)])
    x[:, list(_TANH_FEATURES)] = np.tanh(x[:, list(_TANH_FEATURES)])
    return x, y


def load_jets(
    seed: int = 0, n_samples: int = 60_000, test_fraction: float = 0.2
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """SYNTHETIC jet-tagging stand-in, split and standardized.

    Returns:
        ``(x_train, y_train, x_test, y_test)``; x float32 ``(N, 16)`` standardized with
        the training-split mean / std, y int64 in 0..4.  Deterministic given the
        arguments.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError("test_fraction must be in (0, 1)")
    x, y = make_jets(n_samples, seed)
    n_test = int(round(n_samples * test_fraction))
    x_train, y_train = x[n_test:], y[n_test:]
    x_test, y_test = x[:n_test], y[:n_test]
    mean = x_train.mean(axis=0)
    std = x_train.std(axis=0)
    std[std == 0] = 1.0
    x_train = ((x_train - mean) / std).astype(np.float32)
    x_test = ((x_test - mean) / std).astype(np.float32)
    return x_train, y_train, x_test, y_test
