// Tessera average pooling fused with the Quant that follows it (2D as depth 1, or 3D).
//
// y = clip(R((S << num_shift) / (n << den_shift)), qmin, qmax): S is the exact window sum
// of input codes (zero padding), n the kernel volume or the count of valid elements, R the
// Quant's rounding mode.  A dilated window sums its pool_* taps dilation_* apart.  All arithmetic is on integers; the result's raw bits are set
// directly, so nothing else can round.
//
// The division (form TESSERA_AVG_MULTIPLY_SHIFT): y = clip((mult[n] * S + add[n]) >> shift),
// one multiplier per channel lane, the constants indexed by the divisor n; the compiler proves
// for every divisor and every sum the input type allows that this equals the exact rational
// rounding (tessera/compiler/ops/avgpool.py: division).  Only where no multiply-shift fits
// 64 bits does the kernel divide (form TESSERA_AVG_DIVISION, nnet_tessera_rounding.h).
#ifndef NNET_TESSERA_AVGPOOL_H_
#define NNET_TESSERA_AVGPOOL_H_

#include "hls_stream.h"
#include "nnet_common.h"
#include "nnet_tessera_codes.h"
#include "nnet_tessera_stream.h"

namespace nnet {

struct tessera_avgpool3d_config {
    static const unsigned in_depth = 1, in_height = 1, in_width = 1, n_filt = 1;
    static const unsigned out_depth = 1, out_height = 1, out_width = 1;
    static const unsigned pool_depth = 1, pool_height = 1, pool_width = 1;
    static const unsigned stride_depth = 1, stride_height = 1, stride_width = 1;
    static const unsigned dilation_depth = 1, dilation_height = 1, dilation_width = 1;
    static const unsigned pad_front = 0, pad_top = 0, pad_left = 0;
    static const bool count_include_pad = false;
    static const unsigned num_shift = 0, den_shift = 0;
    static const int rounding = TESSERA_ROUND; // the Quant's mode (nnet_tessera_rounding.h)
    static const long long qmin = 0, qmax = 0;
    static const unsigned sum_bits = 1, out_bits = 1;
    static const unsigned max_count = 1, shift = 0;
    static const int form = 0;
    typedef float accum_t;
    typedef ap_int<4> prod_t;
    typedef ap_int<2> mult_t;
    typedef ap_int<2> add_t;
};

// Round the exact window sum (raw bits of accum_t) divided by count, clip, and set the raw bits of out.
template <class out_T, typename CONFIG_T>
inline void tessera_avgpool_finish(const typename CONFIG_T::accum_t &sum, long long count, out_T &out,
                                   const typename CONFIG_T::mult_t mult[CONFIG_T::max_count + 1],
                                   const typename CONFIG_T::add_t add[CONFIG_T::max_count + 1]) {
    #pragma HLS INLINE
    if (CONFIG_T::form == TESSERA_AVG_MULTIPLY_SHIFT) {
        ap_int<CONFIG_T::sum_bits> code;
        code.range() = sum.range(CONFIG_T::sum_bits - 1, 0);
        const long long y = tessera_multiply_shift<typename CONFIG_T::prod_t>(code, mult[count], add[count], CONFIG_T::shift,
                                                                              CONFIG_T::qmin, CONFIG_T::qmax);
        out.range(CONFIG_T::out_bits - 1, 0) = ap_int<CONFIG_T::out_bits>(y).range();
    } else {
        tessera_div_round_to<out_T, typename CONFIG_T::accum_t, CONFIG_T::sum_bits, CONFIG_T::out_bits>(
            sum, count, CONFIG_T::num_shift, CONFIG_T::den_shift, CONFIG_T::rounding, CONFIG_T::qmin, CONFIG_T::qmax,
            out);
    }
}

// Number of window taps inside the input along one axis: K taps from start, DILATION apart.
template <int K, int DILATION> inline long long tessera_valid(int start, int n) {
    #pragma HLS INLINE
    long long count = 0;
    for (int j = 0; j < K; j++)
        count += start + j * DILATION >= 0 && start + j * DILATION < n;
    return count;
}

template <class in_T, class out_T, typename CONFIG_T>
void tessera_avgpool3d_compute(const in_T *data, out_T *res, const typename CONFIG_T::mult_t *mult,
                               const typename CONFIG_T::add_t *add) {
    #pragma HLS INLINE
    const int D = CONFIG_T::in_depth, H = CONFIG_T::in_height, W = CONFIG_T::in_width, C = CONFIG_T::n_filt;
OutDepth:
    for (int od = 0; od < (int)CONFIG_T::out_depth; od++) {
    OutHeight:
        for (int oh = 0; oh < (int)CONFIG_T::out_height; oh++) {
        OutWidth:
            for (int ow = 0; ow < (int)CONFIG_T::out_width; ow++) {
                #pragma HLS PIPELINE
            Channels:
                for (int c = 0; c < C; c++) {
                    typename CONFIG_T::accum_t sum = 0;
                    long long count = 0;
                    for (int kd = 0; kd < (int)CONFIG_T::pool_depth; kd++)
                        for (int kh = 0; kh < (int)CONFIG_T::pool_height; kh++)
                            for (int kw = 0; kw < (int)CONFIG_T::pool_width; kw++) {
                                const int id = od * CONFIG_T::stride_depth + kd * CONFIG_T::dilation_depth -
                                               (int)CONFIG_T::pad_front;
                                const int ih = oh * CONFIG_T::stride_height + kh * CONFIG_T::dilation_height -
                                               (int)CONFIG_T::pad_top;
                                const int iw = ow * CONFIG_T::stride_width + kw * CONFIG_T::dilation_width -
                                               (int)CONFIG_T::pad_left;
                                if (id < 0 || id >= D || ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                sum += data[((id * H + ih) * W + iw) * C + c];
                                count++;
                            }
                    if (CONFIG_T::count_include_pad)
                        count = CONFIG_T::pool_depth * CONFIG_T::pool_height * CONFIG_T::pool_width;
                    out_T out;
                    tessera_avgpool_finish<out_T, CONFIG_T>(sum, count, out, mult, add);
                    res[((od * CONFIG_T::out_height + oh) * CONFIG_T::out_width + ow) * C + c] = out;
                }
            }
        }
    }
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_avgpool3d_cl(data_T data[CONFIG_T::in_depth * CONFIG_T::in_height * CONFIG_T::in_width * CONFIG_T::n_filt],
                          res_T res[CONFIG_T::out_depth * CONFIG_T::out_height * CONFIG_T::out_width * CONFIG_T::n_filt],
                          typename CONFIG_T::mult_t mult[CONFIG_T::max_count + 1],
                          typename CONFIG_T::add_t add[CONFIG_T::max_count + 1]) {
    #pragma HLS ARRAY_PARTITION variable = mult complete
    #pragma HLS ARRAY_PARTITION variable = add complete
    tessera_avgpool3d_compute<data_T, res_T, CONFIG_T>(data, res, mult, add);
}

// io_stream: the 3D line buffer of nnet_tessera_stream.h (zero-padded plane buffer of the
// window's span of planes).
template <class res_T, typename CONFIG_T> struct tessera_avgpool3d_window {
    template <class P>
    static void apply(const P &planes, int d0, int h0, int w0, res_T &out, const typename CONFIG_T::mult_t *mult,
                      const typename CONFIG_T::add_t *add) {
        #pragma HLS INLINE
        long long count = CONFIG_T::pool_depth * CONFIG_T::pool_height * CONFIG_T::pool_width;
        if (!CONFIG_T::count_include_pad)
            count = tessera_valid<CONFIG_T::pool_depth, CONFIG_T::dilation_depth>(d0 - (int)CONFIG_T::pad_front,
                                                                                  CONFIG_T::in_depth) *
                    tessera_valid<CONFIG_T::pool_height, CONFIG_T::dilation_height>(h0 - (int)CONFIG_T::pad_top,
                                                                                    CONFIG_T::in_height) *
                    tessera_valid<CONFIG_T::pool_width, CONFIG_T::dilation_width>(w0 - (int)CONFIG_T::pad_left,
                                                                                  CONFIG_T::in_width);
        for (int c = 0; c < (int)CONFIG_T::n_filt; c++) {
            typename CONFIG_T::accum_t sum = 0;
            for (int kd = 0; kd < (int)CONFIG_T::pool_depth; kd++)
                for (int kh = 0; kh < (int)CONFIG_T::pool_height; kh++)
                    for (int kw = 0; kw < (int)CONFIG_T::pool_width; kw++)
                        sum += planes[(d0 + kd * CONFIG_T::dilation_depth) % tessera_window_span<CONFIG_T>::depth]
                                     [h0 + kh * CONFIG_T::dilation_height][w0 + kw * CONFIG_T::dilation_width][c];
            tessera_avgpool_finish<typename res_T::value_type, CONFIG_T>(sum, count, out[c], mult, add);
        }
    }
};

template <class data_T, class res_T, typename CONFIG_T>
void tessera_avgpool3d_stream(hls::stream<data_T> &data, hls::stream<res_T> &res,
                              typename CONFIG_T::mult_t mult[CONFIG_T::max_count + 1],
                              typename CONFIG_T::add_t add[CONFIG_T::max_count + 1]) {
    #pragma HLS ARRAY_PARTITION variable = mult complete
    #pragma HLS ARRAY_PARTITION variable = add complete
    typedef tessera_window_span<CONFIG_T> span;
    tessera_plane_walk<span::depth, span::height, span::width, CONFIG_T::stride_depth, CONFIG_T::stride_height,
                       CONFIG_T::stride_width, CONFIG_T::pad_front, CONFIG_T::pad_top, CONFIG_T::pad_left,
                       CONFIG_T::in_depth, CONFIG_T::in_height, CONFIG_T::in_width, CONFIG_T::out_depth,
                       CONFIG_T::out_height, CONFIG_T::out_width, 1, data_T, res_T,
                       tessera_avgpool3d_window<res_T, CONFIG_T> >(data, res, mult, add);
}

} // namespace nnet

#endif
