"""tessera.models: the quantized model zoo the compiler consumes.

* :mod:`.quant` -- Brevitas quantizer presets with power-of-two scales and zero-point 0
  (8/4-bit integer, binary, ternary weights; 8/4-bit activations; ``Int16Bias``).
* :mod:`.zoo` -- ``ZOO``: the registry of model specs (MLPs for the synthetic jet task,
  small CNNs for MNIST digits).
* :mod:`.train` -- ``train_model`` (QAT + QONNX export + metrics) and ``export_model``.
* :mod:`.cnn3d` -- quantized 3D CNNs of paper 1 (CosmoFlow, MLPerf CosmoFlow, 3D U-Net),
  ``fold_batchnorm``, MAC counts.
* :mod:`.train3d` -- ``train_cnn3d`` (QAT + BN folding + QONNX export + metrics).
* :mod:`.data` -- data loaders and the PyPI file cache.

Submodules are not imported here so that ``import tessera.models`` stays cheap.
"""
