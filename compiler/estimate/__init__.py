"""FPGA resource / latency estimates and the reuse-factor and block-grid chooser (issue 8,
FPGA side).  What each layer's kernel does per sample is the op's ``cost`` facet
(:class:`~..ops.base.cost.Work`); what that costs on a part is here.  Every number is an
analytical estimate; docs/estimate.md gives each formula and its source."""

from .chooser import choose_design, choose_for_grid, choose_reuse, partitionable, sweep_reuse, valid_reuse_factors
from .model import Design, LayerEstimate, estimate, layer_works, mult_cost, node_work
from .parts import PARTS, Part, get_part

__all__ = ["Design", "LayerEstimate", "PARTS", "Part", "choose_design", "choose_for_grid", "choose_reuse", "estimate",
           "get_part", "layer_works", "mult_cost", "node_work", "partitionable", "sweep_reuse", "valid_reuse_factors"]
