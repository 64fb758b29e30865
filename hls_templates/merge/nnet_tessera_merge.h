// Tessera merges on channels-last tensors of any rank: channel concatenation (U-Net skips)
// and elementwise addition.  The compiler sets res_T so that both inputs convert exactly
// (common fractional bits, enough integer bits): the casts below never round or wrap.
// Add computes k1[c] * a + k2[c] * b with integer weights (k2 negative for a subtraction), one
// per channel or one (n_k = 1): 1 and 1 unless the compiler aligned two differently scaled
// inputs.  res_T holds each input and every reachable sum; the products are exact in ap_fixed
// arithmetic.
#ifndef NNET_TESSERA_MERGE_H_
#define NNET_TESSERA_MERGE_H_

#include "hls_stream.h"
#include "nnet_common.h"

namespace nnet {

struct tessera_concat_config {
    static const unsigned n_pos = 1, n_chan1 = 1, n_chan2 = 1;
};

struct tessera_add_config {
    static const unsigned n_elem = 1, n_chan = 1;
    static const unsigned n_k = 1;
    typedef ap_uint<1> k1_t;
    typedef ap_uint<1> k2_t;
};

template <class in1_T, class in2_T, class res_T, typename CONFIG_T>
void tessera_concat_cl(in1_T a[CONFIG_T::n_pos * CONFIG_T::n_chan1], in2_T b[CONFIG_T::n_pos * CONFIG_T::n_chan2],
                       res_T res[CONFIG_T::n_pos * (CONFIG_T::n_chan1 + CONFIG_T::n_chan2)]) {
    const int C = CONFIG_T::n_chan1 + CONFIG_T::n_chan2;
Positions:
    for (int p = 0; p < (int)CONFIG_T::n_pos; p++) {
        for (int c = 0; c < (int)CONFIG_T::n_chan1; c++)
            res[p * C + c] = (res_T)a[p * CONFIG_T::n_chan1 + c];
        for (int c = 0; c < (int)CONFIG_T::n_chan2; c++)
            res[p * C + CONFIG_T::n_chan1 + c] = (res_T)b[p * CONFIG_T::n_chan2 + c];
    }
}

template <class in1_T, class in2_T, class res_T, typename CONFIG_T>
void tessera_concat_stream(hls::stream<in1_T> &a, hls::stream<in2_T> &b, hls::stream<res_T> &res) {
Positions:
    for (int p = 0; p < (int)CONFIG_T::n_pos; p++) {
        #pragma HLS PIPELINE
        in1_T wa = a.read();
        in2_T wb = b.read();
        res_T out;
        for (int c = 0; c < (int)CONFIG_T::n_chan1; c++)
            out[c] = (typename res_T::value_type)wa[c];
        for (int c = 0; c < (int)CONFIG_T::n_chan2; c++)
            out[CONFIG_T::n_chan1 + c] = (typename res_T::value_type)wb[c];
        res.write(out);
    }
}

template <class in1_T, class in2_T, class res_T, typename CONFIG_T>
void tessera_add_cl(in1_T a[CONFIG_T::n_elem], in2_T b[CONFIG_T::n_elem], res_T res[CONFIG_T::n_elem],
                    const typename CONFIG_T::k1_t k1[CONFIG_T::n_k], const typename CONFIG_T::k2_t k2[CONFIG_T::n_k]) {
Elements:
    for (int i = 0; i < (int)CONFIG_T::n_elem; i++) {
        const int c = CONFIG_T::n_k == 1 ? 0 : i % (int)CONFIG_T::n_chan;
        res[i] = (res_T)((res_T)a[i] * k1[c] + (res_T)b[i] * k2[c]);
    }
}

template <class in1_T, class in2_T, class res_T, typename CONFIG_T>
void tessera_add_stream(hls::stream<in1_T> &a, hls::stream<in2_T> &b, hls::stream<res_T> &res,
                        const typename CONFIG_T::k1_t k1[CONFIG_T::n_k], const typename CONFIG_T::k2_t k2[CONFIG_T::n_k]) {
Positions:
    for (int p = 0; p < (int)(CONFIG_T::n_elem / CONFIG_T::n_chan); p++) {
        #pragma HLS PIPELINE
        in1_T wa = a.read();
        in2_T wb = b.read();
        res_T out;
        for (int c = 0; c < (int)CONFIG_T::n_chan; c++) {
            const int k = CONFIG_T::n_k == 1 ? 0 : c;
            out[c] = (typename res_T::value_type)((typename res_T::value_type)wa[c] * k1[k] +
                                                  (typename res_T::value_type)wb[c] * k2[k]);
        }
        res.write(out);
    }
}

} // namespace nnet

#endif
