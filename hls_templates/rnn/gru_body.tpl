${types}
    static const long long z_one = ${z_one};
    static const long long z_m = ${z_m};
    static const int sh_sum_zn = ${sh_sum_zn};
    static const int sh_sum_zh = ${sh_sum_zh};
    static const long long m_sum_zn = ${m_sum_zn};
    static const long long m_sum_zh = ${m_sum_zh};
    static const long long h_m = ${h_m};
    static const long long h_c = ${h_c};
    static const int sh_h = ${h_shift};
    static const int h_mode = nnet::${h_mode};
    static const bool h_thr = ${h_thr};
    static const int h_thr_at = ${h_thr_at};
    static const long long h_min = ${h_min};
    static const long long h_max = ${h_max};
${gates}
