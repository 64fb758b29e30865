"""Tessera: quantized neural networks to FPGAs, verified bit for bit."""

__version__ = "0.1.0"
