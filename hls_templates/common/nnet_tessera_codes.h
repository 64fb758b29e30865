// Tessera integer codes inside kernels: hls4ml's ap_fixed values <-> their integer codes,
// requantization of codes (QONNX Quant: the rounding table of nnet_tessera_rounding.h, then
// saturation), the exact division of a sum (average pools), and products with weights
// stored on a codebook (binary in 1 bit, b -> 2b - 1;
// ternary in 2 bits; quaternary {-2, -1, 1, 2} in 3 bits: sign selections and one shift, no
// multiplier).  The codebooks are tessera/compiler/ops/cells/program.py's Codebook.
#ifndef NNET_TESSERA_CODES_H_
#define NNET_TESSERA_CODES_H_

#include "ap_fixed.h"
#include "ap_int.h"
#include "nnet_tessera_rounding.h"

namespace nnet {

enum { TESSERA_W_INT = 0, TESSERA_W_BINARY, TESSERA_W_TERNARY, TESSERA_W_QUATERNARY };

// -- codes <-> hls4ml's ap_fixed values ---------------------------------------------------

template <class T> struct tessera_is_signed { static const bool value = true; };
template <int W, int I, ap_q_mode Q, ap_o_mode O, int N> struct tessera_is_signed<ap_ufixed<W, I, Q, O, N> > {
    static const bool value = false;
};

// The integer code of an ap_fixed value (its raw bits, sign-extended when signed).
template <class T> inline ap_int<T::width + 1> tessera_code_of(const T &v) {
    ap_uint<T::width> raw = v.range(T::width - 1, 0);
    ap_int<T::width + 1> c = raw;
    if (tessera_is_signed<T>::value && raw[T::width - 1])
        c -= (ap_int<T::width + 1>(1) << T::width);
    return c;
}

// The ap_fixed value whose code is c (c fits T by construction).
template <class T, class C> inline T tessera_of_code(const C &c) {
    T v;
    ap_int<T::width + 1> wide = c;
    v.range(T::width - 1, 0) = wide.range(T::width - 1, 0);
    return v;
}

// -- requantization: R(x / 2**SHIFT) with a QONNX rounding mode, then clamp ------------------

template <class out_T, int SHIFT, int MODE, long long QMIN, long long QMAX, class in_T>
inline out_T tessera_requant(const in_T &x) {
    static const int LS = SHIFT < 0 ? -SHIFT : 0;
    static const int RS = SHIFT > 0 ? SHIFT : 0;
    static const int RS1 = RS > 0 ? RS : 1;
    static const int WW = (in_T::width > RS1 ? in_T::width : RS1) + LS + 2;
    typedef ap_int<WW> wide_t;
    wide_t xw = x;
    wide_t q;
    if (RS == 0) {
        q = xw << LS;
    } else {
        wide_t fl = xw >> RS; // arithmetic: floor
        ap_uint<RS1> r = xw.range(RS1 - 1, 0);
        ap_uint<RS1> half = ap_uint<RS1>(1) << (RS1 - 1);
        q = fl + (tessera_round_up(MODE, r > half, r == half, xw < 0, r != 0, fl[0]) ? 1 : 0);
    }
    if (q < wide_t(QMIN))
        q = QMIN;
    if (q > wide_t(QMAX))
        q = QMAX;
    return (out_T)q;
}

// -- products with weights on a codebook -------------------------------------------------

template <int KIND> struct tessera_wmul {
    template <class P, class X, class W> static P mul(const X &x, const W &w) { return (P)((P)x * (P)w); }
};
template <> struct tessera_wmul<TESSERA_W_BINARY> { // stored bit b means 2b - 1
    template <class P, class X, class W> static P mul(const X &x, const W &w) { return w != 0 ? (P)x : (P)(-(P)x); }
};
template <> struct tessera_wmul<TESSERA_W_TERNARY> {
    template <class P, class X, class W> static P mul(const X &x, const W &w) {
        return w == 0 ? (P)0 : (w > 0 ? (P)x : (P)(-(P)x));
    }
};
template <> struct tessera_wmul<TESSERA_W_QUATERNARY> { // codes -2, -1, 1, 2
    template <class P, class X, class W> static P mul(const X &x, const W &w) {
        P m = (w == 2 || w == -2) ? (P)((P)x << 1) : (P)x;
        return w > 0 ? m : (P)(-m);
    }
};

// An exact sum of codes (the raw bits of sum, SUM_BITS wide, held in accum_T), divided
// exactly: R((code << num_shift) / (count << den_shift)) with a rounding mode, clamped to
// [qmin, qmax] and written as the raw bits of out (OUT_BITS wide), so nothing else rounds.
// The average pools' finish (the division of an average and its Quant, fused).
template <class out_T, class accum_T, int SUM_BITS, int OUT_BITS>
inline void tessera_div_round_to(const accum_T &sum, long long count, int num_shift, int den_shift, int mode,
                                 long long qmin, long long qmax, out_T &out) {
    ap_int<SUM_BITS> code;
    code.range() = sum.range(SUM_BITS - 1, 0);
    long long y = tessera_div_round(((long long)code) << num_shift, count << den_shift, mode);
    if (y < qmin)
        y = qmin;
    if (y > qmax)
        y = qmax;
    out.range(OUT_BITS - 1, 0) = ap_int<OUT_BITS>(y).range();
}

// A pragma whose text is built from macro arguments (the idiom of hls4ml's nnet_common.h).
#define TESSERA_PRAGMA(text) _Pragma(EXPAND_STRING(text))

// How an average divides its exact sum (the compiler's choice, per layer): by the proven
// multiply-shift below, or by the exact integer division of nnet_tessera_rounding.h.
enum { TESSERA_AVG_MULTIPLY_SHIFT = 0, TESSERA_AVG_DIVISION = 1 };

// The requantization primitive's multiply-shift (tessera/compiler/exact/requant.py, proven by
// the compiler for every reachable code): clamp((mult * code + add) >> shift, qmin, qmax),
// computed in prod_T, which holds mult * code + add exactly; the shift is arithmetic (floor).
// The clamp compares integers: the output's bounds need not fit prod_T.
template <class prod_T, class code_T, class mult_T, class add_T>
inline long long tessera_multiply_shift(const code_T &code, const mult_T &mult, const add_T &add, unsigned shift,
                                        long long qmin, long long qmax) {
    #pragma HLS INLINE
    prod_T p = code * mult + add;
    long long y = (p >> shift).to_int64();
    if (y < qmin)
        y = qmin;
    if (y > qmax)
        y = qmax;
    return y;
}

} // namespace nnet

#endif
