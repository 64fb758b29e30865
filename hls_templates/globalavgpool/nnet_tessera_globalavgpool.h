// Tessera global average pooling fused with the Quant that follows it (2D or 3D).
//
// y[c] = clip(R((S_c << num_shift) / (n << den_shift)), qmin, qmax): S_c is the exact sum of
// channel c's input codes over all n positions, R the Quant's rounding mode
// (nnet_tessera_rounding.h).  All arithmetic is on integers; the result's raw bits are set
// directly, so nothing else can round.  Inputs are channels-last (position-major); the
// output is one word of n_filt channels.
//
// The division (form TESSERA_AVG_MULTIPLY_SHIFT): y = clip((mult * S + add) >> shift), one
// multiplier per channel, proven by the compiler equal to the exact rational rounding for
// every channel sum the input type allows (tessera/compiler/ops/globalavgpool.py: division).
// Only where no multiply-shift fits 64 bits does the kernel divide (TESSERA_AVG_DIVISION).
#ifndef NNET_TESSERA_GLOBALAVGPOOL_H_
#define NNET_TESSERA_GLOBALAVGPOOL_H_

#include "hls_stream.h"
#include "nnet_common.h"
#include "nnet_tessera_codes.h"

namespace nnet {

struct tessera_globalavgpool_config {
    static const unsigned n_pixels = 1, n_filt = 1;
    static const unsigned num_shift = 0, den_shift = 0;
    static const int rounding = TESSERA_ROUND; // the Quant's mode
    static const long long qmin = 0, qmax = 0;
    static const unsigned sum_bits = 1, out_bits = 1;
    static const long long mult = 0, add = 0;
    static const unsigned shift = 0;
    static const int form = TESSERA_AVG_DIVISION;
    typedef float accum_t; // holds every channel sum exactly (width from the compiler)
    typedef ap_int<4> prod_t; // holds mult * S + add exactly
    typedef ap_int<2> mult_t;
    typedef ap_int<2> add_t;
};

template <class out_T, typename CONFIG_T> inline void tessera_globalavgpool_finish(const typename CONFIG_T::accum_t &sum,
                                                                                   out_T &out) {
    #pragma HLS INLINE
    if (CONFIG_T::form == TESSERA_AVG_MULTIPLY_SHIFT) {
        ap_int<CONFIG_T::sum_bits> code;
        code.range() = sum.range(CONFIG_T::sum_bits - 1, 0);
        const long long y = tessera_multiply_shift<typename CONFIG_T::prod_t>(
            code, typename CONFIG_T::mult_t(CONFIG_T::mult), typename CONFIG_T::add_t(CONFIG_T::add), CONFIG_T::shift,
            CONFIG_T::qmin, CONFIG_T::qmax);
        out.range(CONFIG_T::out_bits - 1, 0) = ap_int<CONFIG_T::out_bits>(y).range();
    } else {
        tessera_div_round_to<out_T, typename CONFIG_T::accum_t, CONFIG_T::sum_bits, CONFIG_T::out_bits>(
            sum, CONFIG_T::n_pixels, CONFIG_T::num_shift, CONFIG_T::den_shift, CONFIG_T::rounding, CONFIG_T::qmin,
            CONFIG_T::qmax, out);
    }
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_globalavgpool_cl(data_T data[CONFIG_T::n_pixels * CONFIG_T::n_filt], res_T res[CONFIG_T::n_filt]) {
Channels:
    for (unsigned c = 0; c < CONFIG_T::n_filt; c++) {
        #pragma HLS PIPELINE
        typename CONFIG_T::accum_t sum = 0;
    Pixels:
        for (unsigned p = 0; p < CONFIG_T::n_pixels; p++) {
            sum += data[p * CONFIG_T::n_filt + c];
        }
        tessera_globalavgpool_finish<res_T, CONFIG_T>(sum, res[c]);
    }
}

// io_stream: one word (a position's channels) per iteration into per-channel sums, then
// one output word.
template <class data_T, class res_T, typename CONFIG_T>
void tessera_globalavgpool_stream(hls::stream<data_T> &data, hls::stream<res_T> &res) {
    typename CONFIG_T::accum_t sums[CONFIG_T::n_filt];
    #pragma HLS ARRAY_PARTITION variable = sums complete
Init:
    for (unsigned c = 0; c < CONFIG_T::n_filt; c++) {
        #pragma HLS UNROLL
        sums[c] = 0;
    }
Pixels:
    for (unsigned p = 0; p < CONFIG_T::n_pixels; p++) {
        #pragma HLS PIPELINE
        data_T word = data.read();
    Accumulate:
        for (unsigned c = 0; c < CONFIG_T::n_filt; c++) {
            #pragma HLS UNROLL
            sums[c] += word[c];
        }
    }
    res_T out;
    PRAGMA_DATA_PACK(out)
Finish:
    for (unsigned c = 0; c < CONFIG_T::n_filt; c++) {
        #pragma HLS UNROLL
        tessera_globalavgpool_finish<typename res_T::value_type, CONFIG_T>(sums[c], out[c]);
    }
    res.write(out);
}

} // namespace nnet

#endif
