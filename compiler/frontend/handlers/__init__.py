"""The importer's handlers, one module per concern; importing this package fills the table
of :mod:`..registry` (each module registers its handlers with ``@handles``)."""

from . import elementwise, linear, qcdq, quantizers, recurrent, shape, windows

MODULES = (quantizers, qcdq, linear, windows, elementwise, shape, recurrent)

__all__ = ["MODULES"]
