"""Checks of a generated project that C-simulation cannot give, with g++ alone: the
synthesis branch compiles (:mod:`.synth`), the C++ uses nothing Vitis HLS rejects
(:mod:`.lint`)."""
