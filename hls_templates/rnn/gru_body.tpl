${types}
    static const int z_one = ${z_one};
    static const int sh_sum_zn = ${sh_sum_zn};
    static const int sh_sum_zh = ${sh_sum_zh};
    static const int sh_h = ${sh_h};
    static const int h_mode = nnet::${h_mode};
    static const long long h_min = ${h_min};
    static const long long h_max = ${h_max};
${gates}
