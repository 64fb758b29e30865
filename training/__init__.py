"""tessera.training: hybrid data + spatial parallel training of the 3D CNNs on torch.distributed.

``mesh`` (data x spatial process groups), ``halo`` (halo exchange, gathers, BatchNorm and
quantizer statistics over groups: autograd Functions over torch.distributed), ``spatial``
(:class:`~tessera.training.spatial.SpatialModel`: a model sharded in space), ``data``
(per-rank HDF5 hyperslab reads), ``trainer`` (the ``tessera train ... --data-parallel D
--spatial AxBxC`` run), ``check`` (equivalence with single-process training).  See
docs/training.md.
"""
