// Tessera lookup-table activation: res = table[code(x) - table_lo], with the table computed
// by the compiler (the same table the onnxruntime reference reads).  The input's integer
// code is taken from its raw bits (.range()), so no arithmetic can round.
#ifndef NNET_TESSERA_LUT_H_
#define NNET_TESSERA_LUT_H_

#include "hls_stream.h"
#include "nnet_common.h"

namespace nnet {

struct tessera_lut_config {
    static const unsigned n_in = 1, n_table = 1, in_width = 1;
    static const int table_lo = 0;
    static const bool in_signed = true;
    typedef float table_t;
};

template <class in_T, typename CONFIG_T> inline long long tessera_code(const in_T &x) {
    ap_uint<CONFIG_T::in_width> raw = x.range(CONFIG_T::in_width - 1, 0);
    long long code = (long long)raw.to_uint64();
    if (CONFIG_T::in_signed && (code >> (CONFIG_T::in_width - 1)) & 1)
        code -= (1LL << CONFIG_T::in_width);
    return code;
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_lut_cl(data_T data[CONFIG_T::n_in], res_T res[CONFIG_T::n_in],
                    typename CONFIG_T::table_t table[CONFIG_T::n_table]) {
Elements:
    for (int i = 0; i < (int)CONFIG_T::n_in; i++)
        res[i] = (res_T)table[tessera_code<data_T, CONFIG_T>(data[i]) - CONFIG_T::table_lo];
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_lut_stream(hls::stream<data_T> &data, hls::stream<res_T> &res,
                        typename CONFIG_T::table_t table[CONFIG_T::n_table]) {
Words:
    for (int i = 0; i < (int)(CONFIG_T::n_in / data_T::size); i++) {
        #pragma HLS PIPELINE
        data_T in = data.read();
        res_T out;
        for (int c = 0; c < (int)data_T::size; c++)
            out[c] = (typename res_T::value_type)
                table[tessera_code<typename data_T::value_type, CONFIG_T>(in[c]) - CONFIG_T::table_lo];
        res.write(out);
    }
}

} // namespace nnet

#endif
