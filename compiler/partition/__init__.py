"""Spatial partitioning of 3D CNNs (papers 1-2): the halo arithmetic shared by the deployment
planner and the training companion."""

from .execute import run_block
from .regions import Span, input_span, required_spans

__all__ = ["Span", "input_span", "required_spans", "run_block"]
