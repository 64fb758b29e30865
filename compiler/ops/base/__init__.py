"""The base every op stands on: the op contract (:mod:`.contract`), the cost facet's types
(:mod:`.cost`), the declaration of an hls4ml extension layer (:mod:`.extension`), integer
weight codes (:mod:`.weights`) and what the linear ops share (:mod:`.linear`).  Op modules
sit beside this package in ``ops/``; the arithmetic they are built from sits below the IR, in
``compiler/exact/``."""

from .contract import (SPATIAL, HlsBuilder, IoType, Layout, OpDef, ReferenceBuilder, RtlBuilder, Trait, check_width,
                       fits_int8, limb_kernel)

__all__ = ["HlsBuilder", "IoType", "Layout", "OpDef", "ReferenceBuilder", "RtlBuilder", "SPATIAL", "Trait", "check_width", "fits_int8",
           "limb_kernel"]
