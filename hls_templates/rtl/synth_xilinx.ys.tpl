# Tessera's Yosys script for ${target} (rendered from tessera/hls_templates/rtl/synth_xilinx.ys.tpl),
# run by `tessera synth` in the project's rtl/ folder: every path is relative to it.  -flatten:
# without it ABC runs once per da4ml module (tens of minutes of tiny calls).
read_verilog ${sources}
synth_xilinx -flatten -family ${arch} -top ${top}
tee -q -o ${stats} stat -json
