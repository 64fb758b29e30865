// Tessera's RTL simulation driver (tessera/hls_templates/rtl/tessera_rtl_sim.cpp), built by
// Verilator with the project's Verilog into one executable.
//
//   tessera_rtl_sim run INPUT OUTPUT      codes in (int64, N x TESSERA_N_IN) -> codes out
//                                         (int64, N x TESSERA_N_OUT), one sample per clock
//   tessera_rtl_sim check INPUT EXPECTED  the same with idle cycles between samples (in_valid
//                                         low), compared with EXPECTED: the last line says how
//                                         many outputs differ; exit 0 when none, 1 otherwise
//
// Every run checks the valid protocol: out_valid rises exactly TESSERA_LATENCY cycles after
// each in_valid, and the outputs come out in order.  A violation exits with 3.
//
// Compile-time constants (-D): TESSERA_N_IN, TESSERA_IN_WIDTH, TESSERA_N_OUT,
// TESSERA_OUT_WIDTH, TESSERA_OUT_SIGNED, TESSERA_LATENCY.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "Vtessera_top.h"
#include "verilated.h"

namespace {

// Verilator's ports: an integer up to 64 bits, or VlWide (32-bit words) beyond.
template <typename T>
void put_bits(T &port, size_t lsb, size_t width, uint64_t value) {
    for (size_t b = 0; b < width; ++b) {
        T bit = static_cast<T>(1) << (lsb + b);
        if ((value >> b) & 1) port |= bit;
        else port &= static_cast<T>(~bit);
    }
}

template <std::size_t W>
void put_bits(VlWide<W> &port, size_t lsb, size_t width, uint64_t value) {
    for (size_t b = 0; b < width; ++b) {
        size_t at = lsb + b;
        uint32_t bit = 1u << (at % 32);
        if ((value >> b) & 1) port[at / 32] |= bit;
        else port[at / 32] &= ~bit;
    }
}

template <typename T>
uint64_t get_bits(const T &port, size_t lsb, size_t width) {
    uint64_t v = 0;
    for (size_t b = 0; b < width; ++b) v |= static_cast<uint64_t>((port >> (lsb + b)) & 1) << b;
    return v;
}

template <std::size_t W>
uint64_t get_bits(const VlWide<W> &port, size_t lsb, size_t width) {
    uint64_t v = 0;
    for (size_t b = 0; b < width; ++b) {
        size_t at = lsb + b;
        v |= static_cast<uint64_t>((port[at / 32] >> (at % 32)) & 1) << b;
    }
    return v;
}

int64_t as_code(uint64_t field) {
    const int w = TESSERA_OUT_WIDTH;
    if (w < 64 && TESSERA_OUT_SIGNED && ((field >> (w - 1)) & 1)) return static_cast<int64_t>(field | (~0ull << w));
    return static_cast<int64_t>(field);
}

std::vector<int64_t> read_codes(const char *path, size_t per_sample) {
    std::vector<int64_t> codes;
    FILE *f = std::fopen(path, "rb");
    if (!f) return codes;
    int64_t buf[4096];
    size_t got;
    while ((got = std::fread(buf, sizeof(int64_t), 4096, f)) > 0) codes.insert(codes.end(), buf, buf + got);
    std::fclose(f);
    if (codes.size() % per_sample) codes.clear();
    return codes;
}

struct Run {
    std::vector<int64_t> outputs;
    std::string error;
};

// Drive every sample through the design; `idle_every` > 0 leaves in_valid low one cycle in
// that many.
Run simulate(const std::vector<int64_t> &inputs, int idle_every) {
    const size_t n = inputs.size() / TESSERA_N_IN;
    Run run;
    run.outputs.reserve(n * TESSERA_N_OUT);
    auto ctx = std::make_unique<VerilatedContext>();
    auto dut = std::make_unique<Vtessera_top>(ctx.get());
    std::deque<uint64_t> due;  // the cycle each sample in flight must leave at
    dut->rst = 1;
    dut->in_valid = 0;
    for (int c = 0; c < 2; ++c) {
        dut->clk = 0; dut->eval(); dut->clk = 1; dut->eval();
    }
    dut->rst = 0;
    size_t next = 0, done = 0;
    for (uint64_t cycle = 0; done < n; ++cycle) {
        bool send = next < n && !(idle_every > 0 && cycle % idle_every == idle_every - 1);
        dut->in_valid = send;
        if (send) {
            for (size_t k = 0; k < TESSERA_N_IN; ++k)
                put_bits(dut->in_data, k * TESSERA_IN_WIDTH, TESSERA_IN_WIDTH,
                         static_cast<uint64_t>(inputs[next * TESSERA_N_IN + k]));
            due.push_back(cycle + TESSERA_LATENCY);
            ++next;
        }
        dut->clk = 0; dut->eval(); dut->clk = 1; dut->eval();
        // after the edge of `cycle`: out_valid belongs to a sample sent LATENCY - 1 edges before
        bool expect = !due.empty() && due.front() == cycle + 1;
        if (dut->out_valid != expect) {
            run.error = "out_valid " + std::to_string(dut->out_valid) + " at cycle " + std::to_string(cycle + 1) +
                        ", expected " + std::to_string(expect) + " (latency " + std::to_string(TESSERA_LATENCY) + ")";
            return run;
        }
        if (expect) {
            due.pop_front();
            for (size_t k = 0; k < TESSERA_N_OUT; ++k)
                run.outputs.push_back(as_code(get_bits(dut->out_data, k * TESSERA_OUT_WIDTH, TESSERA_OUT_WIDTH)));
            ++done;
        }
    }
    dut->final();
    return run;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 4 || (std::strcmp(argv[1], "run") != 0 && std::strcmp(argv[1], "check") != 0)) {
        std::fprintf(stderr, "usage: %s run INPUT OUTPUT | check INPUT EXPECTED\n", argv[0]);
        return 2;
    }
    const bool check = std::strcmp(argv[1], "check") == 0;
    std::vector<int64_t> inputs = read_codes(argv[2], TESSERA_N_IN);
    if (inputs.empty()) {
        std::fprintf(stderr, "cannot read %s as int64 codes of %d per sample\n", argv[2], TESSERA_N_IN);
        return 2;
    }
    Run run = simulate(inputs, check ? 7 : 0);
    if (!run.error.empty()) {
        std::printf("valid protocol violated: %s\n", run.error.c_str());
        return 3;
    }
    if (!check) {
        FILE *f = std::fopen(argv[3], "wb");
        if (!f || std::fwrite(run.outputs.data(), sizeof(int64_t), run.outputs.size(), f) != run.outputs.size()) {
            std::fprintf(stderr, "cannot write %s\n", argv[3]);
            return 2;
        }
        std::fclose(f);
        return 0;
    }
    std::vector<int64_t> expected = read_codes(argv[3], TESSERA_N_OUT);
    if (expected.size() != run.outputs.size()) {
        std::printf("expected codes: %zu values, the design gave %zu\n", expected.size(), run.outputs.size());
        return 1;
    }
    size_t differ = 0;
    for (size_t i = 0; i < expected.size(); ++i) differ += expected[i] != run.outputs[i];
    const size_t n = inputs.size() / TESSERA_N_IN;
    std::printf("RTL testbench: %zu samples, %zu outputs, %zu mismatches\n", n, expected.size(), differ);
    return differ ? 1 : 0;
}
