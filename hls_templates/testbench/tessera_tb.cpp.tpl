// Tessera bit-exact testbench (rendered from tessera/hls_templates/testbench/tessera_tb.cpp.tpl).
//
// Reads integer input codes and the exact reference's integer output codes (one sample per
// line, channels-last order), runs the generated firmware through the hls4ml bridge, and
// compares every output code with ==.  Exit status 0 only if every output matches.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifdef TESSERA_TB_EXTERN_BRIDGE
// Tessera's C-simulation build links this file with the bridge's object (tessera.compiler.sim.build)
extern "C" void ${project}_double(double *x, double *y);
#else
#include "${project}_bridge.cpp"
#endif

static const int TESSERA_N_IN = ${n_in};
static const int TESSERA_N_OUT = ${n_out};
static const int TESSERA_IN_FRAC = ${in_frac};
static const int TESSERA_OUT_FRAC = ${out_frac};

static bool read_row(std::ifstream &f, std::vector<long long> &row, int n) {
    std::string line;
    if (!std::getline(f, line))
        return false;
    std::istringstream ss(line);
    row.assign(n, 0);
    for (int i = 0; i < n; i++) {
        if (!(ss >> row[i]))
            return false;
    }
    return true;
}

int main(int argc, char **argv) {
    const char *in_path = argc > 1 ? argv[1] : "tb_data/tessera_input_codes.txt";
    const char *exp_path = argc > 2 ? argv[2] : "tb_data/tessera_expected_codes.txt";
    std::ifstream fin(in_path), fexp(exp_path);
    if (!fin.is_open() || !fexp.is_open()) {
        std::printf("tessera-tb: cannot open %s or %s\n", in_path, exp_path);
        return 2;
    }
    std::vector<long long> in, expected;
    std::vector<double> x(TESSERA_N_IN), y(TESSERA_N_OUT);
    long samples = 0, outputs = 0, mismatches = 0;
    while (read_row(fin, in, TESSERA_N_IN) && read_row(fexp, expected, TESSERA_N_OUT)) {
        for (int i = 0; i < TESSERA_N_IN; i++)
            x[i] = std::ldexp((double)in[i], -TESSERA_IN_FRAC);
        ${project}_double(x.data(), y.data());
        for (int j = 0; j < TESSERA_N_OUT; j++) {
            double c = std::ldexp(y[j], TESSERA_OUT_FRAC);
            long long code = (long long)c;
            if ((double)code != c || code != expected[j]) {
                if (mismatches < 10)
                    std::printf("tessera-tb: mismatch sample %ld output %d: expected %lld got %.17g\n", samples, j,
                                expected[j], c);
                mismatches++;
            }
        }
        outputs += TESSERA_N_OUT;
        samples++;
    }
    std::printf("tessera-tb: %ld samples, %ld outputs, %ld mismatches\n", samples, outputs, mismatches);
    return (mismatches == 0 && samples > 0) ? 0 : 1;
}
