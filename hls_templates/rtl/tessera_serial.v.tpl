`timescale 1 ns / 1 ps
// Tessera's serial wrapper (rendered from tessera/hls_templates/rtl/tessera_serial.v.tpl), for
// synthesis only: the top module's ports (${in_bits} bits in, ${out_bits} out) exceed the
// package's user IOs, so the core sits behind shift registers and the pins carry one input
// element and one output word per clock.  `tessera synth` builds it; `verify` never runs it.
//
// In: each clock with in_valid high shifts in_word (one ${in_width}-bit input element, element 0
// first) into in_shift; after the sample's ${n_in}th element the core sees in_valid for one
// clock with the whole sample on in_data (the next sample's elements may follow without a
// gap: the core reads in_shift on the clock edge that shifts the next element in).
// Out: when the core's out_valid rises its out_data is loaded into out_shift and leaves on
// out_word, ${out_word_bits} bits a clock (the lowest first), out_valid high for the ${out_words} words.  A
// sample's input takes ${n_in} clocks, at least as many as its ${out_words} output words, so an output
// never overtakes the previous one.  rst (synchronous, active high) clears the counters.
module ${wrapper} (
    input clk,
    input rst,
    input in_valid,
    input [${in_width}-1:0] in_word,
    output out_valid,
    output [${out_word_bits}-1:0] out_word
);
    reg [${in_bits}-1:0] in_shift;
    reg [${in_count_bits}-1:0] in_count;
    reg sample_valid;
    always @(posedge clk) begin
        if (in_valid) in_shift <= ${in_shifted};
        if (rst) begin
            in_count <= ${in_count_bits}'d0;
            sample_valid <= 1'b0;
        end else begin
            sample_valid <= in_valid && in_count == ${in_last};
            if (in_valid) in_count <= in_count == ${in_last} ? ${in_count_bits}'d0 : in_count + ${in_count_bits}'d1;
        end
    end

    wire core_valid;
    wire [${out_bits}-1:0] core_out;
    ${top} core (
        .clk(clk),
        .rst(rst),
        .in_valid(sample_valid),
        .in_data(in_shift),
        .out_valid(core_valid),
        .out_data(core_out)
    );

    reg [${out_shift_bits}-1:0] out_shift;
    reg [${out_count_bits}-1:0] out_left;
    always @(posedge clk) begin
        if (core_valid) out_shift <= ${out_loaded};
        else if (out_left != ${out_count_bits}'d0) out_shift <= ${out_shifted};
        if (rst) out_left <= ${out_count_bits}'d0;
        else if (core_valid) out_left <= ${out_first};
        else if (out_left != ${out_count_bits}'d0) out_left <= out_left - ${out_count_bits}'d1;
    end
    assign out_valid = out_left != ${out_count_bits}'d0;
    assign out_word = out_shift[${out_word_bits}-1:0];
endmodule
