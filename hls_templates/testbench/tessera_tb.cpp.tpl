// Tessera bit-exact testbench (rendered from tessera/hls_templates/testbench/tessera_tb.cpp.tpl).
//
// Reads integer input codes and the exact reference's integer output codes (one sample per
// line, channels-last order, several ports side by side), runs the generated firmware
// through the hls4ml bridge, and compares every output code with ==.  Exit status 0 only if
// every output matches.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifdef TESSERA_TB_EXTERN_BRIDGE
// Tessera's C-simulation build links this file with the bridge's and the ports' objects (tessera.compiler.sim.build)
extern "C" void tessera_packed_double(double *x, double *y);
#else
#include "${project}_bridge.cpp"
#include "tessera_ports.cpp"
#endif

// A sample's values, port after port: each port's size and fractional bits
static const int TESSERA_IN_PORTS = ${in_ports};
static const int TESSERA_IN_SIZE[] = {${in_sizes}};
static const int TESSERA_IN_FRAC[] = {${in_fracs}};
static const int TESSERA_OUT_PORTS = ${out_ports};
static const int TESSERA_OUT_SIZE[] = {${out_sizes}};
static const int TESSERA_OUT_FRAC[] = {${out_fracs}};

static int tessera_total(const int *sizes, int ports) {
    int n = 0;
    for (int p = 0; p < ports; p++)
        n += sizes[p];
    return n;
}

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
    const int n_in = tessera_total(TESSERA_IN_SIZE, TESSERA_IN_PORTS);
    const int n_out = tessera_total(TESSERA_OUT_SIZE, TESSERA_OUT_PORTS);
    std::vector<long long> in, expected;
    std::vector<double> x(n_in), y(n_out);
    long samples = 0, outputs = 0, mismatches = 0;
    while (read_row(fin, in, n_in) && read_row(fexp, expected, n_out)) {
        for (int p = 0, i = 0; p < TESSERA_IN_PORTS; p++) {
            for (int k = 0; k < TESSERA_IN_SIZE[p]; k++, i++)
                x[i] = std::ldexp((double)in[i], -TESSERA_IN_FRAC[p]);
        }
        tessera_packed_double(x.data(), y.data());
        for (int p = 0, j = 0; p < TESSERA_OUT_PORTS; p++) {
            for (int k = 0; k < TESSERA_OUT_SIZE[p]; k++, j++) {
                double c = std::ldexp(y[j], TESSERA_OUT_FRAC[p]);
                long long code = (long long)c;
                if ((double)code != c || code != expected[j]) {
                    if (mismatches < 10)
                        std::printf("tessera-tb: mismatch sample %ld output %d: expected %lld got %.17g\n", samples, j,
                                    expected[j], c);
                    mismatches++;
                }
            }
        }
        outputs += n_out;
        samples++;
    }
    std::printf("tessera-tb: %ld samples, %ld outputs, %ld mismatches\n", samples, outputs, mismatches);
    return (mismatches == 0 && samples > 0) ? 0 : 1;
}
