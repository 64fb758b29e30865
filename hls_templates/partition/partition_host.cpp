// Tessera partitioned-model host (C++; the same schedule as tessera.compiler.partition).
//
// Runs a 3D CNN whose volume does not fit on chip as blocks: for every sample it cuts each
// block's input region (block + accumulated halo, clipped to the volume) out of the full
// input, calls the block's kernel, writes the kernel's output box into the stitched
// segment output, then runs the gathered tail kernel, and compares every output code with
// the exact reference's (==).  Kernels are the block projects' C-simulation libraries
// (firmware/<name>-*.so, built by their build_lib.sh), loaded with dlopen.
//
// schedule.txt (written by the compiler; all boxes are (d, h, w) begin + size):
//   input C D H W IN_FRAC          the model input (channels-last in the code files)
//   cut C D H W CUT_FRAC           the stitched segment output
//   block DIR NAME d h w sd sh sw  D H W SD SH SW   kernel, input region, output box
//   tail DIR NAME N_OUT OUT_FRAC   (or "notail N_OUT OUT_FRAC")
#include <dlfcn.h>
#include <glob.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

typedef void (*kernel_fn)(double *, double *);

struct Box {
    int d, h, w, sd, sh, sw;
    long voxels() const { return (long)sd * sh * sw; }
};

struct Block {
    kernel_fn fn;
    Box region, box;
};

static kernel_fn load_kernel(const std::string &dir, const std::string &name) {
    glob_t g;
    const std::string pattern = dir + "/firmware/" + name + "-*.so";
    if (glob(pattern.c_str(), 0, nullptr, &g) != 0 || g.gl_pathc == 0) {
        std::printf("tessera-host: no kernel library %s (run the block's build_lib.sh)\n", pattern.c_str());
        return nullptr;
    }
    void *lib = dlopen(g.gl_pathv[g.gl_pathc - 1], RTLD_NOW | RTLD_LOCAL);
    globfree(&g);
    if (!lib) {
        std::printf("tessera-host: %s\n", dlerror());
        return nullptr;
    }
    return (kernel_fn)dlsym(lib, (name + "_double").c_str());
}

static bool read_row(std::ifstream &f, std::vector<long long> &row, long n) {
    std::string line;
    if (!std::getline(f, line))
        return false;
    std::istringstream ss(line);
    row.assign(n, 0);
    for (long i = 0; i < n; i++)
        if (!(ss >> row[i]))
            return false;
    return true;
}

// copy box `b` (relative to the volume of extent D x H x W, C channels, channels-last)
// between a full volume and a dense box buffer
template <bool TO_BOX>
static void copy_box(std::vector<double> &vol, int C, int H, int W, std::vector<double> &buf, const Box &b) {
    long k = 0;
    for (int d = 0; d < b.sd; d++)
        for (int h = 0; h < b.sh; h++)
            for (int w = 0; w < b.sw; w++) {
                const long base = (((long)(b.d + d) * H + b.h + h) * W + b.w + w) * C;
                for (int c = 0; c < C; c++, k++) {
                    if (TO_BOX)
                        buf[k] = vol[base + c];
                    else
                        vol[base + c] = buf[k];
                }
            }
}

int main(int argc, char **argv) {
    const char *sched_path = argc > 1 ? argv[1] : "schedule.txt";
    const char *in_path = argc > 2 ? argv[2] : "tb_data/input_codes.txt";
    const char *exp_path = argc > 3 ? argv[3] : "tb_data/expected_codes.txt";
    std::ifstream fs(sched_path), fin(in_path), fexp(exp_path);
    if (!fs.is_open() || !fin.is_open() || !fexp.is_open()) {
        std::printf("tessera-host: cannot open %s, %s or %s\n", sched_path, in_path, exp_path);
        return 2;
    }
    int C = 0, D = 0, H = 0, W = 0, in_frac = 0, CC = 0, CD = 0, CH = 0, CW = 0, cut_frac = 0, out_frac = 0;
    long n_out = 0;
    std::vector<Block> blocks;
    kernel_fn tail = nullptr;
    std::string kind;
    while (fs >> kind) {
        if (kind == "input") {
            fs >> C >> D >> H >> W >> in_frac;
        } else if (kind == "cut") {
            fs >> CC >> CD >> CH >> CW >> cut_frac;
        } else if (kind == "block") {
            std::string dir, name;
            Block b;
            fs >> dir >> name >> b.region.d >> b.region.h >> b.region.w >> b.region.sd >> b.region.sh >> b.region.sw >>
                b.box.d >> b.box.h >> b.box.w >> b.box.sd >> b.box.sh >> b.box.sw;
            b.fn = load_kernel(dir, name);
            if (!b.fn)
                return 2;
            blocks.push_back(b);
        } else if (kind == "tail") {
            std::string dir, name;
            fs >> dir >> name >> n_out >> out_frac;
            tail = load_kernel(dir, name);
            if (!tail)
                return 2;
        } else if (kind == "notail") {
            fs >> n_out >> out_frac;
        } else {
            std::printf("tessera-host: unknown schedule line '%s'\n", kind.c_str());
            return 2;
        }
    }
    const long n_in = (long)C * D * H * W, n_cut = (long)CC * CD * CH * CW;
    std::vector<long long> row, exp;
    std::vector<double> x(n_in), cut(n_cut), y(n_out), region, box;
    long samples = 0, mismatches = 0;
    while (read_row(fin, row, n_in)) {
        if (!read_row(fexp, exp, n_out)) {
            std::printf("tessera-host: fewer expected rows than inputs\n");
            return 2;
        }
        for (long i = 0; i < n_in; i++)
            x[i] = std::ldexp((double)row[i], -in_frac);
        for (const Block &b : blocks) {
            region.assign(b.region.voxels() * C, 0.0);
            box.assign(b.box.voxels() * CC, 0.0);
            copy_box<true>(x, C, H, W, region, b.region);
            b.fn(region.data(), box.data());
            copy_box<false>(cut, CC, CH, CW, box, b.box);
        }
        if (tail)
            tail(cut.data(), y.data());
        else
            y = cut;
        for (long i = 0; i < n_out; i++) {
            const double v = std::ldexp(y[i], out_frac);
            if (v != (double)exp[i]) {
                if (mismatches < 10)
                    std::printf("tessera-host: sample %ld output %ld: got %.17g, expected %lld\n", samples, i, v, exp[i]);
                mismatches++;
            }
        }
        samples++;
    }
    std::printf("tessera-host: %ld samples, %zu blocks, %ld mismatches\n", samples, blocks.size(), mismatches);
    return mismatches == 0 && samples > 0 ? 0 : 1;
}
