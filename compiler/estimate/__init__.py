"""FPGA resource / latency estimates and the reuse-factor and block-grid chooser (issue 8,
FPGA side).  Every number is an analytical estimate; docs/estimate.md gives each formula
and its source."""

from .chooser import choose_design, choose_for_grid, choose_reuse, partitionable, sweep_reuse, valid_reuse_factors
from .costs import COST_RULES, CODEBOOK_BITS, Work, node_weight_bits, node_work
from .model import Design, LayerEstimate, estimate, layer_works
from .parts import PARTS, Part, get_part

__all__ = ["CODEBOOK_BITS", "COST_RULES", "Design", "LayerEstimate", "PARTS", "Part", "Work", "choose_design",
           "choose_for_grid", "choose_reuse", "estimate", "get_part", "layer_works", "node_weight_bits", "node_work",
           "partitionable", "sweep_reuse", "valid_reuse_factors"]
