// Tessera's exact requantization: y = clamp(R(slope_c * x + offset_c), qmin, qmax) per channel
// c, the one primitive every real constant between two quantizers folds into (float scales,
// BatchNorm, constant Mul/Add/Div, zero points; tessera/compiler/exact/requant.py).
//
// Two hardware forms, both proven equal to the exact rational function by the compiler for
// every accumulator value x the input types can reach:
//   multiply-shift (form 0): y = clamp((mult[c] * x + add[c]) >> shift), one multiplier per lane;
//   thresholds     (form 1): y = qmin + #{k : sign[c] * x >= thr[c][k]}, compare and count
//                            (FINN's MultiThreshold; 1-2 bit outputs, or where no
//                            multiply-shift fits).
// Inputs and outputs are integer codes (their raw bits); channels are the fastest-varying
// index (hls4ml's channels-last order; a vector's element i is channel i).
#ifndef NNET_TESSERA_RESCALE_H_
#define NNET_TESSERA_RESCALE_H_

#include "hls_stream.h"
#include "nnet_common.h"
#include "nnet_tessera_codes.h"
#include "nnet_tessera_stream.h"

namespace nnet {

enum { TESSERA_RESCALE_MULTIPLY_SHIFT = 0, TESSERA_RESCALE_THRESHOLDS = 1 };

struct tessera_rescale_config {
    static const unsigned n_in = 1;   // elements of one sample
    static const unsigned n_chan = 1; // channels (parameter sets)
    static const unsigned levels = 1; // thresholds per channel (threshold form)
    static const unsigned shift = 0;
    static const int form = TESSERA_RESCALE_MULTIPLY_SHIFT;
    static const long long qmin = 0, qmax = 0;
    static const unsigned out_bits = 1;
    typedef ap_int<2> mult_t;
    typedef ap_int<2> add_t;
    typedef ap_int<2> thr_t;
    typedef ap_int<4> prod_t; // holds mult * x + add exactly (width from the compiler)
};

template <class data_T, typename CONFIG_T>
inline long long tessera_rescale_one(const data_T &x, unsigned c, const typename CONFIG_T::mult_t mult[CONFIG_T::n_chan],
                                     const typename CONFIG_T::add_t add[CONFIG_T::n_chan],
                                     const typename CONFIG_T::thr_t thr[CONFIG_T::n_chan * CONFIG_T::levels]) {
    #pragma HLS INLINE
    typename CONFIG_T::prod_t code = tessera_code_of(x);
    long long y;
    if (CONFIG_T::form == TESSERA_RESCALE_MULTIPLY_SHIFT) {
        y = tessera_multiply_shift<typename CONFIG_T::prod_t>(code, mult[c], add[c], CONFIG_T::shift, CONFIG_T::qmin,
                                                             CONFIG_T::qmax);
    } else {
        typename CONFIG_T::prod_t u = mult[c] < 0 ? typename CONFIG_T::prod_t(-code) : code;
        long long count = 0;
    Levels:
        for (unsigned k = 0; k < CONFIG_T::levels; k++) {
            #pragma HLS UNROLL
            count += (u >= thr[c * CONFIG_T::levels + k]) ? 1 : 0;
        }
        y = CONFIG_T::qmin + count;
    }
    return y;
}

struct tessera_rescale_element {
    template <class data_T, typename CONFIG_T>
    static long long apply(const data_T &x, unsigned c, const typename CONFIG_T::mult_t *mult,
                           const typename CONFIG_T::add_t *add, const typename CONFIG_T::thr_t *thr) {
        #pragma HLS INLINE
        return tessera_rescale_one<data_T, CONFIG_T>(x, c, mult, add, thr);
    }
};

template <class data_T, class res_T, typename CONFIG_T>
void tessera_rescale_cl(data_T data[CONFIG_T::n_in], res_T res[CONFIG_T::n_in],
                        const typename CONFIG_T::mult_t mult[CONFIG_T::n_chan],
                        const typename CONFIG_T::add_t add[CONFIG_T::n_chan],
                        const typename CONFIG_T::thr_t thr[CONFIG_T::n_chan * CONFIG_T::levels]) {
    tessera_codes_map_cl<data_T, res_T, CONFIG_T, tessera_rescale_element>(data, res, mult, add, thr);
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_rescale_stream(hls::stream<data_T> &data, hls::stream<res_T> &res,
                            const typename CONFIG_T::mult_t mult[CONFIG_T::n_chan],
                            const typename CONFIG_T::add_t add[CONFIG_T::n_chan],
                            const typename CONFIG_T::thr_t thr[CONFIG_T::n_chan * CONFIG_T::levels]) {
    tessera_codes_map_stream<data_T, res_T, CONFIG_T, tessera_rescale_element>(data, res, mult, add, thr);
}

} // namespace nnet

#endif
