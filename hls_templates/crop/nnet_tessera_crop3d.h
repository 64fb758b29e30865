// Tessera crop: a box of a channels-last 3D tensor (2D as depth 1, a (T, F) sequence as a 1D map
// whose width is its steps), channels start_chan, start_chan + step_chan, ... (out_chan of them),
// and on each spatial axis out_* positions from start_* every step_* (ONNX Slice with positive
// steps).  Output codes are copies of input codes: exact by construction.  Inserted by the
// spatial partitioner where a block's local value is larger than one consumer reads, and the form
// of an ONNX Slice with positive steps and of a Gather of one index.
#ifndef NNET_TESSERA_CROP3D_H_
#define NNET_TESSERA_CROP3D_H_

#include "hls_stream.h"
#include "nnet_common.h"

namespace nnet {

struct tessera_crop3d_config {
    static const unsigned in_depth = 1, in_height = 1, in_width = 1, n_chan = 1, start_chan = 0, out_chan = 1;
    static const unsigned step_chan = 1;
    static const unsigned start_depth = 0, start_height = 0, start_width = 0;
    static const unsigned out_depth = 1, out_height = 1, out_width = 1;
    static const unsigned step_depth = 1, step_height = 1, step_width = 1;
};

// Whether position p of an axis is one the box keeps: start, start + step, ... (count of them).
inline bool tessera_crop_keeps(int p, int start, int count, int step) {
    return p >= start && p <= start + (count - 1) * step && (p - start) % step == 0;
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_crop3d_cl(data_T data[CONFIG_T::in_depth * CONFIG_T::in_height * CONFIG_T::in_width * CONFIG_T::n_chan],
                       res_T res[CONFIG_T::out_depth * CONFIG_T::out_height * CONFIG_T::out_width * CONFIG_T::out_chan]) {
    const int C = CONFIG_T::n_chan, K = CONFIG_T::out_chan;
    for (int d = 0; d < (int)CONFIG_T::out_depth; d++)
        for (int h = 0; h < (int)CONFIG_T::out_height; h++)
            for (int w = 0; w < (int)CONFIG_T::out_width; w++) {
                #pragma HLS PIPELINE
                const int src = (((d * CONFIG_T::step_depth + CONFIG_T::start_depth) * CONFIG_T::in_height +
                                  h * CONFIG_T::step_height + CONFIG_T::start_height) * CONFIG_T::in_width +
                                 w * CONFIG_T::step_width + CONFIG_T::start_width) * C + CONFIG_T::start_chan;
                const int dst = ((d * CONFIG_T::out_height + h) * CONFIG_T::out_width + w) * K;
                for (int c = 0; c < K; c++)
                    res[dst + c] = (res_T)data[src + c * CONFIG_T::step_chan];
            }
}

// io_stream: every input word is read once, in order; the words inside the box are written.
template <class data_T, class res_T, typename CONFIG_T>
void tessera_crop3d_stream(hls::stream<data_T> &data, hls::stream<res_T> &res) {
    for (int d = 0; d < (int)CONFIG_T::in_depth; d++)
        for (int h = 0; h < (int)CONFIG_T::in_height; h++)
            for (int w = 0; w < (int)CONFIG_T::in_width; w++) {
                #pragma HLS PIPELINE
                const data_T word = data.read();
                const bool inside = tessera_crop_keeps(d, CONFIG_T::start_depth, CONFIG_T::out_depth, CONFIG_T::step_depth) &&
                                    tessera_crop_keeps(h, CONFIG_T::start_height, CONFIG_T::out_height, CONFIG_T::step_height) &&
                                    tessera_crop_keeps(w, CONFIG_T::start_width, CONFIG_T::out_width, CONFIG_T::step_width);
                if (inside) {
                    res_T out;
                    for (int c = 0; c < (int)CONFIG_T::out_chan; c++)
                        out[c] = (typename res_T::value_type)word[CONFIG_T::start_chan + c * CONFIG_T::step_chan];
                    res.write(out);
                }
            }
}

} // namespace nnet

#endif
