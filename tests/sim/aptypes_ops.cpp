// ap_fixed / ap_int arithmetic over many deterministic operands, every quantization and
// overflow mode, narrow and multi-word widths; prints every result's bits.
// tests/sim/test_aptypes.py compiles it against hls4ml's ap_types as shipped and against
// Tessera's view of them (compiler/sim/aptypes.py) and requires the same output.
#include <cstdint>
#include <cstdio>
#include <string>

#include "ap_fixed.h"
#include "ap_int.h"

static uint64_t state = 0x9E3779B97F4A7C15ULL;
static uint64_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 11;
}

template <class T> static void show(const char *tag, const T &v) {
    std::printf("%s %s\n", tag, v.to_string(16).c_str());
}

template <class T> static T draw() {
    T v;
    v.range(T::width - 1, 0) = ap_uint<64>(next());
    return v;
}

template <class T> static T draw_wide() {
    T v;
    for (int lo = 0; lo < T::width; lo += 48) {
        int hi = lo + 47 < T::width - 1 ? lo + 47 : T::width - 1;
        v.range(hi, lo) = ap_uint<48>(next());
    }
    return v;
}

int main() {
    for (int i = 0; i < 4000; i++) {
        ap_ufixed<8, 1> d = draw<ap_ufixed<8, 1> >();
        ap_fixed<8, 1> w = draw<ap_fixed<8, 1> >();
        ap_fixed<20, 6> acc = draw<ap_fixed<20, 6> >();
        ap_fixed<13, -1> b = draw<ap_fixed<13, -1> >();
        acc += d * w;
        acc -= b;
        show("mac", acc);
        show("rnd_sat", ap_fixed<6, 2, AP_RND, AP_SAT>(acc));
        show("rnd_conv_sat_sym", ap_fixed<5, 1, AP_RND_CONV, AP_SAT_SYM>(acc));
        show("rnd_zero_sat_zero", ap_fixed<7, 3, AP_RND_ZERO, AP_SAT_ZERO>(acc));
        show("rnd_inf_wrap", ap_fixed<4, 2, AP_RND_INF, AP_WRAP>(acc));
        show("rnd_min_inf", ap_fixed<9, 4, AP_RND_MIN_INF>(acc));
        show("trn_zero_wrap_sm", ap_fixed<6, 3, AP_TRN_ZERO, AP_WRAP_SM>(acc));
        show("ufixed_sat", ap_ufixed<5, 2, AP_RND, AP_SAT>(acc));
        show("shift", ap_fixed<24, 10>(acc << 3) + ap_fixed<24, 10>(acc >> 2));
        ap_int<17> p = draw<ap_int<17> >();
        ap_uint<11> q = draw<ap_uint<11> >();
        show("int_ops", ap_int<40>(p * q - (p >> 3) + (q << 5)));
        if (q != 0)
            show("int_div", ap_int<17>(p / q));
        show("cmp", ap_uint<3>((acc > b) + 2 * (p < 0)));
        ap_int<100> x = draw_wide<ap_int<100> >();
        ap_uint<90> y = draw_wide<ap_uint<90> >();
        show("wide_mul", ap_int<190>(x * y));
        show("wide_add", ap_int<101>(x + y));
        show("wide_narrow", ap_int<70>(x - y));
        ap_fixed<96, 40> f = draw_wide<ap_fixed<96, 40> >();
        show("wide_fixed", ap_fixed<33, 9, AP_RND_CONV, AP_SAT>(f * acc));
    }
    return 0;
}
