`timescale 1 ns / 1 ps
// Tessera's top module (rendered from tessera/hls_templates/rtl/tessera_top.v.tpl).
//
// One sample per clock (II = 1): in_data holds the design's ${n_in} input codes, element k in
// bits [k*${in_width} +: ${in_width}] as ${in_width}-bit two's complement (ONNX order, the
// ports packed side by side); out_data holds its ${n_out} output codes the same way, ${out_width}
// bits each (${out_signedness}).  out_valid follows in_valid ${latency} clock cycles later;
// rst (synchronous, active high) clears only the valid chain, the datapath has no reset.
// The arithmetic is ${model}: da4ml's pipelined adder graphs of the integer semantics, every
// value an integer code (its fixed-point scale is the manifest's).
module ${top} (
    input clk,
    input rst,
    input in_valid,
    input [${in_bits}-1:0] in_data,
    output out_valid,
    output [${out_bits}-1:0] out_data
);
    localparam N_IN = ${n_in};
    localparam IN_WIDTH = ${in_width};
    localparam MODEL_IN_WIDTH = ${model_in_width};
    localparam N_OUT = ${n_out};
    localparam OUT_WIDTH = ${out_width};
    localparam MODEL_OUT_WIDTH = ${model_out_width};
    localparam OUT_SHIFT = ${out_shift};
    localparam FIELD_SIGNED = ${field_signed};  // da4ml's output fields: two's complement (1) or unsigned (0)
    localparam LATENCY = ${latency};
    localparam EXTENDED = MODEL_OUT_WIDTH + OUT_SHIFT + OUT_WIDTH + 1;

    wire [N_IN*MODEL_IN_WIDTH-1:0] model_inp;
    wire [N_OUT*MODEL_OUT_WIDTH-1:0] model_out;

    // da4ml's inputs are the codes themselves, as wide as the input type
    genvar k;
    generate
        for (k = 0; k < N_IN; k = k + 1) begin : inputs
            assign model_inp[k*MODEL_IN_WIDTH +: MODEL_IN_WIDTH] = in_data[k*IN_WIDTH +: MODEL_IN_WIDTH];
        end
    endgenerate

    ${model}_wrapper datapath (
        .clk(clk),
        .model_inp(model_inp),
        .model_out(model_out)
    );

    // da4ml's outputs: each code >> OUT_SHIFT (its low bits are always zero), extended here
    generate
        for (k = 0; k < N_OUT; k = k + 1) begin : outputs
            wire [MODEL_OUT_WIDTH-1:0] field = model_out[k*MODEL_OUT_WIDTH +: MODEL_OUT_WIDTH];
            wire sign_bit = FIELD_SIGNED ? field[MODEL_OUT_WIDTH-1] : 1'b0;
            wire [EXTENDED-1:0] code = {{(EXTENDED-MODEL_OUT_WIDTH){sign_bit}}, field} << OUT_SHIFT;
            assign out_data[k*OUT_WIDTH +: OUT_WIDTH] = code[OUT_WIDTH-1:0];
        end
    endgenerate

    // the valid chain: one register per pipeline stage of the datapath
    reg [LATENCY-1:0] valid_q;
    wire [LATENCY:0] valid_chain = {valid_q, in_valid};
    always @(posedge clk) begin
        if (rst) valid_q <= {LATENCY{1'b0}};
        else valid_q <= valid_chain[LATENCY-1:0];
    end
    assign out_valid = valid_q[LATENCY-1];
endmodule
