"""Spatial partitioning of 3D CNNs (papers 1-2): the halo arithmetic shared by the deployment
planner and the training companion (:mod:`.regions`), overlapped-tile and halo-exchange
plans and executions, the block / layer / tail graphs, the choice of cut and grid, and the
schedule that runs them (:class:`.runtime.Partition`)."""

from .choose import choose_cut, grid_for_budget
from .exchange import ExchangePlan, plan_exchange, run_exchange
from .execute import run_block
from .plan import BlockPlan, Plan, plan_overlapped, segment_output
from .regions import Span, grid_blocks, input_span, required_spans, transposed_input, upsample_input, window_input
from .runtime import MODES, Partition, parse_grid
from .specialise import block_graph, layer_graph, tail_graph

__all__ = ["BlockPlan", "ExchangePlan", "MODES", "Partition", "Plan", "Span", "block_graph", "choose_cut",
           "grid_blocks", "grid_for_budget", "input_span", "layer_graph", "parse_grid",
           "plan_exchange", "plan_overlapped", "required_spans", "run_block", "run_exchange", "segment_output",
           "tail_graph", "transposed_input", "upsample_input", "window_input"]
