// Tessera's staircase: a monotone function of integer codes (a Tanh or Sigmoid of a layer's
// accumulator, rounded by its Quant; tessera/compiler/ops/staircase.py) as
//     y = base[c] + #{k : sign[c] * x >= thr[c][k]}
// per channel c, the count found by a binary search over each channel's ascending thresholds
// (n_thr = 2**m - 1 of them, padded above every reachable code): m comparisons per element.
// The compiler evaluated the function at every reachable x and proved it monotone, so the
// count is the function.  Inputs and outputs are integer codes (their raw bits); channels
// are the fastest-varying index (hls4ml's channels-last order).
#ifndef NNET_TESSERA_STAIRCASE_H_
#define NNET_TESSERA_STAIRCASE_H_

#include "hls_stream.h"
#include "nnet_common.h"
#include "nnet_tessera_codes.h"
#include "nnet_tessera_stream.h"

namespace nnet {

struct tessera_staircase_config {
    static const unsigned n_in = 1;   // elements of one sample
    static const unsigned n_chan = 1; // channels (threshold sets)
    static const unsigned n_thr = 1;  // thresholds per channel, 2**m - 1
    static const unsigned out_bits = 1;
    typedef ap_int<2> sign_t; // +1 or -1
    typedef ap_int<4> code_t; // holds -x exactly
    typedef ap_int<4> thr_t;
    typedef ap_int<2> base_t;
};

template <class data_T, typename CONFIG_T>
inline long long tessera_staircase_one(const data_T &x, unsigned c, const typename CONFIG_T::sign_t sign[CONFIG_T::n_chan],
                                       const typename CONFIG_T::base_t base[CONFIG_T::n_chan],
                                       const typename CONFIG_T::thr_t thr[CONFIG_T::n_chan * CONFIG_T::n_thr]) {
    #pragma HLS INLINE
    typename CONFIG_T::code_t code = tessera_code_of(x);
    typename CONFIG_T::code_t u = sign[c] < 0 ? typename CONFIG_T::code_t(-code) : code;
    unsigned pos = 0;
Search:
    for (unsigned step = (CONFIG_T::n_thr + 1) / 2; step > 0; step /= 2) {
        #pragma HLS UNROLL
        if (thr[c * CONFIG_T::n_thr + pos + step - 1] <= u)
            pos += step;
    }
    return (long long)base[c] + pos;
}

struct tessera_staircase_element {
    template <class data_T, typename CONFIG_T>
    static long long apply(const data_T &x, unsigned c, const typename CONFIG_T::sign_t *sign,
                           const typename CONFIG_T::base_t *base, const typename CONFIG_T::thr_t *thr) {
        #pragma HLS INLINE
        return tessera_staircase_one<data_T, CONFIG_T>(x, c, sign, base, thr);
    }
};

template <class data_T, class res_T, typename CONFIG_T>
void tessera_staircase_cl(data_T data[CONFIG_T::n_in], res_T res[CONFIG_T::n_in],
                          const typename CONFIG_T::sign_t sign[CONFIG_T::n_chan],
                          const typename CONFIG_T::base_t base[CONFIG_T::n_chan],
                          const typename CONFIG_T::thr_t thr[CONFIG_T::n_chan * CONFIG_T::n_thr]) {
    tessera_codes_map_cl<data_T, res_T, CONFIG_T, tessera_staircase_element>(data, res, sign, base, thr);
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_staircase_stream(hls::stream<data_T> &data, hls::stream<res_T> &res,
                              const typename CONFIG_T::sign_t sign[CONFIG_T::n_chan],
                              const typename CONFIG_T::base_t base[CONFIG_T::n_chan],
                              const typename CONFIG_T::thr_t thr[CONFIG_T::n_chan * CONFIG_T::n_thr]) {
    tessera_codes_map_stream<data_T, res_T, CONFIG_T, tessera_staircase_element>(data, res, sign, base, thr);
}

} // namespace nnet

#endif
