// Tessera's piecewise requantization: the exact requantization clamp(R(slope * x + offset))
// with a different step on consecutive sub-domains of each channel's codes, for outputs of
// any width (16-bit quantizers after float scales, a LeakyRelu / PRelu bend before its Quant;
// tessera/compiler/ops/piecewise.py, tessera/compiler/exact/pieces.py).
//
// Each channel c has n_seg segments; segment k holds the codes x >= start[c][k] (start[c][0]
// is the first reachable code; padding segments start above every reachable code):
//   k = #{j >= 1 : x >= start[c][j]},  y = clamp(R((mult[c][k] * x + add[c][k]) / 2**shift)),
// one compare per segment boundary, one multiplier per lane.  R is the floor where the
// compiler proved each segment's multiply-shift equal to the exact rational step on its
// sub-domain, or the layer's QONNX rounding mode (nnet_tessera_rounding.h) where the steps'
// constants are dyadic and the division by 2**shift is the definition itself.
// Inputs and outputs are integer codes (their raw bits); channels are the fastest-varying
// index (hls4ml's channels-last order; a vector's element i is channel i).
#ifndef NNET_TESSERA_PIECEWISE_H_
#define NNET_TESSERA_PIECEWISE_H_

#include "hls_stream.h"
#include "nnet_common.h"
#include "nnet_tessera_codes.h"
#include "nnet_tessera_rounding.h"
#include "nnet_tessera_stream.h"

namespace nnet {

struct tessera_piecewise_config {
    static const unsigned n_in = 1;   // elements of one sample
    static const unsigned n_chan = 1; // channels (parameter sets)
    static const unsigned n_seg = 1;  // segments per channel
    static const unsigned shift = 0;
    static const int rounding = TESSERA_FLOOR;
    static const long long qmin = 0, qmax = 0;
    static const unsigned out_bits = 1;
    typedef ap_int<2> start_t;
    typedef ap_int<2> mult_t;
    typedef ap_int<2> add_t;
    typedef ap_int<4> prod_t; // holds mult * x + add exactly (width from the compiler)
};

// R(p / 2**shift): the floor quotient, plus one where the rounding table says so.
template <typename CONFIG_T> inline long long tessera_piecewise_round(const typename CONFIG_T::prod_t &p) {
    #pragma HLS INLINE
    if (CONFIG_T::shift == 0)
        return p.to_int64();
    const typename CONFIG_T::prod_t q = p >> CONFIG_T::shift; // arithmetic: floor
    const ap_uint<CONFIG_T::shift + 1> r = p.range(CONFIG_T::shift - 1, 0);
    const ap_uint<CONFIG_T::shift + 1> half = ap_uint<CONFIG_T::shift + 1>(1) << (CONFIG_T::shift - 1);
    const bool up = tessera_round_up(CONFIG_T::rounding, r > half, r == half, p < 0, r != 0, q[0] != 0);
    return q.to_int64() + (up ? 1 : 0);
}

template <class data_T, typename CONFIG_T>
inline long long tessera_piecewise_one(const data_T &x, unsigned c,
                                       const typename CONFIG_T::start_t start[CONFIG_T::n_chan * CONFIG_T::n_seg],
                                       const typename CONFIG_T::mult_t mult[CONFIG_T::n_chan * CONFIG_T::n_seg],
                                       const typename CONFIG_T::add_t add[CONFIG_T::n_chan * CONFIG_T::n_seg]) {
    #pragma HLS INLINE
    const typename CONFIG_T::prod_t code = tessera_code_of(x);
    unsigned k = 0;
Boundaries:
    for (unsigned j = 1; j < CONFIG_T::n_seg; j++) {
        #pragma HLS UNROLL
        k += (code >= start[c * CONFIG_T::n_seg + j]) ? 1 : 0;
    }
    const typename CONFIG_T::prod_t p = code * mult[c * CONFIG_T::n_seg + k] + add[c * CONFIG_T::n_seg + k];
    long long y = tessera_piecewise_round<CONFIG_T>(p);
    if (y < CONFIG_T::qmin)
        y = CONFIG_T::qmin;
    if (y > CONFIG_T::qmax)
        y = CONFIG_T::qmax;
    return y;
}

struct tessera_piecewise_element {
    template <class data_T, typename CONFIG_T>
    static long long apply(const data_T &x, unsigned c, const typename CONFIG_T::start_t *start,
                           const typename CONFIG_T::mult_t *mult, const typename CONFIG_T::add_t *add) {
        #pragma HLS INLINE
        return tessera_piecewise_one<data_T, CONFIG_T>(x, c, start, mult, add);
    }
};

template <class data_T, class res_T, typename CONFIG_T>
void tessera_piecewise_cl(data_T data[CONFIG_T::n_in], res_T res[CONFIG_T::n_in],
                          const typename CONFIG_T::start_t start[CONFIG_T::n_chan * CONFIG_T::n_seg],
                          const typename CONFIG_T::mult_t mult[CONFIG_T::n_chan * CONFIG_T::n_seg],
                          const typename CONFIG_T::add_t add[CONFIG_T::n_chan * CONFIG_T::n_seg]) {
    tessera_codes_map_cl<data_T, res_T, CONFIG_T, tessera_piecewise_element>(data, res, start, mult, add);
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_piecewise_stream(hls::stream<data_T> &data, hls::stream<res_T> &res,
                              const typename CONFIG_T::start_t start[CONFIG_T::n_chan * CONFIG_T::n_seg],
                              const typename CONFIG_T::mult_t mult[CONFIG_T::n_chan * CONFIG_T::n_seg],
                              const typename CONFIG_T::add_t add[CONFIG_T::n_chan * CONFIG_T::n_seg]) {
    tessera_codes_map_stream<data_T, res_T, CONFIG_T, tessera_piecewise_element>(data, res, start, mult, add);
}

} // namespace nnet

#endif
