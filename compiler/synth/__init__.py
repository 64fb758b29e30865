"""``tessera synth``: an RTL project (``--backend rtl``) synthesized by Yosys for an ECP5 or a
Xilinx part and, on ECP5, placed and routed by nextpnr, with the open tools of the ``[rtl]``
extra (YoWASP).  ``targets.py`` the parts and the time model, ``wrapper.py`` the serial wrapper
of designs with more port bits than a package has pins, ``yosys.py`` / ``place.py`` the tools,
``stats.py`` Yosys's statistics as typed counts, ``run.py`` the command (docs/synth.md)."""
