"""Spatial partitioning of 3D CNNs (papers 1-2): the halo arithmetic shared by the deployment
planner and the training companion."""

from .execute import run_block
from .plan import BlockPlan, Plan, grid_blocks, grid_for_budget, plan_overlapped, segment_output
from .regions import Span, input_span, required_spans, transposed_input, upsample_input, window_input

__all__ = ["BlockPlan", "Plan", "Span", "grid_blocks", "grid_for_budget", "input_span", "plan_overlapped", "transposed_input", "upsample_input", "window_input",
           "required_spans", "run_block", "segment_output"]
