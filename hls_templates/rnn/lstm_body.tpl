${types}
    static const int cifg_one = ${cifg_one};
    static const int sh_fc = ${sh_fc};
    static const int fc_mode = nnet::${fc_mode};
    static const long long fc_m = ${fc_m};
    static const long long fc_c = ${fc_c};
    static const int sh_ig = ${sh_ig};
    static const int ig_mode = nnet::${ig_mode};
    static const long long ig_m = ${ig_m};
    static const long long ig_c = ${ig_c};
    static const int sh_sum_fc = ${sh_sum_fc};
    static const int sh_sum_ig = ${sh_sum_ig};
    static const int sh_c = ${sh_c};
    static const int c_mode = nnet::${c_mode};
    static const long long c_min = ${c_min};
    static const long long c_max = ${c_max};
    static const int sh_h = ${sh_h};
    static const int h_mode = nnet::${h_mode};
    static const int hp_mode = nnet::${hp_mode};
    static const long long h_m = ${h_m};
    static const long long h_c = ${h_c};
    static const long long h_min = ${h_min};
    static const long long h_max = ${h_max};
${gates}
