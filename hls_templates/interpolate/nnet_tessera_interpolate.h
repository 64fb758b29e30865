// Tessera linear interpolation (ONNX Resize, mode linear), channels-last, 1D / 2D as a volume
// of unit axes (tessera/compiler/ops/interpolate.py).  Along each axis output o reads inputs
// index[2 o] and index[2 o + 1] with integer weights weight[2 o], weight[2 o + 1]; the tables
// of depth, height and width follow each other.  The output code is the exact integer sum
//     y = sum_{a, b, e in {0, 1}} wd[a] wh[b] ww[e] x[id[a], ih[b], iw[e]]
// whose common denominator the graph carries as a real scale: nothing rounds here.  Inputs
// and outputs are integer codes (their raw bits).
#ifndef NNET_TESSERA_INTERPOLATE_H_
#define NNET_TESSERA_INTERPOLATE_H_

#include "hls_stream.h"
#include "nnet_common.h"
#include "nnet_tessera_codes.h"

namespace nnet {

struct tessera_interpolate3d_config {
    static const unsigned in_depth = 1, in_height = 1, in_width = 1;
    static const unsigned out_depth = 1, out_height = 1, out_width = 1, n_chan = 1;
    static const unsigned out_bits = 1;
    typedef ap_int<4> accum_t;  // holds every sum exactly (width from the compiler)
    typedef ap_int<4> index_t;
    typedef ap_int<4> weight_t;
};

// The sum of one output element from the codes of channel c of a channels-last volume.
template <class code_T, typename CONFIG_T>
inline typename CONFIG_T::accum_t tessera_interpolate_one(const code_T *codes, unsigned d, unsigned h, unsigned w,
                                                          unsigned c, const typename CONFIG_T::index_t *index,
                                                          const typename CONFIG_T::weight_t *weight) {
    #pragma HLS INLINE
    const unsigned H = 2 * CONFIG_T::out_depth, W = H + 2 * CONFIG_T::out_height; // table offsets
    typename CONFIG_T::accum_t sum = 0;
Terms:
    for (unsigned t = 0; t < 8; t++) {
        #pragma HLS UNROLL
        const unsigned a = 2 * d + (t >> 2), b = H + 2 * h + ((t >> 1) & 1), e = W + 2 * w + (t & 1);
        const unsigned src = ((index[a].to_uint() * CONFIG_T::in_height + index[b].to_uint()) * CONFIG_T::in_width +
                              index[e].to_uint()) * CONFIG_T::n_chan + c;
        sum += typename CONFIG_T::accum_t(weight[a] * weight[b] * weight[e]) * codes[src];
    }
    return sum;
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_interpolate3d_cl(
    data_T data[CONFIG_T::in_depth * CONFIG_T::in_height * CONFIG_T::in_width * CONFIG_T::n_chan],
    res_T res[CONFIG_T::out_depth * CONFIG_T::out_height * CONFIG_T::out_width * CONFIG_T::n_chan],
    const typename CONFIG_T::index_t index[2 * (CONFIG_T::out_depth + CONFIG_T::out_height + CONFIG_T::out_width)],
    const typename CONFIG_T::weight_t weight[2 * (CONFIG_T::out_depth + CONFIG_T::out_height + CONFIG_T::out_width)]) {
    const unsigned N = CONFIG_T::in_depth * CONFIG_T::in_height * CONFIG_T::in_width * CONFIG_T::n_chan;
    typename CONFIG_T::accum_t codes[N];
Codes:
    for (unsigned i = 0; i < N; i++)
        codes[i] = tessera_code_of(data[i]);
    unsigned k = 0;
Outputs:
    for (unsigned d = 0; d < CONFIG_T::out_depth; d++)
        for (unsigned h = 0; h < CONFIG_T::out_height; h++)
            for (unsigned w = 0; w < CONFIG_T::out_width; w++)
                for (unsigned c = 0; c < CONFIG_T::n_chan; c++) {
                    #pragma HLS PIPELINE
                    typename CONFIG_T::accum_t y = tessera_interpolate_one<typename CONFIG_T::accum_t, CONFIG_T>(
                        codes, d, h, w, c, index, weight);
                    res[k++].range(CONFIG_T::out_bits - 1, 0) = y.range(CONFIG_T::out_bits - 1, 0);
                }
}

// io_stream, volume-buffered: the whole input volume (D x H x W words) is kept, then each
// output word is computed from it in order.
template <class data_T, class res_T, typename CONFIG_T>
void tessera_interpolate3d_stream(
    hls::stream<data_T> &data, hls::stream<res_T> &res,
    const typename CONFIG_T::index_t index[2 * (CONFIG_T::out_depth + CONFIG_T::out_height + CONFIG_T::out_width)],
    const typename CONFIG_T::weight_t weight[2 * (CONFIG_T::out_depth + CONFIG_T::out_height + CONFIG_T::out_width)]) {
    const unsigned P = CONFIG_T::in_depth * CONFIG_T::in_height * CONFIG_T::in_width;
    typename CONFIG_T::accum_t codes[P * CONFIG_T::n_chan];
Words:
    for (unsigned p = 0; p < P; p++) {
        data_T word = data.read();
        for (unsigned c = 0; c < CONFIG_T::n_chan; c++)
            codes[p * CONFIG_T::n_chan + c] = tessera_code_of(word[c]);
    }
Outputs:
    for (unsigned d = 0; d < CONFIG_T::out_depth; d++)
        for (unsigned h = 0; h < CONFIG_T::out_height; h++)
            for (unsigned w = 0; w < CONFIG_T::out_width; w++) {
                #pragma HLS PIPELINE
                res_T out;
                PRAGMA_DATA_PACK(out)
                for (unsigned c = 0; c < CONFIG_T::n_chan; c++) {
                    #pragma HLS UNROLL
                    typename CONFIG_T::accum_t y = tessera_interpolate_one<typename CONFIG_T::accum_t, CONFIG_T>(
                        codes, d, h, w, c, index, weight);
                    out[c].range(CONFIG_T::out_bits - 1, 0) = y.range(CONFIG_T::out_bits - 1, 0);
                }
                res.write(out);
            }
}

} // namespace nnet

#endif
