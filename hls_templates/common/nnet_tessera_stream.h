// Stream <-> array helpers shared by Tessera's io_stream kernels (one pixel, all channels,
// per stream word).  The io_stream forms of the 3D kernels currently buffer whole volumes
// with these; plane-buffered forms are future work.
#ifndef NNET_TESSERA_STREAM_H_
#define NNET_TESSERA_STREAM_H_

#include "hls_stream.h"

namespace nnet {

template <class data_T, unsigned N_POS>
void tessera_stream_to_array(hls::stream<data_T> &in, typename data_T::value_type *buf) {
ReadWords:
    for (unsigned p = 0; p < N_POS; p++) {
        data_T word = in.read();
        for (unsigned c = 0; c < data_T::size; c++)
            buf[p * data_T::size + c] = word[c];
    }
}

template <class res_T, unsigned N_POS>
void tessera_array_to_stream(const typename res_T::value_type *buf, hls::stream<res_T> &out) {
WriteWords:
    for (unsigned p = 0; p < N_POS; p++) {
        res_T word;
        for (unsigned c = 0; c < res_T::size; c++)
            word[c] = buf[p * res_T::size + c];
        out.write(word);
    }
}

} // namespace nnet

#endif
