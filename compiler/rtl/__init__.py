"""The RTL back end: the typed IR traced into da4ml's adder graphs (:mod:`.trace`, through
each op's ``rtl`` facet and :mod:`.builder`), checked against the exact semantics
(:mod:`.check`) and written as pipelined Verilog with Tessera's top module (:mod:`.design`).
da4ml is the optional dependency of this package (``pip install tessera[rtl]``); nothing
outside it imports da4ml."""
