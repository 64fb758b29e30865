# Tessera's Yosys script for ${target} (rendered from tessera/hls_templates/rtl/synth_ecp5.ys.tpl),
# run by `tessera synth` in the project's rtl/ folder: every path is relative to it.
read_verilog ${sources}
synth_ecp5 -top ${top} -json ${netlist}
tee -q -o ${stats} stat -json
